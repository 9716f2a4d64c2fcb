"""bind: listeners per address; blocks for one zone told apart by bind."""

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.plugins import bind
from tests.support import util


class BindTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_same_zone_on_two_addresses(self):
        app = yield util.start(self, """
example.org:0 {
    bind 127.0.0.1
    whoami
}
example.org:0 {
    bind 127.0.0.2
    prometheus 127.0.0.1:0
}
""")
        p1 = app.port(host="127.0.0.1")
        p2 = app.port(host="127.0.0.2")
        m = yield util.query(p1, "a.example.org.")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(len(m.additional), 2)
        m = yield util.query(p2, "a.example.org.", host="127.0.0.2")
        self.assertEqual(m.rcode(), 2)   # that block has no answering plugin
        labels = sorted(mux.label for mux in app.muxes)
        self.assertEqual(labels, ["dns://127.0.0.1:0", "dns://127.0.0.2:0"])

    def test_interface_name_and_except(self):
        s = util.Direct(self, ".:0 {\n    bind lo {\n        except ::1\n"
                              "    }\n    whoami\n}\n")
        addrs = s.app.config.blocks[0].bind
        self.assertIn("127.0.0.1", addrs)
        self.assertNotIn("::1", addrs)

    def test_interface_addresses(self):
        self.assertIn("127.0.0.1", bind.interface_addresses("lo"))

    def test_repeated_bind_adds_up(self):
        s = util.Direct(self, ".:0 {\n    bind 127.0.0.1\n    bind ::1\n"
                              "    whoami\n}\n")
        self.assertEqual(s.app.config.blocks[0].bind, ["127.0.0.1", "::1"])

    def test_unknown_property(self):
        from corednstw.core.errors import CorefileError
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    bind 127.0.0.1 {\n        only x\n"
                              "    }\n}\n")
        self.assertIn("Corefile:2", str(cm.exception))

    def test_neither_address_nor_interface(self):
        """The value is quoted as Go's %q quotes it."""
        from corednstw.core.errors import CorefileError
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, '.:0 {\n    bind "no\\"such"\n}\n')
        self.assertIn('plugin/bind: not a valid IP address or interface '
                      'name: "no\\"such"', str(cm.exception))

    def test_overlap_with_unbound_block_refused(self):
        from corednstw.core.errors import CorefileError
        with self.assertRaises(CorefileError):
            util.Direct(self, "example.org:0 {\n    whoami\n}\n"
                              "example.org:0 {\n    bind 127.0.0.1\n"
                              "    whoami\n}\n")


class LookupTest(unittest.TestCase):
    """App.lookup re-enters the server (CoreDNS's upstream)."""

    @defer.inlineCallbacks
    def test_lookup_through_own_blocks(self):
        app = yield util.start(self, "example.org:0 {\n    whoami\n}\n")
        resp = yield app.lookup("x.example.org.", 1)
        self.assertEqual(resp.rcode, 0)
        self.assertEqual(resp.plugin, "")
        self.assertEqual(len(resp.additional), 2)
        none = yield app.lookup("x.example.net.", 1)
        self.assertEqual(none.rcode, 5)      # no block: REFUSED

    @defer.inlineCallbacks
    def test_loop_guard(self):
        app = yield util.start(self, "example.org:0 {\n    whoami\n}\n")

        class Deep:
            depth = 100
            server = ""
        resp = yield app.lookup("x.example.org.", 1, parent=Deep())
        self.assertIsNone(resp)


class ResolverTest(unittest.TestCase):
    """The chain as a twisted.names IResolver."""

    @defer.inlineCallbacks
    def test_lookup_address_and_errors(self):
        from twisted.names import dns as tdns
        from twisted.names import error

        from corednstw.service.resolver import ChainResolver
        app = yield util.start(self, "example.org:0 {\n    whoami\n}\n"
                                     "sub.example.org:0 {\n"
                                     "    prometheus 127.0.0.1:0\n}\n")
        r = ChainResolver(app)
        answers, authority, additional = yield r.lookupAddress(
            "x.example.org")
        self.assertEqual(answers, [])
        self.assertEqual(additional[0].type, tdns.A)
        self.assertEqual(additional[0].payload.dottedQuad(), "127.0.0.1")
        yield self.assertFailure(r.lookupAddress("a.sub.example.org"),
                                 error.DNSServerError)
        yield self.assertFailure(r.lookupAddress("example.net"),
                                 error.DNSQueryRefusedError)
