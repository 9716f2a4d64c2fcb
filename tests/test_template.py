"""template: CoreDNS's README examples over the wire, its setup and
handler cases, and the metrics."""

import os

import dns.edns
import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.plugins import template as tp
from tests.support import util

ID = "abcdefghijklmnopqrstuvwxyz"       # 26 base32 letters
EXAMPLES = os.path.join(util.REPO, "tests", "corefiles", "template")


def example(name):
    """A README example, its listener on port 0 and ``forward`` replaced
    by what its queries need."""
    with open(os.path.join(EXAMPLES, name + ".Corefile")) as f:
        return f.read()


def answers(msg, section="answer"):
    return [" ".join(line.split()) for line in util.rrs(msg, section)]


class ReadmeExamplesTest(unittest.TestCase):
    """Each example of the README; ``forward`` is replaced by what the
    example's queries need (nothing, or hosts for the CNAME target)."""

    @defer.inlineCallbacks
    def ask(self, corefile_text, name, qtype="A", **kw):
        app = yield util.start(self, corefile_text)
        r = yield util.query(app.port(), name, qtype, **kw)
        defer.returnValue(r)

    @defer.inlineCallbacks
    def test_everything_nxdomain(self):
        app = yield util.start(self, ".:0 {\n template ANY ANY {\n"
                               "  rcode NXDOMAIN\n }\n}\n")
        for name, qtype in (("example.org.", "A"), ("a.b.", "MX")):
            r = yield util.query(app.port(), name, qtype)
            self.assertEqual(r.rcode(), dns.rcode.NXDOMAIN)
            self.assertTrue(r.flags & dns.flags.AA)
            self.assertEqual((r.answer, r.authority), ([], []))

    @defer.inlineCallbacks
    def test_invalid_tld(self):
        cf = example("invalid")
        r = yield self.ask(cf, "test.invalid.", "A", use_edns=0)
        self.assertEqual(r.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(answers(r, "authority"), [
            "invalid. 60 IN SOA ns.invalid. hostmaster.invalid. "
            "1 60 60 60 60"])
        ede = [o for o in r.options if o.otype == dns.edns.EDE]
        self.assertEqual(len(ede), 1)
        self.assertEqual(ede[0].code, 21)
        self.assertEqual(ede[0].text, "Blocked according to RFC2606")

    @defer.inlineCallbacks
    def test_search_domain_zone(self):
        cf = example("search-zone")
        r = yield self.ask(cf, "something.example.com.dc1.example.com.")
        self.assertEqual(r.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(answers(r, "authority"), [
            "example.com.dc1.example.com. 60 IN SOA ns.example.com. "
            "hostmaster.example.com. 1 60 60 60 60"])

    @defer.inlineCallbacks
    def test_search_domain_regex(self):
        cf = example("search-regex")
        app = yield util.start(self, cf)
        r = yield util.query(app.port(),
                             "something.example.com.dc1.example.com.")
        self.assertEqual(r.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(answers(r, "authority"), [
            "dc1.example.com. 60 IN SOA ns.dc1.example.com. "
            "hostmaster.dc1.example.com. 1 60 60 60 60"])
        r = yield util.query(app.port(), "www.example.com.")
        self.assertEqual(r.rcode(), dns.rcode.NOERROR)
        self.assertEqual(len(r.additional), 2)      # whoami's answer

    @defer.inlineCallbacks
    def test_a_and_ptr(self):
        cf = example("a-ptr")
        app = yield util.start(self, cf)
        r = yield util.query(app.port(), "ip-10-95-12-8.example.")
        self.assertEqual(answers(r), ["ip-10-95-12-8.example. 60 IN A "
                                      "10.95.12.8"])
        self.assertTrue(r.flags & dns.flags.AA)
        r = yield util.query(app.port(), "www.ip-10-95-12-8.example.")
        self.assertEqual(answers(r), ["www.ip-10-95-12-8.example. 60 IN A "
                                      "10.95.12.8"])
        r = yield util.query(app.port(), "8.12.95.10.in-addr.arpa.", "PTR")
        self.assertEqual(answers(r), ["8.12.95.10.in-addr.arpa. 60 IN PTR "
                                      "ip-10-95-12-8.example."])
        # No regex match and no fallthrough: SERVFAIL.
        r = yield util.query(app.port(), "x.in-addr.arpa.", "PTR")
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)

    @defer.inlineCallbacks
    def test_device_addresses(self):
        cf = example("device")
        app = yield util.start(self, cf)
        r = yield util.query(app.port(), "192-168-1-20.%s.example.com." % ID)
        self.assertEqual(answers(r), [
            "192-168-1-20.%s.example.com. 60 IN A 192.168.1.20" % ID])
        # A public address is refused by the expression: fallthrough.
        r = yield util.query(app.port(), "8-8-8-8.%s.example.com." % ID)
        self.assertEqual(r.answer, [])
        self.assertEqual(len(r.additional), 2)      # whoami's answer

    @defer.inlineCallbacks
    def test_parse_int(self):
        cf = example("parseint")
        r = yield self.ask(cf, "ip0a7b7b7b.example.")
        self.assertEqual(answers(r), ["ip0a7b7b7b.example. 60 IN A "
                                      "10.123.123.123"])

    @defer.inlineCallbacks
    def test_multiple_patterns(self):
        cf = example("multiple")
        app = yield util.start(self, cf)
        r = yield util.query(app.port(), "ip-10-1-2-3.dc.example.")
        self.assertEqual(answers(r), ["ip-10-1-2-3.dc.example. 60 IN A "
                                      "10.1.2.3"])
        r = yield util.query(app.port(), "4.5.6.7.ext.example.")
        self.assertEqual(answers(r), ["4.5.6.7.ext.example. 60 IN A "
                                      "4.5.6.7"])

    @defer.inlineCallbacks
    def test_a_and_mx(self):
        app = yield util.start(self, example("a-mx"))
        r = yield util.query(app.port(), "ip-10-1-2-3.example.", "MX")
        self.assertEqual(answers(r), ["ip-10-1-2-3.example. 60 IN MX 10 "
                                      "ip-10-1-2-3.example."])
        self.assertEqual(answers(r, "additional"), [
            "ip-10-1-2-3.example. 60 IN A 10.1.2.3"])
        r = yield util.query(app.port(), "ip-10-1-2-3.example.", "A")
        self.assertEqual(answers(r), ["ip-10-1-2-3.example. 60 IN A "
                                      "10.1.2.3"])

    @defer.inlineCallbacks
    def test_authoritative_nameservers(self):
        app = yield util.start(self, example("a-mx-ns"))
        r = yield util.query(app.port(), "ip-10-1-2-3.example.", "A")
        self.assertEqual(answers(r), ["ip-10-1-2-3.example. 60 IN A "
                                      "10.1.2.3"])
        self.assertEqual(answers(r, "authority"), [
            "example. 60 IN NS ns0.example.",
            "example. 60 IN NS ns1.example."])
        self.assertEqual(answers(r, "additional"), [
            "ns0.example. 60 IN A 203.0.113.8",
            "ns1.example. 60 IN A 198.51.100.8"])
        r = yield util.query(app.port(), "ip-10-1-2-3.example.", "MX")
        self.assertEqual(len(r.additional), 3)

    @defer.inlineCallbacks
    def test_fabricate_cname(self):
        cf = example("cname")
        app = yield util.start(self, cf)
        r = yield util.query(app.port(), "foogle.com.", "A")
        self.assertEqual(answers(r), [
            "foogle.com. 60 IN CNAME google.com.",
            "google.com. 3600 IN A 192.0.2.7"])
        # Only A and AAAA queries follow the CNAME.
        r = yield util.query(app.port(), "foogle.com.", "TXT")
        self.assertEqual(answers(r), ["foogle.com. 60 IN CNAME google.com."])


class BehaviourTest(unittest.TestCase):
    """CoreDNS's handler cases, sans-I/O through the block mux."""

    def direct(self, body, key="."):
        return util.Direct(self, "%s:0 {\n%s\n}\n" % (key, body))

    def test_drop_aaaa(self):
        s = self.direct("template ANY AAAA {\n rcode NOERROR\n}\nwhoami")
        r = s.query("example.org.", "AAAA")
        self.assertEqual(r.rcode(), dns.rcode.NOERROR)
        self.assertEqual((r.answer, r.additional), ([], []))
        self.assertTrue(r.flags & dns.flags.AA)
        r = s.query("example.org.", "A")
        self.assertEqual(len(r.additional), 2)      # whoami

    def test_servfail_rcode_is_not_written(self):
        s = self.direct("template ANY ANY {\n rcode SERVFAIL\n}")
        r = s.query("test.invalid.", "A")
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)
        self.assertFalse(r.flags & dns.flags.AA)

    def test_remote(self):
        s = self.direct('template IN A {\n answer "{{ .Name }} 60 IN A '
                        '{{ .Remote }}"\n}')
        self.assertEqual(answers(s.query("a.example.")),
                         ["a.example. 60 IN A 127.0.0.1"])

    def test_multi_section(self):
        """CoreDNS's TestMultiSection, against a server block for test."""
        s = util.Direct(self, example("multi-section"))
        self.assertEqual(s.query("some.test.", "A").rcode(),
                         dns.rcode.REFUSED)
        r = s.query("some.test.", "TXT")                # fell through
        self.assertEqual(len(r.additional), 2)
        r = s.query("ip-10-11-12-13.example.", "A")
        self.assertEqual(answers(r), ["ip-10-11-12-13.example. 60 IN A "
                                      "10.11.12.13"])
        r = s.query("ip-10-11-12-13.example.", "MX")
        self.assertEqual(len(r.answer), 1)
        r = s.query("something.example.", "A")          # fell through
        self.assertEqual(len(r.additional), 2)
        r = s.query("something.example.", "MX")         # no fallthrough
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)

    def test_chaos_class(self):
        s = self.direct('template CH TXT coredns.invalid {\n answer '
                        '"{{ .Name }} 60 CH TXT \\"test\\""\n}\nchaos')
        r = s.query("coredns.invalid.", "TXT", rdclass="CH")
        self.assertEqual(answers(r), ['coredns.invalid. 60 CH TXT "test"'])

    def test_expr_cases(self):
        """CoreDNS's TestExpr: true, false with and without fallthrough,
        variables, groups, runtime errors."""
        cases = [
            ("expr name() == 'a.example.'", "a.example.", "answer"),
            ("expr name() == 'b.example.'", "a.example.", "SERVFAIL"),
            ("expr name() == 'b.example.'\nfallthrough", "a.example.",
             "next"),
            ("expr name() == 'b.example.'\nfallthrough other.example.",
             "a.example.", "SERVFAIL"),
            ("expr type() == 'A'\nexpr incidr(client_ip(), "
             "'192.0.2.0/24')\nfallthrough", "a.example.", "next"),
            ("match ^(?P<n>[0-9]+)[.]example[.]$\nvar num int(group('n'))"
             "\nexpr num > 1\nfallthrough", "2.example.", "answer"),
            ("match ^(?P<n>[0-9]+)[.]example[.]$\nvar num int(group('n'))"
             "\nexpr num > 1\nfallthrough", "1.example.", "next"),
            ("match ^(?P<n>[0-9]+)[.]example[.]$\nexpr group('n') == '2' "
             "&& group(0) == '2.example.'", "2.example.", "answer"),
            ("expr 1\nfallthrough", "a.example.", "next"),
            ("expr incidr('notanip', '10.0.0.0/8')\nfallthrough",
             "a.example.", "SERVFAIL"),
            ("var bad incidr('notanip', '10.0.0.0/8')\nfallthrough",
             "a.example.", "SERVFAIL"),
            ("match ^a[.]example[.]$\nexpr incidr('notanip', "
             "'10.0.0.0/8')\nfallthrough", "b.example.", "next"),
        ]
        for body, qname, want in cases:
            s = self.direct('template IN A example. {\n%s\nanswer '
                            '"{{ .Name }} 60 IN A 10.0.0.1"\n}\nwhoami'
                            % body)
            r = s.query(qname, "A")
            if want == "answer":
                got = "answer" if r.answer else r
            elif want == "next":
                got = "next" if len(r.additional) == 2 else r
            else:
                got = dns.rcode.to_text(r.rcode())
            self.assertEqual(got, want, body)

    def test_vars(self):
        s = util.Direct(self, example("vars"))
        self.assertEqual(answers(s.query("a.example.")),
                         ["a.example. 60 IN A 10.1.2.20"])
        self.assertEqual(answers(s.query("a.example.", "TXT")),
                         ['a.example. 60 IN TXT "empty=true local 2"'])

    def test_metadata(self):
        s = util.Direct(self, example("metadata"))
        self.assertEqual(answers(s.query("a.example.")),
                         ["x.a.example. 60 IN A 10.0.0.1"])

    def test_template_failure_metrics(self):
        s = self.direct('template ANY ANY {\n match "[.]example[.]$"\n '
                        'answer "{{ .Name }} 60 IN TXT \\"{{ index .Match 2 '
                        '}}\\""\n}', key="example.")
        label = '{{ .Name }} 60 IN TXT "{{ index .Match 2 }}"'
        key = (s.mux.label, "example.", "", "IN", "TXT", "answer", label)
        before = tp.TEMPLATE_FAILURES.get(key)
        r = s.query("test.example.", "TXT")
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(tp.TEMPLATE_FAILURES.get(key), before + 1)

    def test_rr_failure_metrics(self):
        s = self.direct('template ANY ANY {\n match "[.]example[.]$"\n '
                        'authority "{{ .Name }}"\n}', key="example.")
        key = (s.mux.label, "example.", "", "IN", "A", "authority",
               "{{ .Name }}")
        before = tp.RR_FAILURES.get(key)
        r = s.query("test.example.", "A")
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(tp.RR_FAILURES.get(key), before + 1)

    def test_matches_metric(self):
        s = self.direct("template ANY ANY {\n rcode NXDOMAIN\n}")
        key = (s.mux.label, ".", "", "IN", "MX")
        before = tp.MATCHES.get(key)
        s.query("x.", "MX")
        self.assertEqual(tp.MATCHES.get(key), before + 1)
        # An ANY query counts under the template's own type.
        s2 = self.direct("template IN A {\n rcode NXDOMAIN\n}")
        key = (s2.mux.label, ".", "", "IN", "A")
        before = tp.MATCHES.get(key)
        s2.query("x.", "ANY")
        self.assertEqual(tp.MATCHES.get(key), before + 1)

    def test_parse_int_error_is_servfail(self):
        s = self.direct('template ANY ANY {\n answer "{{ .Name }} 60 IN '
                        'TXT \\"{{ parseInt \\"gg\\" 16 8 }}\\""\n}')
        self.assertEqual(s.query("a.example.", "TXT").rcode(),
                         dns.rcode.SERVFAIL)


class SetupTest(unittest.TestCase):
    """CoreDNS's TestSetupParse, TestSetupParseVar, TestSetupParseExpr."""

    def build(self, body, key="domain.com.:0 dynamic.domain.com.:0"):
        return util.Direct(self, "%s {\n%s\n}\n" % (key, body))

    def assertSetup(self, body, ok):
        if ok:
            self.build(body)
        else:
            self.assertRaises(CorefileError, self.build, body)

    def test_parse(self):
        for body, ok in [
            ("template", False), ("template X", False),
            ("template ANY", False), ("template ANY X", False),
            ("template ANY ANY .* {\n notavailable\n}", False),
            ("template ANY ANY {\n answer\n}", False),
            ("template ANY ANY {\n additional\n}", False),
            ("template ANY ANY {\n rcode\n}", False),
            ("template ANY ANY {\n rcode UNDEFINED\n}", False),
            ('template ANY ANY {\n answer "{{"\n}', False),
            ('template ANY ANY {\n additional "{{"\n}', False),
            ('template ANY ANY {\n authority "{{"\n}', False),
            ('template ANY ANY {\n answer "{{ notAFunction }}"\n}', False),
            ('template ANY ANY {\n answer "{{ parseInt }}"\n additional '
             '"{{ parseInt }}"\n authority "{{ parseInt }}"\n}', True),
            ("template ANY ANY {\n\n}", True),
            ("template ANY A example.com {\n match ip-(?P<a>[0-9]*)-(?P<b>"
             "[0-9]*)[.]example[.]com\n answer \"{{ .Name }} A "
             "{{ .Group.a }}.{{ .Grup.d }}.\"\n fallthrough\n}", True),
            ('template IN ANY example.com {\n match "[.](example[.]com[.]'
             'dc1[.]example[.]com[.])$"\n rcode NXDOMAIN\n authority "{{ '
             'index .Match 1 }} 60 IN SOA ns.{{ index .Match 1 }} hostmaster'
             '.example.com (1 60 60 60 60)"\n fallthrough example.com\n}',
             True),
            ('template ANY ANY invalid {\n rcode NXDOMAIN\n ederror 21 '
             '"Blocked according to RFC2606"\n}', True),
            ('template ANY ANY invalid {\n ederror invalid "x"\n}', False),
            ("template ANY ANY invalid {\n ederror too many arguments\n}",
             False),
            ("template ANY A example.com {\n match %s\n}" % ("a" * 10001),
             False),
            ("template ANY A {\n match (a)\\1\n}", False),
            ("template in A", False), ("template IN a", False),
            ("template ANY AAAA {\n rcode NOERROR\n}\n"
             "template IN A {\n rcode NXDOMAIN\n upstream\n}", True),
        ]:
            self.assertSetup(body, ok)

    def test_vars(self):
        for lines, ok in [
            ("var a 1", True),
            ("var a 1\nvar b a + 1\nvar c 'x' + name()", True),
            ("match ^(?P<a>[a-z]+)[.]example[.]$\n"
             "var a group(\"a\") + group(1) + group(0)", True),
            ("var", False), ("var a", False), ("var 1a 1", False),
            ("var a-b 1", False), ("var name 1", False),
            ("var group 1", False), ("var len 1", False),
            ("var true 1", False), ("var let 1", False),
            ("var a 1 +", False), ("var a invalid expression", False),
            ("var a b + 1\nvar b 1", False), ("var a undefined", False),
            ("var a 1\nvar a 2", False),
            ("var a 1\nvar b a + 1\nvar c 'x' + b", False),
            ("expr name() == 'a.example.'", True),
            ("var a 1\nexpr a == 1", True),
            ("expr 1", True), ("expr", False), ("expr name() ==", False),
            ("expr invalid expression", False),
            ("expr undefined == 1", False),
            ("var a 1\nexpr a + 'x'", False),
        ]:
            self.assertSetup("template ANY ANY example. {\n%s\n}" % lines,
                             ok)

    def test_error_names_file_and_line(self):
        with self.assertRaises(CorefileError) as cm:
            self.build("template ANY ANY {\n expr nosuch()\n}")
        text = str(cm.exception)
        self.assertIn("Corefile:3", text)
        self.assertIn("plugin/template", text)
        self.assertIn("unknown name nosuch", text)


class ParseRRTest(unittest.TestCase):

    def test_records(self):
        for text, want in [
            ("a.example. 60 IN A 10.0.0.1", ("a.example.", w.A, 60, 1)),
            ("ns0.example. IN A 203.0.113.8",
             ("ns0.example.", w.A, 3600, 1)),
            ("x. 60 CH TXT \"t\"", ("x.", w.TXT, 60, 3)),
            ("foogle.com 60 IN CNAME google.com",
             ("foogle.com.", w.CNAME, 60, 1)),
            ("x. IN 60 MX 10 x.", ("x.", w.MX, 60, 1)),
        ]:
            rr = tp.parse_rr(text)
            self.assertEqual((rr.name, rr.rtype, rr.ttl, rr.rclass), want)

    def test_invalid(self):
        for text in ["", "test.example.", "a. 60 IN A 300.1.1.1",
                     "a. 60 IN A 1.2.3.4 extra", "a. 60 IN NOSUCH x"]:
            self.assertRaises(ValueError, tp.parse_rr, text)
