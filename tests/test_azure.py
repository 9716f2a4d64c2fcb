"""azure against a local emulation of Azure AD's token endpoint, the
managed identity endpoints and Azure DNS's record set lists
(tests/support/cloud_apis.py): answers from public and private zones,
paging, tokens from a secret, a client certificate or a managed identity,
failures and setup errors."""

import datetime
import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import cases, cloud_apis, util
from tests.support.cases import Case

SOA = ("example.org. 3600 IN SOA ns1-01.azure-dns.com. "
       "azuredns-hostmaster.microsoft.com. 1 3600 300 2419200 300")
NS = ["example.org. 3600 IN NS ns1-01.azure-dns.com."]


def rs(name, fqdn, ttl, **props):
    props.update({"fqdn": fqdn, "TTL": ttl})
    return {"name": name, "properties": props}


PUBLIC = [
    rs("@", "example.org.", 3600, SOARecord={
        "host": "ns1-01.azure-dns.com.",
        "email": "azuredns-hostmaster.microsoft.com", "serialNumber": 1,
        "refreshTime": 3600, "retryTime": 300, "expireTime": 2419200,
        "minimumTTL": 300}),
    rs("@", "example.org.", 3600,
       NSRecords=[{"nsdname": "ns1-01.azure-dns.com."}]),
    rs("www", "www.example.org.", 300, ARecords=[
        {"ipv4Address": "1.2.3.4"}, {"ipv4Address": "1.2.3.5"}]),
    rs("www", "www.example.org.", 300,
       AAAARecords=[{"ipv6Address": "2001:db8::1"}]),
    rs("mail", "mail.example.org.", 300,
       MXRecords=[{"preference": 10, "exchange": "www.example.org"}]),
    rs("txt", "txt.example.org.", 300,
       TXTRecords=[{"value": ["hello world", "two"]}]),
    rs("alias", "alias.example.org.", 300,
       CNAMERecord={"cname": "www.example.org"}),
    rs("_sip._tcp", "_sip._tcp.example.org.", 300, SRVRecords=[
        {"priority": 1, "weight": 2, "port": 5060,
         "target": "www.example.org"}]),
    rs("ptr", "ptr.example.org.", 300,
       PTRRecords=[{"ptrdname": "www.example.org"}]),
]


def lower_keys(record_sets):
    """The private API's spelling (aRecords, ttl, ...)."""
    out = []
    for r in record_sets:
        props = {(k[0].lower() + k[1:] if k != "TTL" else "ttl"): v
                 for k, v in r["properties"].items()}
        props = {("aaaaRecords" if k == "aAAARecords" else
                  "soaRecord" if k == "sOARecord" else
                  "cnameRecord" if k == "cNAMERecord" else
                  "mxRecords" if k == "mXRecords" else
                  "txtRecords" if k == "tXTRecords" else
                  "srvRecords" if k == "sRVRecords" else
                  "ptrRecords" if k == "pTRRecords" else
                  "nsRecords" if k == "nSRecords" else k): v
                 for k, v in props.items()}
        out.append({"name": r["name"], "properties": props})
    return out


def found(qname, qtype, answer, extra=(), ns=NS):
    return Case(qname, qtype, aa=True, answer=answer, ns=ns, extra=extra)


def table(ns=NS):
    return [
        found("www.example.org.", "A", ["www.example.org. 300 IN A 1.2.3.4",
                                        "www.example.org. 300 IN A 1.2.3.5"],
              ns=ns),
        found("www.example.org.", "AAAA",
              ["www.example.org. 300 IN AAAA 2001:db8::1"], ns=ns),
        found("mail.example.org.", "MX",
              ["mail.example.org. 300 IN MX 10 www.example.org."],
              extra=["www.example.org. 300 IN A 1.2.3.4",
                     "www.example.org. 300 IN A 1.2.3.5",
                     "www.example.org. 300 IN AAAA 2001:db8::1"], ns=ns),
        found("txt.example.org.", "TXT",
              ['txt.example.org. 300 IN TXT "hello world" "two"'], ns=ns),
        found("alias.example.org.", "A", [
            "alias.example.org. 300 IN CNAME www.example.org.",
            "www.example.org. 300 IN A 1.2.3.4",
            "www.example.org. 300 IN A 1.2.3.5"], ns=ns),
        found("_sip._tcp.example.org.", "SRV",
              ["_sip._tcp.example.org. 300 IN SRV 1 2 5060 "
               "www.example.org."],
              extra=["www.example.org. 300 IN A 1.2.3.4",
                     "www.example.org. 300 IN A 1.2.3.5",
                     "www.example.org. 300 IN AAAA 2001:db8::1"], ns=ns),
        found("ptr.example.org.", "PTR",
              ["ptr.example.org. 300 IN PTR www.example.org."], ns=ns),
        Case("www.example.org.", "TXT", aa=True, ns=[SOA]),
        Case("nothere.example.org.", "A", rcode="NXDOMAIN", aa=True,
             ns=[SOA]),
    ]


def corefile_text(api, zones, extra=""):
    return """example.org {
    azure %s {
        tenant %s
        client %s
        secret %s
        subscription %s
        endpoint %s
        %s
    }
}
""" % (" ".join(zones), cloud_apis.TENANT, cloud_apis.CLIENT,
       cloud_apis.SECRET, cloud_apis.SUBSCRIPTION, api.url, extra)


def azure_of(app):
    return [p for p in app.config.plugins() if p.name == "azure"][0]


class AzureTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)
        self.api = cloud_apis.CloudAPIs(page_size=2).start()
        self.addCleanup(self.api.stop)

    @defer.inlineCallbacks
    def start(self, zones, extra=""):
        app = yield util.start(self, corefile_text(self.api, zones, extra))
        p = azure_of(app)
        yield util.wait_for(p.ready)
        return app, p

    @defer.inlineCallbacks
    def test_public(self):
        self.api.azure_zone("rg", "example.org", PUBLIC)
        app, _ = yield self.start(["rg:example.org"])
        yield cases.run(self, app.port(), table())
        # Five pages of two record sets, one token for them all.
        lists = [r for r in self.api.requests if "recordsets" in r[1]]
        self.assertEqual(len(lists), 5)
        self.assertEqual(len(self.api.tokens), 1)

    @defer.inlineCallbacks
    def test_private(self):
        self.api.azure_zone("rg", "example.org", lower_keys(PUBLIC),
                            private=True)
        app, _ = yield self.start(["rg:example.org"], "access private")
        # Private zones have no NS records.
        yield cases.run(self, app.port(), table(ns=[]))

    @defer.inlineCallbacks
    def test_bad_secret(self):
        """A refused token: logged, not ready, SERVFAIL."""
        self.api.azure_zone("rg", "example.org", PUBLIC)
        text = corefile_text(self.api, ["rg:example.org"]).replace(
            cloud_apis.SECRET, "wrong")
        app = yield util.start(self, text)
        yield util.wait_for(lambda: "Failed to update zones" in
                            self.log.text())
        self.assertIn("[ERROR] plugin/azure: Failed to update zones "
                      "[example.org.]: errors updating zones: [failed to "
                      "list resource records for example.org from azure: "
                      "Unexpected response code: 401", self.log.text())
        self.assertFalse(azure_of(app).ready())
        yield cases.run(self, app.port(), [
            Case("www.example.org.", "A", rcode="SERVFAIL")])

    @defer.inlineCallbacks
    def test_failure_keeps_data(self):
        self.api.azure_zone("rg", "example.org", PUBLIC)
        app, p = yield self.start(["rg:example.org"])
        self.api.fail = True
        yield p.update()
        self.assertIn("Unexpected response code: 503", self.log.text())
        yield cases.run(self, app.port(), table()[:1])


def make_certificate(directory, password=None):
    """A self-signed RSA client certificate: (cryptography Certificate,
    path of a PEM file with the key, or of a PKCS#12 file with
    ``password``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "coredns")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    if password is None:
        path = os.path.join(directory, "client.pem")
        data = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()) + cert.public_bytes(
                serialization.Encoding.PEM)
    else:
        path = os.path.join(directory, "client.pfx")
        data = pkcs12.serialize_key_and_certificates(
            b"coredns", key, cert, None,
            serialization.BestAvailableEncryption(password.encode()))
    with open(path, "wb") as f:
        f.write(data)
    return cert, path


class CredentialsTest(unittest.TestCase):
    """The ways to a token besides a secret: a client certificate, and
    the managed identity of the machine."""

    def setUp(self):
        self.log = util.capture_log(self)
        self.api = cloud_apis.CloudAPIs().start()
        self.addCleanup(self.api.stop)
        self.api.azure_zone("rg", "example.org", PUBLIC)
        self.dir = util.write_files(self, {})
        env = {k: v for k, v in os.environ.items() if k not in (
            "IDENTITY_ENDPOINT", "IDENTITY_HEADER")}
        env["AZURE_POD_IDENTITY_AUTHORITY_HOST"] = self.api.url
        self.patch(os, "environ", env)

    @defer.inlineCallbacks
    def start(self, creds):
        app = yield util.start(self, "example.org {\n    azure rg:example.org"
                               " {\n        endpoint %s\n%s    }\n}\n" % (
                                   self.api.url, "".join(
                                       "        %s\n" % c for c in creds)))
        return app, azure_of(app)

    @defer.inlineCallbacks
    def serves(self, creds):
        app, p = yield self.start(creds)
        yield util.wait_for(p.ready)
        yield cases.run(self, app.port(), table()[:2])

    @defer.inlineCallbacks
    def test_managed_identity_from_the_instance_metadata(self):
        """No credentials: the machine's identity, and the machine's
        subscription from the instance metadata."""
        yield self.serves([])
        self.assertEqual(self.api.identities,
                         {"/metadata/identity/oauth2/token": None})
        self.assertIn(("GET", "/metadata/instance"), self.api.requests)

    @defer.inlineCallbacks
    def test_user_assigned_identity_of_app_service(self):
        """App Service's identity endpoint (IDENTITY_ENDPOINT and its
        header secret), a user-assigned identity named by ``client``;
        its token gives only ``expires_on``."""
        os.environ["IDENTITY_ENDPOINT"] = self.api.url + "/msi/token"
        os.environ["IDENTITY_HEADER"] = self.api.identity_header
        yield self.serves(["client my-identity",
                           "subscription " + cloud_apis.SUBSCRIPTION])
        self.assertEqual(self.api.identities, {"/msi/token": "my-identity"})
        self.assertNotIn(("GET", "/metadata/instance"), self.api.requests)
        p = [p for p in self.api.requests if p[1] == "/msi/token"]
        self.assertEqual(len(p), 1)

    @defer.inlineCallbacks
    def test_client_certificate_pem(self):
        cert, path = make_certificate(self.dir)
        self.api.azure_certificate(cert)
        yield self.serves(["tenant " + cloud_apis.TENANT,
                           "client " + cloud_apis.CLIENT,
                           "certificate " + path,
                           "subscription " + cloud_apis.SUBSCRIPTION])
        self.assertEqual(self.api.identities, {})

    @defer.inlineCallbacks
    def test_client_certificate_pkcs12(self):
        cert, path = make_certificate(self.dir, password="pfx-pass")
        self.api.azure_certificate(cert)
        yield self.serves(["tenant " + cloud_apis.TENANT,
                           "client " + cloud_apis.CLIENT,
                           "certificate %s pfx-pass" % path,
                           "subscription " + cloud_apis.SUBSCRIPTION])

    @defer.inlineCallbacks
    def test_unknown_certificate_refused(self):
        _, path = make_certificate(self.dir)
        app, p = yield self.start(["tenant " + cloud_apis.TENANT,
                                   "client " + cloud_apis.CLIENT,
                                   "certificate " + path,
                                   "subscription " + cloud_apis.SUBSCRIPTION])
        yield util.wait_for(lambda: "Failed to update zones" in
                            self.log.text())
        self.assertIn("Unexpected response code: 401", self.log.text())
        self.assertFalse(p.ready())
        yield cases.run(self, app.port(), [
            Case("www.example.org.", "A", rcode="SERVFAIL")])


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def check(self, args, body, message, line=2):
        text = "example.org {\n    azure %s {\n%s\n    }\n}\n" % (args, body)
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        self.assertIn("Corefile:%d - Error during parsing: plugin/azure: %s"
                      % (line, message), str(cm.exception))

    def test_errors(self):
        creds = ("tenant t\nclient c\nsecret s\nsubscription x\n")
        self.check("rg", creds, 'invalid resource group/zone: "rg"')
        self.check(":example.org", creds,
                   'invalid resource group/zone: ":example.org"')
        self.check("rg:example.org rg:example.org", creds,
                   'conflicting zone: "rg:example.org"')
        self.check("rg:example.org", creds + "access foo",
                   "invalid access value: can be public/private, found: "
                   "foo", 7)
        self.check("rg:example.org", creds + "environment mars",
                   'cannot set azure environment: "autorest/azure: There '
                   'is no cloud environment matching the name \\"MARS\\""',
                   7)
        self.check("rg:example.org", creds + "tenant", "Wrong argument "
                   "count", 7)
        self.check("rg:example.org", creds + "bogus",
                   'unknown property: "bogus"', 7)
        self.check("rg:example.org", "client c\nsecret s",
                   "tenant must be set with a secret")
        d = util.write_files(self, {"junk.pem": "not a certificate"})
        self.check("rg:example.org", "certificate %s/junk.pem" % d,
                   "cannot read certificate %s/junk.pem" % d, 3)
        self.check("rg:example.org", "certificate %s/none.pem" % d,
                   "cannot read certificate %s/none.pem: no such file or "
                   "directory" % d, 3)
        self.check("rg:example.org", "certificate", "Wrong argument count",
                   3)
        _, path = make_certificate(d)
        self.check("rg:example.org", "tenant t\ncertificate " + path,
                   "client must be set with a certificate")

    def test_valid(self):
        plugins, _ = util.build_plugins(self, """example.org {
    azure rg:example.org rg2:example.org rg:example.private {
        tenant t
        client c
        secret s
        subscription x
        environment AzureChinaCloud
        access private
        fallthrough
    }
}
""", "azure")
        p = plugins[0]
        self.assertEqual(p.origins, ["example.org.", "example.private."])
        self.assertEqual([(h.ref.group, h.ref.private)
                          for h in p.hosted["example.org."]],
                         [("rg", True), ("rg2", True)])
        self.assertEqual(p.creds.resource,
                         "https://management.chinacloudapi.cn/")
