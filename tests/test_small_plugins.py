"""chaos, any, local, minimal, header, nsid, bufsize, root, debug and
timeouts: Corefile parsing, and queries over the wire (query in, expected
sections out, in the style of CoreDNS's own tests)."""

import socket
import struct

import dns.edns
import dns.flags
import dns.message
import dns.rdataclass
import dns.rdatatype
from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest

from corednstw import COREDNS_VERSION
from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.errors import CorefileError
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Request, Response, make_query
from corednstw.plugins import chaos as chaosmod
from corednstw.plugins import minimal as minimalmod
from corednstw.plugins.debug import hexdump
from tests.support import cases, util
from tests.support.cases import Case


def setup_error(testcase, text):
    """The Corefile error text building ``text`` raises."""
    with testcase.assertRaises(CorefileError) as cm:
        util.Direct(testcase, text)
    return str(cm.exception)


def flag_names(msg):
    return dns.flags.to_text(msg.flags).split()


def txt(qname, *strings):
    """chaos's answer: a CH TXT record per string, TTL 0, no AA."""
    return Case(qname, "TXT", qclass="CH", flags="QR RD", answer=[
        '%s 0 CH TXT "%s"' % (qname, s) for s in strings])


class ChaosTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.app = yield util.start(
            self, ".:0 {\n    chaos CoreDNS-001 info@coredns.io miek\n"
                  "    erratic {\n        drop 0\n    }\n}\n")
        self.port = self.app.port()

    def test_version(self):
        # No AA, as CoreDNS.
        return cases.run(self, self.port, [
            txt(name, "CoreDNS-001") for name in ("version.bind.",
                                                  "version.server.")])

    def test_version_case_echoed_over_tcp(self):
        return cases.run(self, self.port, [txt("VERSION.Bind.",
                                               "CoreDNS-001")], proto="tcp")

    def test_hostname(self):
        return cases.run(self, self.port, [
            txt(name, socket.gethostname()) for name in ("hostname.bind.",
                                                         "id.server.")])

    def test_authors(self):
        return cases.run(self, self.port, [
            txt("authors.bind.", "info@coredns.io", "miek")])

    def test_other_names_and_types_go_on(self):
        # erratic answers what chaos does not: SERVFAIL for TXT, an address
        # for A.
        return cases.run(self, self.port, [
            Case("foo.bind.", "TXT", "SERVFAIL", qclass="CH"),
            Case("version.bind.", "TXT", "SERVFAIL"),
            Case("version.bind.", "A", aa=True,
                 answer=["version.bind. 0 IN A 192.0.2.53"]),
        ])

    def test_defaults(self):
        d = util.Direct(self, ".:0 {\n    chaos\n}\n")
        cases.run_direct(self, d, [txt("version.bind.",
                                       "CoreDNS-%s" % COREDNS_VERSION)])
        cases.run_direct(self, d, [txt("authors.bind.", *chaosmod.OWNERS)],
                         proto="tcp")

    def test_version_only_keeps_default_authors(self):
        d = util.Direct(self, ".:0 {\n    chaos v1\n}\n")
        m = d.query("authors.bind.", "TXT", rdclass="CH", proto="tcp")
        self.assertEqual(len(m.answer[0]), len(chaosmod.OWNERS))

    def test_long_version_trimmed(self):
        d = util.Direct(self, ".:0 {\n    chaos %s\n}\n" % ("x" * 300))
        m = d.query("version.bind.", "TXT", rdclass="CH")
        self.assertEqual(m.answer[0][0].strings, (b"x" * 255,))

    def test_duplicate_authors_once(self):
        d = util.Direct(self, ".:0 {\n    chaos v1 b a b\n}\n")
        cases.run_direct(self, d, [txt("authors.bind.", "a", "b")])

    def test_without_chaos_ch_refused(self):
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        cases.run_direct(self, d, [Case("version.bind.", "TXT", "REFUSED",
                                        qclass="CH")])

    def test_block_rejected(self):
        err = setup_error(self, ".:0 {\n    chaos {\n        foo\n    }\n}\n")
        self.assertIn("plugin/chaos: unknown property 'foo'", err)


class AnyTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_any(self):
        app = yield util.start(self,
                               "example.org:0 {\n    whoami\n    any\n}\n")
        yield cases.run(self, app.port(), [
            Case("Example.ORG.", "ANY", flags="QR RD", answer=[
                'Example.ORG. 8482 IN HINFO "ANY obsoleted" "See RFC 8482"'])])
        # Other types pass to whoami.
        yield cases.run(self, app.port(), [
            Case("example.org.", "A", aa=True,
                 extra=cases.whoami("example.org.", "tcp"))], proto="tcp")

    def test_args_rejected(self):
        err = setup_error(self, ".:0 {\n    any foo\n}\n")
        self.assertIn("plugin/any: Wrong argument count", err)
        err = setup_error(self, ".:0 {\n    any {\n        foo\n    }\n}\n")
        self.assertIn("plugin/any: unknown property 'foo'", err)


LOCAL_SOA = "localhost. root.localhost. 1 0 0 0 604800"



def local(qname, qtype, *answer, rcode="NOERROR", soa=None):
    """local's answer: never AA; NODATA and NXDOMAIN carry the SOA of
    ``soa`` (the zone apex, in the case asked)."""
    ns = ["%s 604800 IN SOA %s" % (soa, LOCAL_SOA)] if soa else []
    return Case(qname, qtype, rcode, answer=answer, ns=ns, aa=False)


# CoreDNS's cases plus the 0x20 case echo.
LOCAL_CASES = [
    local("localhost.", "A", "localhost. 604800 IN A 127.0.0.1"),
    local("localHOst.", "A", "localHOst. 604800 IN A 127.0.0.1"),
    local("localhost.", "AAAA", "localhost. 604800 IN AAAA ::1"),
    local("localhost.", "NS", "localhost. 604800 IN NS localhost."),
    local("localhost.", "SOA", "localhost. 604800 IN SOA " + LOCAL_SOA),
    local("127.in-addr.arpa.", "A", soa="127.in-addr.arpa."),
    local("0.in-addr.arpa.", "NS",
          "0.in-addr.arpa. 604800 IN NS localhost."),
    local("255.in-addr.arpa.", "SOA",
          "255.in-addr.arpa. 604800 IN SOA " + LOCAL_SOA),
    local("localhost.", "MX", soa="localhost."),
    local("a.localhost.", "A", "a.localhost. 604800 IN A 127.0.0.1"),
    local("a.localhost.", "AAAA", "a.localhost. 604800 IN AAAA ::1"),
    local("a.localhost.", "MX", soa="a.localhost."),
    local("1.0.0.127.in-addr.arpa.", "PTR",
          "1.0.0.127.in-addr.arpa. 604800 IN PTR localhost."),
    local("1.0.0.127.IN-addr.arpa.", "MX", soa="127.IN-addr.arpa."),
    local("2.0.0.127.in-addr.arpa.", "PTR", rcode="NXDOMAIN",
          soa="127.in-addr.arpa."),
    local("x.0.in-addr.arpa.", "A", rcode="NXDOMAIN", soa="0.in-addr.arpa."),
    local("localhost.example.net.", "A",
          "localhost.example.net. 604800 IN A 127.0.0.1"),
]


class LocalTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_cases_over_udp(self):
        from corednstw.plugins import local
        before = local.LOCALHOST_COUNT.get()
        app = yield util.start(self, ".:0 {\n    local\n    whoami\n}\n")
        yield cases.run(self, app.port(), LOCAL_CASES)
        # a.localhost. three times and localhost.example.net. once; never
        # the apex.
        self.assertEqual(local.LOCALHOST_COUNT.get() - before, 4)
        status, body = yield util.http_get(
            (yield util.start(self, ".:0 {\n    prometheus 127.0.0.1:0\n}\n"))
            .http_port(), "/metrics")
        self.assertIn("coredns_local_localhost_requests_total ", body)

    @defer.inlineCallbacks
    def test_other_names_pass(self):
        app = yield util.start(self, ".:0 {\n    local\n    whoami\n}\n")
        yield cases.run(self, app.port(), [
            Case(name, "A", aa=True, extra=cases.whoami(name, "tcp"))
            for name in ("example.org.", "localhostx.", "1.in-addr.arpa.",
                         "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
                         "0.0.0.0.0.0.0.ip6.arpa.")], proto="tcp")

    @defer.inlineCallbacks
    def test_localhost_prefix_off(self):
        app = yield util.start(
            self, ".:0 {\n    local {\n        localhost_prefix off\n    }\n"
                  "    whoami\n}\n")
        yield cases.run(self, app.port(), [
            Case("localhost.example.net.", "A", aa=True,
                 extra=cases.whoami("localhost.example.net.")),
            local("b.localhost.", "A", "b.localhost. 604800 IN A 127.0.0.1"),
        ])

    def test_debug_line(self):
        cap = util.capture_log(self)
        self.patch(logger, "debug_enabled", True)
        d = util.Direct(self, ".:0 {\n    local\n}\n")
        d.query("a.localhost.", "AAAA")
        self.assertEqual(cap.lines, [
            '[DEBUG] plugin/local: Intercepting localhost query for '
            '"a.localhost." AAAA, from 127.0.0.1'])

    def test_setup_errors(self):
        err = setup_error(self, ".:0 {\n    local foo\n}\n")
        self.assertIn("Wrong argument count", err)
        err = setup_error(self, ".:0 {\n    local {\n"
                                "        localhost_prefix maybe\n"
                                "    }\n}\n")
        self.assertIn("""localhost_prefix expects 'on' or 'off', """
                      """got "maybe\"""", err)
        self.assertIn("Corefile:3", err)
        err = setup_error(self, ".:0 {\n    local {\n"
                                "        localhost_prefix\n"
                                "    }\n}\n")
        self.assertIn("Wrong argument count", err)
        err = setup_error(self, ".:0 {\n    local {\n        bar\n    }\n}\n")
        self.assertIn("unknown property 'bar'", err)


class Canned(Plugin):
    """A next plugin answering with a fixed response."""

    name = "canned"

    def __init__(self, resp):
        self.resp = resp

    def serve(self, req):
        return self.resp


def rr(text):
    name, ttl, _, rtype, rdata = text.split(None, 4)
    return w.RR.from_text(name, rtype, int(ttl), rdata)


ANSWER = [rr("example.com. 293 IN A 142.250.76.46")]
NS = [rr("example.com. 157127 IN NS ns%d.example.com." % i) for i in (2, 1)]
EXTRA = [rr("ns2.example.com. 316273 IN A 216.239.34.10"),
         rr("ns1.example.com. 165555 IN AAAA 2001:4860:4802:32::a")]
SOA = [rr("example.com. 60 IN SOA ns1.example.com. h.example.com. 1 2 3 4 5")]


def request(name="example.com.", qtype=w.A, do=False, edns=None):
    req = Request(make_query(name, qtype, edns=edns, do=do))
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req


class MinimalTest(unittest.TestCase):

    def run_minimal(self, resp, req=None):
        m = minimalmod.Minimal()
        m.next = Canned(resp)
        req = req or request()
        out = m.serve(req)
        return dns.message.from_wire(out.finish(req))

    def test_positive_minimized(self):
        msg = self.run_minimal(Response(0, ANSWER, NS, EXTRA, aa=True))
        cases.check_response(self, Case(
            "example.com.", "A", aa=True,
            answer=["example.com. 293 IN A 142.250.76.46"]), msg)

    def test_delegation_kept(self):
        msg = self.run_minimal(Response(0, [], NS, EXTRA))
        self.assertEqual(len(msg.authority[0]), 2)
        self.assertEqual(len(msg.additional), 2)

    def test_error_kept(self):
        msg = self.run_minimal(Response(2, ANSWER, NS, EXTRA))
        self.assertEqual(len(msg.authority[0]), 2)
        self.assertEqual(len(msg.additional), 2)

    def test_denials_kept(self):
        msg = self.run_minimal(Response(0, [], SOA, EXTRA))      # NODATA
        self.assertEqual(len(msg.additional), 2)
        msg = self.run_minimal(Response(3, [], SOA, EXTRA))      # NXDOMAIN
        self.assertEqual(len(msg.additional), 2)
        msg = self.run_minimal(Response(3, ANSWER, [], EXTRA))   # other
        self.assertEqual(len(msg.additional), 2)

    def test_transfer_kept(self):
        msg = self.run_minimal(Response(0, ANSWER + SOA, NS, EXTRA),
                               request(qtype=w.AXFR))
        self.assertEqual(len(msg.additional), 2)

    def test_opt_kept(self):
        req = request(edns=1400, do=True)
        msg = self.run_minimal(Response(0, ANSWER, NS, EXTRA), req)
        self.assertEqual(msg.additional, [])
        self.assertEqual(msg.payload, 1400)
        self.assertTrue(msg.ednsflags & dns.flags.DO)

    def test_raw_upstream_answer(self):
        req = request(edns=1232)
        full = Response(0, ANSWER, NS, EXTRA, ra=True).finish(req)
        msg = self.run_minimal(RawResponse(full, plugin="forward"), req)
        cases.check_response(self, Case(
            "example.com.", "A", ra=True,
            answer=["example.com. 293 IN A 142.250.76.46"]), msg)
        self.assertEqual(msg.payload, 1232)

    def test_raw_with_only_opt_untouched(self):
        req = request(edns=1232)
        raw = RawResponse(Response(0, ANSWER).finish(req))
        m = minimalmod.Minimal()
        m.next = Canned(raw)
        self.assertIs(m.serve(req), raw)

    def test_expired_signature_with_do_kept(self):
        sig = w.RR("example.com.", w.RRSIG, 293, struct.pack(
            "!HBBIII", w.A, 8, 2, 293, 1000, 500) + struct.pack("!H", 1)
            + w.name_to_wire("example.com.") + b"sig")
        resp = Response(0, ANSWER + [sig], NS, EXTRA)
        self.assertFalse(minimalmod.positive(resp, request(do=True)))
        self.assertTrue(minimalmod.positive(resp, request(do=False)))
        valid = w.RR("example.com.", w.RRSIG, 293, struct.pack(
            "!HBBIII", w.A, 8, 2, 293, 2000000000, 1000) + b"\x00\x01\x00x")
        resp = Response(0, ANSWER + [valid], NS, EXTRA)
        self.assertTrue(minimalmod.positive(resp, request(do=True),
                                            now=1700000000))

    @defer.inlineCallbacks
    def test_over_the_wire_with_whoami(self):
        # whoami's answer has only additional records: a NOERROR that
        # minimal strips (as CoreDNS does).
        app = yield util.start(self, ".:0 {\n    minimal\n    whoami\n}\n")
        m = yield util.query(app.port(), "example.org.", "A", use_edns=0)
        self.assertEqual((m.answer, m.authority, m.additional), ([], [], []))
        self.assertEqual(m.edns, 0)

    def test_args_rejected(self):
        self.assertIn("Wrong argument count",
                      setup_error(self, ".:0 {\n    minimal x\n}\n"))


class HeaderTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_response_rules(self):
        app = yield util.start(
            self, ".:0 {\n    header {\n        response set ra aa\n"
                  "        response clear rd\n    }\n    erratic {\n"
                  "        drop 0\n    }\n}\n")
        yield cases.run(self, app.port(), [
            Case("example.org.", "A", flags="QR AA RA",
                 answer=["example.org. 0 IN A 192.0.2.53"])])
        yield cases.run(self, app.port(), [
            Case("example.org.", "AAAA", flags="QR AA RA",
                 answer=["example.org. 0 IN AAAA 2001:db8::53"])],
            proto="tcp")

    @defer.inlineCallbacks
    def test_last_rule_wins(self):
        app = yield util.start(
            self, ".:0 {\n    header {\n        response clear aa\n"
                  "        response set aa ra\n        response clear ra\n"
                  "    }\n    whoami\n}\n")
        yield cases.run(self, app.port(), [
            Case("example.org.", "A", flags="QR AA RD",
                 extra=cases.whoami("example.org."))])

    def test_query_rules_seen_by_later_plugins(self):
        seen = []

        class Spy(Plugin):
            def serve(self, req):
                seen.append((req.rd, req.flags & w.AA,
                             struct.unpack("!H", req.data[2:4])[0]))
                return Response(0, aa=False)

        d = util.Direct(self, ".:0 {\n    header {\n        query set rd aa\n"
                              "        query clear rd\n    }\n    whoami\n}\n")
        hdr = d.mux.zones["."][0][1].plugins[0]
        hdr.next = Spy()
        q = util.make_query("example.org.", "A")
        q.flags = 0
        out = dns.message.from_wire(d.ask(q.to_wire()))
        self.assertEqual(seen, [(False, w.AA, w.AA)])
        self.assertEqual(flag_names(out), ["QR"])
        d2 = util.Direct(self, ".:0 {\n    header {\n        query set rd\n"
                               "    }\n    whoami\n}\n")
        out = dns.message.from_wire(d2.ask(q.to_wire()))
        self.assertEqual(flag_names(out), ["QR", "AA", "RD"])

    def test_setup_errors(self):
        cases = [
            ("header", "Wrong argument count"),
            ("header {\n    }", "Wrong argument count"),
            ("header {\n        toggle ra\n    }",
             "setting up rule: invalid selector=toggle should be query or "
             "response"),
            ("header {\n        set\n    }",
             "setting up rule: invalid length for flags, at least one "
             "should be provided"),
            ("header {\n        response\n    }",
             "setting up rule: no flag action provided"),
            ("header {\n        response set\n    }",
             "setting up rule: invalid length for flags, at least one "
             "should be provided"),
            ("header {\n        query toggle rd\n    }",
             "setting up rule: unknown flag action=toggle, should be set or "
             "clear"),
            ("header {\n        query set cd\n    }",
             "setting up rule: unknown/unsupported flag=cd"),
        ]
        for text, msg in cases:
            err = setup_error(self, ".:0 {\n    %s\n}\n" % text)
            self.assertIn("plugin/header: " + msg, err)

    @defer.inlineCallbacks
    def test_old_form_without_selector(self):
        # CoreDNS before 1.12.4: "set ra" meant "response set ra".
        log = util.capture_log(self)
        app = yield util.start(
            self, ".:0 {\n    header {\n        set ra aa\n"
                  "        clear rd\n    }\n    erratic {\n"
                  "        drop 0\n    }\n}\n")
        m = yield util.query(app.port(), "example.org.", "A")
        self.assertEqual(flag_names(m), ["QR", "AA", "RA"])
        warnings = [x for x in log.lines if x.startswith("[WARNING]")]
        self.assertEqual(len(warnings), 2, log.lines)
        self.assertTrue(warnings[0].startswith(
            '[WARNING] plugin/header: a rule without a selector is '
            'deprecated: write "response set ra aa" instead of '
            '"set ra aa" ('), warnings[0])
        self.assertTrue(warnings[0].endswith("Corefile:3)"), warnings[0])
        self.assertIn('"response clear rd"', warnings[1])
        self.assertTrue(warnings[1].endswith("Corefile:4)"), warnings[1])

    def test_mixed_case_accepted(self):
        d = util.Direct(self, ".:0 {\n    header {\n        RESPONSE Set RA\n"
                              "    }\n    whoami\n}\n")
        self.assertIn("RA", flag_names(d.query("example.org.")))


def nsid_query(name="example.org.", payload=1232, nsid=True, do=False):
    opts = [dns.edns.GenericOption(3, b"")] if nsid else []
    return util.make_query(name, "A", use_edns=0, payload=payload,
                           options=opts, want_dnssec=do)


class NsidTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_nsid_over_the_wire(self):
        app = yield util.start(
            self, "example.org:0 {\n    whoami\n    nsid Use The Force\n}\n")
        for proto in ("udp", "tcp"):
            m = yield util.query(app.port(), nsid_query(), proto=proto)
            self.assertEqual([(o.otype, o.to_wire()) for o in m.options],
                             [(3, b"Use The Force")])
            self.assertEqual(m.payload, 1232)
            self.assertEqual(len(m.additional), 2)   # whoami's

    @defer.inlineCallbacks
    def test_only_when_asked(self):
        app = yield util.start(self, ".:0 {\n    nsid\n    whoami\n}\n")
        m = yield util.query(app.port(), nsid_query(nsid=False))
        self.assertEqual(m.options, ())
        self.assertEqual(m.edns, 0)
        m = yield util.query(app.port(), "example.org.", "A")
        self.assertEqual(m.edns, -1)

    def test_default_is_hostname(self):
        d = util.Direct(self, ".:0 {\n    nsid\n    whoami\n}\n")
        m = dns.message.from_wire(d.ask(nsid_query(do=True).to_wire()))
        self.assertEqual([o.to_wire() for o in m.options],
                         [socket.gethostname().encode()])
        self.assertTrue(m.ednsflags & dns.flags.DO)

    def test_only_nsid_in_a_new_opt(self):
        """CoreDNS gives an answer without an OPT record a new one with
        NSID alone: the query's COOKIE, EXPIRE and KEEPALIVE are not
        echoed, from a plugin's answer or from an upstream's."""
        opts = [dns.edns.GenericOption(3, b""),
                dns.edns.GenericOption(10, b"12345678"),
                dns.edns.GenericOption(9, b""),
                dns.edns.GenericOption(11, b"")]
        q = util.make_query("example.org.", "A", use_edns=0, options=opts)
        d = util.Direct(self, ".:0 {\n    nsid ours\n    whoami\n}\n")
        m = dns.message.from_wire(d.ask(q.to_wire()))
        self.assertEqual([(o.otype, o.to_wire()) for o in m.options],
                         [(3, b"ours")])

        class Upstream(Plugin):
            def serve(self, req):
                up = dns.message.make_response(
                    dns.message.from_wire(req.data))
                up.use_edns(False)
                return RawResponse(up.to_wire(), plugin="forward")
        d.mux.zones["."][0][1].plugins[0].next = Upstream()
        m = dns.message.from_wire(d.ask(q.to_wire()))
        self.assertEqual([(o.otype, o.to_wire()) for o in m.options],
                         [(3, b"ours")])

    def test_upstream_option_replaced(self):
        d = util.Direct(self, ".:0 {\n    nsid ours\n    whoami\n}\n")
        req_wire = nsid_query().to_wire()

        class Upstream(Plugin):
            def serve(self, req):
                up = dns.message.make_response(
                    dns.message.from_wire(req.data))
                up.use_edns(0, 0, 4096, options=[
                    dns.edns.GenericOption(3, b"theirs"),
                    dns.edns.GenericOption(10, b"12345678")])
                up.answer.append(dns.rrset.from_text(
                    req.name, 30, "IN", "A", "192.0.2.1"))
                return RawResponse(up.to_wire(), plugin="forward")

        import dns.rrset  # noqa: F401
        nsid = d.mux.zones["."][0][1].plugins[0]
        nsid.next = Upstream()
        m = dns.message.from_wire(d.ask(req_wire))
        cases.check_response(self, Case(
            "example.org.", "A", answer=["example.org. 30 IN A 192.0.2.1"]),
            m)
        self.assertEqual([(o.otype, o.to_wire()) for o in m.options],
                         [(3, b"ours"), (10, b"12345678")])
        self.assertEqual(m.payload, 1232)


class BufsizeTest(unittest.TestCase):

    def spy(self, text):
        d = util.Direct(self, text)
        seen = []

        class Spy(Plugin):
            def serve(self, req):
                seen.append((req.edns.size if req.edns else None,
                             dns.message.from_wire(req.data).payload
                             if req.edns else None))
                return Response(0, [w.RR(req.name, w.TXT, 0,
                                         w.txt_rdata("%d" % i * 200))
                                    for i in range(10)])

        d.mux.zones["."][0][1].plugins[0].next = Spy()
        return d, seen

    def test_capped_for_later_plugins_and_client(self):
        d, seen = self.spy(".:0 {\n    bufsize 1100\n    whoami\n}\n")
        m = dns.message.from_wire(d.ask(util.make_query(
            "example.org.", "A", use_edns=0, payload=4096).to_wire()))
        self.assertEqual(seen, [(1100, 1100)])
        self.assertEqual(m.payload, 1100)
        # 10 x 200+ bytes does not fit 1100: truncated for the smaller size.
        self.assertIn("TC", flag_names(m))
        self.assertEqual(len(m.answer[0]), 4)

    def test_smaller_and_absent_untouched(self):
        d, seen = self.spy(".:0 {\n    bufsize\n    whoami\n}\n")
        d.ask(util.make_query("example.org.", "A", use_edns=0,
                              payload=1000).to_wire())
        d.ask(util.make_query("example.org.", "A", use_edns=0,
                              payload=4096).to_wire())
        d.ask(util.make_query("example.org.", "A").to_wire())
        self.assertEqual(seen, [(1000, 1000), (1232, 1232), (None, None)])

    @defer.inlineCallbacks
    def test_over_the_wire(self):
        app = yield util.start(self, ".:0 {\n    bufsize 512\n    whoami\n}\n")
        m = yield util.query(app.port(), "example.org.", "A", use_edns=0,
                             payload=4096)
        self.assertEqual(m.payload, 512)

    def test_setup(self):
        for arg in ("511", "4097", "abc", "1232 1232", "-1"):
            err = setup_error(self, ".:0 {\n    bufsize %s\n}\n" % arg)
            self.assertIn("plugin/bufsize: Wrong argument count", err)
        for arg, size in (("512", 512), ("4096", 4096), ("", 1232)):
            d = util.Direct(self, ".:0 {\n    bufsize %s\n}\n" % arg)
            self.assertEqual(d.mux.zones["."][0][1].plugins[0].size, size)


class RootTest(unittest.TestCase):

    def test_root_setting(self):
        d = util.Direct(self, ".:0 {\n    root /tmp\n    whoami\n}\n")
        block = d.mux.zones["."][0][1]
        self.assertEqual(block.settings["root"], "/tmp")
        self.assertEqual(block.path("db.example"), "/tmp/db.example")
        self.assertEqual(block.path("/etc/hosts"), "/etc/hosts")
        self.assertEqual(block.directive_names(), ["root", "whoami"])
        self.assertEqual(block.chain.name, "whoami")

    def test_missing_root_warns(self):
        cap = util.capture_log(self)
        util.Direct(self, ".:0 {\n    root /does/not/exist\n}\n")
        self.assertEqual(cap.lines, [
            "[WARNING] plugin/root: Root path does not exist: "
            "/does/not/exist"])

    def test_unreadable_root_is_an_error(self):
        d = util.write_files(self, {"file": "x"})
        err = setup_error(self, ".:0 {\n    root %s/file/sub\n}\n" % d)
        self.assertIn("plugin/root: unable to access root path", err)

    def test_args(self):
        self.assertIn("Wrong argument count",
                      setup_error(self, ".:0 {\n    root\n}\n"))
        self.assertIn("Wrong argument count",
                      setup_error(self, ".:0 {\n    root a b\n}\n"))

    def test_no_root_resolves_as_given(self):
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        self.assertEqual(d.mux.zones["."][0][1].path("db"), "db")


class Boom(Plugin):
    def serve(self, req):
        raise RuntimeError("boom")


class DebugTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_debug_enables_debug_lines_and_tracebacks(self):
        self.patch(logger, "debug_enabled", False)
        app = yield util.start(self, ".:0 {\n    debug\n    whoami\n}\n")
        block = app.config.blocks[0]
        self.assertTrue(block.debug)
        self.assertTrue(logger.debug_enabled)
        cap = util.capture_log(self)
        logger.debug("test", "hello")
        self.assertEqual(cap.lines, ["[DEBUG] plugin/test: hello"])
        # A failing plugin still gets SERVFAIL; the traceback goes to the
        # real stdout (not checked here), the panic line to the logger.
        from corednstw.core import metrics
        self.addCleanup(setattr, metrics.PANICS, "values",
                        dict(metrics.PANICS.values))
        block.chain = Boom()
        m = yield util.query(app.port(), "example.org.", "A")
        self.assertEqual(m.rcode(), 2)
        self.assertIn("Recovered from panic", cap.text())
        yield app.stopService()
        self.assertFalse(logger.debug_enabled)

    def test_without_debug(self):
        self.patch(logger, "debug_enabled", False)
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        self.assertFalse(d.mux.zones["."][0][1].debug)
        cap = util.capture_log(self)
        logger.debug("test", "hello")
        self.assertEqual(cap.lines, [])

    def test_hexdump(self):
        data = bytes(range(18))
        self.assertEqual(hexdump(data), (
            "debug: 000000 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f\n"
            "debug: 000010 10 11\n"
            "debug: 000012"))

    def test_args(self):
        self.assertIn("Wrong argument count",
                      setup_error(self, ".:0 {\n    debug on\n}\n"))


class _Silent(protocol.Protocol):
    def __init__(self):
        self.closed = defer.Deferred()

    def connectionLost(self, reason):
        self.closed.callback(None)


class TimeoutsTest(unittest.TestCase):

    def settings(self, body):
        d = util.Direct(self, ".:0 {\n    timeouts {\n%s\n    }\n}\n" % body)
        return d.mux.zones["."][0][1].settings.get("timeouts")

    def test_values(self):
        self.assertEqual(self.settings("read 10s\nwrite 20\nidle 1m"),
                         {"read": 10.0, "write": 20.0, "idle": 60.0})
        self.assertEqual(self.settings("idle 24h"), {"idle": 86400.0})

    def test_errors(self):
        cases = [
            ("read 0.5s", "timeout provided '500ms' needs to be between 1 "
                          "second and 24 hours"),
            ("idle 25h", "timeout provided '25h0m0s' needs to be between 1 "
                         "second and 24 hours"),
            ("read abc", "failed to parse duration 'abc'"),
            ("read", "Wrong argument count"),
            ("read 1s 2s", "Wrong argument count"),
            ("foo 5s", "unknown option: 'foo'"),
            ("maxtcpqueries 0", "maxtcpqueries provided '0' needs to be -1 "
                                "(unlimited) or a positive integer"),
            ("maxtcpqueries x", "invalid value for maxtcpqueries 'x'"),
        ]
        for body, msg in cases:
            err = setup_error(self, ".:0 {\n    timeouts {\n        %s\n"
                                    "    }\n}\n" % body)
            self.assertIn("plugin/timeouts: " + msg, err)
            self.assertIn("Corefile:3", err)
        err = setup_error(self, ".:0 {\n    timeouts\n}\n")
        self.assertIn("timeouts block with no timeouts specified", err)
        err = setup_error(self, ".:0 {\n    timeouts 5s\n}\n")
        self.assertIn("Wrong argument count", err)

    @defer.inlineCallbacks
    def test_tcp_read_timeout_closes_silent_connection(self):
        app = yield util.start(self, ".:0 {\n    timeouts {\n        read 1s\n"
                                     "        idle 30s\n    }\n"
                                     "    whoami\n}\n")
        lst = next(iter(app.listeners.values()))
        limits = lst.tcp.factory.timeouts
        self.assertEqual((limits.read, limits.idle), (1.0, 30.0))
        client = _Silent()
        yield protocol.ClientCreator(reactor, lambda: client).connectTCP(
            "127.0.0.1", app.port())
        yield client.closed     # the server hangs up on a silent client
