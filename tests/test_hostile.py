"""Hostile clients against real listeners on 127.0.0.1.

Each test plays an attack on the server over the wire and checks the
bound that holds it, and that other clients are answered meanwhile:
clients that pipeline queries for large answers and do not read them
(TCP, DoT), slowloris clients on DoH (HTTP/1.1, HTTP/2) and gRPC, a flood
of QUIC Initials.  The limits are listed in docs/limits.md.
"""

import struct

import dns.message
import dns.rcode
from twisted.internet import defer, protocol, reactor, ssl
from twisted.trial import unittest

from corednstw.dnsserver import stream
from tests.support import tlsutil, util
from tests.support.upstream import Upstream

#: A TXT RRset of about 63 KB: the answer a flooding client asks for.
BIG_RECORDS = 235
ZONE = "$ORIGIN example.org.\n@ 3600 IN SOA ns hostmaster 1 7200 3600 " \
       "1209600 3600\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.1\n" \
       "www 3600 IN A 192.0.2.2\n" + "".join(
           'big 3600 IN TXT "%03d%s"\n' % (i, "x" * 247)
           for i in range(BIG_RECORDS))


def framed(messages):
    return b"".join(struct.pack("!H", len(m)) + m for m in messages)


def big_queries(n):
    return [dns.message.make_query("big.example.org.", "TXT",
                                   id=i).to_wire() for i in range(n)]


class _Hoarder(protocol.Protocol):
    """A client that pipelines all its queries at once, reads one chunk of
    answers and then nothing more until ``drain`` (a client that asks
    much and reads slowly)."""

    def __init__(self, queries):
        self.data = framed(queries)
        self.answers = 0
        self.sizes = set()
        self.holding = True
        self._need = None       # bytes of the frame being read
        self._head = b""

    def connectionMade(self):
        self.transport.write(self.data)

    def dataReceived(self, data):
        i, end = 0, len(data)
        while i < end:
            if self._need is None:
                take = data[i:i + 2 - len(self._head)]
                self._head += take
                i += len(take)
                if len(self._head) == 2:
                    self._need = struct.unpack("!H", self._head)[0]
                    self.sizes.add(self._need)
                    self._head = b""
                continue
            take = min(self._need, end - i)
            self._need -= take
            i += take
            if not self._need:
                self._need = None
                self.answers += 1
        if self.holding:
            self.transport.pauseProducing()

    def drain(self):
        self.holding = False
        self.transport.resumeProducing()


def unsent(conn):
    """Bytes the server wrote to connection ``conn`` that no socket has
    taken yet: in the TLS layer's buffers (if any) and in the TCP
    transport's."""
    total = 0
    t = conn.transport
    while t is not None:
        aggregator = getattr(t, "_aggregator", None)
        if aggregator is not None:
            total += sum(len(b) for b in getattr(aggregator, "_buffer", ()))
        total += sum(len(b) for b in getattr(t, "_appSendBuffer", ()))
        if hasattr(type(t), "writeSomeData"):
            return total + stream._buffered(t)
        t = getattr(t, "transport", None)
    return total


class PipelineFloodTest(unittest.TestCase):
    """Clients pipeline 1,000 queries each for a 63 KB answer and read
    slowly: each connection stops being read while its unsent answers
    pass the limit, so what the server holds per connection stays
    bounded (without the bound, all 63 MB of each client's answers
    waited in the server's memory); other clients are answered all
    along, and the slow clients get every answer once they read."""

    CLIENTS = 3
    QUERIES = 1000
    #: What a connection may hold unsent: the limit, one answer past it,
    #: and the TLS layer's batch of small writes.
    BOUND = stream.UNSENT_LIMIT + 2 * 65536

    def setUp(self):
        util.capture_log(self)
        self.zones = util.write_files(self, {"db.example.org": ZONE})

    @defer.inlineCallbacks
    def start(self, scheme, tls=""):
        app = yield util.start(
            self, "%s://.:0 {\n    bind 127.0.0.1\n%s"
                  "    file %s/db.example.org example.org\n"
                  "    timeouts {\n        write 1h\n    }\n}\n"
                  % (scheme, tls, self.zones))
        [listener] = app.listeners.values()
        return app, listener.stream

    @defer.inlineCallbacks
    def flood(self, factory, connect, ask):
        """Run the flood on ``factory``'s listener; ``ask()`` is another
        client's query for www.example.org (a Deferred answer)."""
        hoarders = [_Hoarder(big_queries(self.QUERIES))
                    for _ in range(self.CLIENTS)]
        connectors = [connect(protocol.ClientFactory.forProtocol(
            lambda h=h: h)) for h in hoarders]
        self.addCleanup(lambda: [c.disconnect() for c in connectors])
        conns = factory.connections

        def settled():
            if any(unsent(p) > self.BOUND for p in conns):
                return True     # the attack got through: fail below
            return (len(conns) == self.CLIENTS
                    and all(p.paused for p in conns))
        yield util.wait_for(settled, 60)
        self.assertLess(max(unsent(p) for p in conns), self.BOUND)
        # Another client is answered while the flood holds.
        for _ in range(3):
            m = yield ask()
            self.assertEqual(util.rrs(m),
                             ["www.example.org. 3600 IN A 192.0.2.2"])
        self.assertLess(max(unsent(p) for p in conns), self.BOUND)
        for h in hoarders:
            h.drain()
        yield util.wait_for(
            lambda: all(h.answers == self.QUERIES for h in hoarders), 120)
        sizes = set().union(*(h.sizes for h in hoarders))
        self.assertEqual(len(sizes), 1)
        self.assertGreater(sizes.pop(), 60000)

    @defer.inlineCallbacks
    def test_tcp(self):
        app, factory = yield self.start("dns")
        port = app.port()
        turn = []

        def ask():
            turn.append(None)
            return util.query(port, "www.example.org.",
                              proto=("udp", "tcp")[len(turn) % 2])
        yield self.flood(factory, lambda f: reactor.connectTCP(
            "127.0.0.1", port, f), ask)

    @defer.inlineCallbacks
    def test_dot(self):
        _, _, cert, key = tlsutil.certs(self)
        app, factory = yield self.start(
            "tls", "    tls %s %s\n" % (cert, key))
        port = app.port(transport="tls")
        ctx = tlsutil.client_context()

        def ask():
            q = dns.message.make_query("www.example.org.", "A")
            return tlsutil.dot(port, q, ctx)
        yield self.flood(factory, lambda f: reactor.connectSSL(
            "127.0.0.1", port, f, ssl.CertificateOptions()), ask)


class PendingQueriesTest(unittest.TestCase):
    """A client pipelines 300 queries that wait on the upstream: the
    connection has at most MAX_PENDING of them out at once, and reads
    the next ones as answers come back (without the bound, all 300 went
    to the upstream at once, and their answers would pile up together)."""

    @defer.inlineCallbacks
    def test_pending_bounded(self):
        util.capture_log(self)
        up = Upstream().start()
        self.addCleanup(up.stop)
        up.held = True
        app = yield util.start(self, ".:0 {\n    bind 127.0.0.1\n"
                               "    forward . %s\n}\n" % up.addr())
        total = 300
        answers = util.send_tcp(app.port(), [
            dns.message.make_query("q%d.example." % i, "A", id=i).to_wire()
            for i in range(total)], timeout=60)
        [conn] = yield util.wait_for(
            lambda: list(app.listeners[("dns", "127.0.0.1", "0")]
                         .stream.connections))
        released = peak = 0
        while released < total:
            want = min(stream.MAX_PENDING, total - released)
            yield util.wait_for(lambda: len(up.pending) >= want, 30)
            peak = max(peak, len(up.pending))
            self.assertLessEqual(len(up.pending), stream.MAX_PENDING)
            self.assertLessEqual(conn.pending, stream.MAX_PENDING)
            self.assertEqual(conn.paused, want == stream.MAX_PENDING)
            released += len(up.pending)
            up.release()
        replies = yield answers
        self.assertEqual(peak, stream.MAX_PENDING)
        self.assertEqual(len(replies), total)
        self.assertEqual({dns.message.from_wire(r).rcode() for r in replies},
                         {dns.rcode.NOERROR})
        self.assertEqual(up.count(qtype="A"), total)
