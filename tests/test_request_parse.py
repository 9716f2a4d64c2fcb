"""Request.parse_question: a question name asked before is found by its
bytes instead of walked; the fields must be those of the walk."""

import dns.edns
import dns.message
from twisted.trial import unittest

from corednstw.core import request as rq


def _fields(data, longest=255):
    r = rq.Request(data)
    qd, an, ns, ar = r.parse_header()
    r.parse_question(an, ns, ar, longest)
    e = r.edns
    return (r.qwire, r.name, r.qname, r.qtype, r.qclass, r.qend, r.data,
            r.arcount, None if e is None else (e.size, e.ttl, e.options))


class KnownNameTest(unittest.TestCase):

    def setUp(self):
        self.patch(rq, "_NAMES", {})

    def _twice(self, wire, longest=255):
        """Fields of the first parse (walked) and the second (from the
        table, where the fast path applies)."""
        first = _fields(wire, longest)
        return first, _fields(wire, longest)

    def test_plain_question(self):
        q = dns.message.make_query("WwW.Example.org.", "AAAA").to_wire()
        first, second = self._twice(q)
        self.assertEqual(first, second)
        self.assertEqual(second[1:4], ("WwW.Example.org.", "www.example.org.",
                                       28))

    def test_with_an_empty_opt(self):
        q = dns.message.make_query("a.example.", "A", use_edns=0,
                                   payload=1232, want_dnssec=True).to_wire()
        first, second = self._twice(q)
        self.assertEqual(first, second)
        self.assertEqual(second[-1], (1232, 0x8000, []))

    def test_opt_with_options_is_walked(self):
        q = dns.message.make_query(
            "a.example.", "A", use_edns=0,
            options=[dns.edns.GenericOption(10, b"12345678")]).to_wire()
        first, second = self._twice(q)
        self.assertEqual(first, second)
        self.assertEqual(second[-1][2], [(10, b"12345678")])

    def test_root_and_trailing_bytes(self):
        q = dns.message.make_query(".", "NS").to_wire()
        first, second = self._twice(q)
        self.assertEqual(first, second)
        # Bytes after the question: not where a known name ends, so the
        # question is walked and the message cut after it.
        first, second = self._twice(q + b"\x00\x00")
        self.assertEqual(first, second)
        self.assertEqual(second[6], q)

    def test_name_longer_than_the_limit_still_refused(self):
        # 305 octets: only a question made inside the server (rewrite)
        # may pass 255.
        qwire = (b"\x3c" + b"a" * 60) * 5 + b"\x00"
        q = (b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + qwire
             + b"\x00\x01\x00\x01")
        _fields(q, longest=400)         # remembered under a larger limit
        with self.assertRaises(rq.w.FormatError):
            _fields(q)


class AddressPiecesTest(unittest.TestCase):
    """request.address_pieces: the Pieces request.pieces cuts from the
    same answer made of records, field for field."""

    def test_same_as_the_cut_of_records(self):
        from corednstw.core import dnswire as w
        rds = {w.A: [bytes([10, 0, 0, i]) for i in (1, 2, 3)],
               w.AAAA: [bytes(15) + b"\x01", bytes(15) + b"\x02"]}
        for qname in ("svc.ns.svc.cluster.local.", "SVC.Ns.svc.Cluster.",
                      "."):
            for qtype, all_rds in rds.items():
                for n in (1, len(all_rds)):
                    req = rq.Request(dns.message.make_query(
                        qname, qtype).to_wire())
                    qd, an, ns, ar = req.parse_header()
                    req.parse_question(an, ns, ar)
                    got = rq.address_pieces(req, all_rds[:n], 30, "k")
                    want = rq.pieces(req, rq.Response(
                        0, [w.RR(req.name, qtype, 30, rd)
                            for rd in all_rds[:n]], aa=True, plugin="k"))
                    self.assertIsNotNone(want)
                    self.assertEqual(got, want, (qname, qtype, n))
                    self.assertIs(got.__class__, tuple)
