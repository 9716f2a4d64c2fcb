"""whoami over the wire: UDP and TCP, IPv4, the 0x20 case echoed."""

from twisted.internet import defer
from twisted.trial import unittest

from tests.support import util


class WhoamiTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.app = yield util.start(self, ".:0 {\n    whoami\n}\n")
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_udp(self):
        m = yield util.query(self.port, "WhoAmI.Example.ORG", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(str(m.question[0].name), "WhoAmI.Example.ORG.")
        self.assertEqual(m.answer, [])
        lines = util.rrs(m, "additional")
        self.assertEqual(lines[0], "WhoAmI.Example.ORG. 0 IN A 127.0.0.1")
        self.assertTrue(lines[1].startswith(
            "_udp.WhoAmI.Example.ORG. 0 IN SRV 0 0 "))
        self.assertTrue(m.flags & 0x0400)  # AA

    @defer.inlineCallbacks
    def test_tcp(self):
        m = yield util.query(self.port, "example.org", "TXT", proto="tcp")
        lines = util.rrs(m, "additional")
        self.assertTrue(lines[0].startswith("_tcp.example.org. 0 IN SRV"))
        self.assertEqual(lines[1], "example.org. 0 IN A 127.0.0.1")

    @defer.inlineCallbacks
    def test_root(self):
        m = yield util.query(self.port, ".", "NS")
        lines = util.rrs(m, "additional")
        self.assertEqual(lines[0], ". 0 IN A 127.0.0.1")
        self.assertTrue(lines[1].startswith("_udp. 0 IN SRV"))
