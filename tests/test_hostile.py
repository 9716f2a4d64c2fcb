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


class _Slowloris(protocol.Protocol):
    """Sends ``data`` one byte every ``interval`` seconds (a request that
    never ends: each byte would restart an idle timer) and notes when the
    server cuts it."""

    def __init__(self, data, interval=0.1):
        self.data = data
        self.interval = interval
        self.sent = 0
        self.opened = self.closed = None
        self.timer = None

    def connectionMade(self):
        self.opened = reactor.seconds()
        self.drip()

    def drip(self):
        self.timer = None
        if self.sent < len(self.data) - 1:
            self.transport.write(self.data[self.sent:self.sent + 1])
            self.sent += 1
            self.timer = reactor.callLater(self.interval, self.drip)

    def connectionLost(self, reason):
        self.closed = reactor.seconds()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def h2_bytes(headers, body=b"", end=True, size=None):
    """What an HTTP/2 client sends for one request on stream 1: the
    preface, its SETTINGS, HEADERS, then ``body`` as DATA (declared as
    ``size`` bytes when given: a frame that never ends)."""
    import h2.config
    import h2.connection
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None))
    conn.initiate_connection()
    conn.send_headers(1, headers, end_stream=end and not body)
    out = conn.data_to_send()
    if size is not None:
        return out + struct.pack("!I", size)[1:] + b"\x00\x00" + \
            struct.pack("!I", 1) + body
    if body:
        conn.send_data(1, body, end_stream=end)
    return out + conn.data_to_send()


def doh_get_path():
    import base64
    q = dns.message.make_query("www.example.org.", "A", id=0).to_wire()
    return b"/dns-query?dns=" + base64.urlsafe_b64encode(q).rstrip(b"=")


class _Listener:
    """A DoH or gRPC listener with a read timeout of 1 s, and clients of
    it."""

    READ = 1.0

    @defer.inlineCallbacks
    def serve(self, scheme, limits, tls=True):
        util.capture_log(self)
        self.ca = None
        text = ""
        if tls:
            _, self.ca, cert, key = tlsutil.certs(self)
            text = "    tls %s %s\n" % (cert, key)
        self.zones = util.write_files(self, {"db.example.org": ZONE})
        self.app = yield util.start(
            self, "%s://.:0 {\n    bind 127.0.0.1\n%s%s"
                  "    timeouts {\n        read 1s\n        idle 20s\n"
                  "    }\n    file %s/db.example.org example.org\n}\n"
                  % (scheme, text, limits, self.zones))
        [listener] = self.app.listeners.values()
        self.front = listener.stream
        self.port = listener.port

    def connect(self, p, alpn=None):
        factory = protocol.ClientFactory.forProtocol(lambda: p)
        if self.ca is None:
            c = reactor.connectTCP("127.0.0.1", self.port, factory)
        else:
            c = reactor.connectSSL("127.0.0.1", self.port, factory,
                                   ssl.CertificateOptions(
                                       acceptableProtocols=alpn))
        self.addCleanup(c.disconnect)


class SlowlorisTest(_Listener, unittest.TestCase):
    """Clients hold every connection a DoH or gRPC listener allows and send
    their requests a byte at a time.  Each request has the read timeout
    (1 s here) to arrive, whatever bytes come meanwhile: the slow clients
    are cut at that deadline (before it, every byte restarted the idle
    timer and they held the listener for good) and a client waiting for
    a connection gets its answer."""

    SLOTS = 4

    @defer.inlineCallbacks
    def attack(self, requests, alpn, ask):
        """``requests``: the bytes of each slow client; ``ask()``: the
        waiting client's query (a Deferred of the parsed answer)."""
        lorises = [_Slowloris(r) for r in requests]
        for p in lorises:
            self.connect(p, alpn)
        yield util.wait_for(lambda: self.front.paused
                            and len(self.front.connections) == self.SLOTS)
        m = yield ask()
        self.assertEqual(util.rrs(m),
                         ["www.example.org. 3600 IN A 192.0.2.2"])
        yield util.wait_for(lambda: all(p.closed for p in lorises), 15)
        for p in lorises:
            # Cut at the deadline, never before; the byte-a-time request
            # would have taken far longer to arrive.
            self.assertGreaterEqual(p.closed - p.opened, self.READ - 0.05)
            self.assertLess(p.sent, len(p.data) - 1)

    def doh(self, http2):
        import httpx2
        url = "https://127.0.0.1:%d%s" % (self.port, doh_get_path().decode())

        def run():
            with httpx2.Client(verify=False, http2=http2, timeout=10) as c:
                r = c.get(url)
                r.raise_for_status()
                return dns.message.from_wire(r.content)
        from twisted.internet import threads
        return threads.deferToThread(run)

    @defer.inlineCallbacks
    def test_doh_http1(self):
        yield self.serve("https", "    https {\n        max_connections "
                         "%d\n    }\n" % self.SLOTS)
        headers = (b"GET " + doh_get_path() + b" HTTP/1.1\r\nHost: x\r\n"
                   b"X-Pad: " + b"a" * 1000 + b"\r\n\r\n")
        body = (b"POST /dns-query HTTP/1.1\r\nHost: x\r\nContent-Length: "
                b"1000\r\n\r\n" + b"\x00" * 1000)
        yield self.attack([headers, body] * (self.SLOTS // 2),
                          [b"http/1.1"], lambda: self.doh(False))

    @defer.inlineCallbacks
    def test_doh_http2(self):
        yield self.serve("https", "    https {\n        max_connections "
                         "%d\n    }\n" % self.SLOTS)
        get = h2_bytes([(b":method", b"GET"), (b":scheme", b"https"),
                        (b":authority", b"x"), (b":path", doh_get_path())])
        post = h2_bytes([(b":method", b"POST"), (b":scheme", b"https"),
                         (b":authority", b"x"), (b":path", b"/dns-query")],
                        b"\x00" * 10, size=1000)
        yield self.attack([get, post] * (self.SLOTS // 2), [b"h2"],
                          lambda: self.doh(True))

    @defer.inlineCallbacks
    def test_grpc(self):
        from twisted.internet import threads

        from tests.support import grpcclient
        yield self.serve("grpc", "    grpc_server {\n        max_connections"
                         " %d\n    }\n" % self.SLOTS, tls=False)
        post = h2_bytes([(b":method", b"POST"), (b":scheme", b"http"),
                         (b":authority", b"x"),
                         (b":path", b"/coredns.dns.DnsService/Query"),
                         (b"content-type", b"application/grpc")],
                        b"\x00", size=1000)
        q = dns.message.make_query("www.example.org.", "A").to_wire()

        def ask():
            return threads.deferToThread(
                grpcclient.query, self.port, q, timeout=10).addCallback(
                    dns.message.from_wire)
        yield self.attack([post] * self.SLOTS, None, ask)


class _H2Client(protocol.Protocol):
    """An HTTP/2 client on h2's state machine: the events it received."""

    def __init__(self):
        import h2.config
        import h2.connection
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None))
        self.events = []
        self.closed = None

    def connectionMade(self):
        self.conn.initiate_connection()
        self.flush()

    def dataReceived(self, data):
        self.events.extend(self.conn.receive_data(data))
        self.flush()

    def flush(self):
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)

    def get(self, sid):
        self.conn.send_headers(sid, [
            (b":method", b"GET"), (b":scheme", b"https"),
            (b":authority", b"x"), (b":path", doh_get_path())],
            end_stream=True)
        self.flush()

    def answered(self, sid):
        import h2.events
        return any(type(e) is h2.events.StreamEnded and e.stream_id == sid
                   for e in self.events)

    def connectionLost(self, reason):
        self.closed = reactor.seconds()


class SlowStreamTest(_Listener, unittest.TestCase):
    """HTTP/2 requests on a connection that sends whole frames."""

    @defer.inlineCallbacks
    def test_slow_body_resets_the_stream(self):
        """A POST whose body comes a byte a frame: its stream is reset
        (CANCEL) at the read timeout; the connection serves on."""
        import h2.errors
        import h2.events
        from twisted.internet import task
        yield self.serve("https", "")
        client = _H2Client()
        self.connect(client, [b"h2"])
        yield util.wait_for(lambda: client.events)
        client.conn.send_headers(1, [
            (b":method", b"POST"), (b":scheme", b"https"),
            (b":authority", b"x"), (b":path", b"/dns-query")])
        client.flush()
        began = reactor.seconds()

        def drip():
            client.conn.send_data(1, b"\x00")
            client.flush()
        dripping = task.LoopingCall(drip)
        dripping.start(0.1)
        self.addCleanup(lambda: dripping.running and dripping.stop())
        resets = yield util.wait_for(lambda: [
            e for e in client.events if type(e) is h2.events.StreamReset],
            15)
        dripping.stop()
        self.assertGreaterEqual(reactor.seconds() - began, self.READ - 0.05)
        self.assertEqual([(e.stream_id, e.error_code) for e in resets],
                         [(1, h2.errors.ErrorCodes.CANCEL)])
        client.get(3)
        yield util.wait_for(lambda: client.answered(3))
        self.assertIsNone(client.closed)

    @defer.inlineCallbacks
    def test_requests_now_and_then_keep_the_connection(self):
        """Whole requests that come slowly, spread over more than the
        read timeout, are answered on the same connection."""
        from twisted.internet import task
        yield self.serve("https", "")
        client = _H2Client()
        self.connect(client, [b"h2"])
        yield util.wait_for(lambda: client.events)
        streams = iter(range(1, 13, 2))
        asking = task.LoopingCall(lambda: client.get(next(streams)))
        asking.start(0.4).addErrback(lambda f: f.trap(StopIteration))
        self.addCleanup(lambda: asking.running and asking.stop())
        yield util.wait_for(lambda: all(client.answered(sid)
                                        for sid in range(1, 13, 2)), 15)
        self.assertIsNone(client.closed)


def quic_client(port):
    """An aioquic client connection to 127.0.0.1:``port`` that has made
    its first Initial."""
    import ssl as pyssl
    import time

    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection
    config = QuicConfiguration(is_client=True, alpn_protocols=["doq"],
                               server_name="localhost")
    config.verify_mode = pyssl.CERT_NONE
    qc = QuicConnection(configuration=config)
    qc.connect(("127.0.0.1", port), now=time.time())
    return qc


class _Initials(protocol.DatagramProtocol):
    """Sends QUIC Initials and sorts what comes back.

    ``flood`` sends copies of one client's Initial, each for a connection
    ID of its own (what a spoofing client does: it never sees the
    answers); ``validating`` starts real clients that answer a Retry with
    its token, then go silent (what a flooding client that receives at
    its address can do).  ``mark`` asks for a Version Negotiation: its
    reply says the server has handled every datagram sent before."""

    def __init__(self, port):
        self.port = port
        self.retries = 0
        self.tokens = 0
        self.marks = 0
        self.clients = {}       # our connection ID -> client connection

    def send(self, data):
        self.transport.write(data, ("127.0.0.1", self.port))

    def flood(self, n):
        import os
        initial = bytearray(quic_client(self.port).datagrams_to_send(
            now=reactor.seconds())[0][0])
        for _ in range(n):
            initial[6:14] = os.urandom(8)       # the destination ID
            self.send(bytes(initial))

    def validating(self, n):
        for _ in range(n):
            qc = quic_client(self.port)
            self.clients[qc.host_cid] = qc
            for data, _ in qc.datagrams_to_send(now=reactor.seconds()):
                self.send(data)

    def mark(self):
        import os
        self.send(b"\xc0\x1a\x2a\x3a\x4a\x08" + os.urandom(8) + b"\x08"
                  + os.urandom(8) + b"\x00" * 1200)

    def datagramReceived(self, data, addr):
        from aioquic.buffer import Buffer
        from aioquic.quic.packet import QuicPacketType, pull_quic_header
        header = pull_quic_header(Buffer(data=data), host_cid_length=8)
        if header.version == 0:
            self.marks += 1
        elif header.packet_type == QuicPacketType.RETRY:
            self.retries += 1
            qc = self.clients.pop(header.destination_cid, None)
            if qc is not None:
                qc.receive_datagram(data, addr, now=reactor.seconds())
                for out, _ in qc.datagrams_to_send(now=reactor.seconds()):
                    self.send(out)
                self.tokens += 1


class QuicFloodTest(unittest.TestCase):
    """A flood of Initials on a DoQ listener: past RETRY_AFTER handshakes
    in progress (4 here) a new client gets a Retry and no connection
    until it comes back with the token; handshakes in progress never pass
    MAX_HANDSHAKES (8 here), and those never finished are forgotten at
    the read timeout; a real client gets its answer all along.  Without
    the bound each Initial made a connection that stayed for the idle
    timeout."""

    @defer.inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, _, cert, key = tlsutil.certs(self)
        self.app = yield util.start(
            self, "quic://.:0 {\n    bind 127.0.0.1\n    tls %s %s\n"
                  "    timeouts {\n        read 2s\n    }\n    whoami\n}\n"
                  % (cert, key))
        self.port = self.app.port(transport="quic")
        [listener] = self.app.listeners.values()
        self.server = listener.stream
        self.server.retry_after = 4
        self.server.max_handshakes = 8
        self.initials = _Initials(self.port)
        udp = reactor.listenUDP(0, self.initials, interface="127.0.0.1")
        self.addCleanup(udp.stopListening)

    def handshaking(self):
        return sum(1 for c in set(self.server.conns.values())
                   if c.open and not c.admitted)

    @defer.inlineCallbacks
    def marked(self):
        """Every datagram sent so far has been handled."""
        before = self.initials.marks
        self.initials.mark()
        yield util.wait_for(lambda: self.initials.marks > before)

    @defer.inlineCallbacks
    def answered(self):
        from twisted.internet import threads

        from tests.support import doq
        q = dns.message.make_query("example.org.", "A", id=0)
        res = yield threads.deferToThread(
            doq.exchange, self.port, [doq.prefixed(q.to_wire())])
        [answer] = res.answers.values()
        self.assertEqual(dns.message.from_wire(answer).rcode(),
                         dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_spoofed_flood_gets_retries(self):
        self.initials.flood(40)
        yield self.marked()
        self.assertEqual(self.initials.retries, 36)
        self.assertEqual(self.handshaking(), 4)
        yield self.answered()       # past a Retry of its own
        self.assertEqual(self.initials.retries, 36)
        self.initials.flood(40)
        yield self.marked()
        self.assertLessEqual(self.handshaking(), 4)
        self.assertGreaterEqual(self.initials.retries, 72)
        yield util.wait_for(lambda: not self.server.conns, 10)
        self.assertEqual(self.server.handshakes, 0)

    @defer.inlineCallbacks
    def test_validated_handshakes_capped(self):
        self.initials.validating(12)
        yield util.wait_for(lambda: self.initials.tokens == 8)
        yield self.marked()
        self.assertEqual(self.handshaking(), 8)
        self.assertEqual(self.server.handshakes, 8)
        # Never finished, they are forgotten at the read timeout; then a
        # real client is served.
        yield util.wait_for(lambda: not self.server.conns, 10)
        self.assertEqual(self.server.handshakes, 0)
        yield self.answered()


class RetryTest(unittest.TestCase):
    """The Retry packets and tokens of the DoQ listener."""

    def test_packet_as_aioquic_encodes_it(self):
        from aioquic.quic.packet import QuicProtocolVersion, encode_quic_retry

        from corednstw.dnsserver import doq
        for version in (QuicProtocolVersion.VERSION_1,
                        QuicProtocolVersion.VERSION_2):
            self.assertEqual(
                doq.retry_packet(version, b"s" * 8, b"d" * 8, b"o" * 20,
                                 b"token"),
                encode_quic_retry(version=version, source_cid=b"s" * 8,
                                  destination_cid=b"d" * 8,
                                  original_destination_cid=b"o" * 20,
                                  retry_token=b"token"))

    def test_tokens(self):
        from corednstw.dnsserver import doq
        tokens = doq.RetryTokens()
        addr = ("127.0.0.1", 5300)
        token = tokens.create(addr, b"original", b"retrycid", 100.0)
        self.assertEqual(tokens.validate(addr, b"retrycid", token, 101.0),
                         b"original")
        self.assertEqual(tokens.validate(addr, b"retrycid", token, 130.0),
                         b"original")
        for other in (
                (("127.0.0.2", 5300), b"retrycid", token, 101.0),
                (("127.0.0.1", 5301), b"retrycid", token, 101.0),
                (addr, b"othercid", token, 101.0),
                (addr, b"retrycid", token, 130.5),      # expired
                (addr, b"retrycid", token, 99.0),       # from the future
                (addr, b"retrycid", token[:-1] + bytes([token[-1] ^ 1]),
                 101.0),
                (addr, b"retrycid", token[:12], 101.0),
                (addr, b"retrycid", b"", 101.0),
                (addr, b"retrycid", doq.RetryTokens().create(
                    addr, b"original", b"retrycid", 100.0), 101.0)):
            self.assertIsNone(tokens.validate(*other), other[1:])
