"""loadbalance: round_robin grouping and shuffling (CoreDNS's table),
prefer, weighted with its weight file, wire answers, options."""

import os
import random

import dns.message
import dns.rdata
import dns.rdataclass
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.directive import Directive
from corednstw.core.errors import CorefileError
from corednstw.core.request import RawResponse, Request, Response, make_query
from corednstw.plugins import loadbalance as lb
from tests.support import cases, util
from tests.support.cases import Case


def rr(text):
    name, ttl, _, rtype, rdata = text.split(None, 4)
    return w.RR.from_text(name, rtype, int(ttl), rdata)


def A(name, ip):
    return rr("%s 300 IN A %s" % (name, ip))


def AAAA(name, ip):
    return rr("%s 300 IN AAAA %s" % (name, ip))


def MX(n):
    return rr("mx.region2.skydns.test. 300 IN MX 1 mx%d.region2.skydns.test."
              % n)


def CNAME(a, b):
    return rr("%s.region2.skydns.test. 300 IN CNAME %s.region2.skydns.test."
              % (a, b))


EP = "endpoint.region2.skydns.test."


def _rdatas(msg):
    """The answer's rdatas in wire order (dnspython groups an RRset)."""
    return [rd for rrset in msg.answer for rd in rrset]


def _rdata_text(rr_):
    return dns.rdata.from_wire(dns.rdataclass.IN, rr_.rtype, rr_.rdata, 0,
                               len(rr_.rdata)).to_text()


def req(name="region2.skydns.test.", qtype=w.SRV):
    r = Request(make_query(name, qtype))
    qd, an, ns, ar = r.parse_header()
    r.parse_question(an, ns, ar)
    return r


def counts(rrs):
    """(cnames, addresses, mx, grouped) as CoreDNS's countRecords."""
    order = {w.CNAME: 0, w.A: 1, w.AAAA: 1, w.MX: 2}
    state = -1
    grouped = True
    c = [0, 0, 0]
    for r in rrs:
        k = order.get(r.rtype)
        if k is None:
            state = 3
            continue
        grouped = grouped and state <= k
        state = k
        c[k] += 1
    return c[0], c[1], c[2], grouped


def hosts_case(name, *ips):
    """The A answer hosts gives ``name``: ``ips``, in any order."""
    return Case(name, "A", aa=True, answer=[
        "%s. 3600 IN A %s" % (name, ip) for ip in ips])


@defer.inlineCallbacks
def orders(testcase, port, count, case):
    """The addresses of ``count`` answers to ``case``, in answer order;
    every reply is checked against ``case`` first."""
    out = []
    for _ in range(count):
        m = yield cases.ask(port, case)
        cases.check_response(testcase, case, m)
        out.append([str(rrset[0]) for rrset in m.answer])
    return out


class RoundRobinTest(unittest.TestCase):
    """CoreDNS's TestLoadBalanceRandom table."""

    def test_table(self):
        cases = [
            ([CNAME("cname1", "cname2"), CNAME("cname2", "cname3"),
              CNAME("cname5", "cname6"), CNAME("cname6", "endpoint"),
              A(EP, "10.240.0.1"), MX(1), MX(2), MX(3)], [],
             (4, 1, 3), (0, 0, 0)),
            ([A(EP, "10.240.0.1"), MX(1), CNAME("cname", "endpoint")], [],
             (1, 1, 1), (0, 0, 0)),
            ([MX(1), A(EP, "10.240.0.1"), A(EP, "10.240.0.2"), MX(2),
              CNAME("cname2", "cname3"), A(EP, "10.240.0.3"), MX(3)],
             [A(EP, "10.240.0.1"), AAAA(EP, "::1"), MX(1),
              CNAME("cname2", "cname3"), MX(2), A(EP, "10.240.0.3"),
              AAAA(EP, "::2"), MX(3)],
             (1, 3, 3), (1, 4, 3)),
        ]
        plugin = lb.LoadBalance()
        for answer, extra, want_an, want_ar in cases:
            resp = Response(0, list(answer), additional=list(extra))
            out = plugin._after(resp, req())
            self.assertEqual(counts(out.answer), want_an + (True,))
            self.assertEqual(counts(out.additional), want_ar + (True,))
            self.assertEqual(sorted(map(repr, out.answer)),
                             sorted(map(repr, answer)))

    def test_other_records_before_addresses(self):
        sig = rr("a.example. 300 IN TXT sig")
        out = lb.round_robin([A("a.example.", "10.0.0.1"), sig])
        self.assertEqual([r.rtype for r in out], [w.TXT, w.A])

    def test_every_order_appears(self):
        rng = random.Random(7)
        addrs = [A("a.example.", "10.0.0.%d" % i) for i in range(3)]
        seen = set()
        for _ in range(200):
            out = lb.round_robin(list(addrs), rng)
            seen.add(tuple(r.rdata for r in out))
        self.assertEqual(len(seen), 6)

    def test_original_list_untouched(self):
        addrs = [A("a.example.", "10.0.0.%d" % i) for i in range(5)]
        keep = list(addrs)
        resp = Response(0, addrs)
        lb.LoadBalance()._after(resp, req(qtype=w.A))
        self.assertEqual(addrs, keep)

    def test_authority_shuffled_too(self):
        ns = [A("a.example.", "10.0.0.%d" % i) for i in range(4)]
        resp = Response(0, authority=[MX(1)] + ns)
        out = lb.LoadBalance()._after(resp, req())
        self.assertEqual(out.authority[-1].rtype, w.MX)

    def test_untouched(self):
        soa = rr("skydns.test. 30 IN SOA ns.dns.skydns.test. "
                 "hostmaster.skydns.test. 1 7200 1800 86400 30")
        answer = [soa, MX(1), A(EP, "10.240.0.1"), A(EP, "10.240.0.2"),
                  CNAME("cname2", "cname3"), soa]
        plugin = lb.LoadBalance()
        for qtype in (w.AXFR, w.IXFR):
            out = plugin._after(Response(0, list(answer)), req(qtype=qtype))
            self.assertEqual(out.answer, answer)
        out = plugin._after(Response(3, list(answer)), req())
        self.assertEqual(out.answer, answer)
        self.assertIsNone(plugin._after(None, req()))


class RawTest(unittest.TestCase):

    def raw(self, answer, qtype=w.A):
        q = req("a.example.", qtype)
        wire = Response(0, answer, aa=True, plugin="forward").finish(q)
        resp = RawResponse(wire, plugin="forward")
        resp.error = None
        return q, resp

    def test_single_address_stays_raw(self):
        q, resp = self.raw([A("a.example.", "10.0.0.1")])
        out = lb.LoadBalance()._after(resp, q)
        self.assertIs(out, resp)
        self.assertIsNotNone(out.raw)

    def test_grouped_cname_stays_raw(self):
        q, resp = self.raw([CNAME("c", "endpoint"), A(EP, "10.0.0.1")])
        self.assertIs(lb.LoadBalance()._after(resp, q), resp)

    def test_decoded_when_needed(self):
        addrs = [A("a.example.", "10.0.0.%d" % i) for i in range(3)]
        q, resp = self.raw([MX(1)] + addrs)
        resp.set_flag(w.RA)
        out = lb.LoadBalance()._after(resp, q)
        self.assertIsNone(out.raw)
        self.assertEqual(out.plugin, "forward")
        self.assertTrue(out.flags & w.RA and out.flags & w.AA)
        self.assertEqual([r.rtype for r in out.answer],
                         [w.A, w.A, w.A, w.MX])
        m = dns.message.from_wire(out.finish(q))
        self.assertEqual(sum(len(s) for s in m.answer), 4)

    def structured(self, resp, q):
        """What the decoding path makes of ``resp``: round_robin on each
        section of the decoded answer, encoded for ``q``."""
        out = lb._decoded(resp)
        out.answer = lb.round_robin(out.answer)
        out.authority = lb.round_robin(out.authority)
        out.additional = lb.round_robin(out.additional)
        return dns.message.from_wire(out.finish(q))

    def test_addresses_shuffled_in_the_wire(self):
        # One name's addresses: shuffled without decoding, in the very
        # order the structured path gives for the same random state.
        q = Request(make_query("a.example.", w.A, edns=1232))
        q.parse_question(*q.parse_header()[1:])
        answer = ([CNAME("c", "endpoint")]
                  + [A(EP, "10.0.0.%d" % i) for i in range(6)])
        wire = Response(0, answer, [rr("example. 300 IN NS ns.example.")],
                        [A("ns.example.", "10.0.1.%d" % i)
                         for i in range(3)], aa=True).finish(q)
        seen = set()
        for seed in range(20):
            resp = RawResponse(wire, plugin="cache")
            resp.set_flag(w.RA)
            random.seed(seed)
            out = lb.LoadBalance()._after(resp, q)
            self.assertIsNotNone(out.raw)
            self.assertEqual(out.plugin, "cache")
            self.assertTrue(out.flags & w.RA and out.flags & w.AA)
            got = dns.message.from_wire(out.finish(q))
            random.seed(seed)
            want = self.structured(RawResponse(wire, plugin="cache"), q)
            for section in ("answer", "authority", "additional"):
                self.assertEqual(
                    [r.to_text() for r in getattr(got, section)],
                    [r.to_text() for r in getattr(want, section)])
            seen.add(str(got.answer[1]))
        self.assertGreater(len(seen), 1)

    def test_endpoint_addresses_quick_path(self):
        # A service's endpoints (kubernetes, or cache's copy of them): the
        # records are permuted whole without walking the message, in
        # round_robin's order, with and without an OPT.
        def no_walk(raw):
            raise AssertionError("the message was walked")
        self.patch(lb, "_section_types", no_walk)
        for qtype, make, ips in ((w.A, A, ["10.0.0.%d" % i
                                           for i in range(1, 6)]),
                                 (w.AAAA, AAAA, ["fd00::%d" % i
                                                 for i in range(1, 4)])):
            for edns in (None, 1232):
                seen = set()
                for seed in range(12):
                    q = Request(make_query("svc.ns.svc.cluster.local.", qtype,
                                           edns=edns))
                    q.parse_question(*q.parse_header()[1:])
                    wire = Response(0, [make("svc.ns.svc.cluster.local.", ip)
                                        for ip in ips], aa=True).finish(q)
                    random.seed(seed)
                    out = lb.LoadBalance()._after(
                        RawResponse(wire, "cache"), q)
                    got = dns.message.from_wire(out.finish(q))
                    random.seed(seed)
                    want = lb.round_robin(Response(0, [
                        make("svc.ns.svc.cluster.local.", ip) for ip in ips
                    ]).answer)
                    self.assertEqual([str(r) for r in _rdatas(got)],
                                     [_rdata_text(r) for r in want])
                    self.assertEqual(got.edns >= 0, edns is not None)
                    seen.add(tuple(str(r) for r in _rdatas(got)))
                self.assertGreater(len(seen), 1)

    def test_mixed_addresses_moved_whole(self):
        # A and AAAA together, or owners written differently, as the last
        # records: whole records change places, in round_robin's order.
        for answer in ([A(EP, "10.0.0.1"), AAAA(EP, "::1"),
                        A(EP, "10.0.0.2")],
                       [A(EP, "10.0.0.1"), A("b.example.", "10.0.0.2")]):
            seen = set()
            for seed in range(12):
                q, resp = self.raw(answer)
                random.seed(seed)
                out = lb.LoadBalance()._after(resp, q)
                self.assertIsNotNone(out.raw)
                got = dns.message.from_wire(out.finish(q))
                random.seed(seed)
                q, resp = self.raw(answer)
                want = self.structured(resp, q)
                self.assertEqual([r.to_text() for r in got.answer],
                                 [r.to_text() for r in want.answer])
                seen.add(tuple(r.to_text() for r in got.answer))
            self.assertGreater(len(seen), 1)

    def test_mx_host_addresses_moved_whole(self):
        # An MX answer with its host's A and AAAA in the additional
        # section (their owners compressed to the MX's exchange).
        host = "mx1.region2.skydns.test."
        seen = set()
        for seed in range(12):
            q = req("a.example.", w.MX)
            wire = Response(0, [MX(1)], additional=[
                A(host, "10.0.0.3"), AAAA(host, "::3")], aa=True).finish(q)
            random.seed(seed)
            out = lb.LoadBalance()._after(RawResponse(wire, "file"), q)
            self.assertIsNotNone(out.raw)
            got = dns.message.from_wire(out.finish(q))
            random.seed(seed)
            want = self.structured(RawResponse(wire, "file"), q)
            self.assertEqual([r.to_text() for r in got.additional],
                             [r.to_text() for r in want.additional])
            seen.add(tuple(r.to_text() for r in got.additional))
        self.assertEqual(len(seen), 2)

    def test_mixed_addresses_not_last_decoded(self):
        # Other records after them might point into them: decoded.
        q = req("a.example.", w.A)
        wire = Response(0, [A(EP, "10.0.0.1"), AAAA(EP, "::1")],
                        additional=[A("ns.example.", "10.0.0.53")],
                        aa=True).finish(q)
        resp = RawResponse(wire, plugin="forward")
        self.assertIsNone(lb.LoadBalance()._after(resp, q).raw)

    def test_prefer_decodes(self):
        q, resp = self.raw([A("a.example.", "1.1.1.1"),
                            rr("a.example. 300 IN TXT x")])
        plugin = lb.LoadBalance(prefer=lb.Prefer([]))
        out = plugin._after(resp, q)
        self.assertEqual([r.rtype for r in out.answer], [w.A, w.TXT])

    def test_section_types(self):
        # One walk gives each section's types, the OPT left out.
        q = Request(make_query("a.example.", w.A, edns=1232))
        q.parse_question(*q.parse_header()[1:])
        wire = Response(0, [CNAME("c", "endpoint"), A(EP, "10.0.0.1")],
                        authority=[rr("example. 300 IN NS ns.example.")],
                        additional=[A("ns.example.", "10.0.0.53")]
                        ).finish(q)
        self.assertEqual(wire[10:12], b"\x00\x02")   # the OPT included
        self.assertEqual(lb._section_types(wire),
                         ([w.CNAME, w.A], [w.NS], [w.A]))
        self.assertRaises(w.FormatError, lb._section_types, wire[:-15])

    def test_malformed_stays_raw(self):
        q, resp = self.raw([MX(1), A("a.example.", "10.0.0.1"),
                            A("a.example.", "10.0.0.2")])
        resp.raw = resp.raw[:-3]
        self.assertIs(lb.LoadBalance()._after(resp, q), resp)


class PreferTest(unittest.TestCase):

    def test_sort(self):
        # CoreDNS's TestSortPreferred.
        import ipaddress
        records = [A("example.org.", ip) for ip in (
            "10.9.30.1", "10.9.20.5", "192.168.1.2", "10.10.0.1",
            "10.9.20.3", "172.16.0.1")] + [
            AAAA("example.org.", ip) for ip in (
                "2001:db8::1", "2001:db8:abcd::1", "fd00::1")] + [
            rr("example.org. 300 IN CNAME alias.example.org.")]
        p = lb.Prefer([ipaddress.ip_network(c) for c in (
            "2001:db8::/32", "10.9.20.0/24", "10.9.30.0/24")])
        out = p.reorder(records)
        self.assertEqual([r.rdata_text() for r in out], [
            "alias.example.org.", "2001:db8::1", "2001:db8:abcd::1",
            "10.9.20.5", "10.9.20.3", "10.9.30.1", "192.168.1.2",
            "10.10.0.1", "172.16.0.1", "fd00::1"])

    def test_groups(self):
        p = lb.Prefer([])
        txt = rr("a.example. 300 IN TXT x")
        out = p.reorder([txt, MX(1), A("a.example.", "10.0.0.1")])
        self.assertEqual([r.rtype for r in out], [w.A, w.MX, w.TXT])

    @defer.inlineCallbacks
    def test_over_the_wire(self):
        app = yield util.start(self, """
example.org:0 {
    loadbalance round_robin {
        prefer 10.9.20.0/24 192.168.1.0/24
    }
    hosts /nonexistent {
        172.16.0.1 a.example.org
        10.9.20.5 a.example.org
        1.1.1.1 a.example.org
        192.168.1.2 a.example.org
        10.9.20.3 a.example.org
    }
}
""")
        tops = set()
        want = hosts_case("a.example.org", "172.16.0.1", "10.9.20.5",
                          "1.1.1.1", "192.168.1.2", "10.9.20.3")
        for ips in (yield orders(self, app.port(), 20, want)):
            tops.add(tuple(ips[:2]))
            self.assertEqual(ips[2], "192.168.1.2")
            self.assertEqual(sorted(ips[3:]), ["1.1.1.1", "172.16.0.1"])
        self.assertTrue(tops <= {("10.9.20.5", "10.9.20.3"),
                                 ("10.9.20.3", "10.9.20.5")})


class FixedRandom:
    def __init__(self, values):
        self.values = list(values)

    def randrange(self, n):
        v = self.values.pop(0)
        assert 0 <= v < n
        return v


WEIGHTS = """
# comment
www.example.com
100.64.1.1 3
100.64.1.2 1
100.64.1.3 2

other.example.com.
::1 7
"""


class WeightedTest(unittest.TestCase):

    def test_parse(self):
        wts = lb.Weights("wf")
        d = wts.parse(WEIGHTS)
        self.assertEqual(d["www.example.com."], [
            (bytes([100, 64, 1, 1]), 3), (bytes([100, 64, 1, 2]), 1),
            (bytes([100, 64, 1, 3]), 2)])
        self.assertEqual(d["other.example.com."], [(bytes(15) + b"\x01", 7)])

    def test_parse_errors(self):
        cases = [
            ("10.0.0.1", 'wrong domain name:"10.0.0.1" in weight file wf. '
             '(Maybe a missing weight value?)'),
            ("a.org\nx 1", 'wrong IP address:"x" in weight file wf'),
            ("a.org\n10.0.0.1 0", 'wrong weight value:"0" in weight file wf'),
            ("a.org\n10.0.0.1 256",
             'wrong weight value:"256" in weight file wf'),
            ("10.0.0.1 5", "missing domain name in weight file wf"),
            ("a.org\n10.0.0.1 5 # c",
             'could not parse weight line:"10.0.0.1 5 # c" in weight file '
             'wf'),
        ]
        for text, msg in cases:
            e = self.assertRaises(ValueError, lb.Weights("wf").parse, text)
            self.assertEqual(str(e), msg)

    def test_top(self):
        wts = lb.Weights("wf", rng=FixedRandom([0, 2, 3, 4, 5]))
        wts.domains = wts.parse(WEIGHTS)
        addrs = [A("WWW.example.com.", "100.64.1.%d" % i) for i in (1, 2, 3)]
        got = [wts.top(addrs) for _ in range(5)]
        self.assertEqual(got, [0, 0, 1, 2, 2])
        # Unknown addresses weigh 1.
        wts.rng = FixedRandom([3])
        extra = addrs + [A("www.example.com.", "10.0.0.1")]
        self.assertEqual(wts.top(extra), 1)

    def test_reorder(self):
        wts = lb.Weights("wf", rng=FixedRandom([5]))
        wts.domains = wts.parse(WEIGHTS)
        cname = rr("alias.example.com. 300 IN CNAME www.example.com.")
        addrs = [A("www.example.com.", "100.64.1.%d" % i) for i in (1, 2, 3)]
        out = wts.reorder(addrs + [cname])
        self.assertEqual(out[0], cname)
        self.assertEqual([r.rdata_text() for r in out[1:]],
                         ["100.64.1.3", "100.64.1.2", "100.64.1.1"])

    def test_only_address_queries(self):
        wts = lb.Weights("wf", rng=FixedRandom([]))
        plugin = lb.LoadBalance(weights=wts)
        answer = [MX(1), MX(2), A(EP, "10.0.0.1"), A(EP, "10.0.0.2")]
        out = plugin._after(Response(0, list(answer)), req(qtype=w.MX))
        self.assertEqual(out.answer, answer)

    @defer.inlineCallbacks
    def test_served_and_reloaded(self):
        cap = util.capture_log(self)
        d = util.write_files(self, {"wf": "www.example.com\n100.64.1.2 255\n"
                                    "100.64.1.1 1\n"})
        path = os.path.join(d, "wf")
        app = yield util.start(self, """
example.com:0 {
    loadbalance weighted %s {
        reload 20ms
    }
    hosts /nonexistent {
        100.64.1.1 www.example.com
        100.64.1.2 www.example.com
        100.64.1.3 www.example.com
    }
}
""" % path)
        plugin = app.config.blocks[0].plugin("loadbalance")
        plugin.weights.rng = random.Random(1)
        self.assertIn("[INFO] plugin/loadbalance: Successfully reloaded "
                      "weight file %s" % path, cap.lines)
        want = hosts_case("www.example.com", "100.64.1.1", "100.64.1.2",
                          "100.64.1.3")
        firsts = [ips[0] for ips in (yield orders(self, app.port(), 10,
                                                  want))]
        # Weight 255 against 1+1: the odds of another first are tiny, and
        # the seeded generator makes the outcome fixed.
        self.assertEqual(firsts, ["100.64.1.2"] * 10)
        util.rewrite(path, "www.example.com\n100.64.1.3 200\n")
        yield util.wait_for(lambda: plugin.weights.domains.get(
            "www.example.com.") == [(bytes([100, 64, 1, 3]), 200)])
        (ips,) = yield orders(self, app.port(), 1, want)
        self.assertEqual(ips[0], "100.64.1.3")
        # A broken file is reported and the last weights stay.
        util.rewrite(path, "www.example.com\nbad 1\n")
        yield util.wait_for(lambda: any("wrong IP address" in line
                                        for line in cap.lines))
        self.assertEqual(len(plugin.weights.domains["www.example.com."]), 1)

    @defer.inlineCallbacks
    def test_missing_file(self):
        cap = util.capture_log(self)
        yield util.start(self, "example.com:0 {\n    loadbalance weighted "
                         "/nonexistent/wf\n    whoami\n}\n")
        self.assertIn("[WARNING] plugin/loadbalance: Failed to open weight "
                      "file:weight file open error. Will try again in 30s",
                      cap.lines)

    def test_missing_file_without_reload(self):
        x = util.Direct(self, "example.com:0 {\n    loadbalance weighted "
                        "/nonexistent/wf {\n        reload 0s\n    }\n}\n")
        plugin = x.app.config.blocks[0].plugin("loadbalance")
        e = self.assertRaises(RuntimeError, plugin.start)
        self.assertEqual(str(e), "plugin/loadbalance: weight file open error")


class SetupTest(unittest.TestCase):

    def load(self, text):
        return util.Direct(self, "example.org:0 {\n    %s\n}\n" % text)

    def plugin(self, text):
        return self.load(text).app.config.blocks[0].plugin("loadbalance")

    def test_ok(self):
        self.assertIsNone(self.plugin("loadbalance").weights)
        self.assertIsNone(self.plugin("loadbalance round_robin").weights)
        p = self.plugin("loadbalance weighted wfile")
        self.assertEqual((p.weights.path, p.weights.reload), ("wfile", 30.0))
        p = self.plugin("loadbalance weighted wf {\n        reload 10s\n    }")
        self.assertEqual(p.weights.reload, 10.0)
        p = self.plugin("loadbalance {\n        prefer 10.0.0.0/8 "
                        "2001:db8::/32\n    }")
        self.assertEqual(len(p.prefer.nets), 2)

    def test_root(self):
        x = self.load("loadbalance weighted wf")
        block = x.app.config.blocks[0]
        block.settings["root"] = "/srv"
        p = lb.setup(Directive("loadbalance", ["weighted", "wf"],
                                        [], "C", 1), block)
        self.assertEqual(p.weights.path, "/srv/wf")

    def test_errors(self):
        cases = [
            ("loadbalance fleeb", "unknown policy: fleeb"),
            ("loadbalance round_robin a", "unknown property for round_robin"),
            ("loadbalance weighted", "missing weight file argument"),
            ("loadbalance weighted a b", "unexpected argument(s)"),
            ("loadbalance weighted wf {\n        prefer 10.0.0.0/8\n    }",
             "unknown property 'prefer'"),
            ("loadbalance weighted wf {\n        reload\n    }",
             "reload duration value is missing"),
            ("loadbalance weighted wf {\n        reload 10\n    }",
             "invalid reload duration '10'"),
            ("loadbalance weighted wf {\n        reload 1s 2s\n    }",
             "unexpected argument"),
            ("loadbalance {\n        reload 1s\n    }",
             "unknown property 'reload'"),
            ("loadbalance {\n        prefer 10.0.0.1\n    }",
             'invalid CIDR "10.0.0.1": invalid CIDR address: 10.0.0.1'),
            ("loadbalance {\n        prefer 10.0.0.0/33\n    }",
             'invalid CIDR "10.0.0.0/33"'),
        ]
        for text, msg in cases:
            e = self.assertRaises(CorefileError, self.load, text)
            self.assertIn("plugin/loadbalance: " + msg, str(e), text)


class WireTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_round_robin_over_udp(self):
        app = yield util.start(self, """
example.org:0 {
    loadbalance
    hosts /nonexistent {
        10.0.0.1 a.example.org
        10.0.0.2 a.example.org
        10.0.0.3 a.example.org
    }
}
""")
        want = hosts_case("a.example.org", "10.0.0.1", "10.0.0.2",
                          "10.0.0.3")
        seen = set(map(tuple, (yield orders(self, app.port(), 30, want))))
        self.assertEqual({tuple(sorted(o)) for o in seen},
                         {("10.0.0.1", "10.0.0.2", "10.0.0.3")})
        # 30 answers in the same order: odds 6 * 6**-30.
        self.assertGreater(len(seen), 1)
