"""clouddns against a local emulation of Google's token endpoints and the
Cloud DNS record set list (tests/support/cloud_apis.py): a service
account's signed JWT, an authorized user, the metadata server, paging,
several managed zones, failures and setup errors."""

import json
import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import cases, cloud_apis, util
from tests.support.cases import Case

SOA = ("example.org. 300 IN SOA ns-cloud-a1.googledomains.com. "
       "cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300")
NS = ["example.org. 21600 IN NS ns-cloud-a1.googledomains.com."]


def rrset(name, rtype, ttl, *datas):
    return {"kind": "dns#resourceRecordSet", "name": name, "type": rtype,
            "ttl": ttl, "rrdatas": list(datas)}


ZONE = [
    rrset("example.org.", "SOA", 300, SOA.split(None, 4)[4]),
    rrset("example.org.", "NS", 21600, "ns-cloud-a1.googledomains.com."),
    rrset("www.example.org.", "A", 300, "1.2.3.4", "1.2.3.5"),
    rrset("alias.example.org.", "CNAME", 300, "www.example.org"),
    rrset("txt.example.org.", "TXT", 300, '"hello world"'),
    rrset("bad.example.org.", "A", 300, "not-an-address"),
]
OTHER = [
    rrset("example.org.", "SOA", 300, "ns.other. host.other. 1 2 3 4 5"),
    rrset("other.example.org.", "A", 60, "192.0.2.9"),
]

TABLE = [
    Case("www.example.org.", "A", aa=True, ns=NS, answer=[
        "www.example.org. 300 IN A 1.2.3.4",
        "www.example.org. 300 IN A 1.2.3.5"]),
    Case("alias.example.org.", "A", ns=NS, answer=[
        "alias.example.org. 300 IN CNAME www.example.org.",
        "www.example.org. 300 IN A 1.2.3.4",
        "www.example.org. 300 IN A 1.2.3.5"]),
    Case("txt.example.org.", "TXT", ns=NS, answer=[
        'txt.example.org. 300 IN TXT "hello world"']),
    Case("www.example.org.", "AAAA", aa=True, ns=[SOA]),
    # The second managed zone of the same domain.
    Case("other.example.org.", "A", answer=[
        "other.example.org. 60 IN A 192.0.2.9"]),
    # Nowhere: the last zone's NXDOMAIN; the bad set was skipped.
    Case("bad.example.org.", "A", rcode="NXDOMAIN", ns=[
        "example.org. 300 IN SOA ns.other. host.other. 1 2 3 4 5"]),
]


def clouddns_of(app):
    return [p for p in app.config.plugins() if p.name == "clouddns"][0]


class CloudDNSTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)
        self.api = cloud_apis.CloudAPIs(page_size=2).start()
        self.addCleanup(self.api.stop)
        self.api.google_zone("proj", "zone-1", ZONE)
        self.api.google_zone("proj", "zone-2", OTHER)

    def file(self, name, data):
        """An absolute path to a new file holding ``data`` as JSON."""
        return os.path.join(util.write_files(self, {name: json.dumps(
            data)}), name)

    @defer.inlineCallbacks
    def start(self, options, zones=("example.org.:proj:zone-1",
                                    "example.org.:proj:zone-2")):
        text = "example.org {\n    clouddns %s {\n        endpoint %s\n" \
            "        %s\n    }\n}\n" % (" ".join(zones), self.api.url,
                                        options)
        app = yield util.start(self, text)
        p = clouddns_of(app)
        yield util.wait_for(p.ready)
        return app, p

    @defer.inlineCallbacks
    def test_service_account(self):
        creds = self.api.service_account("dns@proj.iam.gserviceaccount.com")
        app, _ = yield self.start("credentials " + self.file("sa.json",
                                                             creds))
        yield cases.run(self, app.port(), TABLE)
        self.assertIn("Failed to process resource record set",
                      self.log.text())
        self.assertEqual(len(self.api.tokens), 1)
        pages = [r for r in self.api.requests if r[1].endswith("/rrsets")]
        self.assertEqual(len(pages), 4)     # 3 pages + 1 page

    @defer.inlineCallbacks
    def test_authorized_user(self):
        self.api.refresh_tokens.add("refresh-1")
        creds = {"type": "authorized_user", "client_id": "c",
                 "client_secret": "s", "refresh_token": "refresh-1",
                 "token_uri": self.api.url + "/token"}
        app, _ = yield self.start("credentials " + self.file("user.json",
                                                             creds))
        yield cases.run(self, app.port(), TABLE[:1])

    def external(self, source, **extra):
        self.api.audience = ("//iam.googleapis.com/projects/1/locations/"
                             "global/workloadIdentityPools/pool/providers/"
                             "prov")
        return dict({
            "type": "external_account", "audience": self.api.audience,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": self.api.url + "/v1/token",
            "credential_source": source}, **extra)

    def impersonation_url(self, email):
        return ("%s/v1/projects/-/serviceAccounts/%s:generateAccessToken"
                % (self.api.url, email))

    @defer.inlineCallbacks
    def test_external_account_from_a_file(self):
        """Workload identity federation: a projected token file exchanged
        at the STS; the federated token reads the zones itself."""
        self.api.subject_tokens.add("k8s-token-1")
        token_file = os.path.join(util.write_files(
            self, {"token": "k8s-token-1\n"}), "token")
        creds = self.external({"file": token_file,
                               "format": {"type": "text"}})
        app, _ = yield self.start("credentials " + self.file("ext.json",
                                                             creds))
        yield cases.run(self, app.port(), TABLE[:1])
        self.assertIn(("POST", "/v1/token"), self.api.requests)
        self.assertEqual(self.api.impersonations, [])

    @defer.inlineCallbacks
    def test_external_account_from_a_url_impersonating(self):
        """The subject token from a URL (a JSON field, a header sent),
        then a service account impersonated with the federated token."""
        self.api.subject_tokens.add("idp-token")
        self.api.impersonable.add("dns@proj.iam.gserviceaccount.com")
        creds = self.external(
            {"url": self.api.url + "/subject-token",
             "headers": {"X-Identity": "yes"},
             "format": {"type": "json",
                        "subject_token_field_name": "id_token"}},
            service_account_impersonation_url=self.impersonation_url(
                "dns@proj.iam.gserviceaccount.com"),
            service_account_impersonation={"token_lifetime_seconds": 1800})
        app, _ = yield self.start("credentials " + self.file("ext.json",
                                                             creds))
        yield cases.run(self, app.port(), TABLE[:1])
        self.assertEqual(self.api.impersonations, [
            ("dns@proj.iam.gserviceaccount.com", [], "1800s")])

    @defer.inlineCallbacks
    def test_external_account_refused(self):
        """A subject token the STS does not take: logged, SERVFAIL."""
        token_file = os.path.join(util.write_files(
            self, {"token": "stolen"}), "token")
        creds = self.external({"file": token_file})
        text = ("example.org {\n    clouddns example.org.:proj:zone-1 {\n"
                "        endpoint %s\n        credentials %s\n    }\n}\n"
                % (self.api.url, self.file("ext.json", creds)))
        app = yield util.start(self, text)
        yield util.wait_for(lambda: "Failed to update zones" in
                            self.log.text())
        self.assertIn("Unexpected response code: 400 ({\"error\": "
                      "\"invalid_grant\"})", self.log.text())
        yield cases.run(self, app.port(), [
            Case("www.example.org.", "A", rcode="SERVFAIL")])

    @defer.inlineCallbacks
    def test_impersonated_service_account(self):
        """gcloud's impersonated credentials: a user's refresh token buys
        the service account's token, through a delegate."""
        self.api.refresh_tokens.add("refresh-1")
        self.api.impersonable.add("dns@proj.iam.gserviceaccount.com")
        creds = {"type": "impersonated_service_account",
                 "service_account_impersonation_url": self.impersonation_url(
                     "dns@proj.iam.gserviceaccount.com"),
                 "delegates": ["hop@proj.iam.gserviceaccount.com"],
                 "source_credentials": {
                     "type": "authorized_user", "client_id": "c",
                     "client_secret": "s", "refresh_token": "refresh-1",
                     "token_uri": self.api.url + "/token"}}
        app, _ = yield self.start("credentials " + self.file("imp.json",
                                                             creds))
        yield cases.run(self, app.port(), TABLE[:1])
        self.assertEqual(self.api.impersonations, [
            ("dns@proj.iam.gserviceaccount.com",
             ["hop@proj.iam.gserviceaccount.com"], "3600s")])

    @defer.inlineCallbacks
    def test_metadata_server(self):
        """No credentials anywhere: the metadata server's token."""
        env = {k: v for k, v in os.environ.items()
               if k != "GOOGLE_APPLICATION_CREDENTIALS"}
        env["GCE_METADATA_HOST"] = "127.0.0.1:%d" % self.api.port
        env["HOME"] = util.write_files(self, {})
        self.patch(os, "environ", env)
        app, _ = yield self.start("")
        yield cases.run(self, app.port(), TABLE[:1])

    @defer.inlineCallbacks
    def test_refused_and_retried(self):
        """A JWT the token endpoint refuses: logged, not ready, SERVFAIL;
        a zone that does not exist names itself in the error."""
        creds = self.api.service_account("dns@proj.iam.gserviceaccount.com")
        creds["client_email"] = "someone@else"
        text = ("example.org {\n    clouddns example.org.:proj:zone-1 "
                "example.org.:proj:nozone {\n        endpoint %s\n"
                "        credentials %s\n    }\n}\n" % (
                    self.api.url, self.file("sa.json", creds)))
        app = yield util.start(self, text)
        yield util.wait_for(lambda: "Failed to update zones" in
                            self.log.text())
        self.assertIn("[ERROR] plugin/clouddns: Failed to update zones "
                      "[example.org.]: errors updating zones: [failed to "
                      "list resource records for example.org.:proj:zone-1 "
                      "from clouddns: Unexpected response code: 400",
                      self.log.text())
        self.assertFalse(clouddns_of(app).ready())
        yield cases.run(self, app.port(), [
            Case("www.example.org.", "A", rcode="SERVFAIL")])

    @defer.inlineCallbacks
    def test_failure_keeps_data(self):
        creds = self.api.service_account("dns@proj.iam.gserviceaccount.com")
        app, p = yield self.start("credentials " + self.file("sa.json",
                                                             creds))
        self.api.fail = True
        yield p.update()
        self.assertIn("Unexpected response code: 503", self.log.text())
        yield cases.run(self, app.port(), TABLE[:1])


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def check(self, args, body, message, line=2, files=None):
        d = util.write_files(self, files or {})
        body = body.replace("c.json", os.path.join(d, "c.json"))
        message = message.replace('"c.json"', '"%s"' % os.path.join(
            d, "c.json"))
        text = "example.org {\n    clouddns %s {\n%s\n    }\n}\n" % (args,
                                                                   body)
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        self.assertIn("Corefile:%d - Error during parsing: plugin/clouddns: "
                      "%s" % (line, message), str(cm.exception))

    def test_errors(self):
        z = "example.org.:p:z"
        self.check("example.org.:p", "", 'invalid zone "example.org.:p"')
        self.check("example.org.::z", "", 'invalid zone "example.org.::z"')
        self.check(z + " " + z, "", 'conflict zone "%s"' % z)
        self.check(z, "credentials", "Wrong argument count", 3)
        self.check(z, "credentials c.json", 'invalid credentials file '
                   '"c.json": missing `type` field in credential', 3,
                   {"c.json": "{}"})
        self.check(z, "credentials c.json", 'invalid credentials file '
                   '"c.json": unknown credential type: magic', 3,
                   {"c.json": '{"type": "magic"}'})
        for data, msg in [
                ({"type": "external_account"},
                 "external_account credentials: missing audience"),
                ({"type": "external_account", "audience": "a",
                  "subject_token_type": "t", "token_url": "u",
                  "credential_source": {"environment_id": "aws1"}},
                 "external_account credentials: only a credential_source "
                 "with a file or a url is "
                 "supported"),
                ({"type": "impersonated_service_account",
                  "service_account_impersonation_url": "u",
                  "source_credentials": {"type": "authorized_user"}},
                 "authorized_user credentials: missing client_id"),
                ({"type": "service_account", "client_email": "e"},
                 "service_account credentials: missing private_key")]:
            self.check(z, "credentials c.json", 'invalid credentials file '
                       '"c.json": ' + msg, 3, {"c.json": json.dumps(data)})
        self.check(z, "credentials missing.json", 'invalid credentials '
                   'file "missing.json": open ', 3)
        self.check(z, "bogus", 'unknown property "bogus"', 3)
