"""rewrite: every rule form, over the wire and through the chain without
sockets; the reply always carries the question the client sent."""

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import rewrite
from corednstw.plugins.rewrite import edns0 as redns0
from tests.support import upstream, util

ZONE = """$ORIGIN example.org.
@       3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 300
        3600 IN NS  ns.example.org.
ns       300 IN A   192.0.2.53
to       300 IN A   192.0.2.1
to       300 IN MX  10 mail.to.example.org.
mail.to  300 IN A   192.0.2.25
svc      300 IN SRV 0 0 53 to.example.org.
short      5 IN A   192.0.2.5
alias    200 IN CNAME to.cdn.example.net.
to.cdn.example.net. 300 IN A 192.0.2.80
other.cdn.example.net. 100 IN A 192.0.2.81
"""

NET = """$ORIGIN example.net.
@       3600 IN SOA ns.example.net. admin.example.net. 1 7200 3600 1209600 300
        3600 IN NS  ns.example.net.
to.cdn   300 IN A   192.0.2.80
to.other  60 IN A   192.0.2.90
"""


def names(m, section="answer"):
    return [str(rrset.name) for rrset in getattr(m, section)]


class Chain:
    """A Direct configuration with the example zones loaded."""

    def __init__(self, testcase, rules, extra=""):
        d = util.write_files(testcase, {"example.org.db": ZONE,
                                        "example.net.db": NET})
        self.direct = util.Direct(testcase, (
            ".:0 {\n%s%s"
            "    file %s/example.org.db example.org\n"
            "    file %s/example.net.db example.net\n}\n")
            % ("".join("    %s\n" % r for r in rules), extra, d, d))

    def query(self, name, rdtype="A", **kw):
        got = []
        self.direct.ask_async(util.make_query(name, rdtype, **kw).to_wire()
                              ).addCallback(got.append)
        if not got or got[0] is None:
            return None
        return dns.message.from_wire(got[0])

    def plugin(self):
        for p in self.direct.app.config.blocks[0].plugins:
            if isinstance(p, rewrite.Rewrite):
                return p


class NameRuleTest(unittest.TestCase):
    """The name field, every match type, and what the client gets back."""

    def test_exact_keeps_client_case(self):
        c = Chain(self, ["rewrite name from.example.org to.example.org"])
        m = c.query("FrOm.Example.ORG", "A")
        self.assertEqual(str(m.question[0].name), "FrOm.Example.ORG.")
        self.assertEqual(util.rrs(m), ["FrOm.Example.ORG. 300 IN A 192.0.2.1"])
        self.assertTrue(m.flags & dns.flags.AA)

    def test_exact_reverts_values_below_the_name(self):
        c = Chain(self, ["rewrite name from.example.org to.example.org"])
        m = c.query("from.example.org", "MX")
        self.assertEqual(util.rrs(m), [
            "from.example.org. 300 IN MX 10 mail.from.example.org."])
        self.assertEqual(util.rrs(m, "additional"), [
            "mail.from.example.org. 300 IN A 192.0.2.25"])

    def test_exact_other_names_untouched(self):
        c = Chain(self, ["rewrite name from.example.org to.example.org"])
        m = c.query("to.example.org", "A")
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])
        m = c.query("www.from.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)

    def test_prefix(self):
        c = Chain(self, ["rewrite name prefix from to"])
        m = c.query("from.example.org", "A")
        # No answer option: the records keep the rewritten name.
        self.assertEqual(str(m.question[0].name), "from.example.org.")
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])

    def test_prefix_answer_auto(self):
        c = Chain(self, ["rewrite name prefix from to answer auto"])
        m = c.query("from.example.org", "A")
        self.assertEqual(util.rrs(m), ["from.example.org. 300 IN A 192.0.2.1"])

    def test_suffix_answer_auto(self):
        c = Chain(self, ["rewrite name suffix .example.com .example.org "
                         "answer auto"])
        m = c.query("to.Example.COM", "MX")
        self.assertEqual(str(m.question[0].name), "to.Example.COM.")
        self.assertEqual(util.rrs(m), [
            "to.Example.COM. 300 IN MX 10 mail.to.example.com."])
        # The authority's NS value is below the rewritten suffix too.
        self.assertEqual(util.rrs(m, "authority"), [
            "example.org. 3600 IN NS ns.example.com."])

    def test_suffix_without_answer(self):
        c = Chain(self, ["rewrite name suffix .example.com .example.org"])
        m = c.query("to.example.com", "A")
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])

    def test_substring(self):
        c = Chain(self, ["rewrite name substring from.example to.example "
                         "answer auto"])
        m = c.query("from.example.org", "A")
        self.assertEqual(util.rrs(m), ["from.example.org. 300 IN A 192.0.2.1"])

    def test_regex_answer_auto(self):
        c = Chain(self, [r"rewrite name regex (.*)-(x)\.example\.com "
                         "{1}.example.org answer auto"])
        m = c.query("to-x.example.com", "SRV")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        m = c.query("svc-x.example.com", "SRV")
        self.assertEqual(util.rrs(m), [
            "svc-x.example.com. 300 IN SRV 0 0 53 to.example.org."])

    def test_regex_answer_name_and_value(self):
        c = Chain(self, [
            r"rewrite stop {",
            r"    name regex (.*)-(us)\.example\.com {1}.example.org",
            r"    answer name (.*)\.example\.org {1}-us.example.com",
            r"    answer value (.*)\.example\.org {1}-us.example.com",
            "}"])
        m = c.query("svc-us.example.com", "SRV")
        self.assertEqual(str(m.question[0].name), "svc-us.example.com.")
        self.assertEqual(util.rrs(m), [
            "svc-us.example.com. 300 IN SRV 0 0 53 to-us.example.com."])
        self.assertEqual(util.rrs(m, "additional"), [
            "to-us.example.com. 300 IN A 192.0.2.1"])

    def test_regex_answer_value_only(self):
        c = Chain(self, [r"rewrite name regex ^x\.(.*) to.{1} answer value "
                         r"^mail\.to\.(.*) post.{1}"])
        m = c.query("x.example.org", "MX")
        self.assertEqual(util.rrs(m), [
            "to.example.org. 300 IN MX 10 post.example.org."])

    def test_regex_no_match_passes(self):
        c = Chain(self, [r"rewrite name regex ^nothing\.(.*) to.{1}"])
        m = c.query("to.example.org", "A")
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])

    def test_invalid_name_after_rewrite_servfail(self):
        c = Chain(self, [r"rewrite name regex ^(a)\.(.*) {1}..{2}"],
                  "    errors\n")
        cap = util.capture_log(self)
        m = c.query("a.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(str(m.question[0].name), "a.example.org.")
        self.assertIn("invalid name after rewrite: a..example.org.",
                      cap.text())

    def test_name_past_255_octets(self):
        """A rewritten name of 256 or 257 octets passes CoreDNS's check
        (miekg's IsDomainName) and gets the zone's NXDOMAIN, its SOA owner
        mapped back by answer auto; 258 octets is refused (SERVFAIL)."""
        # Question names of 255 octets on the wire (253 characters).
        long = ".".join(["a" * 63] * 3 + ["b" * 60])
        for suffix, grows in (("example.co", 1), ("example.c", 2)):
            c = Chain(self, ["rewrite name suffix %s example.org answer auto"
                             % suffix])
            qname = long[:252 - len(suffix)] + "." + suffix
            self.assertEqual(len(qname) + 2, 255)
            m = c.query(qname, "A")
            self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN, grows)
            self.assertEqual(str(m.question[0].name), qname + ".")
            self.assertEqual(
                [line.split()[:4] for line in util.rrs(m, "authority")],
                [[suffix + ".", "3600", "IN", "SOA"]])
        c = Chain(self, ["rewrite name suffix e.c example.org answer auto",
                         "errors"])
        cap = util.capture_log(self)
        qname = long[:249] + ".e.c"
        self.assertEqual(len(qname) + 2, 255)
        self.assertEqual(c.query(qname, "A").rcode(), dns.rcode.SERVFAIL)
        self.assertIn("invalid name after rewrite", cap.text())

    def test_nxdomain_answer_keeps_client_question(self):
        c = Chain(self, ["rewrite name exact nope.example.com "
                         "nope.example.org"])
        m = c.query("nope.example.com", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(str(m.question[0].name), "nope.example.com.")
        self.assertEqual(util.rrs(m, "authority")[0].split()[0],
                         "example.org.")


class ModeTest(unittest.TestCase):
    """stop/continue over several lines: one list of rules."""

    def test_stop_is_default(self):
        c = Chain(self, ["rewrite name a.example.org b.example.org",
                         "rewrite name b.example.org to.example.org"])
        self.assertEqual(len(c.plugin().rules), 2)
        self.assertEqual(c.query("a.example.org").rcode(),
                         dns.rcode.NXDOMAIN)

    def test_continue_chains_and_reverts_in_reverse(self):
        c = Chain(self, ["rewrite continue name a.example.org b.example.org",
                         "rewrite name b.example.org to.example.org"])
        m = c.query("A.example.org")
        self.assertEqual(util.rrs(m), ["A.example.org. 300 IN A 192.0.2.1"])

    def test_stop_keyword(self):
        c = Chain(self, ["rewrite stop name a.example.org to.example.org",
                         "rewrite ttl to.example.org 1"])
        m = c.query("a.example.org")
        self.assertEqual(util.rrs(m), ["a.example.org. 300 IN A 192.0.2.1"])

    def test_continue_into_ttl(self):
        c = Chain(self, ["rewrite continue name a.example.org "
                         "to.example.org",
                         "rewrite ttl to.example.org 7"])
        m = c.query("a.example.org")
        self.assertEqual(util.rrs(m), ["a.example.org. 7 IN A 192.0.2.1"])


class TypeClassTest(unittest.TestCase):

    def test_type(self):
        c = Chain(self, ["rewrite type AAAA A"])
        m = c.query("to.example.org", "AAAA")
        # The client's question; the answer is the A record.
        self.assertEqual(m.question[0].rdtype, dns.rdatatype.AAAA)
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])

    def test_type_other_passes(self):
        c = Chain(self, ["rewrite type ANY HINFO"])
        m = c.query("to.example.org", "A")
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])

    def test_class(self):
        c = Chain(self, ["rewrite class CH IN"], "    chaos\n")
        m = c.query("to.example.org", "A", rdclass="CH")
        self.assertEqual(m.question[0].rdclass, 3)
        self.assertEqual(util.rrs(m), ["to.example.org. 300 IN A 192.0.2.1"])


class TTLTest(unittest.TestCase):

    def ttls(self, rule, name="to.example.org", rdtype="A"):
        c = Chain(self, [rule])
        m = c.query(name, rdtype)
        return ([rrset.ttl for rrset in m.answer],
                [rrset.ttl for rrset in m.authority])

    def test_set(self):
        self.assertEqual(self.ttls("rewrite ttl to.example.org 15"),
                         ([15], [15]))

    def test_range(self):
        self.assertEqual(self.ttls("rewrite ttl to.example.org 30-600"),
                         ([300], [600]))
        self.assertEqual(self.ttls("rewrite ttl short.example.org 30-600",
                                   "short.example.org"), ([30], [600]))

    def test_cap(self):
        self.assertEqual(self.ttls("rewrite ttl to.example.org -30"),
                         ([30], [30]))

    def test_floor(self):
        self.assertEqual(self.ttls("rewrite ttl short.example.org 30-",
                                   "short.example.org"), ([30], [3600]))

    def test_match_types(self):
        for rule in ("rewrite ttl exact to.example.org 9",
                     "rewrite ttl prefix to 9",
                     "rewrite ttl suffix example.org 9",
                     "rewrite ttl substring o.example 9",
                     r"rewrite ttl regex ^t.\.example\.org\.$ 9"):
            self.assertEqual(self.ttls(rule), ([9], [9]), rule)
        self.assertEqual(self.ttls("rewrite ttl prefix short 9"),
                         ([300], [3600]))

    def test_block_form(self):
        c = Chain(self, ["rewrite continue {",
                         r"    ttl regex (.*)\.example\.org 15",
                         "}"])
        m = c.query("to.example.org")
        self.assertEqual(util.rrs(m), ["to.example.org. 15 IN A 192.0.2.1"])


class RcodeTest(unittest.TestCase):

    def test_nxdomain_to_noerror(self):
        c = Chain(self, ["rewrite rcode suffix example.org NXDOMAIN NOERROR"])
        m = c.query("nope.example.org")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(len(m.authority), 1)

    def test_numeric(self):
        c = Chain(self, ["rewrite rcode nope.example.org 3 5"])
        self.assertEqual(c.query("nope.example.org").rcode(),
                         dns.rcode.REFUSED)
        self.assertEqual(c.query("other.example.org").rcode(),
                         dns.rcode.NXDOMAIN)

    def test_message_without_records(self):
        # Nothing in the chain writes: SERVFAIL, no records.
        c = Chain(self, [r"rewrite rcode regex .*\.example\.com "
                         "SERVFAIL NOERROR"])
        c.plugin().next = util.Stub(lambda req: None)
        m = c.query("www.example.com")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(str(m.question[0].name), "www.example.com.")


class CnameTest(unittest.TestCase):

    def test_exact_target_resolved_again(self):
        c = Chain(self, ["rewrite cname exact to.cdn.example.net. "
                         "to.other.example.net."])
        m = c.query("alias.example.org")
        self.assertEqual(util.rrs(m), [
            "alias.example.org. 200 IN CNAME to.other.example.net.",
            "to.other.example.net. 60 IN A 192.0.2.90"])

    def test_regex_target(self):
        c = Chain(self, [r"rewrite cname regex (.*)\.cdn\.example\.net\. "
                         "{1}.other.example.net."])
        m = c.query("alias.example.org")
        self.assertEqual(util.rrs(m)[0],
                         "alias.example.org. 200 IN CNAME "
                         "to.other.example.net.")

    def test_other_targets_untouched(self):
        c = Chain(self, ["rewrite cname suffix .nowhere. .example.net."])
        m = c.query("alias.example.org")
        self.assertEqual(util.rrs(m), [
            "alias.example.org. 200 IN CNAME to.cdn.example.net.",
            "to.cdn.example.net. 300 IN A 192.0.2.80"])


class Edns0Test(unittest.TestCase):
    """The query the rest of the chain sees, captured with a stub."""

    def seen(self, rules, options=(), payload=1232, edns=0, client=None):
        c = Chain(self, rules, "    whoami\n")
        p = c.plugin()
        got = []
        nxt = p.next
        p.next = util.Stub(lambda req: (got.append(req), nxt.serve(req))[1])
        q = util.make_query("to.example.org", "A", use_edns=edns,
                            payload=payload, options=list(options))
        kw = {"client": client} if client else {}
        wire = c.direct.ask(q.to_wire(), **kw)
        reply = dns.message.from_wire(wire)
        return got[-1] if got else None, reply

    def opts(self, req):
        return req.edns.options if req is not None and req.edns else None

    def test_local_set_hex(self):
        req, reply = self.seen(["rewrite edns0 local set 0xffee 0x61626364"])
        self.assertEqual(self.opts(req), [(0xffee, b"abcd")])
        # Not reverted: the reply echoes the option, as CoreDNS does.
        self.assertEqual([(o.otype, o.data) for o in reply.options],
                         [(0xffee, b"abcd")])

    def test_local_set_revert(self):
        req, reply = self.seen(["rewrite edns0 local set 0xffee abcd revert"])
        self.assertEqual(self.opts(req), [(0xffee, b"abcd")])
        self.assertEqual(list(reply.options), [])

    def test_local_replace_and_append(self):
        old = dns.edns.GenericOption(0xffee, b"old")
        req, _ = self.seen(["rewrite edns0 local replace 0xffee new"], [old])
        self.assertEqual(self.opts(req), [(0xffee, b"new")])
        # Nothing to replace: the rule does not apply.
        req, _ = self.seen(["rewrite edns0 local replace 0xffee new"])
        self.assertEqual(self.opts(req), [])
        req, _ = self.seen(["rewrite edns0 local append 0xffee new"])
        self.assertEqual(self.opts(req), [(0xffee, b"new")])

    def test_mixed_revert_restores_previous(self):
        req, reply = self.seen([
            "rewrite continue edns0 local set 0xffee abcd",
            "rewrite edns0 local replace 0xffee bcde revert"])
        self.assertEqual(self.opts(req), [(0xffee, b"bcde")])
        self.assertEqual([(o.otype, o.data) for o in reply.options],
                         [(0xffee, b"abcd")])

    def test_local_unset(self):
        old = dns.edns.GenericOption(0xffee, b"old")
        req, _ = self.seen(["rewrite edns0 local unset 0xffee"], [old])
        self.assertEqual(self.opts(req), [])

    def test_query_without_opt_gets_one(self):
        req, _ = self.seen(["rewrite edns0 local set 0xffee x"], edns=-1)
        self.assertEqual(req.edns.size, 4096)
        self.assertEqual(self.opts(req), [(0xffee, b"x")])

    def test_variables(self):
        cases = [("{qname}", b"to.example.org."),
                 ("{qtype}", b"\x00\x01"),
                 ("{client_ip}", bytes([10, 1, 2, 3])),
                 ("{client_port}", b"\x9c\x40"),
                 ("{protocol}", b"udp")]
        for var, want in cases:
            req, _ = self.seen(["rewrite edns0 local set 0xffee %s" % var],
                               client="10.1.2.3")
            self.assertEqual(self.opts(req), [(0xffee, want)], var)

    def test_metadata_variable(self):
        req, _ = self.seen(["metadata",
                            "rewrite edns0 local set 0xffee {whoami/x}"])
        # No such label: the rule does nothing.
        self.assertEqual(self.opts(req), [])

    def test_nsid(self):
        req, _ = self.seen(["rewrite edns0 nsid set"])
        self.assertEqual(self.opts(req), [(3, b"")])
        nsid = dns.edns.GenericOption(3, b"x")
        req, _ = self.seen(["rewrite edns0 nsid replace"], [nsid])
        self.assertEqual(self.opts(req), [(3, b"")])
        req, _ = self.seen(["rewrite edns0 nsid unset"], [nsid])
        self.assertEqual(self.opts(req), [])

    def test_subnet(self):
        req, _ = self.seen(["rewrite edns0 subnet set 24 56"],
                           client="10.1.2.3")
        self.assertEqual(self.opts(req),
                         [(8, b"\x00\x01\x18\x00\x0a\x01\x02")])
        req, _ = self.seen(["rewrite edns0 subnet set 24 56"],
                           client="2001:db8:1:2:3::1")
        self.assertEqual(self.opts(req), [
            (8, b"\x00\x02\x38\x00\x20\x01\x0d\xb8\x00\x01\x00")])
        ecs = dns.edns.ECSOption("192.0.2.0", 24)
        req, _ = self.seen(["rewrite edns0 subnet append 24 56"], [ecs])
        self.assertEqual(self.opts(req), [(8, ecs.to_wire())])
        req, _ = self.seen(["rewrite edns0 subnet unset"], [ecs])
        self.assertEqual(self.opts(req), [])


class Edns0WireTest(unittest.TestCase):
    """The rewritten query as an upstream receives it."""

    @defer.inlineCallbacks
    def test_forwarded_options(self):
        up = upstream.Upstream().start()
        self.addCleanup(up.stop)
        app = yield util.start(self, (
            ".:0 {\n    rewrite continue edns0 local set 0xffee {protocol}\n"
            "    rewrite edns0 subnet set 24 56\n"
            "    forward . %s\n}\n") % up.addr())
        m = yield util.query(app.port(), "www.example.com", "A",
                             use_edns=0)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        q = up.queries[-1][3]
        got = sorted((o.otype, o.to_wire()) for o in q.options)
        self.assertEqual(got, [(8, b"\x00\x01\x18\x00\x7f\x00\x00"),
                               (0xffee, b"udp")])


class WireTest(unittest.TestCase):
    """Over the wire: UDP and TCP, with cache after rewrite."""

    @defer.inlineCallbacks
    def setUp(self):
        d = util.write_files(self, {"example.org.db": ZONE})
        self.app = yield util.start(self, (
            ".:0 {\n"
            "    rewrite name exact Www.Example.COM to.example.org\n"
            "    rewrite name suffix .example.net .example.org answer auto\n"
            "    cache 30\n"
            "    file %s/example.org.db example.org\n}\n") % d)
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_exact_udp_tcp(self):
        for proto in ("udp", "tcp", "udp"):
            m = yield util.query(self.port, "wWw.example.com", "A",
                                 proto=proto)
            self.assertEqual(str(m.question[0].name), "wWw.example.com.")
            self.assertEqual(util.rrs(m),
                             ["wWw.example.com. 30 IN A 192.0.2.1"])

    @defer.inlineCallbacks
    def test_suffix_cached_twice(self):
        for _ in range(2):
            m = yield util.query(self.port, "mail.to.example.net", "A")
            self.assertEqual(str(m.question[0].name),
                             "mail.to.example.net.")
            self.assertEqual(util.rrs(m),
                             ["mail.to.example.net. 30 IN A 192.0.2.25"])

    @defer.inlineCallbacks
    def test_unrelated_from_cache(self):
        for _ in range(2):
            m = yield util.query(self.port, "to.example.org", "A")
            self.assertEqual(util.rrs(m),
                             ["to.example.org. 30 IN A 192.0.2.1"])


ERRORS = [
    ([], "no rule type specified for rewrite"),
    (["stop"], "stop rule must begin with a rule type"),
    (["continue"], "continue rule must begin with a rule type"),
    (["answer", "name", "a", "b"],
     "response rewrites must begin with a name rule"),
    (["foo", "a", "b"], 'invalid rule type "foo"'),
    (["stop", "foo", "a", "b"], 'invalid rule type "stop"'),
    (["name", "a"], "too few arguments for a name rule"),
    (["name", "bogus", "a", "b"], "name rule supports only exact, prefix, "
     "suffix, substring, and regex name matching, received: bogus"),
    (["name", "regex", "(", "b"], "invalid regex matching pattern: ("),
    (["name", "regex", "(a)", "{1}{2}"], "the rewrite regex pattern "
     "({1}{2}) uses more subexpressions than its corresponding matching "
     "regex pattern ((a))"),
    (["name", "exact", "a", "b", "auto"], "invalid arguments for exact "
     "rule"),
    (["name", "exact", "a", "b", "x", "y"], "exceeded the number of "
     "arguments for a non-answer rule argument for exact rule"),
    (["name", "regex", "a", "b", "answer", "bogus"], "invalid type "
     "'bogus' for answer rule for regex rule"),
    (["name", "regex", "a", "b", "answer", "name", "x"], "name answer "
     "rule for regex rule: 2 arguments required"),
    (["name", "regex", "a", "b", "answer", "auto", "answer", "name", "x",
      "y"], "auto name answer rule cannot be combined with explicit name "
     "anwer rules"),
    (["type", "A"], "type rules must have exactly two arguments"),
    (["type", "A", "BOGUS"], 'invalid type "BOGUS"'),
    (["class", "IN", "XX"], 'invalid class "XX"'),
    (["ttl", "a"], "too few (1) arguments for a ttl rule"),
    (["ttl", "a", "-"], "invalid TTL '-' for a ttl rule"),
    (["ttl", "a", "20-10"], "invalid TTL '20-10' for a ttl rule"),
    (["ttl", "a", "x"], "invalid TTL 'x' for a ttl rule"),
    (["ttl", "bogus", "a", "1"], "ttl rule supports only exact, prefix, "
     "suffix, substring, and regex name matching"),
    (["ttl", "regex", "(", "1"], "invalid regex pattern in a ttl rule: ("),
    (["rcode", "a", "b"], "too few (2) arguments for a rcode rule"),
    (["rcode", "a", "BOGUS", "0"], "invalid matching RCODE 'BOGUS' for a "
     "rcode rule"),
    (["rcode", "a", "0", "24"], "invalid replacement RCODE '24' for a "
     "rcode rule"),
    (["cname", "a"], "too few (1) arguments for a cname rule"),
    (["cname", "bogus", "a", "b"], "unknown cname rewrite type: bogus"),
    (["edns0", "local"], "too few arguments for an EDNS0 rule"),
    (["edns0", "local", "foo", "1", "x"], 'invalid action: "foo"'),
    (["edns0", "local", "set", "1"],
     "EDNS0 local rules require three or four args"),
    (["edns0", "local", "set", "0xffee", "{dummy}"],
     'unsupported variable name "{dummy}"'),
    (["edns0", "local", "unset", "0xffee", "x"],
     "local unset action requires exactly two arguments"),
    (["edns0", "nsid", "set", "junk"],
     "EDNS0 NSID rules can accept no more than one arg"),
    (["edns0", "nsid", "unset", "revert"],
     "nsid unset action requires exactly one argument"),
    (["edns0", "subnet", "set", "33", "56"], "invalid IPv4 bit mask "
     "length 33"),
    (["edns0", "subnet", "set", "24", "129"], "invalid IPv6 bit mask "
     "length 129"),
    (["edns0", "subnet", "append", "24", "56", "72"],
     "EDNS0 subnet rules require three or four args"),
    (["edns0", "subnet", "unset", "24"],
     "subnet unset action requires exactly one argument"),
    (["edns0", "bogus", "set", "1"], 'invalid rule type "bogus"'),
]

VALID = [
    ["name", "a.com", "b.com"],
    ["stop", "name", "a.com", "b.com"],
    ["continue", "name", "regex", "(.*)", "{1}", "answer", "auto"],
    ["name", "regex", "(a)", "{1}", "answer", "name", "x", "y", "value",
     "x", "y"],
    ["name", "suffix", "a", "b", "answer", "auto", "answer", "value", "x",
     "y"],
    ["type", "any", "a"],
    ["class", "ch", "in"],
    ["ttl", "a", "1"], ["ttl", "a", "1-"], ["ttl", "a", "-1"],
    ["ttl", "regex", "a", "1-2"],
    ["rcode", "a", "servfail", "noerror"],
    ["rcode", "substring", "a", "2", "0"],
    ["cname", "a", "b"], ["cname", "regex", "(a)", "{1}"],
    ["edns0", "local", "set", "65518", "abcdefg"],
    ["edns0", "local", "append", "0xffee", "abcdefg", "revert"],
    ["edns0", "local", "set", "0xffee", "{server_ip}"],
    ["edns0", "local", "set", "0xffee", "{server_port}", "revert"],
    ["edns0", "local", "set", "0xffee", "{plugin/label}"],
    ["edns0", "nsid", "append", "revert"],
    ["edns0", "subnet", "replace", "24", "56", "revert"],
    ["edns0", "subnet", "unset"],
]


class SetupTest(unittest.TestCase):

    def test_errors(self):
        for args, want in ERRORS:
            with self.assertRaises(ValueError, msg=args) as cm:
                rewrite.new_rule(args)
            self.assertEqual(str(cm.exception), want, args)

    def test_valid(self):
        for args in VALID:
            rewrite.new_rule(args)

    def test_error_has_file_and_line(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    whoami\n    rewrite ttl a x\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/rewrite: "
                      "invalid TTL 'x' for a ttl rule", str(cm.exception))

    def test_local_codes_are_echoed(self):
        from corednstw.core import request
        rewrite.new_rule(["edns0", "local", "set", "0xfff1", "x"])
        self.assertIn(0xfff1, request.SUPPORTED_OPTIONS)

    def test_one_plugin_for_all_lines(self):
        d = util.Direct(self, ".:0 {\n    rewrite name a. b.\n"
                        "    rewrite type A AAAA\n    whoami\n}\n")
        plugins = [p for p in d.app.config.blocks[0].plugins
                   if isinstance(p, rewrite.Rewrite)]
        self.assertEqual(len(plugins), 1)
        self.assertEqual(len(plugins[0].rules), 2)

    def test_variable_data_table(self):
        self.assertEqual(redns0.VARIABLES[0], "{qname}")
