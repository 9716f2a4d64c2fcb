"""health's self-check client (plugins/health/probe.py) against real
sockets: kept-alive connections, the ways an answer ends, refused and
cancelled requests."""

from twisted.internet import defer, error, protocol, reactor
from twisted.trial import unittest

from corednstw.plugins.health.probe import Prober


class Canned(protocol.Protocol):
    """Answers each request (up to its empty line) with the factory's
    next canned reply; None: no answer at all."""

    def connectionMade(self):
        self.factory.connections.append(self)
        self.buf = b""

    def dataReceived(self, data):
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            req, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.factory.requests.append(req)
            reply = self.factory.replies.pop(0)
            if reply is None:
                return
            close = reply.endswith(b"<close>")
            self.transport.write(reply.replace(b"<close>", b""))
            if close:
                self.transport.loseConnection()

    def connectionLost(self, reason):
        self.factory.lost.append(self)


class ProberTest(unittest.TestCase):

    def serve(self, *replies):
        f = protocol.Factory.forProtocol(Canned)
        f.replies = list(replies)
        f.requests, f.connections, f.lost = [], [], []
        port = reactor.listenTCP(0, f, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.factory = f
        self.prober = Prober(reactor, "127.0.0.1", port.getHost().port,
                             b"/health", 3.0)
        self.addCleanup(self.prober.close)
        return f

    @defer.inlineCallbacks
    def test_kept_alive(self):
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK"
        f = self.serve(ok, ok, ok)
        for _ in range(3):
            got = yield self.prober.get()
            self.assertIsNone(got)
        self.assertEqual(len(f.connections), 1)
        self.assertEqual(f.requests[0].split(b"\r\n"), [
            b"GET /health HTTP/1.1",
            b"Host: 127.0.0.1:%d" % self.prober.port])

    @defer.inlineCallbacks
    def test_ends_of_an_answer(self):
        f = self.serve(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nOK",
            b"HTTP/1.1 503 Service Unavailable\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n2\r\nOK\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\nuntil the close<close>",
            b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
        for _ in range(4):
            yield self.prober.get()
        # Connection: close, the body to the close and HTTP/1.0 each end
        # their connection: the next request opens another.
        self.assertEqual(len(f.connections), 3)

    @defer.inlineCallbacks
    def test_answer_in_pieces(self):
        self.serve(None)
        done = []
        self.prober.get().addCallback(done.append)
        yield _until(lambda: self.factory.requests)
        conn = self.factory.connections[0]
        for piece in (b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 5\r\n\r\n",
                      b"OK", b"..."):
            self.assertEqual(done, [])
            conn.transport.write(piece)
            yield _turn()
        self.assertEqual(done, [None])

    @defer.inlineCallbacks
    def test_refused(self):
        port = reactor.listenTCP(0, protocol.Factory(), interface="127.0.0.1")
        number = port.getHost().port
        yield port.stopListening()
        prober = Prober(reactor, "127.0.0.1", number, b"/health", 3.0)
        with self.assertRaises(error.ConnectionRefusedError):
            yield prober.get()

    @defer.inlineCallbacks
    def test_cancelled(self):
        f = self.serve(None)
        d = self.prober.get()
        yield _until(lambda: f.requests)
        d.cancel()
        with self.assertRaises(defer.CancelledError):
            yield d
        yield _until(lambda: f.lost)

    @defer.inlineCallbacks
    def test_not_http(self):
        self.serve(b"SSH-2.0-x\r\n\r\n")
        with self.assertRaises(Exception):
            yield self.prober.get()


def _turn():
    d = defer.Deferred()
    reactor.callLater(0.01, d.callback, None)
    return d


@defer.inlineCallbacks
def _until(cond, timeout=5.0):
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        yield _turn()
    raise AssertionError("timed out")
