"""Wire helpers: names, records, skipping."""

import struct

import dns.message
import dns.rrset
from twisted.trial import unittest

from corednstw.core import dnswire as w


def answer_wire():
    q = dns.message.make_query("a.example.org.", "A")
    m = dns.message.make_response(q)
    m.answer.append(dns.rrset.from_text("a.example.org.", 30, "IN", "A",
                                        "192.0.2.1"))
    return m.to_wire()


class SkipTest(unittest.TestCase):

    def test_skip_compressed_owner(self):
        data = answer_wire()
        qend = 12 + len(w.name_to_wire("a.example.org.")) + 4
        end, rtype, rclass, ttl, rdata = w.skip_rr(data, qend)
        self.assertEqual((end, rtype, rclass, ttl, rdata),
                         (len(data), w.A, 1, 30, bytes([192, 0, 2, 1])))

    def test_forward_pointer_rejected(self):
        data = bytearray(answer_wire())
        qend = 12 + len(w.name_to_wire("a.example.org.")) + 4
        struct.pack_into("!H", data, qend, 0xC000 | qend)  # points at itself
        self.assertRaises(w.FormatError, w.skip_rr, bytes(data), qend)

    def test_overrun(self):
        data = answer_wire()
        self.assertRaises(w.FormatError, w.skip_rr, data[:-3],
                          12 + len(w.name_to_wire("a.example.org.")) + 4)

    def test_name_round_trip(self):
        for name in (".", "a.", "Example.ORG.", "a\\.b.c.", "x\\032y.org."):
            wire = w.name_to_wire(name)
            self.assertEqual(w.read_name(wire, 0), (name.replace(
                "\\032", "\\ "), len(wire)))


def sections_wire():
    """A response with two answers, an authority NS and an OPT."""
    q = dns.message.make_query("a.example.org.", "A", use_edns=0)
    m = dns.message.make_response(q)
    m.answer.append(dns.rrset.from_text("a.example.org.", 30, "IN", "A",
                                        "192.0.2.1", "192.0.2.2"))
    m.authority.append(dns.rrset.from_text("example.org.", 60, "IN", "NS",
                                           "ns.example.org."))
    m.use_edns(0, payload=1232)
    return m.to_wire()


class WalkTest(unittest.TestCase):
    """skip_question and iter_records: one walk over a message."""

    def test_records(self):
        data = sections_wire()
        qend = w.skip_question(data, 12)
        self.assertEqual(qend, 12 + len(w.name_to_wire("a.example.org."))
                         + 4)
        recs = list(w.iter_records(data, qend, 4))
        self.assertEqual([(r[1], r[2], r[3]) for r in recs],
                         [(w.A, 1, 30), (w.A, 1, 30), (w.NS, 1, 60),
                          (w.OPT, 1232, 0)])
        # Each record starts where the last one ended; the last ends the
        # message; the values agree with skip_rr.
        off = qend
        for owner, rtype, rclass, ttl, rdata, end in recs:
            self.assertEqual(owner, off)
            self.assertEqual(w.skip_rr(data, owner),
                             (end, rtype, rclass, ttl, data[rdata:end]))
            self.assertEqual(struct.unpack_from("!I", data, rdata - 6)[0],
                             ttl)
            off = end
        self.assertEqual(off, len(data))
        self.assertEqual({data[r[4]:r[5]] for r in recs[:2]},
                         {bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])})

    def test_none(self):
        data = sections_wire()
        self.assertEqual(list(w.iter_records(data, len(data), 0)), [])

    def test_overruns(self):
        data = sections_wire()
        qend = w.skip_question(data, 12)
        for cut in (3, 12, len(data) - qend - 1):
            recs = w.iter_records(data[:-cut], qend, 4)
            self.assertRaises(w.FormatError, list, recs)
        # More records than the message holds.
        self.assertRaises(w.FormatError, list,
                          w.iter_records(data, qend, 5))

    def test_forward_pointer(self):
        data = bytearray(answer_wire())
        qend = 12 + len(w.name_to_wire("a.example.org.")) + 4
        struct.pack_into("!H", data, qend, 0xC000 | qend)  # points at itself
        data = bytes(data)
        self.assertRaises(w.FormatError, list, w.iter_records(data, qend, 1))
        recs = list(w.iter_records(data, qend, 1, backward=False))
        self.assertEqual(recs[0][:2], (qend, w.A))

    def test_skip_question(self):
        plain = w.name_to_wire("www.example.org.")
        data = bytes(12) + plain + b"\x00\x01\x00\x01"
        self.assertEqual(w.skip_question(data, 12), len(data))
        # A compressed question name is read through read_name.
        data = bytes(12) + plain + b"\x00\x01\x00\x01" + b"\x01x\xc0\x0c" \
            + b"\x00\x01\x00\x01"
        start = 12 + len(plain) + 4
        self.assertEqual(w.skip_question(data, start), len(data))
        self.assertRaises(w.FormatError, w.skip_question, data[:20], 12)
        self.assertRaises(w.FormatError, w.skip_question,
                          bytes(12) + b"\x80a\x00", 12)


class LongNameTest(unittest.TestCase):
    """A name that loops through compression pointers grows past 255
    bytes long before the loop limit: decoding stops at the limit, not
    after copying 127 laps of labels."""

    def test_expanding_stops_at_255_bytes(self):
        # At 12: a 63-byte label, then a pointer back to 12.
        data = bytes(12) + b"\x3f" + b"a" * 63 + b"\xc0\x0c"
        # "compression loop" would mean 127 laps copied first.
        with self.assertRaises(w.FormatError) as cm:
            w.expand_name(data, 12)
        self.assertEqual(str(cm.exception), "name too long")
        with self.assertRaises(w.FormatError) as cm:
            w.read_name(data, 12)
        self.assertEqual(str(cm.exception), "name too long")

    def test_longest_name_still_read(self):
        wire = b"".join(b"\x3f" + b"x" * 63 for _ in range(3)) + \
            b"\x3d" + b"y" * 61 + b"\x00"
        self.assertEqual(len(wire), 255)
        data = bytes(12) + wire
        self.assertEqual(w.expand_name(data, 12), (wire, len(data)))
        self.assertEqual(w.read_name(data, 12)[1], len(data))
