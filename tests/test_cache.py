"""cache: parsing, and the cache in front of forward and a scripted
upstream (query counts tell hits from misses; a fake clock ages entries)."""

import dns.edns
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.engines import response
from corednstw.plugins import cache as cachemod
from corednstw.plugins.cache import plugin as cacheplugin
from tests.support import cases, util
from tests.support.cases import Case
from tests.support.cases import rrset as _rrset
from tests.support.upstream import Upstream


def parse_cache(testcase, body):
    plugins, _ = util.build_plugins(testcase, ". {\n%s\n}\n" % body,
                                    "cache")
    return plugins[0]


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
                 "serve_stale_policy requires serve_stale"),
                ("cache {\n disable both\n }", "cache type for disable"),
                ("cache {\n bogus\n }", "Wrong argument count")]:
            with self.assertRaises(CorefileError) as cm:
                parse_cache(self, " " + body)
            self.assertIn(msg, str(cm.exception), body)

    def test_store_shards(self):
        s = cachemod.Store(1024)
        self.assertEqual(s.shard_size, 4)
        evictions = sum(s.add(("n%d." % i, 1, 1, False, False), i)
                        for i in range(5000))
        self.assertEqual(len(s), 1024)
        self.assertEqual(evictions, 5000 - 1024)

    def test_store_keys_follow_removals(self):
        # Each shard's key list holds exactly its map's keys, through
        # replacements, removals and evictions.
        s = cachemod.Store(1024)
        keys = [("n%d." % i, 1, 1, False, False) for i in range(3000)]
        for i, k in enumerate(keys):
            s.add(k, i)
            if i % 3 == 0:
                s.add(k, -i)        # replaced: no second key
            if i % 7 == 0:
                self.assertTrue(s.remove(k))
                self.assertFalse(s.remove(k))
        for shard, kl in zip(s.shards, s.keys):
            self.assertEqual(sorted(shard), sorted(kl))
            self.assertLessEqual(len(kl), s.shard_size)
        self.assertEqual(len(s), sum(len(x) for x in s.shards))

    def test_eviction_victim_random(self):
        # CoreDNS drops the key Go's randomly started map iteration gives
        # first.  Names asked in a cycle a little larger than the cache
        # then mostly stay cached; dropping the oldest would miss every
        # name of a full shard (46% hits here).
        import random

        from corednstw.plugins.cache import store
        self.patch(store, "_below", random.Random(7).randrange)
        s = cachemod.Store(9984)
        keys = [("n%d." % i, 1, 1, False, False) for i in range(10000)]
        for _ in range(3):
            hits = 0
            for k in keys:
                if s.get(k) is not None:
                    hits += 1
                else:
                    s.add(k, 1)
        self.assertLessEqual(len(s), 9984)
        self.assertGreater(hits / len(keys), 0.75)


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
        miss = Case("www.example", aa=False, answer=[
            "www.example. 300 IN A 192.0.2.1"])
        yield cases.run(self, self.port, [miss])
        self.clock.t += 100.4
        # owner names keep the case of the stored answer (CoreDNS's cache
        # sends the records it stored); the question is the client's
        yield cases.run(self, self.port, [Case(
            "WWW.Example", aa=True, ra=True, answer=[
                "www.example. 200 IN A 192.0.2.1"])], proto="tcp")
        self.assertEqual(self.up.count(), 1)
        self.clock.t += 200
        yield cases.run(self, self.port, [miss])
        self.assertEqual(self.up.count(), 2)
        after = (cachemod.REQUESTS.get(labels), cachemod.HITS.get(hl),
                 cachemod.MISSES.get(labels))
        self.assertEqual([a - b for a, b in zip(after, before)], [3, 1, 2])
        self.assertEqual(cachemod.ENTRIES.values[hl], 1)

    @defer.inlineCallbacks
    def test_ttl_cap_and_min(self):
        yield self.serve("cache 30")
        yield cases.run(self, self.port, [
            Case("a.example", answer=["a.example. 30 IN A 192.0.2.1"])])
        self.up.ttl = 1
        yield cases.run(self, self.port, [
            Case("b.example", answer=["b.example. 5 IN A 192.0.2.1"])])

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
    def test_notify_reply_flags_passed_through(self):
        # A NOTIFY is forwarded and its reply written through as the
        # upstream sent it: miekg's SetReply sets no RD for a NOTIFY.
        up = Upstream().start()

        def handler(q, proto):
            import dns.message
            r = dns.message.make_response(q)
            r.flags &= ~dns.flags.RD
            r.flags |= dns.flags.AA
            return r
        up.handler = handler
        yield self.serve(up=up)
        for _ in range(2):
            q = util.make_query("example.org.", "SOA")
            q.set_opcode(dns.opcode.NOTIFY)
            m = yield util.query(self.port, q)
            self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
            self.assertEqual(m.flags & (dns.flags.RD | dns.flags.AA),
                             dns.flags.AA)
        self.assertEqual(self.up.count(), 2)

    @defer.inlineCallbacks
    def test_notify_answered_from_cache_has_no_rd(self):
        # CoreDNS's cached answer is built by miekg's SetReply, which
        # copies RD (and CD) for a QUERY only: a NOTIFY answered from the
        # cache has RD clear whatever the client set.
        yield self.serve()
        yield self.q("n.example")
        q = util.make_query("n.example.", "A")
        q.set_opcode(dns.opcode.NOTIFY)
        m = yield util.query(self.port, q)
        self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
        self.assertEqual(dns.flags.to_text(m.flags), "QR AA RA")
        self.assertEqual(len(m.answer), 1)
        self.assertEqual(self.up.count(), 1)

    @defer.inlineCallbacks
    def test_odd_header_bits_and_class_go_upstream_as_sent(self):
        # A query with TC or Z set, or in class 42, is a miss asked of the
        # upstream as it came (miekg keeps TC and Z through the copy the
        # cache makes; forward lets any class through) and the upstream's
        # answer is the client's; from the cache, a reply carries neither
        # bit (SetReply sets them for no one).
        up = Upstream().start()
        seen = []

        def handler(q, proto):
            seen.append((q.flags & (dns.flags.TC | 0x40), q.question[0]
                         .rdclass))
            r = dns.message.make_response(q)
            r.answer.append(cases.rrset("%s 300 %s A \\# 4 c0000209" % (
                q.question[0].name,
                dns.rdataclass.to_text(q.question[0].rdclass))))
            return r
        up.handler = handler
        yield self.serve(up=up)
        for bits, rdclass in ((dns.flags.TC, "IN"), (0x40, "IN"),
                              (0, "CLASS42")):
            for _ in range(2):
                q = util.make_query("odd.example.", "A", rdclass)
                q.flags |= bits
                m = yield util.query(self.port, q)
                self.assertEqual(m.rcode(), dns.rcode.NOERROR)
                self.assertEqual(m.flags & (dns.flags.TC | 0x40), 0)
                self.assertEqual(len(m.answer), 1)
        # The Z query is the TC query's name, type and class: a hit.
        self.assertEqual(seen, [(dns.flags.TC, 1), (0, 42)])

    @defer.inlineCallbacks
    def test_relayed_error_keeps_upstream_ad(self):
        # The cache asks with AD set; a FORMERR or REFUSED that comes back
        # with AD clear goes to a DO (and AD) client with AD clear, as
        # CoreDNS's cache writes what it received.
        up = Upstream().start()

        def handler(q, proto):
            import dns.message
            r = dns.message.make_response(q)
            r.set_rcode(up.rcode)
            r.flags &= ~dns.flags.AD
            return r
        up.handler = handler
        yield self.serve(up=up)
        for rcode in (dns.rcode.FORMERR, dns.rcode.REFUSED):
            up.rcode = rcode
            for proto in ("udp", "tcp"):
                q = util.make_query("example.org.", "A", want_dnssec=True)
                q.flags |= dns.flags.AD
                m = yield self.q(q, proto=proto)
                self.assertEqual(m.rcode(), rcode)
                self.assertFalse(m.flags & dns.flags.AD)
        self.assertTrue(all(x[3].flags & dns.flags.AD
                            for x in self.up.queries))
        self.assertEqual(self.up.count(), 4)

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
        yield cases.run(self, self.port, [Case("k.example", aa=True, answer=[
            "k.example. 300 IN A 192.0.2.1"])])
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
        yield cases.run(self, self.port, [Case("p.example", answer=[
            "p.example. 300 IN A 192.0.2.1"])])

    @defer.inlineCallbacks
    def test_serve_stale_immediate(self):
        yield self.serve("cache {\n serve_stale 1h\n }",
                         options="{\n read_timeout 50ms\n max_fails 0\n}")
        yield self.q("s.example")
        self.up.silent = True
        self.clock.t += 400
        labels = (self.app.muxes[0].label, ".", "")
        st = cachemod.SERVED_STALE.get(labels)
        yield cases.run(self, self.port, [Case("s.example", answer=[
            "s.example. 0 IN A 192.0.2.1"])])
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
        yield cases.run(self, self.port, [Case("v.example", answer=[
            "v.example. 300 IN A 192.0.2.99"])])
        self.up.silent = True
        self.clock.t += 400
        yield cases.run(self, self.port, [Case("v.example", answer=[
            "v.example. 0 IN A 192.0.2.99"])])

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
        p = response.parse(wire)
        self.assertEqual(p.counts, (2, 0, 0))
        self.assertEqual(p.ttls, [77, 77])
        self.assertEqual(len(p.segs), 3)
        rebuilt = wire[:12] + wire[12:12 + p.qlen] + b"\x00\x00\x00\x4d"\
            .join(p.segs)
        rebuilt = rebuilt[:10] + b"\x00\x00" + rebuilt[12:]
        m = dns.message.from_wire(rebuilt)
        self.assertEqual(m.answer[0].ttl, 77)
        self.assertEqual(response.typify(p), response.NOERROR)

    def test_parse_owner_names(self):
        # Owners that point at the question and owners written out (other
        # case, another name) are read alike: lower-cased text.
        import dns.message
        import dns.rrset
        q = dns.message.make_query("X.Example", "A")
        r = dns.message.make_response(q)
        r.answer.append(dns.rrset.from_text("X.Example.", 5, "IN", "CNAME",
                                            "Y.example."))
        r.answer.append(dns.rrset.from_text("Y.EXAMPLE.", 5, "IN", "A",
                                            "192.0.2.1"))
        p = response.parse(r.to_wire())
        self.assertEqual(p.qname, "x.example.")
        self.assertEqual([a[0] for a in p.answers],
                         ["x.example.", "y.example."])
        self.assertTrue(response.answers_question(p))

    def test_refresh_request(self):
        # The AD-flagged copy equals what parsing its bytes gives.
        from corednstw.core.request import Request, make_query
        req = Request(make_query("Svc.Example.", 1, msgid=7, edns=1400,
                                 do=True), "::1", 53, "tcp")
        req.parse_question(*req.parse_header()[1:])
        req.zone, req.start = "example.", 3.5
        got = cacheplugin._refresh_request(req)
        want = req.copy(data=got.data)
        self.assertEqual(got.data[2:4], b"\x01\x20")
        for attr in ("id", "flags", "opcode", "qname", "name", "qtype",
                     "qclass", "qwire", "qend", "arcount", "tsig", "client",
                     "port", "proto", "family", "zone", "start"):
            self.assertEqual(getattr(got, attr), getattr(want, attr), attr)
        self.assertEqual((got.edns.size, got.edns.ttl),
                         (want.edns.size, want.edns.ttl))


# -- CoreDNS's cache tables (cache_test.go and friends) -----------------------

RRSIG_OLD = ("MX 8 2 1800 20160521031301 20160421031301 12051 miek.nl. "
             "lAaEzB5teQLLKyDenatmyhca7blLRg9DoGNrhe3NReBZN5C5/pMQk8Jc "
             "u25hv2fW23/SLm5IC2zaDpp2Fzgm6Jf7e90/yLcwQPuE7JjS55WMF+HE "
             "LEh7Z6AEb+Iq4BWmNhUz6gPxD4d9eRMs7EAzk13o1NYi5/JhfL6IlaYy qkc=")
RRSIG_2017 = RRSIG_OLD.replace("20160521031301 20160421031301",
                               "20170521031301 20170421031301")
SOA = ("example.org. %d IN SOA sns.dns.icann.org. noc.dns.icann.org. "
       "2016082540 7200 3600 1209600 3600")
#: Fri Apr 21 10:51:21 BST 2017, the tables' "now".
APRIL_2017 = 1492768281.0


class Harness:
    """A cache in front of a scripted backend, queried through the block
    mux (no sockets).  ``backend(query message) -> dnspython response``
    (or a Deferred of one); ``calls`` counts the backend's queries."""

    def __init__(self, testcase, options="", args="", now=1_000_000.0):
        from twisted.internet import reactor
        self.s = util.Direct(testcase, ".:0 {\n cache %s {\n%s\n }\n"
                                       " whoami\n}\n" % (args, options))
        self.cache = [p for p in self.s.app.config.plugins()
                      if p.name == "cache"][0]
        self.cache.reactor = reactor
        self.clock = Clock()
        self.clock.t = now
        self.cache.now = self.clock
        self.calls = 0
        self.backend = None
        self.cache.next = util.Stub(self._serve)

    def _serve(self, req):
        from corednstw.core.request import RawResponse
        self.calls += 1
        r = self.backend(req.message())
        if isinstance(r, defer.Deferred):
            return r.addCallback(lambda m: RawResponse(
                m.to_wire(max_size=65535), plugin="stub"))
        return RawResponse(r.to_wire(max_size=65535), plugin="stub")

    def query(self, name, rdtype="A", do=False, cd=False, ad=False,
              proto="udp"):
        q = util.make_query(name, rdtype, want_dnssec=do)
        if cd:
            q.flags |= dns.flags.CD
        if ad:
            q.flags |= dns.flags.AD
        return q

    def ask(self, *args, **kw):
        """The parsed answer (synchronous backends)."""
        import dns.message
        q = self.query(*args, **kw)
        data = self.s.ask(q.to_wire(), kw.get("proto", "udp"))
        return dns.message.from_wire(data)

    def ask_async(self, *args, **kw):
        import dns.message
        q = self.query(*args, **kw)
        return self.s.ask_async(q.to_wire()).addCallback(
            dns.message.from_wire)

    # backends of the Go tests
    @staticmethod
    def ttl_backend(ttl, address="127.0.0.53"):
        def fn(q):
            import dns.message
            r = dns.message.make_response(q)
            r.flags |= dns.flags.RA
            r.answer.append(_rrset("%s %d IN A %s" % (q.question[0].name,
                                                      ttl, address)))
            return r
        return fn

    @staticmethod
    def rcode_backend(rcode, ttl):
        def fn(q):
            import dns.message
            r = dns.message.make_response(q)
            r.flags |= dns.flags.RA
            r.set_rcode(rcode)
            r.authority.append(_rrset(SOA % ttl))
            return r
        return fn


class UncompressedTest(unittest.TestCase):
    """Entries are kept uncompressed, so hits go out as CoreDNS writes
    an answer that fits: without compression pointers."""

    def test_hit_uncompressed(self):
        h = Harness(self)

        def backend(q):
            import dns.message
            r = dns.message.make_response(q)
            r.answer.append(_rrset(
                "example.org. 300 IN MX 10 mx.example.org."))
            r.answer.append(_rrset("mx.example.org. 300 IN A 10.0.2.1"))
            return r
        h.backend = backend
        q = h.query("example.org.", "MX").to_wire()
        wires = [h.s.ask(q), h.s.ask(q)]
        self.assertEqual(h.calls, 1)
        for data in wires:
            self.assertNotIn(b"\xc0", data[12:])
            self.assertEqual(len(data), 12 + 17 + (13 + 10 + 2 + 16)
                             + (16 + 10 + 4))


class UnwrittenTest(unittest.TestCase):
    """An error no plugin wrote (a bare SERVFAIL) is written by CoreDNS's
    server around the plugins: the cache neither stores it nor sets AA."""

    def test_unwritten_servfail_not_cached(self):
        from corednstw.core import dnswire as w
        from corednstw.core.request import Response
        h = Harness(self)
        calls = []
        h.cache.next = util.Stub(
            lambda req: calls.append(req) or Response(w.SERVFAIL))
        for _ in range(2):
            m = h.ask("example.org.")
            cases.check_response(self, Case("example.org.", rcode="SERVFAIL",
                                            flags="QR RD"), m)
        self.assertEqual(len(calls), 2)
        self.assertEqual(len(h.cache.ncache), 0)


def _answer_ttls(m):
    return [rr.ttl for sec in (m.answer, m.authority) for rr in sec]


def _cached(rcode, ttl, desc):
    """cached.org.'s answer from the Go tests' backends, at ``ttl``: the A
    record of ``ttl_backend`` or the denial of ``rcode_backend``."""
    if rcode == 0:
        return Case("cached.org.", answer=[
            "cached.org. %d IN A 127.0.0.53" % ttl], desc=str(desc))
    return Case("cached.org.", rcode=rcode, ns=[SOA % ttl],
                desc=str(desc))


def _at_ttl(line, ttl):
    """A zone-file line with its TTL replaced by ``ttl`` (None: kept)."""
    if ttl is None:
        return line
    name, _, rest = line.split(None, 2)
    return "%s %d %s" % (name, ttl, rest)


class InsertionTableTest(unittest.TestCase):
    """TestCacheInsertion: a response goes in; a second query (lower-case
    name) hits or misses; a hit is AA with the stored RA/AD/CD and every
    TTL the clamped minimum."""

    CASES = [
        # name, qname, qtype, query flags (do, cd, ad), rcode, (ra, ad, tc),
        # answer, authority, cached, TTL on a hit
        ("ad bit", "miek.nl.", "MX", (False, False, True), 0,
         (True, True, False),
         ["miek.nl. 3601 IN MX 1 aspmx.l.google.com.",
          "miek.nl. 3601 IN MX 10 aspmx2.googlemail.com."], [], True, 3600),
        ("case sensitivity", "mIEK.nL.", "MX", (False, False, True), 0,
         (True, True, False),
         ["miek.nl. 3601 IN MX 1 aspmx.l.google.com.",
          "miek.nl. 3601 IN MX 10 aspmx2.googlemail.com."], [], True, 3600),
        ("truncated", "miek.nl.", "MX", (False, False, False), 0,
         (False, False, True),
         ["miek.nl. 1800 IN MX 1 aspmx.l.google.com."], [], False, None),
        ("NXDOMAIN", "example.org.", "A", (False, False, False), 3,
         (True, False, False), [], [SOA % 3600], True, 3600),
        ("NXDOMAIN without SOA", "1.1.168.192.in-addr.arpa.", "PTR",
         (False, False, False), 3, (True, False, False), [], [], False,
         None),
        ("SERVFAIL", "example.org.", "A", (False, False, False), 2,
         (True, False, False), [], [], True, None),
        ("NOTIMP", "example.org.", "A", (False, False, False), 4,
         (True, False, False), [], [], True, None),
        ("REFUSED", "example.org.", "A", (False, False, False), 5,
         (True, False, False), [], [], False, None),
        ("FORMERR", "example.org.", "A", (False, False, False), 1,
         (True, False, False), [], [], False, None),
        ("expired RRSIG", "miek.nl.", "MX", (True, False, False), 0,
         (True, False, False),
         ["miek.nl. 3600 IN MX 1 aspmx.l.google.com.",
          "miek.nl. 3600 IN MX 10 aspmx2.googlemail.com.",
          "miek.nl. 1800 IN RRSIG " + RRSIG_OLD], [], False, None),
        ("RRSIG not expired", "example.org.", "MX", (True, False, False), 0,
         (True, False, False),
         ["example.org. 3600 IN MX 1 aspmx.l.google.com.",
          "example.org. 3600 IN MX 10 aspmx2.googlemail.com.",
          "example.org. 1800 IN RRSIG " + RRSIG_2017], [], True, 1800),
        ("CD bit", "dnssec-failed.org.", "A", (False, True, False), 0,
         (False, False, False),
         ["dnssec-failed.org. 3600 IN A 127.0.0.1"], [], True, 3600),
        ("negative zone exception", "neg-disabled.example.org.", "A",
         (False, False, False), 3, (False, False, False), [], [SOA % 3600],
         False, None),
        ("positive zone exception", "pos-disabled.example.org.", "A",
         (False, False, False), 0, (False, False, False),
         ["pos-disabled.example.org. 3600 IN A 127.0.0.1"], [], False, None),
        ("positive exception, negative answer", "pos-disabled.example.org.",
         "A", (False, False, False), 3, (False, False, False), [],
         [SOA % 3600], True, 3600),
        ("negative exception, positive answer", "neg-disabled.example.org.",
         "A", (False, False, False), 0, (False, False, False),
         ["neg-disabled.example.org. 3600 IN A 127.0.0.1"], [], True, 3600),
        ("dangling CNAME chain", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target1.example.net.",
          "target1.example.net. 3600 IN CNAME target2.example.net."], [],
         False, None),
        ("CNAME chain to another type", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "target.example.net. 3600 IN AAAA ::1"], [], False, None),
        ("MX query, CNAME without MX", "alias.example.org.", "MX",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net."], [],
         False, None),
        ("MX query, CNAME to MX", "alias.example.org.", "MX",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "target.example.net. 3600 IN MX 10 mail.example.net."], [], True,
         3600),
        ("DNSSEC dangling CNAME", "alias.example.org.", "A",
         (True, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "alias.example.org. 3600 IN RRSIG " + RRSIG_2017.replace(
              "MX", "CNAME", 1)], [], False, None),
        ("CNAME with an unrelated A", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "unrelated.example.net. 3600 IN A 192.0.2.1"], [], False, None),
        ("lone CNAME to ANY", "alias.example.org.", "ANY",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net."], [], True,
         3600),
        ("CNAME chain to A", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "target.example.net. 3600 IN A 127.0.0.1"], [], True, 3600),
        ("CNAME chain to A out of order", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["target.example.net. 3600 IN A 127.0.0.1",
          "alias.example.org. 3600 IN CNAME target.example.net."], [], True,
         3600),
        ("CNAME to a CNAME query", "alias.example.org.", "CNAME",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net."], [], True,
         3600),
        ("two CNAME targets", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 3600 IN CNAME target1.example.net.",
          "alias.example.org. 3600 IN CNAME target2.example.net.",
          "target1.example.net. 3600 IN A 192.0.2.1"], [], False, None),
        ("CNAME loop", "alias.example.org.", "A", (False, False, False), 0,
         (True, False, False),
         ["alias.example.org. 3600 IN CNAME target.example.net.",
          "target.example.net. 3600 IN CNAME alias.example.org.",
          "alias.example.org. 3600 IN A 192.0.2.1"], [], False, None),
        ("CNAME chain with SOA is NODATA", "alias.example.org.", "A",
         (False, False, False), 0, (True, False, False),
         ["alias.example.org. 300 IN CNAME target.example.net."],
         [SOA % 60], True, 60),
    ]

    def backend(self, case):
        (_n, _q, _t, _fl, rcode, (ra, ad, tc), answer, ns, _c, _ttl) = case

        def fn(q):
            import dns.message
            r = dns.message.make_response(q)
            if q.ednsflags & dns.flags.DO:
                r.use_edns(0, dns.flags.DO, 1232)
            r.flags &= ~(dns.flags.RA | dns.flags.AD | dns.flags.TC)
            r.flags |= ((dns.flags.RA if ra else 0) | (dns.flags.AD if ad
                        else 0) | (dns.flags.TC if tc else 0))
            r.set_rcode(rcode)
            for line in answer:
                r.answer.append(_rrset(line))
            for line in ns:
                r.authority.append(_rrset(line))
            return r
        return fn

    def test_table(self):
        for case in self.CASES:
            (name, qname, qtype, (do, cd, ad), rcode, (ra, sad, _tc),
             answer, ns, cached, ttl) = case
            h = Harness(self, " disable denial neg-disabled.example.org\n"
                              " disable success pos-disabled.example.org",
                        args="3600", now=APRIL_2017)
            h.backend = self.backend(case)
            first = h.ask(qname, qtype, do=do, cd=cd, ad=ad)
            self.assertEqual(first.rcode(), rcode, name)
            self.assertFalse(first.flags & dns.flags.AA, name)
            m = h.ask(qname.lower(), qtype, do=do, cd=cd, ad=ad)
            self.assertEqual(h.calls, 1 if cached else 2, name)
            if not cached:
                continue
            # a hit: every record at the clamped TTL, flags as stored, and
            # owner names in the case of the stored answer
            stored = {str(r.name).lower(): str(r.name)
                      for r in first.answer + first.authority}
            cases.check_response(self, Case(
                qname.lower(), qtype, rcode, desc=name, aa=True, ra=ra,
                ad=sad and (do or ad), cd=cd,
                answer=[_stored_case(_at_ttl(x, ttl), stored)
                        for x in answer],
                ns=[_stored_case(_at_ttl(x, ttl), stored) for x in ns]), m)
            if ttl is not None:
                # the miss was answered with the same clamped TTLs
                self.assertEqual(set(_answer_ttls(first)), {ttl}, name)


def _stored_case(line, stored):
    """``line`` with its owner written as the stored answer wrote it."""
    owner, rest = line.split(" ", 1)
    return "%s %s" % (stored.get(owner.lower(), owner), rest)


class BehaviourTableTest(unittest.TestCase):
    """The rest of cache_test.go: TTL bounds, SERVFAIL, serve_stale (with
    its response TTL and verify), keepttl, negative entries not masking
    positive ones."""

    def test_zero_ttl_not_cached(self):
        h = Harness(self, " success 10000 3600 0\n denial 10000 1800 0")
        h.backend = h.ttl_backend(0)
        h.ask("example.org.")
        self.assertEqual((len(h.cache.pcache), len(h.cache.ncache)), (0, 0))

    def test_configured_max_above_default(self):
        h = Harness(self, " success 10000 7200 0")
        h.backend = h.ttl_backend(24 * 3600)
        m = h.ask("example.org.")
        self.assertEqual(m.answer[0].ttl, 7200)

    def test_compute_ttl(self):
        for msg, mn, mx, want in [(1800, 300, 3600, 1800),
                                  (299, 300, 3600, 300),
                                  (299, 0, 3600, 299),
                                  (3601, 300, 3600, 3600)]:
            h = Harness(self, " success 10000 %d %d" % (mx, mn))
            h.backend = h.ttl_backend(msg)
            self.assertEqual(h.ask("example.org.").answer[0].ttl, want)

    def test_servfail_ttl_zero(self):
        h = Harness(self, " servfail 0")
        h.backend = h.rcode_backend(dns.rcode.SERVFAIL, 0)
        h.ask("example.org.")
        self.assertEqual(len(h.cache.ncache), 0)

    def test_serve_from_stale(self):
        h = Harness(self, " serve_stale 1h")
        h.backend = h.ttl_backend(60)
        h.ask("cached.org.")
        self.assertEqual(len(h.cache.pcache), 1)
        start = h.clock.t

        def refused(q):
            import dns.message
            r = dns.message.make_response(q)
            r.set_rcode(dns.rcode.REFUSED)
            return r
        h.backend = refused
        for name, minutes, upstream in [
                ("cached.org.", 30, False), ("cached.org.", 60, False),
                ("cached.org.", 70, True), ("notcached.org.", 30, True),
                ("notcached.org.", 60, True), ("notcached.org.", 70, True)]:
            h.clock.t = start + minutes * 60
            calls = h.calls
            m = h.ask(name)
            if upstream:
                self.assertEqual(m.rcode(), dns.rcode.REFUSED)
            else:
                self.assertEqual(m.rcode(), 0)
            # a stale answer also starts one background refresh
            self.assertEqual(h.calls - calls, 1, (name, minutes))

    def test_stale_response_ttl(self):
        for config, rcode, advance, want in [
                ("serve_stale 1h immediate", 0, 120, 0),
                ("serve_stale 1h immediate 30s", 0, 120, 30),
                ("serve_stale 1h immediate 30s", 0, 60, 30),
                ("serve_stale 1h immediate 25s", 3, 120, 25),
                ("serve_stale 1h verify 0 45s", 0, 120, 45),
                ("serve_stale 1h immediate 17s\n keepttl", 0, 120, 17),
                ("serve_stale 1h immediate 30s", 0, 10, 50)]:
            h = Harness(self, " " + config)
            h.backend = (h.ttl_backend(60) if rcode == 0 else
                         h.rcode_backend(dns.rcode.NXDOMAIN, 60))
            self.assertEqual(h.ask("cached.org.").rcode(), rcode)
            h.clock.t += advance
            h.backend = h.rcode_backend(dns.rcode.SERVFAIL, 60)
            cases.check_response(self, _cached(rcode, want, config),
                                 h.ask("cached.org."))

    def test_stale_verify(self):
        h = Harness(self, " serve_stale 1h verify")
        h.backend = h.ttl_backend(120)
        h.ask("cached.org.")
        start = h.clock.t
        labels = (h.s.mux.label, ".", "")
        # (backend, minutes later, rcode, TTL, served stale)
        for backend, minutes, rcode, ttl, stale in [
                (h.ttl_backend(200), 1, 0, 60, False),
                (h.ttl_backend(200), 3, 0, 200, False),
                (h.rcode_backend(dns.rcode.SERVFAIL, 200), 7, 0, 0, True),
                (h.rcode_backend(dns.rcode.NXDOMAIN, 150), 8, 3, 150, False)]:
            h.backend = backend
            h.clock.t = start + minutes * 60
            before = cachemod.SERVED_STALE.get(labels)
            cases.check_response(self, _cached(rcode, ttl, minutes),
                                 h.ask("cached.org."))
            self.assertEqual(cachemod.SERVED_STALE.get(labels) - before,
                             1 if stale else 0, minutes)

    @defer.inlineCallbacks
    def test_stale_verify_timeout(self):
        """A slow upstream: the stale entry (with the stale TTL) is served
        at the timeout, the verify goes on and refreshes the entry."""
        from twisted.internet import reactor
        h = Harness(self, " serve_stale 1h verify 50ms 30s")
        h.backend = h.ttl_backend(120)
        h.ask("cached.org.")
        h.clock.t += 180
        pending = []

        def slow(q):
            d = defer.Deferred()
            pending.append((d, h.ttl_backend(60)(q)))
            return d
        h.backend = slow
        m = yield h.ask_async("cached.org.")
        self.assertEqual(_answer_ttls(m), [30])
        self.assertEqual(len(pending), 1)
        d, r = pending[0]
        d.callback(r)
        self.assertEqual(h.ask("cached.org.").answer[0].ttl, 60)
        self.assertEqual(h.calls, 2)
        self.assertTrue(reactor)

    @defer.inlineCallbacks
    def test_stale_verify_timeout_fast_upstream(self):
        h = Harness(self, " serve_stale 1h verify 500ms")
        h.backend = h.ttl_backend(120)
        h.ask("cached.org.")
        h.clock.t += 180
        h.backend = h.ttl_backend(200)
        m = yield h.ask_async("cached.org.")
        self.assertEqual(_answer_ttls(m), [200])
        self.assertTrue(m.flags & dns.flags.AA)

    def test_stale_verify_uncacheable_fresh_answer(self):
        """A verify answer that may not be stored (TTL 0) is still sent."""
        h = Harness(self, " serve_stale 1h verify\n success 10000 3600 0")
        h.backend = h.ttl_backend(120)
        h.ask("cached.org.")
        h.clock.t += 180
        h.backend = h.ttl_backend(0)
        m = h.ask("cached.org.")
        self.assertEqual(_answer_ttls(m), [0])
        self.assertEqual(h.calls, 2)

    def test_negative_stale_not_masking_positive(self):
        h = Harness(self, " serve_stale 10m")
        h.backend = h.rcode_backend(dns.rcode.NXDOMAIN, 60)
        self.assertEqual(h.ask("cached.org.").rcode(), 3)
        self.assertEqual((len(h.cache.ncache), len(h.cache.pcache)), (1, 0))

        def broken(q):
            raise AssertionError("no upstream query expected")
        h.backend = broken
        self.assertEqual(h.ask("cached.org.").rcode(), 3)
        h.clock.t += 300
        h.backend = h.ttl_backend(303)
        # stale NXDOMAIN served, the prefetch stores the positive answer
        self.assertEqual(h.ask("cached.org.").rcode(), 3)
        self.assertEqual((len(h.cache.ncache), len(h.cache.pcache)), (0, 1))
        h.backend = broken
        m = h.ask("cached.org.")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(_answer_ttls(m), [303])

    def test_servfail_does_not_shadow_positive(self):
        """A valid positive entry wins over a SERVFAIL entry of the same
        key (TestServfailDoesNotShadowPositiveCache)."""
        import dns.message
        h = Harness(self, " serve_stale 1h")
        h.backend = h.ttl_backend(120)
        h.ask("example.org.")
        q = util.make_query("example.org.", "A")
        fail = h.rcode_backend(dns.rcode.SERVFAIL, 5)(q).to_wire()
        p = response.parse(fail, int(h.clock.t))
        key = ("example.org.", 1, 1, False, False)
        h.cache.ncache.add(key, cachemod.Item.parsed(p, h.clock.t, 5))
        h.clock.t += 1
        m = h.ask("example.org.")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(h.calls, 1)
        # without the positive entry the SERVFAIL is served
        h.cache.pcache.remove(key)
        self.assertEqual(h.ask("example.org.").rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(h.calls, 1)

    def test_stale_refresh_does_not_store_servfail(self):
        """serve_stale immediate: the background refresh keeps only
        NOERROR/NXDOMAIN answers (RFC 8767), so the stale entry stays."""
        h = Harness(self, " serve_stale 1h")
        h.backend = h.ttl_backend(60)
        h.ask("cached.org.")
        h.clock.t += 120
        h.backend = h.rcode_backend(dns.rcode.SERVFAIL, 60)
        self.assertEqual(h.ask("cached.org.").rcode(), 0)
        self.assertEqual(len(h.cache.ncache), 0)
        self.assertEqual(h.ask("cached.org.").rcode(), 0)

    @defer.inlineCallbacks
    def test_stale_verify_timeout_uncacheable(self):
        """An NXDOMAIN without SOA (not cacheable) from a timed verify goes
        to the client as it is."""
        import dns.message
        h = Harness(self, " serve_stale 1h verify 1s")
        h.backend = h.ttl_backend(60)
        h.ask("cached.org.")
        h.clock.t += 120

        def nx(q):
            r = dns.message.make_response(q)
            r.set_rcode(dns.rcode.NXDOMAIN)
            return r
        h.backend = nx
        m = yield h.ask_async("cached.org.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual((m.answer, m.authority), ([], []))

    def test_cname_with_soa_is_nodata(self):
        h = Harness(self, "")

        def fn(q):
            r = h.ttl_backend(1)(q)
            r.answer = [_rrset("alias.example.org. 300 IN CNAME "
                               "missing.example.net.")]
            r.authority.append(_rrset(SOA % 300))
            return r
        h.backend = fn
        h.ask("alias.example.org.")
        self.assertEqual((len(h.cache.ncache), len(h.cache.pcache)), (1, 0))

    def test_keepttl(self):
        h = Harness(self, " keepttl")
        h.backend = h.ttl_backend(300)
        h.ask("example.org.")
        h.clock.t += 100
        self.assertEqual(h.ask("example.org.").answer[0].ttl, 300)


class MoreTablesTest(unittest.TestCase):
    """prefetch_test.go, ad_bit_test.go, dnssec_test.go, spoof_test.go,
    error_test.go, qclass_test.go, serve_stale_recheck_test.go."""

    def counting_backend(self, h, ttl):
        """127.0.0.1, .2, ... one address more per backend query."""
        def fn(q):
            return h.ttl_backend(ttl, "127.0.0.%d" % h.calls)(q)
        return fn

    def test_prefetch_table(self):
        for qname, ttl, prefetch, steps in [
                ("hits.reset.example.org.", 80, 1, [
                    (0, 80, 1, True, False, False),
                    (73, 7, 1, True, False, False),
                    (80, 73, 2, False, False, False)]),
                ("short.ttl.example.org.", 5, 1, [
                    (0, 5, 1, True, False, False),
                    (1, 4, 1, False, False, False),
                    (4, 1, 1, True, False, False),
                    (5, 4, 2, False, False, False)]),
                ("no.prefetch.example.org.", 30, 0, [
                    (0, 30, 1, True, False, False),
                    (15, 15, 1, False, False, False),
                    (29, 1, 1, False, False, False),
                    (30, 30, 2, True, False, False)]),
                ("do.prefetch.example.org.", 80, 1, [
                    (0, 80, 1, True, True, False),
                    (73, 7, 1, True, True, False),
                    (80, 73, 2, False, True, False),
                    (80, 80, 3, True, False, False)]),
                ("cd.prefetch.example.org.", 80, 1, [
                    (0, 80, 1, True, False, True),
                    (73, 7, 1, True, False, True),
                    (80, 73, 2, False, False, True),
                    (80, 80, 3, True, False, False)])]:
            opt = " prefetch %d" % prefetch if prefetch else ""
            h = Harness(self, opt)
            h.backend = self.counting_backend(h, ttl)
            start = h.clock.t
            for after, want_ttl, addr, fetch, do, cd in steps:
                h.clock.t = start + after
                calls = h.calls
                m = h.ask(qname, do=do, cd=cd)
                self.assertEqual(h.calls - calls, 1 if fetch else 0,
                                 (qname, after))
                cases.check_response(self, Case(qname, answer=[
                    "%s %d IN A 127.0.0.%d" % (qname, want_ttl, addr)],
                    desc="after %ds" % after), m)

    def test_prefetch_asks_with_ad(self):
        h = Harness(self, " prefetch 1 1m 90%")
        seen = []

        def fn(q):
            seen.append(bool(q.flags & dns.flags.AD))
            return h.ttl_backend(100)(q)
        h.backend = fn
        h.ask("invent.example.org.")
        h.clock.t += 50
        h.ask("invent.example.org.")
        self.assertEqual(seen, [True, True])

    def ad_backend(self, h, seen):
        def fn(q):
            seen.append(bool(q.flags & dns.flags.AD))
            r = h.ttl_backend(300)(q)
            r.flags |= dns.flags.AD
            return r
        return fn

    def test_ad_bit_not_partitioned(self):
        """The AD bit of a hit comes from the stored answer and this
        client's AD/DO, whichever client filled the entry."""
        for order in ((False, True), (True, False)):
            h = Harness(self, "")
            seen = []
            h.backend = self.ad_backend(h, seen)
            for ad in order:
                m = h.ask("invent.example.org.", ad=ad)
                self.assertEqual(bool(m.flags & dns.flags.AD), ad, order)
            # the backend was asked once, with AD set
            self.assertEqual(seen, [True])

    def test_ad_bit_stale_verify(self):
        h = Harness(self, " serve_stale 1h verify")
        seen = []
        h.backend = self.ad_backend(h, seen)
        h.ask("invent.example.org.")
        h.clock.t += 400
        m = h.ask("invent.example.org.", ad=True)
        self.assertEqual(seen, [True, True])
        self.assertTrue(m.flags & dns.flags.AD)

    def test_dnssec_and_plain_entries(self):
        """DO and non-DO queries are separate entries; each gets its own
        answer (RRSIGs only with DO), in either order."""
        def fn(q):
            import dns.message
            r = dns.message.make_response(q)
            r.flags |= dns.flags.AD
            r.answer.append(_rrset("invent.example.org. 1781 IN CNAME "
                                   "leptone.example.org."))
            if q.ednsflags & dns.flags.DO:
                r.use_edns(0, dns.flags.DO, 1232)
                r.answer.append(_rrset(
                    "invent.example.org. 1781 IN RRSIG CNAME 8 3 1800 "
                    "20301012085750 20200912082613 57411 example.org. "
                    "ijSv5FmsNjFviBcOFwQgqjt073lttxTTNqkno6oMa3DD3kC+"))
            r.answer.append(_rrset("leptone.example.org. 1781 IN A "
                                   "195.201.182.103"))
            return r
        for order in ((False, True), (True, False)):
            # a clock inside the signatures' validity
            h = Harness(self, "", now=1_800_000_000.0)
            h.backend = fn
            for _ in range(2):
                for do in order:
                    m = h.ask("invent.example.org.", do=do)
                    types = sorted(r.rdtype for r in m.answer)
                    self.assertEqual(len(types), 3 if do else 2)
                    self.assertEqual(bool(m.flags & dns.flags.AD), do)
            self.assertEqual(h.calls, 2)

    def test_spoofed_answers_not_cached(self):
        """An answer for another question name or type, or without the QR
        bit, is passed on but not stored (and counted as a drop)."""
        import dns.message
        import dns.name
        import dns.rrset

        def other_question(name, rdtype, line):
            def fn(q):
                r = dns.message.Message(q.id)
                r.flags = dns.flags.QR
                r.question.append(dns.rrset.RRset(
                    dns.name.from_text(name), 1,
                    dns.rdatatype.from_text(rdtype)))
                r.answer.append(_rrset(line))
                return r
            return fn

        def no_qr(q):
            r = dns.message.make_response(q)
            r.flags &= ~dns.flags.QR
            r.answer.append(_rrset("example.org. 60 IN A 127.0.0.53"))
            return r
        import dns.rdatatype
        for fn, rdtype in [
                (other_question("example.net.", "A",
                                "example.net. 60 IN A 127.0.0.53"), "A"),
                (other_question("example.org.", "MX",
                                "example.org. 60 IN MX 10 mail.example.org."),
                 "A"),
                (no_qr, "A")]:
            h = Harness(self, "")
            h.backend = fn
            before = sum(cachemod.DROPS.values.values())
            h.s.ask(h.query("example.org.", rdtype).to_wire())
            self.assertEqual(len(h.cache.pcache), 0)
            self.assertEqual(sum(cachemod.DROPS.values.values()) - before, 1)

    def test_formerr_not_cached(self):
        h = Harness(self, "")
        h.backend = h.rcode_backend(dns.rcode.FORMERR, 60)
        h.ask("example.org.")
        self.assertEqual((len(h.cache.pcache), len(h.cache.ncache)), (0, 0))

    def test_question_classes_separate(self):
        import dns.message
        import dns.rdataclass
        h = Harness(self, "")
        h.s = util.Direct(self, ".:0 {\n chaos\n cache\n whoami\n}\n")
        h.cache = [p for p in h.s.app.config.plugins()
                   if p.name == "cache"][0]
        h.cache.now = h.clock
        h.cache.next = util.Stub(h._serve)
        classes = []

        def fn(q):
            classes.append(q.question[0].rdclass)
            r = dns.message.make_response(q)
            if q.question[0].rdclass == dns.rdataclass.CH:
                r.set_rcode(dns.rcode.NXDOMAIN)
                r.authority.append(_rrset(
                    "cache-class.test. 60 CH SOA ns.cache-class.test. "
                    "hostmaster.cache-class.test. 1 60 60 60 60"))
            else:
                r.answer.append(_rrset("victim.cache-class.test. 60 IN A "
                                       "192.0.2.1"))
            return r
        h.backend = fn
        ch = util.make_query("victim.cache-class.test.", "A", "CH")
        m = dns.message.from_wire(h.s.ask(ch.to_wire()))
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        m = h.ask("victim.cache-class.test.")
        self.assertEqual((m.rcode(), len(m.answer)), (0, 1))
        self.assertEqual(classes, [dns.rdataclass.CH, dns.rdataclass.IN])

    def test_stale_failure_recheck_immediate(self):
        for prime, rcode in [(lambda h: h.ttl_backend(1), 0),
                             (lambda h: h.rcode_backend(3, 1), 3)]:
            h = Harness(self, " success 10000 3600 0\n denial 10000 1800 0\n"
                              " serve_stale 1h immediate 30s 30s")
            h.backend = prime(h)
            h.ask("cached.org.")
            start = h.clock.t
            h.clock.t = start + 2
            h.backend = h.rcode_backend(dns.rcode.SERVFAIL, 30)
            self.assertEqual(h.ask("cached.org.").rcode(), rcode)
            self.assertEqual(h.calls, 2)
            # the failed refresh holds further ones off for 30s
            self.assertEqual(h.ask("cached.org.").rcode(), rcode)
            self.assertEqual(h.calls, 2)
            h.clock.t = start + 33
            self.assertEqual(h.ask("cached.org.").rcode(), rcode)
            self.assertEqual(h.calls, 3)

    def test_stale_failure_recheck_verify(self):
        h = Harness(self, " success 10000 3600 0\n"
                          " serve_stale 1h verify 0 0s 30s")
        h.backend = h.ttl_backend(1)
        h.ask("cached.org.")
        start = h.clock.t
        h.clock.t = start + 2
        h.backend = h.rcode_backend(dns.rcode.SERVFAIL, 30)
        h.ask("cached.org.")
        h.ask("cached.org.")
        self.assertEqual(h.calls, 2)
        h.clock.t = start + 33
        self.assertEqual(h.ask("cached.org.").rcode(), 0)
        self.assertEqual(h.calls, 3)


class SetupTableTest(unittest.TestCase):
    """setup_test.go: settings from Corefile lines, and the lines that are
    errors."""

    def parse(self, text):
        return parse_cache(self, text)

    def test_setup(self):
        D = cachemod.DEFAULT_CAP
        for text, ncap, pcap, nttl, minnttl, pttl, minpttl, prefetch in [
                ("cache", D, D, 1800, 5, 3600, 5, 0),
                ("cache {\n}", D, D, 1800, 5, 3600, 5, 0),
                ("cache example.nl {\n success 10\n}", D, 10, 1800, 5, 3600,
                 5, 0),
                ("cache example.nl {\n success 10 1800 30\n}", D, 10, 1800, 5,
                 1800, 30, 0),
                ("cache example.nl {\n success 10\n denial 10 15\n}", 10, 10,
                 15, 5, 3600, 5, 0),
                ("cache example.nl {\n success 10\n denial 10 15 2\n}", 10,
                 10, 15, 2, 3600, 5, 0),
                ("cache 25 example.nl {\n success 10\n denial 10 15\n}", 10,
                 10, 15, 5, 25, 5, 0),
                ("cache 25 example.nl {\n success 10\n denial 10 15 5\n}", 10,
                 10, 15, 5, 25, 5, 0),
                ("cache aaa example.nl", D, D, 1800, 5, 3600, 5, 0),
                ("cache {\n prefetch 10\n}", D, D, 1800, 5, 3600, 5, 10)]:
            c = self.parse(text)
            self.assertEqual((c.ncap, c.pcap, c.nttl, c.minnttl, c.pttl,
                              c.minpttl, c.prefetch),
                             (ncap, pcap, nttl, minnttl, pttl, minpttl,
                              prefetch), text)
        self.assertEqual(self.parse("cache aaa example.nl").zones,
                         ["aaa.", "example.nl."])

    def test_errors(self):
        for text in [
                "cache example.nl {\n success\n denial 10 15\n}",
                "cache example.nl {\n success 15\n denial aaa\n}",
                "cache example.nl {\n positive 15\n negative aaa\n}",
                "cache 0 example.nl", "cache -1 example.nl",
                "cache 1 example.nl {\n positive 0\n}",
                "cache 1 example.nl {\n positive 0\n prefetch -1\n}",
                "cache 1 example.nl {\n prefetch 0 blurp\n}",
                "cache\n cache"]:
            with self.assertRaises(CorefileError, msg=text):
                self.parse(text)

    def test_serve_stale(self):
        for line, up_to, verify, timeout, ttl in [
                ("serve_stale", 3600, False, 0, 0),
                ("serve_stale 20m", 1200, False, 0, 0),
                ("serve_stale 1h20m", 4800, False, 0, 0),
                ("serve_stale 0m", 0, False, 0, 0),
                ("serve_stale 0", 0, False, 0, 0),
                ("serve_stale 0 verify", 0, True, 0, 0),
                ("serve_stale 0 immediate", 0, False, 0, 0),
                ("serve_stale 0 VERIFY", 0, True, 0, 0),
                ("serve_stale 1h immediate 30s", 3600, False, 0, 30),
                ("serve_stale 1h immediate 30s 30s", 3600, False, 0, 30),
                ("serve_stale 1h immediate 4294967295s", 3600, False, 0,
                 4294967295),
                ("serve_stale 1h immediate 0", 3600, False, 0, 0),
                ("serve_stale 1h immediate 0 0", 3600, False, 0, 0),
                ("serve_stale 1h verify 100ms", 3600, True, 0.1, 0),
                ("serve_stale 1h verify 100ms 30s", 3600, True, 0.1, 30),
                ("serve_stale 1h verify 100ms 30s 30s", 3600, True, 0.1, 30),
                ("serve_stale 1h verify 0", 3600, True, 0, 0),
                ("serve_stale 1h verify 0 1m", 3600, True, 0, 60),
                ("serve_stale 1h VERIFY 250ms", 3600, True, 0.25, 0)]:
            c = self.parse("cache {\n %s\n}" % line)
            self.assertEqual((c.stale_up_to, c.verify_stale, c.verify_timeout,
                              c.stale_ttl), (up_to, verify, timeout, ttl),
                             line)
        for line in [
                "serve_stale 20", "serve_stale -20m", "serve_stale aa",
                "serve_stale 1m nono", "serve_stale 0 after nono",
                "serve_stale 1h immediate 100ms",
                "serve_stale 1h immediate 4294967296s",
                "serve_stale 1h immediate -1s",
                "serve_stale 1h immediate garbage",
                "serve_stale 1h immediate 30s extra",
                "serve_stale 1h verify -1ms", "serve_stale 1h verify garbage",
                "serve_stale 1h verify 100ms 500ms",
                "serve_stale 1h verify 100ms -1s",
                "serve_stale 1h verify 100ms garbage",
                "serve_stale 1h verify 100ms 30s extra",
                "serve_stale 1h verify 100ms 30s 6m"]:
            with self.assertRaises(CorefileError, msg=line):
                self.parse("cache {\n %s\n}" % line)

    def test_servfail(self):
        for line, want in [("servfail 1s", 1), ("servfail 5m", 300),
                           ("servfail 0s", 0), ("servfail 0", 0)]:
            self.assertEqual(self.parse("cache {\n %s\n}" % line).failttl,
                             want, line)
        for line in ["servfail", "servfail 6m", "servfail 20",
                     "servfail -1s", "servfail aa", "servfail 1m invalid"]:
            with self.assertRaises(CorefileError, msg=line):
                self.parse("cache {\n %s\n}" % line)

    def test_disable_and_keepttl(self):
        for lines, nexcept, pexcept in [
                ("disable denial example.com example.org",
                 ["example.com.", "example.org."], []),
                ("disable success example.com example.org", [],
                 ["example.com.", "example.org."]),
                ("disable denial", ["."], []),
                ("disable success", [], ["."]),
                ("disable denial example.com example.org\n disable success "
                 "example.com example.org", ["example.com.", "example.org."],
                 ["example.com.", "example.org."])]:
            c = self.parse("cache {\n %s\n}" % lines)
            self.assertEqual((list(c.nexcept), list(c.pexcept)),
                             (nexcept, pexcept), lines)
        self.assertTrue(self.parse("cache {\n keepttl\n}").keepttl)
        for line in ["disable invalid example.com example.org",
                     "keepttl arg1"]:
            with self.assertRaises(CorefileError, msg=line):
                self.parse("cache {\n %s\n}" % line)


class PreferPositiveTest(unittest.TestCase):
    """serve_stale_policy prefer_positive (CoreDNS's TestPreferPositive*
    and the policy's setup table)."""

    def test_setup(self):
        parse = SetupTableTest.parse
        for lines, want in [
                ("serve_stale\n serve_stale_policy prefer_positive", True),
                ("serve_stale_policy PREFER_POSITIVE\n serve_stale", True),
                ("serve_stale", False)]:
            self.assertEqual(parse(self, "cache {\n %s\n}" % lines)
                             .prefer_positive, want, lines)
        for lines, msg in [
                ("serve_stale_policy prefer_positive",
                 "serve_stale_policy requires serve_stale"),
                ("serve_stale\n serve_stale_policy", "Wrong argument count"),
                ("serve_stale\n serve_stale_policy prefer_positive extra",
                 "Wrong argument count"),
                ("serve_stale\n serve_stale_policy invalid",
                 "invalid serve_stale_policy: invalid"),
                ("serve_stale\n serve_stale_policy prefer_positive\n "
                 "serve_stale_policy prefer_positive",
                 "serve_stale_policy can only be specified once")]:
            with self.assertRaises(CorefileError) as cm:
                parse(self, "cache {\n %s\n}" % lines)
            self.assertIn(msg, str(cm.exception), lines)

    def harness(self, extra=""):
        return Harness(self, " serve_stale 1h\n serve_stale_policy "
                             "prefer_positive" + extra)

    def test_positive_over_negative(self):
        """A stale positive entry is preferred to a fresh NXDOMAIN entry;
        without the policy the NXDOMAIN is served."""
        for policy, rcode in ((True, 0), (False, 3)):
            h = self.harness() if policy else Harness(self, " serve_stale 1h")
            h.backend = h.ttl_backend(60)
            h.ask("example.org.")
            h.clock.t += 120
            q = util.make_query("example.org.", "A")
            nx = h.rcode_backend(dns.rcode.NXDOMAIN, 300)(q).to_wire()
            key = ("example.org.", 1, 1, False, False)
            h.cache.ncache.add(key, cachemod.Item.parsed(
                response.parse(nx, int(h.clock.t)), h.clock.t, 300))
            self.assertEqual(h.ask("example.org.").rcode(), rcode, policy)

    def test_non_answer_not_preferred(self):
        """A positive entry that does not answer (a dangling CNAME) does
        not win over the NXDOMAIN (TestPreferPositiveRejectsNonAnswer)."""
        h = self.harness()
        q = util.make_query("alias.example.org.", "A")
        dangling = h.ttl_backend(60)(q)
        dangling.answer = [_rrset("alias.example.org. 60 IN CNAME "
                                  "missing.example.org.")]
        nx = h.rcode_backend(dns.rcode.NXDOMAIN, 300)(q)
        key = ("alias.example.org.", 1, 1, False, False)
        now = h.clock.t
        for cache, msg, ttl in ((h.cache.pcache, dangling, 60),
                                (h.cache.ncache, nx, 300)):
            p = response.parse(msg.to_wire(), int(now))
            item = cachemod.Item.parsed(p, now, ttl)
            item.answering = response.answers_question(p)
            cache.add(key, item)
        self.assertEqual(h.ask("alias.example.org.").rcode(), 3)
        self.assertEqual(h.calls, 0)

    def test_last_known_good_kept(self):
        """NOERROR refreshes that do not answer (empty, referral, data in
        the additional section) keep the last good answer in use."""
        def refresh(kind):
            def fn(q):
                import dns.message
                r = dns.message.make_response(q)
                if kind in ("referral", "glue"):
                    r.authority.append(_rrset("example.org. 60 IN NS "
                                              "ns.example.org."))
                if kind == "glue":
                    r.additional.append(_rrset("ns.example.org. 60 IN A "
                                               "192.0.2.53"))
                if kind == "extra":
                    r.additional.append(_rrset("cached.org. 60 IN A "
                                               "192.0.2.54"))
                return r
            return fn
        h = self.harness()
        h.backend = h.ttl_backend(60, "192.0.2.10")
        h.ask("cached.org.")
        for kind in ("empty", "referral", "glue", "extra"):
            h.clock.t += 120
            h.backend = refresh(kind)
            m = h.ask("cached.org.")
            self.assertEqual(util.rrs(m), ["cached.org. 0 IN A 192.0.2.10"],
                             kind)
            # the refresh replaced the entry, the good answer stays
            item = h.cache.pcache.get(("cached.org.", 1, 1, False, False))
            self.assertFalse(item.answering, kind)
            self.assertTrue(item.lkg.answering, kind)

    def test_last_known_good_only_within_stale_window(self):
        h = self.harness()
        h.backend = h.ttl_backend(60, "192.0.2.10")
        h.ask("cached.org.")
        h.clock.t += 120

        def empty(q):
            import dns.message
            return dns.message.make_response(q)
        h.backend = empty
        h.ask("cached.org.")             # stale answer, empty refresh kept
        h.clock.t += 2 * 3600
        h.backend = h.rcode_backend(dns.rcode.NXDOMAIN, 300)
        self.assertEqual(h.ask("cached.org.").rcode(), 3)

    def test_verify_keeps_stale_on_non_answers(self):
        def nodata(q):
            import dns.message
            r = dns.message.make_response(q)
            r.authority.append(_rrset(SOA % 300))
            return r

        def notimp(q):
            import dns.message
            r = dns.message.make_response(q)
            r.set_rcode(dns.rcode.NOTIMP)
            return r
        for name in ("NXDOMAIN", "NODATA", "SERVFAIL", "NOTIMP"):
            h = self.harness()
            h.cache.verify_stale = True
            h.backend = h.ttl_backend(60)
            h.ask("cached.org.")
            h.clock.t += 120
            h.backend = {
                "NXDOMAIN": h.rcode_backend(dns.rcode.NXDOMAIN, 300),
                "NODATA": nodata,
                "SERVFAIL": h.rcode_backend(dns.rcode.SERVFAIL, 300),
                "NOTIMP": notimp}[name]
            m = h.ask("cached.org.")
            self.assertEqual(m.rcode(), 0, name)
            self.assertEqual(_answer_ttls(m), [0], name)
            self.assertEqual(len(h.cache.ncache), 1, name)

    def test_verify_rejects_invalid_fresh_answers(self):
        def expired(q):
            import dns.message
            r = dns.message.make_response(q)
            r.use_edns(0, dns.flags.DO, 4096)
            r.answer.append(_rrset("cached.org. 60 IN A 192.0.2.20"))
            r.answer.append(_rrset(
                "cached.org. 60 IN RRSIG " + RRSIG_OLD.replace("MX", "A", 1)
                .replace("miek.nl.", "cached.org.")))
            return r

        def truncated(q):
            import dns.message
            r = dns.message.make_response(q)
            r.flags |= dns.flags.TC
            r.answer.append(_rrset("cached.org. 60 IN A 192.0.2.20"))
            return r
        for timeout in ("", " 1s"):
            for bad in (expired, truncated):
                h = Harness(self, " serve_stale 1h verify%s\n "
                                  "serve_stale_policy prefer_positive"
                            % timeout, now=APRIL_2017)
                h.backend = h.ttl_backend(60, "192.0.2.10")
                h.ask("cached.org.", do=True)
                h.clock.t += 120
                h.backend = bad
                m = h.ask("cached.org.", do=True)
                self.assertEqual(m.rcode(), 0)
                self.assertEqual(util.rrs(m),
                                 ["cached.org. 0 IN A 192.0.2.10"],
                                 (timeout, bad.__name__))


def ask_twice(testcase, answer, off, store, qname, qtype, options="",
              **kw):
    """Ask a cache (with ``options``) in front of ``answer(req)`` (a
    structured Response) twice, two seconds apart, with its quick path
    ``off`` (a method name) turned off or not: the two answers and the
    stored entry's fields, to compare a quick path with the general
    one."""
    h = Harness(testcase, options)
    if off:
        testcase.patch(h.cache, off, lambda *a: None)

    def serve(req):
        h.calls += 1
        return answer(req)
    h.cache.next = util.Stub(serve)
    q = h.query(qname, qtype, **kw)
    q.id = 4242
    wire = q.to_wire()
    first = h.s.ask(wire)
    h.clock.t += 2
    second = h.s.ask(wire)
    item = getattr(h.cache, store).get((qname.lower(), w.type_value(qtype),
                                        1, kw.get("do", False), False))
    testcase.assertEqual(h.calls, 1)
    from corednstw.plugins.cache import store as st
    return first, second, (list(item[st.SEGS]), item[st.AN], item[st.NS],
                           item[st.AR], item[st.HFLAGS] & w.RA,
                           item[st.HFLAGS] & w.AD, item[st.RCODE],
                           item[st.TTL], item[st.QLEN],
                           getattr(item, "answering", False))


class PlainMissTest(unittest.TestCase):
    """The quick miss path (a structured answer of the question's own
    records, as kubernetes, hosts or template give) stores and sends
    exactly what the general path reads back from the encoded bytes."""

    SHAPES = [
        ("svc.ns.svc.cluster.local.", "A", [("A", "10.0.0.1", 30)]),
        ("Svc.NS.svc.cluster.local.", "A", [("A", "10.0.0.%d" % i, 40 - i)
                                             for i in range(1, 4)]),
        ("svc.ns.svc.cluster.local.", "AAAA", [("AAAA", "fd00::1", 5)]),
        ("svc.ns.svc.cluster.local.", "SRV",
         [("SRV", "0 100 80 svc.ns.svc.cluster.local.", 30)]),
        # kubernetes' SRV: the targets' addresses as additional records
        # (one of them under the question's own name), the smallest TTL
        # among them
        ("_http._tcp.Web.ns.svc.cluster.local.", "SRV",
         [("SRV", "0 50 80 a.web.ns.svc.cluster.local.", 30),
          ("SRV", "0 50 80 b.web.ns.svc.cluster.local.", 30)],
         [("a.web.ns.svc.cluster.local.", "A", "10.0.0.1", 30),
          ("B.web.ns.svc.cluster.local.", "AAAA", "fd00::2", 12),
          (None, "A", "10.0.0.3", 30)]),
    ]

    def run_shape(self, qname, qtype, records, general, extra=(), **kw):
        from corednstw.core.request import Response

        def answer(req):
            return Response(0, [
                w.RR(req.name, w.type_value(t), ttl,
                     dns.rdata.from_text("IN", t, text).to_wire())
                for t, text, ttl in records], None, [
                w.RR(owner or req.name, w.type_value(t), ttl,
                     dns.rdata.from_text("IN", t, text).to_wire())
                for owner, t, text, ttl in extra], aa=True, plugin="stub")
        return ask_twice(self, answer, "_cut" if general else None,
                         "pcache", qname, qtype, **kw)

    def test_same_as_general_path(self):
        for qname, qtype, records, *extra in self.SHAPES:
            extra = extra[0] if extra else ()
            for kw in ({}, {"do": True}):
                quick = self.run_shape(qname, qtype, records, False, extra,
                                       **kw)
                general = self.run_shape(qname, qtype, records, True, extra,
                                         **kw)
                self.assertEqual(quick, general, (qname, qtype, kw))
                self.assertEqual(quick[2][3], len(extra))
                m = dns.message.from_wire(quick[0])
                want = min(min(r[2] for r in records),
                           min((r[3] for r in extra), default=3600), 3600)
                self.assertEqual({rr.ttl for rr in m.answer}, {want})
                self.assertEqual(
                    {rr.ttl for rr in m.additional if rr.rdtype != 41},
                    {want} if extra else set())
                self.assertEqual(str(m.question[0].name), qname)


    def test_entries_with_state_alike(self):
        # With serve_stale and prefer_positive every entry keeps state
        # (an Item): the quick path's is the general path's, and an
        # answer answers its question.
        from corednstw.core.request import Response
        from corednstw.plugins.cache import store as st

        def answer(req):
            return Response(0, [w.RR(req.name, w.A, 30, w.a_rdata(
                "10.0.0.1"))], aa=True, plugin="stub")
        opts = " serve_stale 1h\n serve_stale_policy prefer_positive"
        got = [ask_twice(self, answer, off, "pcache", "svc.ns.svc.cluster.",
                         "A", options=opts) for off in (None, "_cut")]
        self.assertEqual(got[0], got[1])
        self.assertTrue(got[0][2][-1])      # answering

        def entry(off):
            h = Harness(self, opts)
            if off:
                self.patch(h.cache, off, lambda *a: None)
            h.cache.next = util.Stub(answer)
            h.ask("svc.ns.svc.cluster.")
            return h.cache.pcache.get(("svc.ns.svc.cluster.", w.A, 1,
                                       False, False))
        for off in (None, "_cut"):
            item = entry(off)
            self.assertIsInstance(item, st.Item)
            self.assertEqual(item[st.TTL], 30)
        # Without those options an entry is a plain tuple (untracked by
        # the collector once it has looked at it).
        h = Harness(self)
        h.cache.next = util.Stub(answer)
        h.ask("svc.ns.svc.cluster.")
        item = h.cache.pcache.get(("svc.ns.svc.cluster.", w.A, 1, False,
                                   False))
        self.assertIs(type(item), tuple)

    def test_declined_once_then_general_path(self):
        # An answer the quick path does not take (a CNAME and its
        # target's address): it is asked once, declines, and the general
        # path stores it; the hit that follows is the same answer.
        from corednstw.core.request import Response
        h = Harness(self)
        target = "web.ns.svc.cluster.local."
        a = dns.rdata.from_text("IN", "A", "10.0.0.1").to_wire()
        h.cache.next = util.Stub(lambda req: Response(
            0, [w.RR(req.name, w.CNAME, 30, w.name_to_wire(target)),
                w.RR(target, w.A, 30, a)], aa=True, plugin="stub"))
        quick = h.cache._cut
        calls = []

        def counted(*args):
            out = quick(*args)
            calls.append(out is None)
            return out
        self.patch(h.cache, "_cut", counted)
        wire = h.query("www.ns.svc.cluster.local.", "A").to_wire()
        first = dns.message.from_wire(h.s.ask(wire))
        self.assertEqual(calls, [True])
        second = dns.message.from_wire(h.s.ask(wire))
        self.assertEqual(calls, [True])
        self.assertEqual(len(first.answer), 2)
        self.assertEqual(first.answer, second.answer)
        self.assertTrue(second.flags & dns.flags.AA)


class DenialMissTest(unittest.TestCase):
    """The quick path of a structured denial (NXDOMAIN, or NOERROR
    without answers, with the zone's SOA alone, as kubernetes, file or
    template give) stores and sends exactly what the general path reads
    back from the encoded bytes, and its hits match too."""

    SOA_TEXT = ("ns.dns.cluster.local. hostmaster.cluster.local. "
                "1712345678 7200 1800 86400 30")
    SHAPES = [
        # the search-path NXDOMAIN of a pod
        ("example.com.ns1.svc.cluster.local.", "A", 3, "cluster.local.", 5),
        ("Example.COM.svc.cluster.local.", "A", 3, "cluster.local.", 30),
        # NODATA of a Service's AAAA
        ("svc.ns.svc.cluster.local.", "AAAA", 0, "cluster.local.", 30),
        # NODATA at the apex itself: the owner is the question's name,
        # written as the client spelled it
        ("Cluster.Local.", "TXT", 0, "cluster.local.", 3600),
        # a TTL over the denial cap
        ("x.cluster.local.", "A", 3, "cluster.local.", 7200),
    ]

    def run_shape(self, qname, qtype, rcode, zone, ttl, general, **kw):
        from corednstw.core.request import Response
        soa = dns.rdata.from_text("IN", "SOA", self.SOA_TEXT).to_wire()

        def answer(req):
            owner = req.name if zone.lower() == req.name.lower() else zone
            return Response(rcode, [], [w.RR(owner, w.SOA, ttl, soa)],
                            aa=True, plugin="stub")
        return ask_twice(self, answer, "_cut" if general else None,
                         "ncache", qname, qtype, **kw)

    def test_same_as_general_path(self):
        for shape in self.SHAPES:
            for kw in ({}, {"do": True}):
                quick = self.run_shape(*shape, False, **kw)
                general = self.run_shape(*shape, True, **kw)
                self.assertEqual(quick, general, (shape, kw))
                m = dns.message.from_wire(quick[0])
                self.assertEqual(m.rcode(), shape[2])
                self.assertEqual(m.answer, [])
                self.assertEqual([rr.rdtype for rr in m.authority],
                                 [dns.rdatatype.SOA])
                self.assertEqual(m.authority[0].ttl, min(shape[4], 1800))
                later = dns.message.from_wire(quick[1])
                self.assertEqual(later.authority[0].ttl,
                                 min(shape[4], 1800) - 2)

    def test_other_denials_take_the_general_path(self):
        """A denial with more than the SOA (a second record) or with no
        SOA is left to the general path (the quick path declines it)."""
        from corednstw.core.request import Response
        soa = dns.rdata.from_text("IN", "SOA", self.SOA_TEXT).to_wire()
        other = dns.rdata.from_text(
            "IN", "SOA", self.SOA_TEXT.replace("1712345678", "2")).to_wire()
        ns = dns.rdata.from_text("IN", "NS", "ns.cluster.local.").to_wire()
        for authority in ([], [w.RR("cluster.local.", w.NS, 30, ns)],
                          [w.RR("cluster.local.", w.SOA, 30, soa),
                           w.RR("cluster.local.", w.SOA, 30, other)]):
            h = Harness(self)
            quick = h.cache._cut
            declined = []

            def store_denial(*a, quick=quick, declined=declined):
                out = quick(*a)
                declined.append(out is None)
                return out
            self.patch(h.cache, "_cut", store_denial)
            h.cache.next = util.Stub(lambda req, a=authority: Response(
                3, [], a, aa=True, plugin="stub"))
            data = h.s.ask(h.query("gone.cluster.local.").to_wire())
            self.assertEqual(data[3] & 0xF, 3)
            # NSCOUNT: every record passed on (dnspython would fold the
            # two SOAs into one)
            self.assertEqual(int.from_bytes(data[8:10], "big"),
                             len(authority))
            self.assertEqual(declined, [True])
