"""UDP listeners read in batches (recvmmsg/sendmmsg) and one datagram at a
time (the path kept where the batched calls do not exist): the same
answers either way, to the right client."""

import ctypes
import errno
import socket
import struct
import time

import dns.edns
import dns.message
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.dnsserver import datagram, udpbatch
from tests.support import util

WHOAMI = ".:0 {\n    whoami\n}\n"
DELAYED = ".:0 {\n    erratic {\n        delay 1 5ms\n    }\n}\n"


def _whoami(wire):
    """(id, client address, client port) of a whoami answer."""
    m = dns.message.from_wire(wire)
    addr = port = None
    for rrset in m.additional:
        if rrset.rdtype in (1, 28):
            addr = rrset[0].address
        elif rrset.rdtype == 33:
            port = rrset[0].port
    return m.id, addr, port


def _queries(first, n, name="q%d.example.org."):
    out = []
    for i in range(n):
        q = dns.message.make_query(name % i, "A")
        q.id = first + i
        out.append(q.to_wire())
    return out


class _Listener:
    """Tests run against both ways of reading; ``batch`` says which."""

    batch = True

    def setUp(self):
        if self.batch and not udpbatch.available():
            raise unittest.SkipTest("no recvmmsg/sendmmsg here")
        self.patch(datagram, "BATCH", self.batch)

    def _udp(self, app):
        return list(app.listeners.values())[0].udp

    @defer.inlineCallbacks
    def test_way_of_reading(self):
        app = yield util.start(self, WHOAMI)
        port = self._udp(app)
        self.assertEqual(isinstance(port, datagram._BatchPort), self.batch)
        self.assertEqual(port.protocol.batch is not None, self.batch)
        if not self.batch:
            # One readiness event never takes thousands of queries.
            self.assertEqual(port.maxThroughput, datagram.ONE_READ)

    @defer.inlineCallbacks
    def test_bursts_from_several_clients(self):
        # 150 queries from each of three sockets arrive together: more
        # than one batch, and every answer goes back to its own socket
        # with that socket's address and port.
        app = yield util.start(self, WHOAMI)
        sports = [util.free_port() for _ in range(3)]
        got = yield defer.gatherResults([
            util.send_udp(app.port(), _queries(1000 * k, 150), count=150,
                          sport=sp)
            for k, sp in enumerate(sports)])
        for k, (sp, replies) in enumerate(zip(sports, got)):
            seen = sorted(_whoami(r) for r in replies)
            self.assertEqual(
                seen, [(1000 * k + i, "127.0.0.1", sp) for i in range(150)])

    @defer.inlineCallbacks
    def test_later_answers(self):
        # Answers made after the batch was read (a Deferred) are sent on
        # their own.
        app = yield util.start(self, DELAYED)
        replies = yield util.send_udp(app.port(), _queries(1, 20), count=20)
        self.assertEqual(sorted(dns.message.from_wire(r).id
                                for r in replies), list(range(1, 21)))

    @defer.inlineCallbacks
    def test_large_query(self):
        # A query of 9000 bytes (an EDNS option) is read whole.
        app = yield util.start(self, WHOAMI)
        q = dns.message.make_query("big.example.org.", "A", use_edns=0,
                                   payload=4096,
                                   options=[dns.edns.GenericOption(
                                       65001, b"\x00" * 9000)])
        q.id = 77
        reply = yield util.send_udp(app.port(), q.to_wire(max_size=65535))
        self.assertEqual(_whoami(reply)[:2], (77, "127.0.0.1"))

    @defer.inlineCallbacks
    def test_ipv6_client(self):
        app = yield util.start(self, WHOAMI)
        try:
            reply = yield util.send_udp(app.port(), _queries(5, 1)[0],
                                        host="::1")
        except Exception as e:
            raise unittest.SkipTest("no IPv6 loopback on this host") from e
        self.assertEqual(_whoami(reply)[:2], (5, "::1"))

    @defer.inlineCallbacks
    def test_ignored_datagrams_do_not_stop_the_batch(self):
        # A response and a short datagram in the middle of a burst get no
        # answer; the queries around them do.
        app = yield util.start(self, WHOAMI)
        qs = _queries(1, 10)
        bad = bytearray(qs[4])
        bad[2] |= 0x80
        qs[4] = bytes(bad)
        qs[6] = b"\x00\x01"
        replies = yield util.send_udp(app.port(), qs, count=8)
        self.assertEqual(sorted(_whoami(r)[0] for r in replies),
                         [1, 2, 3, 4, 6, 8, 9, 10])


class BatchedTest(_Listener, unittest.TestCase):
    batch = True


class OneDatagramTest(_Listener, unittest.TestCase):
    batch = False


def _raw4(host, port):
    return (struct.pack("=H", socket.AF_INET) + struct.pack("!H", port)
            + socket.inet_aton(host) + b"\x00" * 8)


def _raw6(host, port, flow=0, scope=0):
    return (struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port,
                                                               flow)
            + socket.inet_pton(socket.AF_INET6, host)
            + struct.pack("=I", scope))


class PeerTest(unittest.TestCase):
    """Raw socket addresses to the client the server reports."""

    def test_ipv4(self):
        self.assertEqual(udpbatch.peer(_raw4("192.0.2.7", 5353)),
                         ("192.0.2.7", 5353, ("192.0.2.7", 5353)))

    def test_ipv6(self):
        self.assertEqual(udpbatch.peer(_raw6("2001:db8::1", 53, 7)),
                         ("2001:db8::1", 53, ("2001:db8::1", 53, 7, 0)))

    def test_mapped_ipv4_reported_as_ipv4(self):
        self.assertEqual(udpbatch.peer(_raw6("::ffff:10.0.0.1", 1000)),
                         ("10.0.0.1", 1000, ("::ffff:10.0.0.1", 1000, 0, 0)))

    def test_scoped_ipv6_names_the_interface(self):
        lo = socket.if_nametoindex("lo")
        host, port, addr = udpbatch.peer(_raw6("fe80::1", 53, scope=lo))
        self.assertEqual((host, addr), ("fe80::1%lo",
                                        ("fe80::1", 53, 0, lo)))

    def test_not_ip(self):
        self.assertIsNone(udpbatch.peer(struct.pack("=H", socket.AF_UNIX)
                                        + b"/tmp/x"))
        self.assertIsNone(udpbatch.peer(b""))


class LoadTest(unittest.TestCase):
    """Where the calls are found: in the interpreter's own symbols first,
    without a child process; the soname and ctypes.util's search (which
    runs ``ldconfig -p``) only where they are not."""

    def setUp(self):
        if not udpbatch.sys.platform.startswith("linux"):
            raise unittest.SkipTest("Linux only")
        self.patch(udpbatch, "_libc", None)
        self.tried = []

    def cdll(self, missing):
        """ctypes.CDLL failing for the names in ``missing``, once per
        mention."""
        real = ctypes.CDLL
        missing = list(missing)

        def fake(name, **kw):
            self.tried.append(name)
            if name in missing:
                missing.remove(name)
                raise OSError("no %s" % name)
            return real(name, **kw)
        self.patch(udpbatch.ctypes, "CDLL", fake)

    def test_own_symbols_without_a_child_process(self):
        import ctypes.util

        def forbidden(name):
            raise AssertionError("find_library called")
        self.patch(ctypes.util, "find_library", forbidden)
        self.cdll(())
        self.assertTrue(udpbatch.available())
        self.assertEqual(self.tried, [None])

    def test_fallback_to_find_library(self):
        import ctypes.util
        self.patch(ctypes.util, "find_library", lambda name: "libc.so.6")
        # The soname fails the first time, as a differently named C
        # library would; find_library's name is tried next.
        self.cdll((None, "libc.so.6"))
        self.assertTrue(udpbatch.available())
        self.assertEqual(self.tried, [None, "libc.so.6", "libc.so.6"])

    def test_fallback_to_the_soname_then_find_library(self):
        import ctypes.util
        self.patch(ctypes.util, "find_library", lambda name: "libc.so.6")
        self.cdll((None,))
        self.assertTrue(udpbatch.available())
        self.assertEqual(self.tried, [None, "libc.so.6"])
        # The calls found work: a datagram read through them.
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(a.close)
        a.bind(("127.0.0.1", 0))
        a.sendto(b"ping", a.getsockname())
        batch = udpbatch.Batch(a.fileno(), size=2)
        self.assertEqual(batch.recv(), 1)

    def test_nowhere(self):
        import ctypes.util
        self.patch(ctypes.util, "find_library", lambda name: "libc-x.so")
        self.cdll((None, "libc.so.6", "libc-x.so"))
        self.assertFalse(udpbatch.available())
        self.assertEqual(self.tried, [None, "libc.so.6", "libc-x.so"])
        # Remembered: not looked for again.
        self.assertFalse(udpbatch.available())
        self.assertEqual(len(self.tried), 3)


class BatchTest(unittest.TestCase):
    """The slots themselves, on real sockets."""

    def setUp(self):
        if not udpbatch.available():
            raise unittest.SkipTest("no recvmmsg/sendmmsg here")
        self.a = self._sock()
        self.b = self._sock()
        self.batch = udpbatch.Batch(self.a.fileno(), size=4)

    def _sock(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.bind(("127.0.0.1", 0))
        return s

    def _raw_b(self):
        return _raw4(*self.b.getsockname())

    def test_receive_nothing(self):
        self.assertEqual(self.batch.recv(), 0)

    def test_receive_and_answer_more_than_the_slots(self):
        for i in range(6):
            self.b.sendto(b"query %d" % i, self.a.getsockname())
        got = []
        while len(got) < 6:
            n = self.batch.recv()
            self.assertLessEqual(n, 4)
            got.extend(self.batch.datagram(i) for i in range(n))
        raw = self._raw_b()
        self.assertEqual(got, [(b"query %d" % i, raw) for i in range(6)])
        # Seven answers through four slots: a full set goes out first.
        for i in range(7):
            self.batch.stage(b"answer %d" % i, raw)
        self.assertEqual(self.batch.flush(), [])
        self.b.settimeout(5)
        self.assertEqual([self.b.recv(100) for _ in range(7)],
                         [b"answer %d" % i for i in range(7)])

    def test_refused_answer_skipped(self):
        bad = _raw4("127.0.0.1", 0)         # port 0: EINVAL
        raw = self._raw_b()
        self.batch.stage(b"one", raw)
        self.batch.stage(b"lost", bad)
        self.batch.stage(b"two", raw)
        self.assertEqual(self.batch.flush(), [(errno.EINVAL, bad)])
        self.b.settimeout(5)
        self.assertEqual([self.b.recv(100), self.b.recv(100)],
                         [b"one", b"two"])

    def test_receive_times(self):
        self.batch.timestamps(True)
        for i in range(3):
            self.b.sendto(b"q", self.a.getsockname())
        got = []
        while len(got) < 3:
            n = self.batch.recv()
            got.extend(self.batch.arrived(i) for i in range(n))
            for i in range(n):
                self.batch.datagram(i)
        self.assertTrue(all(t is not None and t <= time.time()
                            for t in got))
        self.assertEqual(got, sorted(got))
        self.batch.timestamps(False)
        self.b.sendto(b"q", self.a.getsockname())
        while not self.batch.recv():
            pass
        self.assertIsNone(self.batch.arrived(0))
