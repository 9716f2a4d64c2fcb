"""dns64: AAAA synthesis from A records (RFC 6052 addresses), options."""

import ipaddress
import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import dns64 as mod
from corednstw.service.app import App
from tests.support import cases, util
from tests.support.cases import Case
from tests.support.unbound import Unbound
from tests.support.upstream import Upstream


def parse(testcase, body):
    d = util.write_files(testcase, {"Corefile": ". {\n%s\n}\n" % body})
    cfg = App(os.path.join(d, "Corefile"), dns_port=0).load()
    return [p for p in cfg.plugins() if p.name == "dns64"][0]


class ParseTest(unittest.TestCase):

    def test_forms(self):
        p = parse(self, " dns64")
        self.assertEqual(str(p.prefix), "64:ff9b::/96")
        self.assertFalse(p.translate_all or p.allow_ipv4)
        p = parse(self, " dns64 64:1337::/96")
        self.assertEqual(str(p.prefix), "64:1337::/96")
        p = parse(self, " dns64 {\n prefix 2001:db8::/32\n translate_all\n"
                        " allow_ipv4\n }")
        self.assertEqual(str(p.prefix), "2001:db8::/32")
        self.assertTrue(p.translate_all and p.allow_ipv4)

    def test_errors(self):
        for body, msg in [
                ("dns64 a b", "Wrong argument count"),
                ("dns64 10.0.0.0/8", "invalid netmask 32"),
                ("dns64 2001:db8::/33", "invalid prefix length"),
                ("dns64 2001:db8::/100", "invalid prefix length"),
                ("dns64 {\n bogus\n }", "unknown property 'bogus'")]:
            with self.assertRaises(CorefileError) as cm:
                parse(self, " " + body)
            self.assertIn(msg, str(cm.exception))

    def test_rfc6052_table(self):
        v4 = bytes([192, 0, 2, 33])
        for pfx, want in [("2001:db8::/32", "2001:db8:c000:221::"),
                          ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
                          ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
                          ("2001:db8:122:300::/56",
                           "2001:db8:122:3c0:0:221::"),
                          ("2001:db8:122:344::/64",
                           "2001:db8:122:344:c0:2:2100:0"),
                          ("64:ff9b::/96", "64:ff9b::c000:221")]:
            got = mod.to6(ipaddress.ip_network(pfx), v4)
            self.assertEqual(ipaddress.ip_address(got),
                             ipaddress.ip_address(want), pfx)


def upstream_soa(ttl=3600):
    """The SOA the test upstream denies with."""
    return ("example. %d IN SOA ns.example. host.example. 1 7200 1800 "
            "86400 60" % ttl)


class DNS64Test(unittest.TestCase):

    @defer.inlineCallbacks
    def serve(self, options=""):
        self.up = Upstream().start()
        self.addCleanup(self.up.stop)
        app = yield util.start(self, ".:0 {\n dns64 %s\n forward . %s\n}\n"
                               % (options, self.up.addr()))
        self.port = app.port()
        self.app = app

    @defer.inlineCallbacks
    def test_ipv4_client_untouched_by_default(self):
        yield self.serve()
        yield cases.run(self, self.port, [Case("a.example", "AAAA",
                                               ns=[upstream_soa()])])

    @defer.inlineCallbacks
    def test_synthesis(self):
        yield self.serve("{\n allow_ipv4\n }")
        before = mod.TRANSLATED.get((self.app.muxes[0].label,))
        self.up.soa_ttl = 100
        # the question keeps the client's case; the synthesized records
        # have the owner of the (lower-cased) A lookup, as in CoreDNS
        yield cases.run(self, self.port, [Case("A.Example", "AAAA", answer=[
            "a.example. 100 IN AAAA 64:ff9b::c000:201"])])
        self.assertEqual(mod.TRANSLATED.get((self.app.muxes[0].label,))
                         - before, 1)
        self.assertEqual(self.up.count(qtype="A"), 1)
        # existing AAAA records are kept unless translate_all
        self.up.aaaa = "2001:db8::1"
        yield cases.run(self, self.port, [
            Case("b.example", "AAAA",
                 answer=["b.example. 300 IN AAAA 2001:db8::1"]),
            # NXDOMAIN passes through
            Case("nxx.example", "AAAA", "NXDOMAIN", ns=[upstream_soa(100)]),
        ])

    @defer.inlineCallbacks
    def test_translate_all(self):
        yield self.serve("64:1337::/96 {\n allow_ipv4\n translate_all\n }")
        self.up.aaaa = "2001:db8::1"
        yield cases.run(self, self.port, [Case("b.example", "AAAA", answer=[
            "b.example. 300 IN AAAA 64:1337::c000:201"])])


class UnboundDNS64Test(unittest.TestCase):

    @defer.inlineCallbacks
    def test_against_unbound(self):
        ub = yield Unbound(self).start()
        app = yield util.start(
            self, ".:0 {\n dns64 {\n allow_ipv4\n }\n forward . 127.0.0.1:%d"
                  "\n}\n" % ub.port)
        yield cases.run(self, app.port(), [
            Case("v4only.example.test", "AAAA", answer=[
                "v4only.example.test. 120 IN AAAA 64:ff9b::c633:6407"]),
            Case("www.example.test", "AAAA", answer=[
                "www.example.test. 120 IN AAAA 2001:db8::80"]),
        ])


def _msg(rcode=0, answer=(), ns=(), tc=False, qtype="AAAA"):
    import dns.flags
    import dns.message

    from tests.support.cases import rrset as _rrset
    q = util.make_query("example.com.", qtype)
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    if tc:
        r.flags |= dns.flags.TC
    for line in answer:
        r.answer.append(_rrset(line))
    for line in ns:
        r.authority.append(_rrset(line))
    return r.to_wire()


class TableTest(unittest.TestCase):
    """dns64_test.go: the request and response rules and the synthesis
    table, with the next plugin and the A lookup scripted."""

    def setup(self, options=" allow_ipv4"):
        self.s = util.Direct(self, ".:0 {\n dns64 {\n%s\n }\n whoami\n}\n"
                             % options)
        return [p for p in self.s.app.config.plugins()
                if p.name == "dns64"][0]

    def run_case(self, init, a_resp, client="::1", qtype="AAAA",
                 options=""):
        import dns.message

        from corednstw.core.request import RawResponse, parse_response
        p = self.setup(options)
        p.next = util.Stub(lambda req: RawResponse(init, plugin="stub"))
        lookups = []

        def lookup(name, qtype, qclass=1, parent=None, do=False):
            lookups.append((name, qtype))
            return defer.succeed(parse_response(a_resp) if a_resp else None)
        self.s.app.lookup = lookup
        out = []
        q = util.make_query("example.com.", qtype)
        q.flags |= 0x100
        self.s.mux.handle(q.to_wire(), client, 4000, "udp", None, out.append)
        self.wire = out[0]
        return dns.message.from_wire(out[0]), lookups

    def test_request_should_intercept(self):
        for allow, client, qtype, want in [
                (True, "::1", "AAAA", True), (True, "127.0.0.1", "AAAA", True),
                (False, "127.0.0.1", "AAAA", False),
                (False, "::1", "A", False)]:
            init = _msg(ns=["example.com. 70 IN SOA foo. bar. 1 1 1 1 1"],
                        qtype=qtype)
            a = _msg(answer=["example.com. 60 IN A 192.0.2.42"], qtype="A")
            m, lookups = self.run_case(init, a, client, qtype,
                                       " allow_ipv4" if allow else "")
            self.assertEqual(bool(lookups), want, (allow, client, qtype))

    def test_response_should(self):
        soa = ["example.com. 70 IN SOA foo. bar. 1 1 1 1 1"]
        for init, translate_all, want in [
                (_msg(answer=["example.com. 60 IN AAAA ::1"]), False, False),
                (_msg(ns=soa), False, True),
                (_msg(rcode=4, ns=soa), False, True),
                (_msg(rcode=3, ns=soa), False, False),
                (_msg(answer=["example.com. 60 IN AAAA ::1"]), True, True)]:
            a = _msg(answer=["example.com. 60 IN A 192.0.2.42"], qtype="A")
            m, lookups = self.run_case(
                init, a, options=" translate_all" if translate_all else "")
            self.assertEqual(bool(lookups), want)

    def test_synthesis_table(self):
        two_a = ["example.com. 60 IN A 192.0.2.42",
                 "example.com. 5000 IN A 192.0.2.43"]
        soa = "example.com. 3600 IN SOA foo. bar. 1 7200 900 1209600 86400"
        for name, init, a_resp, rcode, answer, ns, tc in [
                ("standard flow",
                 _msg(ns=["example.com. 70 IN SOA foo. bar. 1 1 1 1 1"]),
                 _msg(answer=two_a, qtype="A"), 0,
                 ["example.com. 60 IN AAAA 64:ff9b::c000:22a",
                  "example.com. 70 IN AAAA 64:ff9b::c000:22b"], [], False),
                ("a empty", _msg(ns=[soa]), _msg(ns=[soa], qtype="A"), 0, [],
                 [soa], False),
                ("non-nxdomain error", _msg(rcode=5),
                 _msg(answer=two_a, qtype="A"), 0,
                 ["example.com. 60 IN AAAA 64:ff9b::c000:22a",
                  "example.com. 600 IN AAAA 64:ff9b::c000:22b"], [], False),
                ("nxdomain", _msg(rcode=3, ns=[soa]), None, 3, [], [soa],
                 False),
                ("AAAA record",
                 _msg(answer=["example.com. 60 IN AAAA ::1",
                              "example.com. 5000 IN AAAA ::2"]), None, 0,
                 ["example.com. 60 IN AAAA ::1",
                  "example.com. 5000 IN AAAA ::2"], [], False),
                ("truncated A response",
                 _msg(ns=["example.com. 70 IN SOA foo. bar. 1 1 1 1 1"]),
                 _msg(answer=two_a, qtype="A", tc=True), 0,
                 ["example.com. 60 IN AAAA 64:ff9b::c000:22a",
                  "example.com. 70 IN AAAA 64:ff9b::c000:22b"], [], True)]:
            m, lookups = self.run_case(init, a_resp)
            # record by record: each keeps its own TTL
            cases.check_response(self, Case(
                "example.com.", "AAAA", rcode, answer=answer, ns=ns, tc=tc,
                rd=True, aa=False if a_resp is not None else None,
                desc=name), cases.parse_reply(self.wire))
            if a_resp is not None:
                self.assertEqual(lookups, [("example.com.", 1)], name)
            else:
                self.assertEqual(lookups, [], name)

    def test_to6(self):
        for pfx, want in [("64:ff9b::/96", "64:ff9b::4040:4040"),
                          ("64:ff9b::/64", "64:ff9b::40:4040:4000:0"),
                          ("64:ff9b::/56", "64:ff9b:0:40:40:4040::"),
                          ("64::/32", "64:0:4040:4040::")]:
            got = mod.to6(ipaddress.ip_network(pfx), bytes([64, 64, 64, 64]))
            self.assertEqual(ipaddress.ip_address(got),
                             ipaddress.ip_address(want), pfx)

    def test_setup_table(self):
        for body, err, prefix, allow in [
                ("dns64", False, "64:ff9b::/96", False),
                ("dns64 64:dead::/96", False, "64:dead::/96", False),
                ("dns64 {\n translate_all\n }", False, "64:ff9b::/96", False),
                ("dns64 {\n prefix 64:ff9b::/96\n }", False, "64:ff9b::/96",
                 False),
                ("dns64 {\n prefix 64:ff9b::/32\n }", False, "64:ff9b::/32",
                 False),
                ("dns64 {\n prefix 64:ff9b::/52\n }", True, None, None),
                ("dns64 {\n prefix 64:ff9b::/104\n }", True, None, None),
                ("dns64 {\n prefix 8.8.8.8/24\n }", True, None, None),
                ("dns64 {\n prefix 2002:ac12:b083::/96\n }", False,
                 "2002:ac12:b083::/96", False),
                ("dns64 {\n allow_ipv4\n }", False, "64:ff9b::/96", True)]:
            if err:
                with self.assertRaises(CorefileError, msg=body):
                    parse(self, " " + body)
                continue
            p = parse(self, " " + body)
            self.assertEqual((str(p.prefix), p.allow_ipv4), (prefix, allow),
                             body)
