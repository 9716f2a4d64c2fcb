"""DoT's two TLS paths: the standard library's ssl with the framing in
one protocol (tlsstream.DoTProtocol) for the settings it can express,
Twisted's TLS layer over pyOpenSSL for the others; and the fast path
against awkward clients (garbage, a failed handshake, a record cut off,
queries split across records, large answers, pipelining, close_notify).
"""

import socket
import ssl
import struct

import dns.message
import dns.rcode
from twisted.internet import defer, protocol, reactor, task, threads
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.trial import unittest

from corednstw.dnsserver import stream, tlsconfig, tlsstream
from tests import test_tls
from tests.support import tlsutil, util

#: About 63 KB of TXT records: an answer of several TLS records.
BIG = "".join('big 3600 IN TXT "%03d%s"\n' % (i, "x" * 247)
              for i in range(235))
ZONE = ("$ORIGIN example.org.\n@ 3600 IN SOA ns hostmaster 1 7200 3600 "
        "1209600 3600\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.1\n"
        "www 3600 IN A 192.0.2.2\n" + BIG)

COREFILE = """tls://.:0 {
    bind 127.0.0.1
    tls %(cert)s %(key)s %(ca)s%(opts)s
    file %(zones)s/db.example.org example.org
    timeouts {
        read 2s
        idle 2s
    }
}
"""


def frame(wire):
    return struct.pack("!H", len(wire)) + wire


def query(name, rtype="A", qid=0):
    return dns.message.make_query(name, rtype, id=qid).to_wire()


class RawClient:
    """A blocking TLS client over memory BIOs: the test decides what goes
    into each TLS record and each TCP write."""

    def __init__(self, port, ctx):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out,
                                server_hostname=tlsutil.HOSTNAME)
        self.plain = b""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.flush()
                self.fill()
        self.flush()

    def flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.inc.write(data)

    def record(self, plain):
        """The ciphertext of one record of ``plain``."""
        self.tls.write(plain)
        return self.out.read()

    def read(self, n):
        while len(self.plain) < n:
            try:
                chunk = self.tls.read(65536)
            except ssl.SSLWantReadError:
                self.fill()
                continue
            if not chunk:       # close_notify
                raise ssl.SSLZeroReturnError("closed")
            self.plain += chunk
        got, self.plain = self.plain[:n], self.plain[n:]
        return got

    def answer(self):
        n = struct.unpack("!H", self.read(2))[0]
        return dns.message.from_wire(self.read(n))

    def until_closed(self):
        """Read to the end: (answers, whether close_notify came)."""
        answers = []
        while True:
            try:
                answers.append(self.answer())
            except ssl.SSLZeroReturnError:
                return answers, True
            except (ConnectionError, OSError):
                return answers, False

    def close(self):
        self.sock.close()


class Base(unittest.TestCase):

    opts = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        zones = util.write_files(self, {"db.example.org": ZONE})
        self.app = yield util.start(self, COREFILE % {
            "cert": self.cert, "key": self.key, "ca": self.ca,
            "opts": self.opts, "zones": zones})
        self.port = self.app.port(transport="tls")
        self.stream = self.app.listeners[("tls", "127.0.0.1", "0")].stream

    def ctx(self, **kw):
        return tlsutil.client_context(self.ca, **kw)

    def in_thread(self, fn, *args):
        return threads.deferToThread(fn, *args)

    def connection(self):
        [p] = self.stream.connections
        return p

    @defer.inlineCallbacks
    def gone(self):
        """Every connection is forgotten, and a new client is answered."""
        yield util.wait_for(lambda: not self.stream.connections)
        m = yield tlsutil.dot(self.port, dns.message.make_query(
            "www.example.org.", "A"), self.ctx())
        self.assertEqual(util.rrs(m), ["www.example.org. 3600 IN A "
                                       "192.0.2.2"])

    @defer.inlineCallbacks
    def path_of_a_connection(self, ctx=None):
        """The protocol serving a connection, and whether it answered."""
        client = yield self.in_thread(RawClient, self.port, ctx or self.ctx())
        self.addCleanup(client.close)
        yield self.in_thread(client.sock.sendall,
                             client.record(frame(query("www.example.org."))))
        m = yield self.in_thread(client.answer)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        return self.connection()


class FastPathTest(Base):
    """nocert: the standard library's path."""

    @defer.inlineCallbacks
    def test_used(self):
        p = yield self.path_of_a_connection()
        self.assertIsInstance(p, tlsstream.DoTProtocol)
        self.assertNotIsInstance(p.transport, TLSMemoryBIOProtocol)

    @defer.inlineCallbacks
    def test_garbage(self):
        # Not TLS at all: an alert, then the connection is closed.
        got = yield self.in_thread(self._send_raw, b"GET / HTTP/1.1\r\n"
                                   b"Host: x\r\n\r\n" * 10)
        self.assertLess(len(got), 100)
        yield self.gone()

    def _send_raw(self, data):
        with socket.create_connection(("127.0.0.1", self.port),
                                      timeout=5) as s:
            s.sendall(data)
            got = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except ConnectionError:
                    return got
                if not chunk:
                    return got
                got += chunk

    @defer.inlineCallbacks
    def test_failed_handshake(self):
        _, other_ca, _, _ = tlsutil.certs(self)
        yield self.assertFailure(
            self.in_thread(RawClient, self.port,
                           tlsutil.client_context(other_ca)),
            ssl.SSLCertVerificationError)
        yield self.gone()

    @defer.inlineCallbacks
    def test_garbage_after_the_handshake(self):
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        record = client.record(frame(query("www.example.org.")))
        # The record's body altered: it does not decrypt.
        bad = record[:10] + bytes(b ^ 0xFF for b in record[10:20]) \
            + record[20:]
        yield self.in_thread(client.sock.sendall, bad)
        answers, _ = yield self.in_thread(client.until_closed)
        self.assertEqual(answers, [])
        yield self.gone()

    @defer.inlineCallbacks
    def test_closed_mid_record(self):
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        record = client.record(frame(query("www.example.org.")))
        yield self.in_thread(client.sock.sendall, record[:len(record) // 2])
        yield util.wait_for(lambda: self.stream.connections)
        client.close()
        yield self.gone()

    @defer.inlineCallbacks
    def test_query_split_across_records_and_segments(self):
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        frames = b"".join(frame(query("www.example.org.", qid=i))
                          for i in range(1, 4))
        # Three records: a length's first byte; the rest of the first
        # query and half the second; the remainder.  The TCP writes cut
        # the records elsewhere again.
        cut = len(frame(query("www.example.org."))) + 10
        data = (client.record(frames[:1]) + client.record(frames[1:cut])
                + client.record(frames[cut:]))
        for i in range(0, len(data), 7):
            yield self.in_thread(client.sock.sendall, data[i:i + 7])
        answers = yield self.in_thread(
            lambda: [client.answer() for _ in range(3)])
        self.assertEqual([m.id for m in answers], [1, 2, 3])

    @defer.inlineCallbacks
    def test_large_answer(self):
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        yield self.in_thread(client.sock.sendall, client.record(
            frame(query("big.example.org.", "TXT", qid=7))))
        m = yield self.in_thread(client.answer)
        self.assertEqual(m.id, 7)
        self.assertEqual(len(m.answer[0]), 235)
        self.assertGreater(len(m.to_wire()), 60000)

    @defer.inlineCallbacks
    def test_pipelined(self):
        # Small answers (encrypted together) and large ones (past
        # FLUSH_AT and the unsent limit) in one write.
        names = ["www.example.org."] * 300 + ["big.example.org."] * 8
        data = b"".join(frame(query(n, "TXT" if n[0] == "b" else "A",
                                    qid=i)) for i, n in enumerate(names))
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        record = yield self.in_thread(
            lambda: b"".join(client.record(data[i:i + 16384])
                             for i in range(0, len(data), 16384)))
        yield self.in_thread(client.sock.sendall, record)
        answers = yield self.in_thread(
            lambda: [client.answer() for _ in names])
        self.assertEqual([m.id for m in answers], list(range(len(names))))
        self.assertEqual({len(m.answer[0]) for m in answers[300:]}, {235})
        self.assertGreater(8 * 60000, stream.UNSENT_LIMIT)

    @defer.inlineCallbacks
    def test_close_notify_after_queries(self):
        # The client's close_notify after its queries: the answers, then
        # the server's close_notify.
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        data = client.record(b"".join(
            frame(query("www.example.org.", qid=i)) for i in range(5)))
        try:
            client.tls.unwrap()
        except ssl.SSLWantReadError:
            pass
        yield self.in_thread(client.sock.sendall, data + client.out.read())
        answers, notified = yield self.in_thread(client.until_closed)
        self.assertEqual([m.id for m in answers], list(range(5)))
        self.assertTrue(notified)
        yield self.gone()

    @defer.inlineCallbacks
    def test_server_close_sends_close_notify(self):
        # The idle timeout ends a connection; maxtcpqueries' end is a
        # close that sends close_notify after the answers.
        self.app.listeners[("tls", "127.0.0.1", "0")].stream.timeouts \
            .max_queries = 2
        client = yield self.in_thread(RawClient, self.port, self.ctx())
        self.addCleanup(client.close)
        yield self.in_thread(client.sock.sendall, client.record(b"".join(
            frame(query("www.example.org.", qid=i)) for i in range(3))))
        answers, notified = yield self.in_thread(client.until_closed)
        self.assertEqual([m.id for m in answers], [0, 1])
        self.assertTrue(notified)


class ImmediateTest(FastPathTest):
    """The same with each read served at once (tlsstream.ROUND off)."""

    def setUp(self):
        self.patch(tlsstream, "ROUND", False)
        return FastPathTest.setUp(self)

    @defer.inlineCallbacks
    def test_used(self):
        p = yield self.path_of_a_connection()
        self.assertIsInstance(p, tlsstream.DoTProtocol)
        self.assertFalse(p._queued)


class RoundTest(Base):
    """Many connections' reads served in one round (tlsstream._Round)."""

    @defer.inlineCallbacks
    def test_many_connections_at_once(self):
        clients = []
        for _ in range(6):
            c = yield self.in_thread(RawClient, self.port, self.ctx())
            self.addCleanup(c.close)
            clients.append(c)
        # Every client's queries (one record each, as dnsperf sends them)
        # are sent before the server's reactor gets to any of them.
        data = [b"".join(c.record(frame(query(
            "big.example.org." if i == 2 else "www.example.org.",
            "TXT" if i == 2 else "A", qid=100 * k + i))) for i in range(5))
            for k, c in enumerate(clients)]
        rounds = []
        run = tlsstream._ROUND.run

        def counted():
            rounds.append(len(tlsstream._ROUND.conns))
            run()
        self.patch(tlsstream._ROUND, "run", counted)

        # Written from the reactor's thread: all are in the sockets before
        # the reactor polls them again.
        for c, d in zip(clients, data):
            c.sock.sendall(d)
        for k, c in enumerate(clients):
            answers = yield self.in_thread(
                lambda c=c: [c.answer() for _ in range(5)])
            self.assertEqual([m.id for m in answers],
                             [100 * k + i for i in range(5)])
            self.assertEqual(len(answers[2].answer[0]), 235)
        self.assertGreater(max(rounds), 1)


class VerifyIfGivenTest(Base):

    opts = " {\n        client_auth verify_if_given\n    }"

    @defer.inlineCallbacks
    def test_fast_path_both_ways(self):
        p = yield self.path_of_a_connection()
        self.assertIsInstance(p, tlsstream.DoTProtocol)
        self.connection().transport.abortConnection()
        yield util.wait_for(lambda: not self.stream.connections)
        p = yield self.path_of_a_connection(
            self.ctx(cert=self.cert, key=self.key))
        self.assertIsInstance(p, tlsstream.DoTProtocol)

    @defer.inlineCallbacks
    def test_certificate_of_another_ca_refused(self):
        _, _, cert, key = tlsutil.certs(self)
        q = dns.message.make_query("www.example.org.", "A")
        yield self.assertFailure(tlsutil.dot(
            self.port, q, self.ctx(cert=cert, key=key)), Exception)


class RequireAndVerifyTest(Base):

    opts = " {\n        client_auth require_and_verify\n    }"

    @defer.inlineCallbacks
    def test_fast_path(self):
        p = yield self.path_of_a_connection(
            self.ctx(cert=self.cert, key=self.key))
        self.assertIsInstance(p, tlsstream.DoTProtocol)


class RequestTest(Base):
    """client_auth request: a certificate is asked for and not checked,
    which only pyOpenSSL can do."""

    opts = " {\n        client_auth request\n    }"

    @defer.inlineCallbacks
    def test_fallback_path(self):
        p = yield self.path_of_a_connection()
        self.assertNotIsInstance(p, tlsstream.DoTProtocol)
        self.assertIsInstance(p, stream.DNSStreamProtocol)
        self.assertIsInstance(p.transport, TLSMemoryBIOProtocol)

    @defer.inlineCallbacks
    def test_certificate_of_another_ca_taken(self):
        _, _, cert, key = tlsutil.certs(self)
        q = dns.message.make_query("www.example.org.", "A")
        m = yield tlsutil.dot(self.port, q, self.ctx(cert=cert, key=key))
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_large_answer(self):
        q = dns.message.make_query("big.example.org.", "TXT")
        m = yield tlsutil.dot(self.port, q, self.ctx())
        self.assertEqual(len(m.answer[0]), 235)


class RequireTest(Base):

    opts = " {\n        client_auth require\n    }"

    @defer.inlineCallbacks
    def test_fallback_path(self):
        _, _, cert, key = tlsutil.certs(self)
        p = yield self.path_of_a_connection(self.ctx(cert=cert, key=key))
        self.assertIsInstance(p.transport, TLSMemoryBIOProtocol)

    @defer.inlineCallbacks
    def test_without_a_certificate(self):
        q = dns.message.make_query("www.example.org.", "A")
        yield self.assertFailure(tlsutil.dot(self.port, q, self.ctx()),
                                 Exception)


class KeyLogFallbackTest(unittest.TestCase):
    """A key log is written by the pyOpenSSL path, which serves it
    (test_tls.KeyLogTest checks the lines)."""

    def setUp(self):
        util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)

    @defer.inlineCallbacks
    def test_fallback_path(self):
        path = "%s/keys.log" % self.dir
        app = yield util.start(self, test_tls.corefile_text(
            self.cert, self.key, self.ca,
            " {\n        keylog %s\n    }" % path))
        settings = app.config.blocks[0].settings["tls"]
        self.assertIsNone(settings.ssl_context(()))
        self.assertIsNotNone(settings.context(()))


class DoTFallbackTest(test_tls.DoTTest):
    """Every DoT test again on the pyOpenSSL path (client_auth request
    takes a client without a certificate)."""

    opts = " {\n        client_auth request\n    }"

    def test_path(self):
        settings = self.app.config.blocks[0].settings["tls"]
        self.assertIsNone(settings.ssl_context(()))


class _Echo(protocol.Protocol):
    """Greets before the handshake is done, echoes, says which ALPN
    protocol was chosen, closes on b"bye"."""

    def connectionMade(self):
        self.transport.write(b"hello ")

    def dataReceived(self, data):
        if data == b"alpn?":
            self.transport.write(
                self.transport.negotiatedProtocol or b"none")
        elif data == b"bye":
            self.transport.write(b"bye")
            self.transport.loseConnection()
        else:
            self.transport.writeSequence([data, data])


class TLSFactoryTest(unittest.TestCase):
    """tlsstream.TLSFactory: any protocol over the standard library's
    TLS, pyOpenSSL for the settings only it can serve."""

    def listen(self, client_auth="nocert"):
        _, self.ca, cert, key = tlsutil.certs(self)
        settings = tlsconfig.ServerTLS(cert, key, self.ca,
                                       client_auth=client_auth)
        factory = tlsstream.TLSFactory(
            tlsconfig.Switchable(settings, tlsconfig.HTTP_ALPN),
            protocol.Factory.forProtocol(_Echo))
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.factory = factory
        return port.getHost().port

    def talk(self, port, alpn, *messages):
        ctx = tlsutil.client_context(self.ca)
        ctx.set_alpn_protocols(alpn)
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        got = []
        with ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME) as s:
            got.append(s.recv(100))
            for m in messages:
                s.sendall(m)
                got.append(s.recv(100))
            if messages[-1] == b"bye":
                got.append(s.recv(100))     # close_notify: b""
        return got

    @defer.inlineCallbacks
    def test_fast_path(self):
        port = self.listen()
        got = yield threads.deferToThread(
            self.talk, port, ["h2", "http/1.1"], b"alpn?", b"ab", b"bye")
        self.assertEqual(got, [b"hello ", b"h2", b"abab", b"bye", b""])
        got = yield threads.deferToThread(
            self.talk, port, ["http/1.1"], b"alpn?", b"bye")
        self.assertEqual(got, [b"hello ", b"http/1.1", b"bye", b""])
        got = yield threads.deferToThread(
            self.talk, port, ["spdy/3"], b"alpn?", b"bye")
        self.assertEqual(got, [b"hello ", b"none", b"bye", b""])
        p = self.factory.buildProtocol(None)
        self.assertIsInstance(p, tlsstream.TLSServerProtocol)

    @defer.inlineCallbacks
    def test_garbage(self):
        port = self.listen()

        def send():
            with socket.create_connection(("127.0.0.1", port),
                                          timeout=5) as s:
                s.sendall(b"\x16\x03\x01\x00\x05hello" * 3)
                return s.recv(100)
        got = yield threads.deferToThread(send)
        self.assertTrue(got.startswith(b"\x15"))    # an alert

    @defer.inlineCallbacks
    def test_fallback_for_request(self):
        port = self.listen("request")
        got = yield threads.deferToThread(
            self.talk, port, ["h2"], b"alpn?", b"bye")
        self.assertEqual(got, [b"hello ", b"h2", b"bye", b""])
        p = self.factory.buildProtocol(None)
        self.assertIsInstance(p, TLSMemoryBIOProtocol)


class _Gone:
    """A TCP transport the client has left."""

    disconnecting = True
    disconnected = True

    def write(self, data):
        raise AssertionError("written after the client left")


class _AnswerAtOnce:
    def handle(self, data, host, port, proto, local, send):
        send(data)


class BookkeepingTest(unittest.TestCase):
    """DoTProtocol's per-query bookkeeping without a connection."""

    def protocol(self, max_queries=-1):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        p = tlsstream.DoTProtocol(
            None, None, stream.Timeouts(max_queries=max_queries), ctx)
        p.factory = type("F", (), {"mux": _AnswerAtOnce()})()
        p.transport = _Gone()
        p.paused = False
        p.setTimeout = lambda period: None
        return p

    def test_answer_after_the_client_left_is_dropped(self):
        p = self.protocol()
        p._send(b"\x00" * 12)
        self.assertEqual((p._out, p._outlen), ([], 0))

    def test_queries_counted_per_read(self):
        p = self.protocol()
        p._reading = True
        p._plain = b"\x00\x0c" + b"\x00" * 12
        p._plain *= 3
        p._frames()
        self.assertEqual((p.queries, p._plain), (3, b""))
        self.assertEqual(len(p._out), 6)


class _PlainTLS:
    """A TLSSession stand-in passing plaintext through."""

    closed = False

    def __init__(self):
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.sent = []

    def receive(self, data):
        if data:
            self.incoming.write(data)
        return self.incoming.read()

    def send(self, data):
        self.sent.append(data)

    def take(self):
        return b""


class _Open:
    """A TCP transport that records how it ends."""

    disconnecting = False
    disconnected = False
    aborted = False

    def abortConnection(self):
        self.aborted = self.disconnecting = True


class TimeoutInRoundTest(unittest.TestCase):
    """A timeout that fires after a read and before its round: what was
    read before it is served as if at once."""

    def protocol(self):
        clock = task.Clock()
        # A round of its own: the reactor's is left to the listeners.
        self.patch(tlsstream, "_ROUND", tlsstream._Round())
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        p = tlsstream.DoTProtocol(None, None, stream.Timeouts(), ctx)
        p.factory = type("F", (), {"mux": _AnswerAtOnce()})()
        p.transport = _Open()
        p.tls = _PlainTLS()
        p.paused = False
        p.callLater = clock.callLater
        p.setTimeout(p.limits.idle)
        return p, clock

    def read_at_the_deadline(self, data):
        """``data`` read in the turn the idle timer falls due (the timer
        runs first, the round after it)."""
        p, clock = self.protocol()
        clock.rightNow = p.limits.idle
        p.dataReceived(data)
        self.assertTrue(p._queued)
        clock.advance(0)
        return p

    def test_query_read_before_the_timeout_is_answered(self):
        q = b"\x00\x07" + b"\x00" * 10
        p = self.read_at_the_deadline(frame(q))
        self.assertFalse(p.transport.aborted)
        self.assertEqual((p.queries, p.tls.sent), (1, [frame(q)]))
        self.assertTrue(p._TimeoutMixin__timeoutCall.active())
        p.setTimeout(None)

    def test_part_of_a_query_does_not_hold_the_timeout(self):
        p = self.read_at_the_deadline(frame(b"\x00\x07" + b"\x00" * 10)[:5])
        self.assertTrue(p.transport.aborted)
        self.assertEqual(p.queries, 0)

    def test_timeout_when_nothing_waits(self):
        p, clock = self.protocol()
        p.timeoutConnection()
        self.assertTrue(p.transport.aborted)
        p.setTimeout(None)


class _Conn:
    """What _Round calls on a connection, recorded."""

    def __init__(self, seen):
        self.seen = seen

    def _decrypt(self):
        self.seen.append(("decrypt", self))

    def _answer(self):
        self.seen.append(("answer", self))

    def _done(self):
        self.seen.append(("done", self))

    def callLater(self, delay, fn):
        raise AssertionError("no timed call inside a poll")


class RoundHookTest(unittest.TestCase):
    """The round at the end of the reactor's poll."""

    def test_served_after_the_poll_in_three_passes(self):
        seen = []
        a, b = _Conn(seen), _Conn(seen)
        r = tlsstream._Round()

        class Reactor:
            def doIteration(self, timeout):
                seen.append(("poll", timeout))
                r.add(a)
                r.add(b)
        reactor_ = Reactor()
        r.hook(reactor_)
        reactor_.doIteration(0.5)
        self.assertEqual(seen, [
            ("poll", 0.5), ("decrypt", a), ("decrypt", b), ("answer", a),
            ("answer", b), ("done", a), ("done", b)])
        self.assertEqual((r.conns, r.polling), ([], False))

    def test_outside_a_poll_a_call_due_at_once(self):
        r = tlsstream._Round()
        clock = task.Clock()
        seen = []
        c = _Conn(seen)
        c.callLater = clock.callLater
        r.add(c)
        self.assertEqual(seen, [])
        clock.advance(0)
        self.assertEqual([step for step, _ in seen],
                         ["decrypt", "answer", "done"])
