"""shed: the bounded answer stack of a UDP socket, and query shedding."""

import errno

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import shed
from tests.support import util

COREFILE = ".:0 {\n    shed\n    whoami\n}\n"


def _dropped(server, reason):
    return shed.DROPPED.get((server, reason))


class FakeSocket:
    """sendto that says EAGAIN while ``full``, else records the sends."""

    def __init__(self):
        self.full = False
        self.sent = []

    def sendto(self, wire, addr):
        if self.full:
            raise BlockingIOError(errno.EAGAIN, "Resource unavailable")
        self.sent.append((wire, addr))


def _send_udp(testcase, port, data):
    """Send one datagram and listen to nothing (the answer never comes)."""
    from twisted.internet import protocol, reactor
    p = reactor.listenUDP(0, protocol.DatagramProtocol(),
                          interface="127.0.0.1")
    testcase.addCleanup(p.stopListening)
    p.write(data, ("127.0.0.1", port))


class ShedSetupTest(unittest.TestCase):

    def _error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_errors(self):
        self.assertIn("Wrong argument count",
                      self._error(".:0 {\n    shed 10\n}\n"))
        self.assertIn("plugin/shed: shed takes no options",
                      self._error(".:0 {\n    shed {\n        x\n    }\n}\n"))
        self.assertIn("can only be used once",
                      self._error(".:0 {\n    shed\n    shed\n}\n"))
        err = self._error("tls://.:0 {\n    shed\n    whoami\n}\n")
        self.assertIn("only plain DNS server blocks are supported; "
                      '"tls://.:0" uses transport "tls"', err)


class StackTest(unittest.TestCase):

    def _stack(self, depth=3):
        from twisted.internet import task
        self.clock = task.Clock()
        self.sock = FakeSocket()
        return shed.Stack(self.clock, self.sock.sendto, "dns://:t", None,
                          depth)

    def test_straight_through(self):
        st = self._stack()
        st.write(b"a", ("127.0.0.1", 1))
        self.assertEqual(self.sock.sent, [(b"a", ("127.0.0.1", 1))])
        self.assertEqual(len(st.items), 0)

    def test_newest_first_and_eviction(self):
        st = self._stack(depth=3)
        before = _dropped("dns://:t", "response")
        self.sock.full = True
        for w in (b"1", b"2", b"3", b"4"):
            st.write(w, ("127.0.0.1", 1))
        self.assertTrue(st.full())
        self.assertEqual(_dropped("dns://:t", "response"), before + 1)
        self.clock.advance(0)
        self.assertEqual(self.sock.sent, [])    # still no room: retried
        self.sock.full = False
        self.clock.advance(shed.RETRY)
        self.assertEqual([w for w, _ in self.sock.sent], [b"4", b"3", b"2"])
        self.assertFalse(st.items)

    def test_close_counts_leftovers(self):
        st = self._stack(depth=5)
        before = _dropped("dns://:t", "response")
        self.sock.full = True
        st.write(b"1", ("127.0.0.1", 1))
        st.write(b"2", ("127.0.0.1", 1))
        st.close()
        st.write(b"3", ("127.0.0.1", 1))
        self.assertEqual(_dropped("dns://:t", "response"), before + 3)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class ShedWireTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_answers_through_the_stack(self):
        app = yield util.start(self, COREFILE)
        lst = list(app.listeners.values())[0]
        self.assertIsInstance(lst.udp.protocol.writer, shed.Stack)
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)

    @defer.inlineCallbacks
    def test_full_stack_sheds_udp_queries(self):
        app = yield util.start(self, COREFILE)
        lst = list(app.listeners.values())[0]
        proto = lst.udp.protocol
        stack = proto.writer
        server = proto.mux.label
        real = stack.sendto
        sock = FakeSocket()
        sock.full = True
        stack.sendto = sock.sendto
        for i in range(shed.DEPTH):
            stack.write(b"%d" % i, ("127.0.0.1", 9))
        self.assertTrue(stack.full())
        before = _dropped(server, "query")
        _send_udp(self, app.port(), util.make_query("example.org").to_wire())
        yield util.wait_for(lambda: _dropped(server, "query") == before + 1)
        # TCP is never shed.
        m = yield util.query(app.port(), "example.org", "A", proto="tcp")
        self.assertEqual(m.rcode(), 0)
        # Room again: the newest answers go first, then UDP is answered.
        sock.full = False
        yield util.wait_for(lambda: not stack.items)
        self.assertEqual(sock.sent[0][0], b"%d" % (shed.DEPTH - 1))
        stack.sendto = real
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)

    @defer.inlineCallbacks
    def test_stale_queries_dropped_unread(self):
        app = yield util.start(self, COREFILE)
        proto = list(app.listeners.values())[0].udp.protocol
        if proto.batch is None:
            raise unittest.SkipTest("no recvmmsg here: nothing is aged")
        self.assertEqual(proto.stale, shed.STALE)
        server = proto.mux.label
        before = _dropped(server, "query")
        # A bound in the future: every datagram read is too old.
        proto.stale = -3600.0
        _send_udp(self, app.port(), util.make_query("example.org").to_wire())
        yield util.wait_for(lambda: _dropped(server, "query") == before + 1)
        proto.stale = shed.STALE
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(_dropped(server, "query"), before + 1)

    @defer.inlineCallbacks
    def test_no_ageing_without_shed(self):
        app = yield util.start(self, ".:0 {\n    whoami\n}\n")
        proto = list(app.listeners.values())[0].udp.protocol
        self.assertIsNone(proto.stale)
        if proto.batch is not None:
            self.assertIsNone(proto.batch.rx.control)

    @defer.inlineCallbacks
    def test_reload_without_shed_restores_the_socket(self):
        app = yield util.start(self, COREFILE)
        proto = list(app.listeners.values())[0].udp.protocol
        first = proto.writer
        port = app.port()
        util.rewrite(app.path, ".:0 {\n    whoami\n}\n")
        self.assertTrue(app.reload())
        yield util.wait_for(lambda: proto.writer is None)
        self.assertTrue(first.closed)
        self.assertIsNone(proto.stale)
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), 0)
