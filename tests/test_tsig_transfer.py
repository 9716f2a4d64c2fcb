"""tsig with transfer: every message of a signed AXFR carries a TSIG that
chains over the one before (RFC 8945 section 5.3.1), as dnspython and a
real Knot DNS secondary check it; wrong keys and unsigned requests get
nothing; a signed UDP answer keeps room for its TSIG record."""

import base64

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
from twisted.internet import defer, threads
from twisted.trial import unittest

from tests.support import knot, util

KEY = "key.example."
SECRET = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
OTHER = base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()
RING = dns.tsigkeyring.from_text({KEY: SECRET})
WRONG = dns.tsigkeyring.from_text({KEY: OTHER})
UNKNOWN = dns.tsigkeyring.from_text({"nokey.example.": SECRET})

#: Enough 200-byte TXT records for an AXFR of several messages.
TXTS = 1000
ZONE = ("$ORIGIN example.org.\n@ 60 IN SOA ns a 9 2 3 4 5\n@ 60 IN NS ns\n"
        "ns 60 IN A 192.0.2.1\n"
        + "".join('t%d 60 IN TXT "%s"\n' % (i, "x" * 200)
                  for i in range(TXTS)))
RECORDS = TXTS + 3 + 1      # the SOA twice

COREFILE = """example.org:0 {
    tsig {
        secret %s %s
        require AXFR IXFR
    }
    transfer {
        to *
    }
    file %%s/db
}
""" % (KEY, SECRET)


def start(testcase):
    d = util.write_files(testcase, {"db": ZONE})
    return util.start(testcase, COREFILE % d)


def axfr(port, ring=RING, keyname=KEY, rdtype="AXFR", serial=None):
    """Every message of a transfer, each checked by dnspython (in a
    thread: ``dns.query.xfr`` blocks)."""
    return threads.deferToThread(
        lambda: list(dns.query.xfr(
            "127.0.0.1", "example.org", rdtype, port=port, timeout=5,
            keyring=ring, keyname=keyname, serial=serial)))


def signed_query(rdtype="AXFR", ring=RING, keyname=KEY):
    q = dns.message.make_query("example.org", rdtype)
    q.use_tsig(ring, keyname)
    return q


class Dnspython(unittest.TestCase):
    """dnspython's xfr checks each message's MAC over the previous one."""

    @defer.inlineCallbacks
    def setUp(self):
        self.app = yield start(self)
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_every_message_signed_and_chained(self):
        msgs = yield axfr(self.port)
        self.assertGreater(len(msgs), 2)
        for m in msgs:
            self.assertTrue(m.had_tsig)
            self.assertEqual(m.tsig_error, 0)
            self.assertEqual(str(m.keyname), KEY)
        self.assertEqual(sum(len(r) for m in msgs for r in m.answer),
                         RECORDS)
        self.assertEqual(msgs[0].answer[0].rdtype, dns.rdatatype.SOA)
        self.assertEqual(msgs[-1].answer[-1].rdtype, dns.rdatatype.SOA)

    @defer.inlineCallbacks
    def test_ixfr_signed(self):
        msgs = yield axfr(self.port, rdtype="IXFR", serial=9)
        self.assertEqual(len(msgs), 1)
        self.assertTrue(msgs[0].had_tsig)
        msgs = yield axfr(self.port, rdtype="IXFR", serial=8)
        self.assertGreater(len(msgs), 2)
        self.assertTrue(all(m.had_tsig for m in msgs))

    @defer.inlineCallbacks
    def test_chain_broken_detected(self):
        # A message left out breaks the chain for the one after it.
        q = signed_query()
        replies = yield util.send_tcp(self.port, q.to_wire(), count=3)
        first = dns.message.from_wire(replies[0], keyring=RING,
                                      request_mac=q.mac, xfr=True,
                                      multi=True)
        with self.assertRaises(dns.tsig.BadSignature):
            dns.message.from_wire(replies[2], keyring=RING, xfr=True,
                                  multi=True, tsig_ctx=first.tsig_ctx)

    @defer.inlineCallbacks
    def test_wrong_secret_badsig_no_records(self):
        q = signed_query(ring=WRONG)
        replies = yield util.send_tcp(self.port, q.to_wire())
        self.assertEqual(len(replies), 1)
        m = dns.message.from_wire(replies[0], keyring=False)
        self.assertEqual(m.rcode(), dns.rcode.NOTAUTH)
        self.assertEqual(m.tsig_error, dns.rcode.BADSIG)
        self.assertEqual(m.answer, [])
        with self.assertRaises(dns.tsig.PeerBadSignature):
            yield axfr(self.port, ring=WRONG)

    @defer.inlineCallbacks
    def test_unknown_key_badkey(self):
        q = signed_query(ring=UNKNOWN, keyname="nokey.example.")
        replies = yield util.send_tcp(self.port, q.to_wire())
        m = dns.message.from_wire(replies[0], keyring=False)
        self.assertEqual(m.rcode(), dns.rcode.NOTAUTH)
        self.assertEqual(m.tsig_error, dns.rcode.BADKEY)
        self.assertEqual(m.answer, [])

    @defer.inlineCallbacks
    def test_unsigned_refused(self):
        q = dns.message.make_query("example.org", "AXFR")
        replies = yield util.send_tcp(self.port, q.to_wire())
        self.assertEqual(len(replies), 1)
        m = dns.message.from_wire(replies[0])
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertFalse(m.had_tsig)
        self.assertEqual(m.answer, [])


class KnotSecondary(unittest.TestCase):
    """Knot DNS pulls the zone from us with the key, and checks every
    message of the transfer as it goes."""

    @defer.inlineCallbacks
    def test_zone_arrives(self):
        app = yield start(self)
        sec = knot.start_secondary(self, "example.org.", app.port(),
                                   (KEY, SECRET))
        yield knot.wait_answers(sec.port, "example.org.", sec.proc)
        m = yield util.query(sec.port, "t%d.example.org" % (TXTS - 1),
                             "TXT")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(util.rrs(m), ['t%d.example.org. 60 IN TXT "%s"'
                                       % (TXTS - 1, "x" * 200)])
        self.assertIn("AXFR, incoming, remote 127.0.0.1@%d, finished"
                      % app.port(), sec.log())

    @defer.inlineCallbacks
    def test_wrong_key_nothing_arrives(self):
        app = yield start(self)
        sec = knot.start_secondary(self, "example.org.", app.port(),
                                   (KEY, OTHER))
        # Our NOTAUTH carries a TSIG without a MAC: knot gives up on it.
        yield util.wait_for(lambda: "refresh, failed" in sec.log(),
                            timeout=20)
        self.assertIn("failed to verify TSIG", sec.log())
        m = yield util.query(sec.port, "example.org", "SOA")
        self.assertNotEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.answer, [])


class UDPRoom(unittest.TestCase):
    """A signed answer that would not fit the client's buffer with its
    TSIG record is cut to the question, TC set, and still signed."""

    def test_question_only_when_full(self):
        big = "".join('big 60 IN TXT "%s"\n' % ("y" * 40 + str(i))
                      for i in range(8))
        d = util.write_files(self, {"db": ZONE + big})
        direct = util.Direct(self, COREFILE % d)
        q = dns.message.make_query("big.example.org", "TXT")
        plain = direct.ask(q.to_wire())
        self.assertLess(len(plain), 512)
        self.assertGreater(len(plain), 512 - 60)
        q = dns.message.make_query("big.example.org", "TXT")
        q.use_tsig(RING, KEY)
        data = direct.ask(q.to_wire())
        self.assertLessEqual(len(data), 512)
        m = dns.message.from_wire(data, keyring=RING, request_mac=q.mac)
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(m.answer, [])
        self.assertEqual(str(m.question[0].name), "big.example.org.")
        self.assertTrue(m.had_tsig)
        # With EDNS the OPT record stays.
        q = dns.message.make_query("big.example.org", "TXT", use_edns=0,
                                   payload=512)
        q.use_tsig(RING, KEY)
        data = direct.ask(q.to_wire())
        self.assertLessEqual(len(data), 512)
        m = dns.message.from_wire(data, keyring=RING, request_mac=q.mac)
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual((m.answer, m.edns, m.payload), ([], 0, 512))

    def test_fits_untouched(self):
        d = util.write_files(self, {"db": ZONE})
        direct = util.Direct(self, COREFILE % d)
        q = dns.message.make_query("t1.example.org", "TXT", use_edns=0,
                                   payload=1232)
        q.use_tsig(RING, KEY)
        m = dns.message.from_wire(direct.ask(q.to_wire()), keyring=RING,
                                  request_mac=q.mac)
        self.assertFalse(m.flags & dns.flags.TC)
        self.assertEqual(len(m.answer), 1)
        self.assertEqual(m.edns, 0)
        self.assertEqual(m.payload, 1232)
