"""cache: parsing, and the cache in front of forward and a scripted
upstream (query counts tell hits from misses; a fake clock ages entries)."""

import dns.edns
import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw import corefile
from corednstw.plugins import cache as cachemod
from tests import util
from tests.test_forward import build as _build
from tests.upstream import Upstream


def build(testcase, text):
    app_plugins, _ = _build(testcase, text)
    return app_plugins


def parse_cache(testcase, body):
    import os
    from corednstw.app import App
    d = util.write_files(testcase, {"Corefile": ". {\n%s\n}\n" % body})
    cfg = App(os.path.join(d, "Corefile"), dns_port=0).load()
    return [p for p in cfg.plugins() if p.name == "cache"][0]


class ParseTest(unittest.TestCase):

    def test_defaults(self):
        c = parse_cache(self, " cache")
        self.assertEqual((c.pttl, c.nttl, c.minpttl, c.minnttl, c.failttl),
                         (3600, 1800, 5, 5, 5))
        self.assertEqual(c.pcache.shard_size, 39)
        self.assertEqual(c.zones, ["."])

    def test_options(self):
        c = parse_cache(self, """ cache 300 example.org 10.0.0.0/24 {
    success 2560 100 10
    denial 100 50 1
    prefetch 3 30s 20%
    serve_stale 10m verify 100ms 30s 10s
    servfail 2s
    disable denial sub.example.org
    keepttl
 }""")
        self.assertEqual(c.zones, ["example.org.", "0.0.10.in-addr.arpa."])
        self.assertEqual(c.zlabel, "example.org.,0.0.10.in-addr.arpa.")
        self.assertEqual((c.pttl, c.minpttl, c.pcache.shard_size),
                         (100, 10, 10))
        self.assertEqual((c.nttl, c.minnttl, c.ncache.shard_size), (50, 1, 4))
        self.assertEqual((c.prefetch, c.window, c.percentage), (3, 30.0, 20))
        self.assertEqual((c.stale_up_to, c.verify_stale, c.verify_timeout,
                          c.stale_ttl, c.stale_recheck),
                         (600.0, True, 0.1, 30, 10.0))
        self.assertEqual(c.failttl, 2.0)
        self.assertEqual(c.nexcept, ["sub.example.org."])
        self.assertTrue(c.keepttl)

    def test_stale_immediate(self):
        c = parse_cache(self, " cache {\n serve_stale 1h immediate 30s\n }")
        self.assertEqual((c.verify_stale, c.stale_ttl), (False, 30))
        c = parse_cache(self, " cache {\n serve_stale\n }")
        self.assertEqual((c.stale_up_to, c.stale_ttl), (3600.0, 0))

    def test_errors(self):
        for body, msg in [
                ("cache 0", "cache TTL can not be zero or negative: 0"),
                ("cache {\n success\n }", "Wrong argument count"),
                ("cache {\n success 10 0\n }", "can not be zero or negative"),
                ("cache {\n prefetch 1 1m 5%\n }",
                 "percentage should fall in range [10, 90]: 5"),
                ("cache {\n prefetch 1 1m 50\n }", "last character"),
                ("cache {\n servfail 10m\n }", "over 5 minutes"),
                ("cache {\n serve_stale 1h sometimes\n }",
                 "invalid value for serve_stale refresh mode"),
                ("cache {\n serve_stale 1h immediate 1500ms\n }",
                 "whole number of seconds"),
                ("cache {\n serve_stale_policy prefer_positive\n }",
                 "not supported yet"),
                ("cache {\n disable both\n }", "cache type for disable"),
                ("cache {\n bogus\n }", "Wrong argument count")]:
            with self.assertRaises(corefile.CorefileError) as cm:
                parse_cache(self, " " + body)
            self.assertIn(msg, str(cm.exception), body)

    def test_store_shards(self):
        s = cachemod.Store(1024)
        self.assertEqual(s.shard_size, 4)
        evictions = sum(s.add(("n%d." % i, 1, 1, False, False), i)
                        for i in range(5000))
        self.assertEqual(len(s), 1024)
        self.assertEqual(evictions, 5000 - 1024)


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


class CacheTest(unittest.TestCase):

    @defer.inlineCallbacks
    def serve(self, cache_line="cache", options="", up=None):
        self.up = up or Upstream().start()
        self.addCleanup(self.up.stop)
        app = yield util.start(self, ".:0 {\n %s\n forward . %s %s\n}\n" % (
            cache_line, self.up.addr(), options))
        self.app = app
        self.port = app.port()
        self.cache = [p for p in app.config.plugins()
                      if p.name == "cache"][0]
        self.clock = Clock()
        self.cache.now = self.clock

    def q(self, name, rdtype="A", **kw):
        return util.query(self.port, name, rdtype, **kw)

    @defer.inlineCallbacks
    def test_hit_countdown_and_expiry(self):
        yield self.serve()
        labels = (self.app.muxes[0].label, ".", "")
        hl = (labels[0], "success", ".", "")
        before = (cachemod.REQUESTS.get(labels), cachemod.HITS.get(hl),
                  cachemod.MISSES.get(labels))
        m = yield self.q("www.example")
        self.assertFalse(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m), ["www.example. 300 IN A 192.0.2.1"])
        self.clock.t += 100.4
        m = yield self.q("WWW.Example", proto="tcp")
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertTrue(m.flags & dns.flags.RA)
        self.assertEqual(str(m.question[0].name), "WWW.Example.")
        # owner names pointing at the question follow the client's case
        self.assertEqual([x.lower() for x in util.rrs(m)],
                         ["www.example. 200 in a 192.0.2.1"])
        self.assertEqual(self.up.count(), 1)
        self.clock.t += 200
        m = yield self.q("www.example")
        self.assertEqual(self.up.count(), 2)
        self.assertEqual(util.rrs(m), ["www.example. 300 IN A 192.0.2.1"])
        after = (cachemod.REQUESTS.get(labels), cachemod.HITS.get(hl),
                 cachemod.MISSES.get(labels))
        self.assertEqual([a - b for a, b in zip(after, before)], [3, 1, 2])
        self.assertEqual(cachemod.ENTRIES.values[hl], 1)

    @defer.inlineCallbacks
    def test_ttl_cap_and_min(self):
        yield self.serve("cache 30")
        m = yield self.q("a.example")
        self.assertEqual(util.rrs(m), ["a.example. 30 IN A 192.0.2.1"])
        self.up.ttl = 1
        m = yield self.q("b.example")
        self.assertEqual(util.rrs(m), ["b.example. 5 IN A 192.0.2.1"])

    @defer.inlineCallbacks
    def test_negative_ttl_and_same_ttl_everywhere(self):
        yield self.serve()
        m = yield self.q("nxname.example")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(m.authority[0].ttl, 1800)   # SOA 3600, denial max
        self.up.soa_ttl = 40
        m = yield self.q("nxother.example")
        self.assertEqual(m.authority[0].ttl, 40)
        self.clock.t += 10
        m = yield self.q("nxother.example")
        self.assertEqual(m.authority[0].ttl, 30)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(self.up.count(), 2)
        # NODATA with SOA is cached too
        yield self.q("a.example", "AAAA")
        m = yield self.q("a.example", "AAAA")
        self.assertEqual(self.up.count(name="a.example."), 1)
        self.assertEqual(m.answer, [])

    @defer.inlineCallbacks
    def test_do_and_cd_in_key(self):
        yield self.serve()
        yield self.q("k.example")
        yield self.q("k.example", want_dnssec=True)
        q = util.make_query("k.example", "A")
        q.flags |= dns.flags.CD
        yield self.q(q)
        yield self.q("k.example", want_dnssec=True)
        self.assertEqual(self.up.count(), 3)

    @defer.inlineCallbacks
    def test_edns_echo_and_ecs_not_in_key(self):
        yield self.serve()
        ecs1 = dns.edns.ECSOption("192.0.2.0", 24)
        ecs2 = dns.edns.ECSOption("198.51.100.0", 24)
        m = yield self.q("e.example", use_edns=0, payload=1400,
                         options=[ecs1])
        self.assertEqual(m.edns, 0)
        self.assertEqual(m.payload, 1400)
        m = yield self.q("e.example", use_edns=0, payload=1300,
                         options=[ecs2])
        self.assertEqual(m.payload, 1300)
        self.assertEqual(self.up.count(), 1)
        sent = self.up.queries[0][3]
        self.assertEqual(sent.options[0].address, "192.0.2.0")
        m = yield self.q("e.example")
        self.assertEqual(m.edns, -1)

    @defer.inlineCallbacks
    def test_truncated_not_cached(self):
        up = Upstream().start()
        up.truncate = True
        yield self.serve(up=up)
        for _ in range(2):
            m = yield self.q("t.example")
            self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(up.count(), 2)

    @defer.inlineCallbacks
    def test_servfail_cached_then_not(self):
        up = Upstream().start()
        up.rcode = dns.rcode.SERVFAIL
        yield self.serve(up=up)
        for _ in range(2):
            m = yield self.q("s.example")
            self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(up.count(), 1)
        self.clock.t += 6
        yield self.q("s.example")
        self.assertEqual(up.count(), 2)

    @defer.inlineCallbacks
    def test_servfail_zero_and_disable(self):
        up = Upstream().start()
        yield self.serve("cache {\n servfail 0\n disable success example\n"
                         " }", up=up)
        for _ in range(2):
            yield self.q("x.example")
        self.assertEqual(up.count(), 2)
        for _ in range(2):
            yield self.q("x.org")
        self.assertEqual(up.count(name="x.org."), 1)
        up.rcode = dns.rcode.SERVFAIL
        for _ in range(2):
            yield self.q("y.org")
        self.assertEqual(up.count(name="y.org."), 2)

    @defer.inlineCallbacks
    def test_keepttl(self):
        yield self.serve("cache {\n keepttl\n }")
        yield self.q("k.example")
        self.clock.t += 100
        m = yield self.q("k.example")
        self.assertEqual(util.rrs(m), ["k.example. 300 IN A 192.0.2.1"])
        self.assertEqual(self.up.count(), 1)

    @defer.inlineCallbacks
    def test_prefetch_one_query_per_entry(self):
        yield self.serve("cache {\n prefetch 2 10m 50%\n }")
        yield self.q("p.example")
        yield self.q("other.example")
        self.clock.t += 160        # 140s left: below 50% of 300
        labels = (self.app.muxes[0].label, ".", "")
        pf = cachemod.PREFETCHES.get(labels)
        before = self.up.count()
        for _ in range(4):
            m = yield self.q("p.example")
            self.assertEqual(m.rcode(), 0)
        for _ in range(4):
            yield self.q("other.example")
        yield util.wait_for(lambda: self.up.count() == before + 2)
        self.assertEqual(self.up.count(name="p.example."), 2)
        self.assertEqual(self.up.count(name="other.example."), 2)
        self.assertEqual(cachemod.PREFETCHES.get(labels) - pf, 2)
        # the refreshed entry is served with its full TTL again
        m = yield self.q("p.example")
        self.assertEqual(util.rrs(m), ["p.example. 300 IN A 192.0.2.1"])

    @defer.inlineCallbacks
    def test_serve_stale_immediate(self):
        yield self.serve("cache {\n serve_stale 1h\n }",
                         options="{\n read_timeout 50ms\n max_fails 0\n}")
        yield self.q("s.example")
        self.up.silent = True
        self.clock.t += 400
        labels = (self.app.muxes[0].label, ".", "")
        st = cachemod.SERVED_STALE.get(labels)
        m = yield self.q("s.example")
        self.assertEqual(util.rrs(m), ["s.example. 0 IN A 192.0.2.1"])
        self.assertEqual(cachemod.SERVED_STALE.get(labels) - st, 1)
        # one background refresh was tried
        yield util.wait_for(lambda: self.up.count(name="s.example.") >= 2)
        self.clock.t += 4000
        m = yield self.q("s.example")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    @defer.inlineCallbacks
    def test_serve_stale_verify(self):
        yield self.serve("cache {\n serve_stale 1h verify\n }",
                         options="{\n read_timeout 50ms\n max_fails 0\n}")
        yield self.q("v.example")
        self.clock.t += 400
        self.up.address = "192.0.2.99"
        m = yield self.q("v.example")
        self.assertEqual(util.rrs(m), ["v.example. 300 IN A 192.0.2.99"])
        self.up.silent = True
        self.clock.t += 400
        m = yield self.q("v.example")
        self.assertEqual(util.rrs(m), ["v.example. 0 IN A 192.0.2.99"])

    @defer.inlineCallbacks
    def test_other_zone_not_cached(self):
        yield self.serve("cache 60 example.org")
        for _ in range(2):
            yield self.q("a.example.net")
        self.assertEqual(self.up.count(), 2)
        for _ in range(2):
            yield self.q("a.example.org")
        self.assertEqual(self.up.count(name="a.example.org."), 1)


class WireTest(unittest.TestCase):
    """The stored form: pieces around the TTL fields, OPT removed."""

    def test_parse_segments(self):
        import dns.message
        import dns.rrset
        q = dns.message.make_query("x.example", "A", use_edns=0)
        r = dns.message.make_response(q)
        r.answer.append(dns.rrset.from_text("x.example.", 77, "IN", "A",
                                            "192.0.2.1", "192.0.2.2"))
        wire = r.to_wire()
        p = cachemod.parse(wire)
        self.assertEqual(p.counts, (2, 0, 0))
        self.assertEqual(p.ttls, [77, 77])
        self.assertEqual(len(p.segs), 3)
        rebuilt = wire[:12] + wire[12:12 + p.qlen] + b"\x00\x00\x00\x4d"\
            .join(p.segs)
        rebuilt = rebuilt[:10] + b"\x00\x00" + rebuilt[12:]
        m = dns.message.from_wire(rebuilt)
        self.assertEqual(m.answer[0].ttl, 77)
        self.assertEqual(cachemod.typify(p), cachemod.NOERROR)
