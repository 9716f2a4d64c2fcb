"""The fuzz targets' short run: seeded mutations of the corpus through the
packet path and the Corefile setup, the same inputs every time (no
instrumentation needed; fuzz/run.sh runs atheris), and the findings of the
long runs kept as regressions."""

import io
import sys

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.trial import unittest

from corednstw.core import corefile, logger
from corednstw.core.errors import CorefileError
from fuzz import mutate, seeds, targets
from tests.support import util

#: Mutants per target in the suite (the seeds run too): a few seconds.
PACKET_INPUTS = 6000
COREFILE_INPUTS = 1500


class ShortRun(unittest.TestCase):

    def setUp(self):
        old = logger.out
        self.addCleanup(setattr, logger, "out", old)
        targets.quiet_log()
        err, sys.stderr = sys.stderr, io.StringIO()   # import warnings
        self.addCleanup(setattr, sys, "stderr", err)

    def run_target(self, target, corpus, count, tokens):
        self.addCleanup(target.close)
        try:
            n, _ = mutate.run(target, corpus, count, seed=1, tokens=tokens)
        except Exception as e:
            self.fail("input %r: %r" % (getattr(e, "fuzz_input", None), e))
        self.assertEqual(n, len(corpus) + count)

    def test_packets(self):
        self.run_target(targets.PacketTarget(), seeds.packets(),
                        PACKET_INPUTS, False)

    def test_corefiles(self):
        self.run_target(targets.CorefileTarget(), seeds.corefiles(),
                        COREFILE_INPUTS, True)

    def test_mutations_are_deterministic(self):
        a = mutate.Mutator([b"abc", b"defgh"], seed=3, tokens=True)
        b = mutate.Mutator([b"abc", b"defgh"], seed=3, tokens=True)
        self.assertEqual([a.next() for _ in range(50)],
                         [b.next() for _ in range(50)])


class Properties(unittest.TestCase):
    """The target's checks catch what they are there to catch."""

    def test_reply_with_other_id(self):
        q = dns.message.make_query("example.org.", "A")
        r = dns.message.make_response(q)
        r.id = (q.id + 1) & 0xFFFF
        with self.assertRaises(targets.Finding):
            targets.check_reply(q.to_wire(), r.to_wire(), "udp")

    def test_udp_reply_over_512_without_edns(self):
        q = dns.message.make_query("example.org.", "TXT")
        r = dns.message.make_response(q)
        text = " ".join(['"%s"' % ("x" * 200)] * 4)
        r.answer.append(dns.rrset.from_text("example.org.", 60, "IN", "TXT",
                                            text))
        with self.assertRaises(targets.Finding):
            targets.check_reply(q.to_wire(), r.to_wire(), "udp")
        targets.check_reply(q.to_wire(), r.to_wire(), "tcp")

    def test_reply_counting_missing_records(self):
        q = dns.message.make_query("example.org.", "A")
        wire = bytearray(dns.message.make_response(q).to_wire())
        wire[7] = 1     # one answer, none there
        with self.assertRaises(targets.Finding):
            targets.check_reply(q.to_wire(), bytes(wire), "udp")


class Findings(unittest.TestCase):
    """Inputs the long runs found, each fixed."""

    def test_nul_byte_in_a_path_is_a_corefile_error(self):
        """A NUL in a token reached os.stat/open/glob (ValueError out of
        hosts, file, root and import); it is a parse error at its line."""
        for text in ('.:0 {\n    hosts \x00/hosts\n}\n',
                     'example.org:0 {\n    file db\x00.x\n}\n',
                     '.:0 {\n\n    root \x00does/not/exist\n}\n',
                     'import b\x00/*.conf\n'):
            with self.assertRaises(CorefileError) as cm:
                corefile.parse(text)
            self.assertEqual(cm.exception.line, text.count(
                "\n", 0, text.index("\x00")) + 1)
            self.assertIn("NUL byte", str(cm.exception))

    def test_whoami_longest_name(self):
        """A query name of 251 to 255 octets left no room for the SRV
        owner's _udp. label: the encoder raised (a panic, SERVFAIL).  The
        address alone is answered."""
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        name = ".".join(["a" * 63] * 3 + ["b" * 59]) + "."
        for proto in ("udp", "tcp"):
            r = d.query(name, "A", proto=proto)
            self.assertEqual(r.rcode(), dns.rcode.NOERROR)
            self.assertEqual([rr.rdtype for rr in r.additional],
                             [dns.rdatatype.A])
        short = ".".join(["a" * 63] * 3 + ["b" * 54]) + "."
        r = d.query(short, "A")
        self.assertEqual(len(r.additional), 2)

    def test_rewrite_edns0_compressed_owner(self):
        """A record after the question whose owner is a compression
        pointer: rewrite's edns0 rules walked those records cut from the
        message, where the pointer led nowhere (a panic, SERVFAIL)."""
        d = util.Direct(self, ".:0 {\n    rewrite edns0 local set 0xffee "
                        "abcd\n    whoami\n}\n")
        q = dns.message.make_query("example.org.", "A", use_edns=0)
        wire = q.to_wire()
        opt = wire.rindex(b"\x00\x00\x29")
        for owner in (b"\xc0\x0c", b"\xc0\x00"):
            m = wire[:opt] + owner + wire[opt + 1:]
            r = dns.message.from_wire(d.ask(m))
            self.assertEqual(r.rcode(), dns.rcode.NOERROR, owner)
