"""route53 against moto's AWS emulator (a real HTTP server speaking the
Route 53 API): CoreDNS's table of answers, paging, refresh, a backend
unreachable at start, failures that keep the last data, and setup
errors."""

import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins.route53 import names, plugin
from tests.support import cases, moto_aws, util
from tests.support.cases import Case

SOA_FIRST = ("example.org. 300 IN SOA ns-15.awsdns-00.co.uk. "
             "awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400")
SOA_LAST = ("example.org. 300 IN SOA ns-1536.awsdns-00.co.uk. "
            "awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400")

#: The apex NS records moto gives every hosted zone (Route 53 does too):
#: CoreDNS's file rules put them in the authority section of answers.
def apex_ns(zone):
    return ["%s 172800 IN NS %s" % (zone, ns) for ns in (
        "ns-2048.awsdns-64.com.", "ns-2049.awsdns-65.net.",
        "ns-2050.awsdns-66.org.", "ns-2051.awsdns-67.co.uk.")]


def found(qname, qtype, answer, extra=()):
    """A positive answer from a hosted zone: its NS in authority."""
    zone = qname.split(".", qname.count(".") - 2)[-1]
    return Case(qname, qtype, aa=True, answer=answer, ns=apex_ns(zone),
                extra=extra)


FIRST = [
    "other.example.org. 300 A 3.5.7.9",
    "split.example.org. 300 A 1.2.3.4",
]
LAST = [
    "example.org. 300 A 1.2.3.4",
    "www.example.org. 300 A 1.2.3.4",
    "\\052.www.example.org. 300 CNAME www.example.org",
    "example.org. 300 AAAA 2001:db8:85a3::8a2e:370:7334",
    "sample.example.org. 300 CNAME example.org",
    "example.org. 300 PTR ptr.example.org.",
    'txt.example.org. 300 TXT "hello world" "two"',
    "mail.example.org. 300 MX 10 mx.example.org.",
    "mx.example.org. 300 A 192.0.2.25",
    # CoreDNS refuses this escape: the set is skipped.
    "bad\\137name.example.org. 300 A 192.0.2.99",
]

TABLE = [
    found("example.org.", "A", ["example.org. 300 IN A 1.2.3.4"]),
    found("example.org.", "AAAA",
          ["example.org. 300 IN AAAA 2001:db8:85a3::8a2e:370:7334"]),
    found("example.org.", "PTR",
          ["example.org. 300 IN PTR ptr.example.org."]),
    found("sample.example.org.", "A", [
        "sample.example.org. 300 IN CNAME example.org.",
        "example.org. 300 IN A 1.2.3.4"]),
    found("sample.example.org.", "CNAME",
          ["sample.example.org. 300 IN CNAME example.org."]),
    found("txt.example.org.", "TXT",
          ['txt.example.org. 300 IN TXT "hello world" "two"']),
    found("mail.example.org.", "MX",
          ["mail.example.org. 300 IN MX 10 mx.example.org."],
          extra=["mx.example.org. 300 IN A 192.0.2.25"]),
    # Only in the first hosted zone.
    found("other.example.org.", "A",
          ["other.example.org. 300 IN A 3.5.7.9"]),
    # NODATA in the first hosted zone wins.
    Case("split.example.org.", "AAAA", ns=[SOA_FIRST], aa=True),
    # Nowhere: the last hosted zone's NXDOMAIN.
    Case("bad.example.org.", "A", rcode="NXDOMAIN", ns=[SOA_LAST],
         aa=True),
    Case("badname.example.org.", "A", rcode="NXDOMAIN", ns=[SOA_LAST]),
    # An escaped wildcard.
    found("a.www.example.org.", "A", [
        "a.www.example.org. 300 IN CNAME www.example.org.",
        "www.example.org. 300 IN A 1.2.3.4"]),
    # Fallthrough to whoami for example.gov. names route53 lacks.
    found("split.example.gov.", "A", ["split.example.gov. 300 IN A 1.2.3.4"]),
    Case("nothere.example.gov.", "A", aa=True, extra=cases.whoami(
        "nothere.example.gov.")),
]


def corefile(srv, zones, options=""):
    return """example.org example.gov {
    route53 %s {
        aws_access_key %s %s
        aws_endpoint %s
        %s
    }
    whoami
}
""" % (" ".join(zones), moto_aws.KEY_ID, moto_aws.SECRET, srv.url, options)


def route53_of(app):
    return [p for p in app.config.plugins() if p.name == "route53"][0]


class Base(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)
        self.srv = moto_aws.MotoServer().start()
        self.addCleanup(self.srv.stop)
        # One attempt per call: an unreachable endpoint fails at once.
        for k, v in (("AWS_MAX_ATTEMPTS", "1"),
                     ("AWS_RETRY_MODE", "standard")):
            old = os.environ.get(k)
            os.environ[k] = v
            self.addCleanup(_restore, k, old)

    @defer.inlineCallbacks
    def start(self, zones, options=""):
        app = yield util.start(self, corefile(self.srv, zones, options))
        p = route53_of(app)
        yield util.wait_for(p.ready)
        return app, p


def _restore(key, old):
    if old is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = old


class AnswersTest(Base):

    @defer.inlineCallbacks
    def test_table(self):
        first = self.srv.zone("example.org.", FIRST, soa=SOA_FIRST.split(
            None, 4)[4])
        last = self.srv.zone("example.org.", LAST)
        gov = self.srv.zone("example.gov.", [
            "split.example.gov. 300 A 1.2.3.4"])
        app, _ = yield self.start([
            "example.org.:" + first, "example.org.:" + last,
            "example.gov.:" + gov], "fallthrough example.gov.")
        yield cases.run(self, app.port(), TABLE)
        self.assertIn("failed to unescape `bad\\137name.example.org.' name: "
                      "invalid character: \\0137", self.log.text())

    @defer.inlineCallbacks
    def test_no_fallthrough_nxdomain(self):
        zid = self.srv.zone("example.org.", LAST)
        app, _ = yield self.start(["example.org:" + zid])
        yield cases.run(self, app.port(), [
            Case("nothere.example.org.", "A", rcode="NXDOMAIN",
                 ns=[SOA_LAST])])

    @defer.inlineCallbacks
    def test_paging(self):
        self.patch(plugin, "PAGE_SIZE", "2")
        zid = self.srv.zone("example.org.", [
            "h%d.example.org. 60 A 192.0.2.%d" % (i, i) for i in range(7)])
        app, _ = yield self.start(["example.org.:" + zid])
        yield cases.run(self, app.port(), [
            found("h%d.example.org." % i, "A",
                  ["h%d.example.org. 60 IN A 192.0.2.%d" % (i, i)])
            for i in range(7)])

    @defer.inlineCallbacks
    def test_refresh(self):
        """Changes show after the next refresh; the timer runs it."""
        zid = self.srv.zone("example.org.", ["a.example.org. 60 A 192.0.2.1"])
        app, _ = yield self.start(["example.org.:" + zid], "refresh 1")
        self.srv.upsert(zid, ["a.example.org. 60 A 192.0.2.2"])
        yield cases.wait_for_answer(app.port(), found(
            "a.example.org.", "A", ["a.example.org. 60 IN A 192.0.2.2"]))

    @defer.inlineCallbacks
    def test_failure_keeps_data(self):
        zid = self.srv.zone("example.org.", ["a.example.org. 60 A 192.0.2.1"])
        app, p = yield self.start(["example.org.:" + zid])
        self.srv.stop()
        yield p.update()
        self.assertIn("[ERROR] plugin/route53: Failed to update zones "
                      "[example.org.]: errors updating zones: [failed to "
                      "list resource records for example.org.:%s from "
                      "route53: " % zid, self.log.text())
        yield cases.run(self, app.port(), [found(
            "a.example.org.", "A", ["a.example.org. 60 IN A 192.0.2.1"])])

    @defer.inlineCallbacks
    def test_unknown_zone_id(self):
        """A hosted zone that does not exist is logged, the others
        served; not ready, the zone answers SERVFAIL."""
        zid = self.srv.zone("example.org.", ["a.example.org. 60 A 192.0.2.1"])
        app = yield util.start(self, corefile(
            self.srv, ["example.org.:" + zid, "example.gov.:NOSUCHZONE"]))
        p = route53_of(app)
        yield util.wait_for(lambda: "NoSuchHostedZone" in self.log.text())
        self.assertFalse(p.ready())
        yield cases.run(self, app.port(), [
            found("a.example.org.", "A", ["a.example.org. 60 IN A 192.0.2.1"]),
            Case("a.example.gov.", "A", rcode="SERVFAIL")])


class UnreachableTest(Base):

    @defer.inlineCallbacks
    def test_retried_until_reachable(self):
        """Nothing listens at start: logged, not ready, SERVFAIL; once the
        API answers the zone is loaded without a restart."""
        port = self.srv.port
        zid = self.srv.zone("example.org.", ["a.example.org. 60 A 192.0.2.1"])
        self.srv.stop()
        app = yield util.start(self, corefile(
            self.srv, ["example.org.:" + zid]))
        p = route53_of(app)
        yield util.wait_for(lambda: "Failed to update zones" in
                            self.log.text())
        self.assertFalse(p.ready())
        yield cases.run(self, app.port(), [
            Case("a.example.org.", "A", rcode="SERVFAIL")])
        self.srv = moto_aws.MotoServer(port).start()
        self.addCleanup(self.srv.stop)
        yield util.wait_for(p.ready, timeout=30)
        yield cases.run(self, app.port(), [found(
            "a.example.org.", "A", ["a.example.org. 60 IN A 192.0.2.1"])])


class CredentialsTest(Base):

    @defer.inlineCallbacks
    def test_profile_file(self):
        zid = self.srv.zone("example.org.", ["a.example.org. 60 A 192.0.2.1"])
        d = util.write_files(self, {"creds": "[other]\naws_access_key_id = "
                                    "k\naws_secret_access_key = s\n"})
        text = """example.org {
    route53 example.org.:%s {
        aws_endpoint %s
        credentials other %s
    }
}
""" % (zid, self.srv.url, os.path.join(d, "creds"))
        app = yield util.start(self, text)
        yield util.wait_for(route53_of(app).ready)
        yield cases.run(self, app.port(), [found(
            "a.example.org.", "A", ["a.example.org. 60 IN A 192.0.2.1"])])


class UnescapeTest(unittest.TestCase):
    """CoreDNS's TestMaybeUnescape rows."""

    def test_rows(self):
        for escaped, want in [
                ("", ""), ("example.com.", "example.com."),
                ("\\052.example.com", "*.example.com"),
                ("weird\\055ex\\141mple\\056com\\056\\056",
                 "weird-example.com..")]:
            self.assertEqual(names.unescape(escaped), want)
        for escaped, err in [
                ("e\\052ample.com",
                 "`*' only supported as wildcard (leftmost label)"),
                ("\\000.example.com", "invalid character: \\000"),
                ("example\\0com", "invalid escape sequence: '\\0co'"),
                ("example.com\\0", "invalid escape sequence: '\\0'")]:
            with self.assertRaises(ValueError) as cm:
                names.unescape(escaped)
            self.assertEqual(str(cm.exception), err)


def setup_error(testcase, text):
    with testcase.assertRaises(CorefileError) as cm:
        util.Direct(testcase, text)
    return str(cm.exception)


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def check(self, body, message, line=2):
        text = "example.org {\n    route53 %s\n}\n" % body
        got = setup_error(self, text)
        self.assertIn("Corefile:%d - Error during parsing: plugin/route53: "
                      "%s" % (line, message), got)

    def test_errors(self):
        self.check("example.org", 'invalid zone "example.org"')
        self.check(":Z1", 'invalid zone ":Z1"')
        self.check("example.org.:", 'invalid zone "example.org.:"')
        self.check("example.org.:Z1 example.org.:Z1",
                   'conflict zone "example.org.:Z1"')
        self.check("example.org.:Z1 {\n aws_access_key ONLY\n}",
                   "invalid access key: '[ONLY]'", 3)
        self.check("example.org.:Z1 {\n aws_endpoint\n}",
                   "Wrong argument count", 3)
        self.check("example.org.:Z1 {\n credentials\n}",
                   "Wrong argument count", 3)
        self.check("example.org.:Z1 {\n refresh\n}",
                   "Wrong argument count", 3)
        self.check("example.org.:Z1 {\n refresh foo\n}",
                   'Unable to parse duration: time: invalid duration "foo"',
                   3)
        self.check("example.org.:Z1 {\n refresh 0\n}",
                   'refresh interval must be greater than 0: "0s"', 3)
        self.check("example.org.:Z1 {\n refresh -1m\n}",
                   'refresh interval must be greater than 0: "-1m"', 3)
        self.check("example.org.:Z1 {\n wrong\n}",
                   'unknown property "wrong"', 3)
        # Tokens past what an option reads start the next option, as
        # CoreDNS reads them one at a time.
        self.check("example.org.:Z1 {\n credentials default creds extra\n}",
                   'unknown property "extra"', 3)
        self.check("example.org.:Z1 {\n refresh 1m 2m\n}",
                   'unknown property "2m"', 3)
        self.check("example.org.:Z1 {\n aws_endpoint http://a refresh\n}",
                   "Wrong argument count", 3)

    def test_valid(self):
        plugins, _ = util.build_plugins(self, """example.org {
    route53 example.org.:Z1 example.org.:Z2 example.gov:Z3 {
        aws_access_key A B
        aws_endpoint http://127.0.0.1:1
        # fallthrough: an option of its own, read after credentials'
        # two tokens as CoreDNS reads them
        credentials default /nonexistent fallthrough example.gov
        upstream
        refresh 90
    }
}
""", "route53")
        p = plugins[0]
        self.assertEqual(p.origins, ["example.org.", "example.gov."])
        self.assertEqual([h.ref for h in p.hosted["example.org."]],
                         ["Z1", "Z2"])
        self.assertEqual(p.refresh, 90.0)
        self.assertTrue(p.fall.through("a.example.gov."))
        self.assertFalse(p.fall.through("a.example.org."))
        self.assertIn("aws_access_key in Corefile has been deprecated",
                      self.log.text())
