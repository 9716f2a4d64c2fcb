"""tsig: a real signing client (dnspython) over the wire, and the error
answers (BADKEY, BADSIG, BADTIME, REFUSED) through the chain."""

import base64
import struct
import time

import dns.message
import dns.query
import dns.rcode
import dns.tsig
import dns.tsigkeyring
from twisted.internet import defer, task, threads
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import tsig
from tests.support import util

SECRET = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
OTHER = base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()
RING = dns.tsigkeyring.from_text({"key.example.": SECRET})
WRONG = dns.tsigkeyring.from_text({"key.example.": OTHER})
UNKNOWN = dns.tsigkeyring.from_text({"nokey.example.": SECRET})

COREFILE = """.:0 {
    tsig example.org {
        secret key.example. %s
        require A
    }
    whoami
}
""" % SECRET

ALGORITHMS = ("hmac-sha256", "hmac-md5.sig-alg.reg.int", "hmac-sha1",
              "hmac-sha224", "hmac-sha384", "hmac-sha512")


def signed(name, rdtype="A", ring=RING, keyname="key.example.",
           algorithm="hmac-sha256"):
    q = dns.message.make_query(name, rdtype)
    q.use_tsig(ring, keyname, algorithm=algorithm)
    return q


class WireTest(unittest.TestCase):
    """dnspython's dns.query signs the query and checks the reply."""

    @defer.inlineCallbacks
    def setUp(self):
        self.app = yield util.start(self, COREFILE)
        self.port = self.app.port()

    def ask(self, q, proto="udp"):
        fn = dns.query.udp if proto == "udp" else dns.query.tcp
        return threads.deferToThread(fn, q, "127.0.0.1", timeout=5,
                                     port=self.port)

    @defer.inlineCallbacks
    def test_signed_udp_tcp_every_algorithm(self):
        for alg in ALGORITHMS:
            for proto in ("udp", "tcp"):
                m = yield self.ask(signed("a.example.org", algorithm=alg),
                                   proto)
                self.assertTrue(m.had_tsig, (alg, proto))
                self.assertEqual(m.rcode(), dns.rcode.NOERROR)
                self.assertEqual(str(m.keyalgorithm).rstrip("."),
                                 alg.rstrip("."))
                self.assertIn("a.example.org. 0 IN A 127.0.0.1",
                              util.rrs(m, "additional"))

    @defer.inlineCallbacks
    def test_wrong_secret_badsig(self):
        with self.assertRaises(dns.tsig.PeerBadSignature):
            yield self.ask(signed("a.example.org", ring=WRONG))

    @defer.inlineCallbacks
    def test_unknown_key_badkey(self):
        with self.assertRaises(dns.tsig.PeerBadKey):
            yield self.ask(signed("a.example.org", ring=UNKNOWN,
                                  keyname="nokey.example."))

    @defer.inlineCallbacks
    def test_unsigned_required_refused(self):
        m = yield util.query(self.port, "a.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertFalse(m.had_tsig)

    @defer.inlineCallbacks
    def test_unsigned_not_required_answered(self):
        m = yield util.query(self.port, "a.example.org", "TXT")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        # Signed queries of types not required are checked all the same.
        m = yield self.ask(signed("a.example.org", "TXT"))
        self.assertTrue(m.had_tsig)
        with self.assertRaises(dns.tsig.PeerBadSignature):
            yield self.ask(signed("a.example.org", "TXT", ring=WRONG))

    @defer.inlineCallbacks
    def test_outside_zones_untouched(self):
        m = yield util.query(self.port, "a.example.net", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        data = yield util.send_udp(self.port, signed(
            "a.example.net", ring=WRONG).to_wire())
        m = dns.message.from_wire(data)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertFalse(m.had_tsig)


class DirectTest(unittest.TestCase):
    """Error answers, as the bytes come back, with a clock we control."""

    def setUp(self):
        self.clock = task.Clock()
        self.clock.advance(time.time())
        self.d = util.Direct(self, COREFILE, clock=self.clock)

    def reply(self, q):
        return self.d.ask(q.to_wire())

    def test_good_reply_validates(self):
        q = signed("a.example.org")
        m = dns.message.from_wire(self.reply(q), keyring=RING,
                                  request_mac=q.mac)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.tsig_error, 0)
        self.assertEqual(m.id, q.id)

    def test_badsig(self):
        q = signed("a.example.org", ring=WRONG)
        m = dns.message.from_wire(self.reply(q), keyring=False)
        self.assertEqual(m.rcode(), dns.rcode.NOTAUTH)
        self.assertEqual(m.tsig_error, dns.rcode.BADSIG)
        self.assertEqual(m.tsig[0].mac, b"")
        self.assertEqual(m.tsig[0].time_signed, 0)
        self.assertEqual(str(m.question[0].name), "a.example.org.")

    def test_badkey(self):
        q = signed("a.example.org", ring=UNKNOWN, keyname="nokey.example.")
        m = dns.message.from_wire(self.reply(q), keyring=False)
        self.assertEqual(m.rcode(), dns.rcode.NOTAUTH)
        self.assertEqual(m.tsig_error, dns.rcode.BADKEY)
        self.assertEqual(str(m.keyname), "nokey.example.")

    def test_badtime(self):
        q = signed("a.example.org")
        wire = q.to_wire()
        self.clock.advance(301)
        data = self.d.ask(wire)
        m = dns.message.from_wire(data, keyring=False)
        self.assertEqual(m.rcode(), dns.rcode.NOTAUTH)
        self.assertEqual(m.tsig_error, dns.rcode.BADTIME)
        rd = m.tsig[0]
        self.assertEqual(rd.time_signed, q.tsig[0].time_signed)
        self.assertEqual(int.from_bytes(rd.other, "big"),
                         int(self.clock.seconds()))
        self.assertNotEqual(rd.mac, b"")
        with self.assertRaises(dns.tsig.PeerBadTime):
            dns.message.from_wire(data, keyring=RING, request_mac=q.mac)

    def test_within_fudge(self):
        q = signed("a.example.org")
        wire = q.to_wire()
        self.clock.advance(299)
        m = dns.message.from_wire(self.d.ask(wire), keyring=False)
        self.assertEqual(m.tsig_error, 0)

    def test_tsig_not_last_formerr(self):
        """RFC 8945 5.1: a TSIG anywhere but last in the additional
        section is FORMERR, whether a record or a second TSIG follows."""
        wire = signed("a.example.org").to_wire()
        tsig_rr = wire[len(dns.message.make_query(
            "a.example.org", "A").to_wire()):]
        extra = (b"\x00" + struct.pack("!HHIH", 1, 1, 0, 4)
                 + bytes([192, 0, 2, 9]))
        for more in (extra, tsig_rr):
            data = bytearray(wire + more)
            data[11] += 1
            m = dns.message.from_wire(self.d.ask(bytes(data)),
                                      keyring=False)
            self.assertEqual(m.rcode(), dns.rcode.FORMERR)
            self.assertIsNone(m.tsig)

    def test_chain_sees_no_tsig(self):
        seen = []
        p = [x for x in self.d.app.config.blocks[0].plugins
             if isinstance(x, tsig.TSIGServer)][0]
        nxt = p.next
        p.next = util.Stub(lambda req: (seen.append(req), nxt.serve(req))[1])
        self.reply(signed("a.example.org"))
        req = seen[0]
        self.assertIsNone(req.tsig)
        self.assertEqual(req.arcount, 0)
        self.assertEqual(dns.message.from_wire(req.data).additional, [])

    def test_servfail_is_signed(self):
        p = [x for x in self.d.app.config.blocks[0].plugins
             if isinstance(x, tsig.TSIGServer)][0]
        p.next = util.Stub(lambda req: None)
        q = signed("a.example.org")
        m = dns.message.from_wire(self.reply(q), keyring=RING,
                                  request_mac=q.mac)
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertTrue(m.had_tsig)


class RequireTest(unittest.TestCase):

    def rcode(self, require, rdtype="A"):
        d = util.Direct(self, ".:0 {\n    tsig {\n        secret k. %s\n"
                        "        %s\n    }\n    whoami\n}\n"
                        % (SECRET, require))
        return d.query("a.example.org", rdtype).rcode()

    def test_types(self):
        self.assertEqual(self.rcode("require A AAAA"), dns.rcode.REFUSED)
        self.assertEqual(self.rcode("require A AAAA", "AAAA"),
                         dns.rcode.REFUSED)
        self.assertEqual(self.rcode("require A AAAA", "MX"),
                         dns.rcode.NOERROR)

    def test_all_none(self):
        self.assertEqual(self.rcode("require all", "MX"), dns.rcode.REFUSED)
        self.assertEqual(self.rcode("require none"), dns.rcode.NOERROR)

    def test_opcode(self):
        self.assertEqual(self.rcode("require_opcode QUERY", "MX"),
                         dns.rcode.REFUSED)
        self.assertEqual(self.rcode("require_opcode NOTIFY"),
                         dns.rcode.NOERROR)
        self.assertEqual(self.rcode("require_opcode all", "MX"),
                         dns.rcode.REFUSED)

    def test_default_requires_nothing(self):
        d = util.Direct(self, ".:0 {\n    tsig\n    whoami\n}\n")
        self.assertEqual(d.query("a.", "A").rcode(), dns.rcode.NOERROR)


KEYFILE = """key "key.example." {
    algorithm hmac-sha256;
    secret "%s";
};
key other. {
    secret %s;
}
""" % (SECRET, OTHER)


class SetupTest(unittest.TestCase):

    def test_secrets_file(self):
        d = util.write_files(self, {"keys": KEYFILE})
        dd = util.Direct(self, ".:0 {\n    tsig {\n        secrets %s/keys\n"
                         "    }\n    whoami\n}\n" % d)
        q = signed("a.example.org")
        m = dns.message.from_wire(dd.ask(q.to_wire()), keyring=RING,
                                  request_mac=q.mac)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(tsig.parse_key_file(KEYFILE),
                         {"key.example.": SECRET, "other.": OTHER})

    def test_key_file_errors(self):
        for text in ("bogus x {\n", "key\n", 'key "a" {\n    foo x;\n};\n',
                     'key a {\n};\n', 'key a {\n secret x;\n};\n'
                     'key a {\n secret y;\n};\n'):
            with self.assertRaises(ValueError, msg=text):
                tsig.parse_key_file(text)

    def test_errors(self):
        for body in ("secret k.", "secret k. a b", "secrets",
                     "secrets /nonexistent/keys", "require",
                     "require BOGUS", "require_opcode BOGUS",
                     "require_opcode", "bogus x",
                     "secret k. %s\n        secret K %s" % (SECRET, SECRET)):
            with self.assertRaises(CorefileError, msg=body) as cm:
                util.Direct(self, ".:0 {\n    tsig {\n        %s\n    }\n}\n"
                            % body)
            self.assertIn("plugin/tsig: Wrong argument count",
                          str(cm.exception), body)

    def test_once(self):
        with self.assertRaises(CorefileError):
            util.Direct(self, ".:0 {\n    tsig\n    tsig\n}\n")
