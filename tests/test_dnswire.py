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
