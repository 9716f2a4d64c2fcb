"""The response engine: Typify and Classify (CoreDNS's typify_test.go
cases), reading a wire response, cacheability and the minimal TTL."""

import dns.flags
import dns.message
import dns.rrset
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core import request as rq
from corednstw.engines import response as r
from corednstw.plugins.cache import plugin as cp


def msg(qname="example.org.", qtype="A", rcode=0, answer=(), ns=(),
        extra=(), edns=None, do=False):
    q = dns.message.make_query(qname, qtype)
    m = dns.message.make_response(q)
    m.set_rcode(rcode)
    for section, lines in ((m.answer, answer), (m.authority, ns),
                           (m.additional, extra)):
        for line in lines:
            name, ttl, cls, rtype, rdata = line.split(None, 4)
            section.append(dns.rrset.from_text(name, int(ttl), cls, rtype,
                                               rdata))
    if edns is not None or do:
        m.use_edns(0, dns.flags.DO if do else 0, edns or 1232)
    return m


def parsed(m, now=None):
    return r.parse(m.to_wire(), now)


SOA = ("example.org. 1800 IN SOA ns.example.org. admin.example.org. "
       "1 7200 3600 1209600 3600")
NS = "example.org. 300 IN NS ns.example.org."
A = "example.org. 300 IN A 192.0.2.1"
# An RRSIG valid only during April 2017.
RRSIG = ("example.org. 300 IN RRSIG NS 8 2 300 20170501000000 "
         "20170401000000 12345 example.org. AAAA")
IN_APRIL_2017 = 1492768281


class TypifyTest(unittest.TestCase):

    def test_parts(self):
        t = r.typify_parts
        cases = [
            # (opcode, qtype, rcode, an, ns types, expected)
            (0, w.A, w.NOERROR, 1, (), r.NOERROR),
            (0, w.A, w.NOERROR, 0, (), r.NOERROR),
            (0, w.A, w.NOERROR, 0, (w.SOA,), r.NODATA),
            (0, w.A, w.NOERROR, 0, (w.NS,), r.DELEGATION),
            (0, w.A, w.NOERROR, 0, (w.NS, w.SOA), r.NODATA),
            (0, w.A, w.NXDOMAIN, 0, (w.SOA,), r.NAMEERROR),
            (0, w.A, w.NXDOMAIN, 0, (), r.NAMEERROR),
            (0, w.A, w.NXDOMAIN, 1, (), r.OTHERERROR),
            (0, w.A, w.SERVFAIL, 0, (), r.SERVERERROR),
            (0, w.A, w.NOTIMP, 0, (), r.SERVERERROR),
            (0, w.A, w.REFUSED, 0, (), r.OTHERERROR),
            (0, w.A, w.REFUSED, 0, (w.NS,), r.OTHERERROR),
            (0, w.AXFR, w.NOERROR, 3, (), r.META),
            (0, w.IXFR, w.NOERROR, 3, (), r.META),
            (w.OPCODE_NOTIFY, w.SOA, w.NOERROR, 0, (), r.META),
            (5, w.SOA, w.NOERROR, 0, (), r.UPDATE),
        ]
        for opcode, qtype, rcode, an, ns, want in cases:
            self.assertEqual(r.typify_parts(opcode, qtype, rcode, an, ns),
                             want, (opcode, qtype, rcode, an, ns))
        # Expired signatures make an answer an error, but meta stays meta.
        self.assertEqual(t(0, w.A, 0, 1, (), expired=True), r.OTHERERROR)
        self.assertEqual(t(0, w.AXFR, 0, 1, (), expired=True), r.META)

    def test_names_and_classes(self):
        self.assertEqual(
            [(r.type_text(t), r.classify(t)) for t in range(8)],
            [("NOERROR", "success"), ("NXDOMAIN", "denial"),
             ("SERVERERROR", "error"), ("NODATA", "denial"),
             ("DELEGATION", "success"), ("META", "error"),
             ("UPDATE", "error"), ("OTHERERROR", "error")])
        self.assertEqual(r.CLASSES, ("all", "success", "denial", "error"))

    def test_parsed(self):
        cases = [
            (msg(answer=[A]), r.NOERROR),
            (msg(ns=[SOA]), r.NODATA),
            (msg(rcode=3, ns=[SOA]), r.NAMEERROR),
            (msg(ns=[NS]), r.DELEGATION),
            (msg(rcode=2), r.SERVERERROR),
            (msg(qtype="AXFR", answer=[SOA]), r.META),
        ]
        for m, want in cases:
            self.assertEqual(r.typify(parsed(m)), want, m)

    def test_rrsig_expiry(self):
        # Outside its period the signature only counts with DO set, and
        # only when the parse had a clock (as cache parses).
        m = msg(ns=[NS, RRSIG])
        self.assertEqual(r.typify(parsed(m, IN_APRIL_2017)), r.DELEGATION)
        self.assertEqual(r.typify(parsed(m, IN_APRIL_2017 + 90 * 86400)),
                         r.DELEGATION)
        m = msg(ns=[NS, RRSIG], do=True)
        self.assertEqual(r.typify(parsed(m, IN_APRIL_2017)), r.DELEGATION)
        late = parsed(m, IN_APRIL_2017 + 90 * 86400)
        self.assertTrue(late.expired)
        self.assertEqual(r.typify(late), r.OTHERERROR)
        self.assertEqual(r.typify(parsed(m)), r.DELEGATION)


class SectionsTest(unittest.TestCase):

    def test_counts_and_types(self):
        m = msg(answer=[A], ns=[NS, SOA], extra=[A], edns=1232)
        an, types = r.sections(m.to_wire())
        self.assertEqual((an, types), (1, {w.NS, w.SOA}))

    def test_malformed(self):
        wire = msg(ns=[SOA]).to_wire()
        self.assertRaises(w.FormatError, r.sections, wire[:-4])


class ParseTest(unittest.TestCase):

    def test_opt_dropped(self):
        p = parsed(msg(answer=[A], extra=[A], edns=1232, do=True))
        self.assertEqual(p.counts, (1, 0, 1))
        self.assertEqual(p.ttls, [300, 300])
        self.assertTrue(p.do)
        self.assertEqual(len(p.segs), 3)

    def test_refused(self):
        q = dns.message.make_query("example.org.", "A")
        two = msg(answer=[A]).to_wire()
        wire = bytearray(two)
        wire[5] = 2       # two questions
        self.assertIsNone(r.parse(bytes(wire)))
        self.assertIsNone(r.parse(two[:-2]))
        self.assertIsNone(r.parse(q.to_wire()[:8]))

    def test_opt_not_last(self):
        m = msg(answer=[A], edns=1232)
        wire = m.to_wire()
        # Claim one more additional record after the OPT.
        wire = bytearray(wire[:11] + bytes([2]) + wire[12:]) + \
            w.name_to_wire("example.org.") + \
            bytes([0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 192, 0, 2, 9])
        self.assertIsNone(r.parse(bytes(wire)))

    def test_answers_question(self):
        chain = ["www.example.org. 300 IN CNAME a.example.org.",
                 "a.example.org. 300 IN A 192.0.2.1"]
        p = parsed(msg("www.example.org.", answer=chain))
        self.assertTrue(r.answers_question(p))
        self.assertEqual(r.response_type(p), r.NOERROR)
        dangling = parsed(msg("www.example.org.", answer=chain[:1],
                              ns=[SOA]))
        self.assertFalse(r.answers_question(dangling))
        self.assertTrue(r.is_nodata(dangling))
        # NOERROR by Typify, NODATA for the cache (SOA, no answer).
        self.assertEqual(r.typify(dangling), r.NOERROR)
        self.assertEqual(r.response_type(dangling), r.NODATA)
        loop = parsed(msg("www.example.org.", answer=[
            "www.example.org. 300 IN CNAME a.example.org.",
            "a.example.org. 300 IN CNAME www.example.org."]))
        self.assertFalse(r.answers_question(loop))


class CacheRulesTest(unittest.TestCase):

    def test_cacheable(self):
        cases = [
            (msg(answer=[A]), True),
            (msg(ns=[SOA]), True),
            (msg(rcode=3, ns=[SOA]), True),
            (msg(rcode=3), False),                     # no SOA
            (msg(rcode=2), True),
            (msg(rcode=5), False),
            (msg(qtype="AXFR", answer=[SOA]), False),
            (msg(qtype="AAAA", answer=[A]), False),    # no answer, no SOA
        ]
        for m, want in cases:
            p = parsed(m)
            self.assertEqual(r.cacheable(p, r.response_type(p)), want, m)
        tc = msg(answer=[A])
        tc.flags |= dns.flags.TC
        p = parsed(tc)
        self.assertFalse(r.cacheable(p, r.response_type(p)))

    def test_minimal_ttl(self):
        # dnsutil's TestMinimalTTL: the SOA's own TTL, not its minimum.
        p = parsed(msg("z.alm.im.", ns=[
            "alm.im. 1800 IN SOA ivan.ns.cloudflare.com. "
            "dns.cloudflare.com. 2025042470 10000 2400 604800 3600"]))
        self.assertEqual(r.typify(p), r.NODATA)
        self.assertEqual(r.minimal_ttl(p, r.NODATA), 1800)
        self.assertEqual(r.minimal_ttl(p, r.NODATA, 600), 600)
        # The smallest TTL of every section; the OPT's does not count.
        p = parsed(msg(answer=[A], ns=[NS.replace("300", "40")],
                       extra=["ns.example.org. 20 IN A 192.0.2.53"],
                       edns=1232, do=True))
        self.assertEqual(r.minimal_ttl(p, r.NOERROR), 20)
        # No records (or only the OPT), other types: the default.
        p = parsed(msg(edns=1232))
        self.assertEqual(r.minimal_ttl(p, r.NOERROR), 5)
        p = parsed(msg(answer=[A]))
        self.assertEqual(r.minimal_ttl(p, r.SERVERERROR), 5)
        self.assertEqual(r.minimal_ttl(p, r.DELEGATION), 5)


class ParseReplyTest(unittest.TestCase):
    """parse_reply: a relayed reply's Parsed, the one-pass reading of the
    usual shape field for field the expanded message's parse."""

    def general(self, wire, now=None):
        try:
            wire = w.expand_message(wire)
        except w.FormatError:
            pass
        return r.parse(wire, now)

    def same(self, wire, now=None):
        got, want = r.parse_reply(wire, now), self.general(wire, now)
        if want is None:
            self.assertIsNone(got)
            return None
        for f in r.Parsed.__slots__:
            self.assertEqual(getattr(got, f, "-"), getattr(want, f, "-"),
                             (f, wire))
        return got

    def test_shapes(self):
        a2 = "example.org. 60 IN A 192.0.2.2"
        aaaa = "example.org. 30 IN AAAA 2001:db8::1"
        txt = 'example.org. 20 IN TXT "a b" "c"'
        cname = "example.org. 300 IN CNAME www.example.org."
        www = "www.example.org. 300 IN A 192.0.2.9"
        shapes = [
            msg(answer=[A]), msg(answer=[A, a2]), msg(answer=[A], do=True),
            msg(answer=[A, a2], edns=4096), msg(qtype="AAAA", answer=[aaaa]),
            msg(qtype="TXT", answer=[txt], edns=1232), msg(),
            msg(edns=1232), msg(rcode=3, ns=[SOA]), msg(ns=[SOA], do=True),
            msg(answer=[cname, www]), msg(answer=[A], extra=[A]),
            msg(qname="ExAmple.ORG.", answer=["EXAMPLE.org. 5 IN A 1.2.3.4"]),
            msg(answer=[A, RRSIG], do=True), msg(answer=[A], ns=[NS]),
        ]
        quick = 0
        for m in shapes:
            # As sent (compressed), and as expanded already.
            for wire in (m.to_wire(), w.expand_message(m.to_wire())):
                got = self.same(wire, IN_APRIL_2017)
                if got is not None and r._parse_pointed(wire) is not None:
                    quick += 1
        self.assertGreaterEqual(quick, 9)

    def test_odd_messages(self):
        wire = msg(answer=[A, "example.org. 60 IN A 192.0.2.2"],
                   edns=1232).to_wire()
        cases = [wire, wire + b"trailing", wire[:-3], wire[:20], wire[:12],
                 wire[:2] + b"\x00\x02" + wire[4:]]
        # OPT not last: the counts say one more additional record.
        b = bytearray(wire)
        b[11] += 1
        cases.append(bytes(b) + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05"
                     b"\x00\x04\x01\x02\x03\x04")
        # A pointer elsewhere than the question.
        b = bytearray(wire)
        i = wire.index(b"\xc0\x0c")
        b[i + 1] = 13
        cases.append(bytes(b))
        for c in cases:
            self.same(c)


class RelayedPiecesTest(unittest.TestCase):
    """relayed_pieces: the usual upstream reply cut for the cache in one
    pass.  A cache in front of a stand-in upstream answers every reply
    shape alike with the quick cut and with it turned off (the general
    path of parse_reply): the bytes sent on the miss and on the hit, and
    the entries stored."""

    def ask(self, qname, qtype, edns, do, flags):
        q = dns.message.make_query(qname, qtype)
        q.flags = flags
        if edns:
            q.use_edns(0, dns.flags.DO if do else 0, 1232)
        q.id = 4242
        req = rq.Request(q.to_wire(), "127.0.0.1", 4000)
        qd, an, ns, ar = req.parse_header()
        req.parse_question(an, ns, ar)
        req.server, req.view = "dns://:53", ""
        return q, req

    def run_cache(self, reply, qname, qtype, edns, do, flags, quick):
        class Up:
            name = "forward"

            def serve(self, req):
                return rq.RawResponse.prebuilt(reply, "forward")

        c = cp.Cache()
        c.build()
        c.next = Up()
        c.now = lambda: 1_000_000.0
        if not quick:
            self.patch(cp, "relayed_pieces", lambda *a: None)
        sent = []
        for _ in range(2):
            _, req = self.ask(qname, qtype, edns, do, flags)
            out = c.serve(req)
            sent.append((out.raw, out.plugin, out.rcode))
        stored = [dict(s) for s in c.pcache.shards if s] + \
            [dict(s) for s in c.ncache.shards if s]
        return sent, stored

    def test_same_as_general_path(self):
        aaaa = "example.org. 30 IN AAAA 2001:db8::1"
        txt = 'example.org. 20 IN TXT "a b" "c"'
        replies = [
            ("A", msg(answer=[A])),
            ("A", msg(answer=[A, "example.org. 60 IN A 192.0.2.2"])),
            ("A", msg(answer=[A], edns=4096)),
            ("A", msg(answer=[A], do=True)),
            ("AAAA", msg(qtype="AAAA", answer=[aaaa], edns=1232)),
            ("TXT", msg(qtype="TXT", answer=[txt])),
            ("A", msg(qname="ExAmple.ORG.",
                      answer=["EXAMPLE.org. 5 IN A 1.2.3.4"])),
            ("A", msg(answer=[A], extra=[A])),
            ("A", msg(answer=[A], ns=[NS])),
            ("A", msg(rcode=3, ns=[SOA])),
            ("A", msg(answer=["example.org. 300 IN CNAME www.example.org.",
                              "www.example.org. 300 IN A 192.0.2.9"])),
            ("A", msg(qname="other.org.", answer=[
                "other.org. 300 IN A 192.0.2.1"])),
            ("A", msg(qtype="AAAA", answer=[aaaa])),
            ("A", msg(answer=["example.org. 2000000 IN A 192.0.2.1"])),
            ("A", msg(answer=["example.org. 0 IN A 192.0.2.1"])),
        ]
        quick = 0
        for qtype, m in replies:
            for bits in (0, dns.flags.AD, dns.flags.RA | dns.flags.AA):
                m.flags = (m.flags & ~(dns.flags.AD | dns.flags.AA
                                       | dns.flags.RA)) | bits
                for rd in (dns.flags.RD, 0):
                    # A reply whose RD differs from the query's, once.
                    m.flags = (m.flags & ~dns.flags.RD) | rd
                    wire = m.to_wire()
                    for edns, do, flags in ((False, False, dns.flags.RD),
                                            (True, True, dns.flags.RD),
                                            (True, False, dns.flags.AD
                                             | dns.flags.RD | dns.flags.CD)):
                        _, req = self.ask("example.ORG.", qtype, edns, do,
                                          flags)
                        if r.relayed_pieces(wire, req, "forward"):
                            quick += 1
                        got = self.run_cache(wire, "example.ORG.", qtype,
                                             edns, do, flags, True)
                        want = self.run_cache(wire, "example.ORG.", qtype,
                                              edns, do, flags, False)
                        self.assertEqual(got, want, (m.to_text(), flags))
        self.assertGreater(quick, 40)

    def test_odd_replies_left_to_general_path(self):
        _, req = self.ask("example.org.", "A", True, False, dns.flags.RD)
        wire = msg(answer=[A], edns=1232).to_wire()
        self.assertIsNotNone(r.relayed_pieces(wire, req, "forward"))
        b = bytearray(wire)
        b[11] += 1      # an additional record the message lacks
        cases = [wire[:-1], wire[:-12], wire[:req.qend], wire[:12],
                 bytes(b), wire[:2] + b"\x00\x00" + wire[4:]]
        for c in cases:
            self.assertIsNone(r.relayed_pieces(c, req, "forward"), c)
