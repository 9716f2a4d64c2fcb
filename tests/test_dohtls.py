"""DoH and gRPC over TLS: the standard library's ssl
(tlsstream.TLSServerProtocol) where the settings allow it, Twisted's TLS
layer over pyOpenSSL for client_auth request and require and a key log;
on both, an HTTP/2 answer to a request that came in its own TLS record
goes out in its own record (dnsperf's DoH client reads one answer per
record and loses the others a record holds)."""

import socket
import ssl
import struct

import dns.message
import dns.query
import dns.rcode
from twisted.internet import defer, threads
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.trial import unittest

from corednstw.dnsserver import grpcdns, tlsstream
from tests.support import grpcclient, tlsutil, util

COREFILE = """%(scheme)s://.:0 {
    bind 127.0.0.1
    tls %(cert)s %(key)s %(ca)s%(opts)s
    whoami
}
"""

_FRAME = struct.Struct("!BHBBI")
DATA, END_STREAM = 0, 0x1


def wire(name="example.org."):
    return dns.message.make_query(name, "A").to_wire()


class RecordClient:
    """An HTTP/2 client over memory BIOs: each request goes in its own
    TLS record, all of them in one TCP write, and the answers are read
    one TLS record at a time."""

    def __init__(self, port, ctx):
        import h2.config
        import h2.connection
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out,
                                server_hostname=tlsutil.HOSTNAME)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                self.inc.write(self.sock.recv(65536))
        self.alpn = self.tls.selected_alpn_protocol()
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True))
        if self.alpn == "h2":
            self.h2.initiate_connection()
            self.tls.write(self.h2.data_to_send())
            self.sock.sendall(self.out.read())

    def ask(self, count):
        """``count`` GET requests, one record each, in one write."""
        import base64
        for i in range(count):
            b64 = base64.urlsafe_b64encode(wire("n%d.example.org." % i))
            sid = self.h2.get_next_available_stream_id()
            self.h2.send_headers(sid, [
                (":method", "GET"), (":scheme", "https"),
                (":authority", "x"),
                (":path", "/dns-query?dns=" + b64.rstrip(b"=").decode())],
                end_stream=True)
            self.tls.write(self.h2.data_to_send())
        self.sock.sendall(self.out.read())

    def record(self):
        """The plaintext of the next TLS record."""
        while True:
            try:
                plain = self.tls.read(65536)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed") from None
                self.inc.write(data)
                continue
            if not plain:
                raise ConnectionError("close_notify")
            return plain

    def records(self, answers):
        """The plaintext of each TLS record read until ``answers`` streams
        have ended: a list of lists of (type, flags, stream) frames."""
        got = []
        ended = 0
        while ended < answers:
            plain = self.record()
            frames = []
            at = 0
            while at < len(plain):
                hi, lo, kind, flags, sid = _FRAME.unpack_from(plain, at)
                frames.append((kind, flags, sid & 0x7FFFFFFF))
                at += 9 + (hi << 16 | lo)
                if kind == DATA and flags & END_STREAM:
                    ended += 1
            self.assertWhole(plain, at)
            got.append(frames)
            self.h2.receive_data(plain)
        return got

    @staticmethod
    def assertWhole(plain, at):
        if at != len(plain):
            raise AssertionError("a frame across two records")

    def close(self):
        self.sock.close()


class Base(unittest.TestCase):

    scheme = "https"
    opts = ""

    @defer.inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, COREFILE % {
            "scheme": self.scheme, "cert": self.cert, "key": self.key,
            "ca": self.ca, "opts": self.opts})
        self.port = self.app.port(transport=self.scheme)
        self.front = self.app.listeners[
            (self.scheme, "127.0.0.1", "0")].stream

    def tls_layer(self):
        """The TLS protocol of the one connection open."""
        [p] = list(self.front.protocols)
        return p.wrappedProtocol

    def expected_layer(self):
        return tlsstream.TLSServerProtocol

    def check_layer(self, layer=None):
        """The open connection (or ``layer``) is on the expected path."""
        if layer is None:
            layer = self.tls_layer()
        self.assertIsInstance(layer, self.expected_layer())
        if self.expected_layer() is tlsstream.TLSServerProtocol:
            self.assertNotIsInstance(layer, TLSMemoryBIOProtocol)

    def client(self, alpn=("h2", "http/1.1")):
        ctx = tlsutil.client_context(self.ca)
        ctx.set_alpn_protocols(list(alpn))
        c = RecordClient(self.port, ctx)
        self.addCleanup(c.close)
        return c


class DoHFastPathTest(Base):
    """tls without client_auth: the standard library's path."""

    @defer.inlineCallbacks
    def test_one_answer_per_request_record(self):
        """Ten requests, each in its own record, arrive in one read: each
        answer comes back in a record of its own, as over pyOpenSSL
        (handed the ten records at once, the HTTP/2 server answered them
        all in one record, and dnsperf lost nine of ten)."""
        c = yield threads.deferToThread(self.client)
        self.assertEqual(c.alpn, "h2")
        yield threads.deferToThread(c.ask, 10)
        records = yield threads.deferToThread(c.records, 10)
        self.check_layer()
        ends = [sum(1 for kind, flags, _ in r
                    if kind == DATA and flags & END_STREAM)
                for r in records]
        self.assertEqual(sum(ends), 10)
        self.assertEqual(max(ends), 1, records)
        # Each answer is its HEADERS and DATA, together.
        answers = [r for r in records if any(k == DATA for k, _, _ in r)]
        for r in answers:
            self.assertEqual([k for k, _, _ in r], [1, DATA])
        self.assertEqual(sorted(r[0][2] for r in answers),
                         list(range(1, 21, 2)))

    @defer.inlineCallbacks
    def test_http1(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.doh(self.port, q, self.ca,
                              http_version=dns.query.HTTPVersion.H1)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.check_layer(self.front.wrappedFactory.buildProtocol(None))

    @defer.inlineCallbacks
    def test_http1_keepalive_one_send_per_read(self):
        """HTTP/1.1 requests on one connection, one after another: each
        answer is one TLS record, sent with one write to the socket."""
        c = yield threads.deferToThread(self.client, ("http/1.1",))
        self.assertEqual(c.alpn, "http/1.1")
        layer = self.tls_layer()
        self.check_layer()
        pushes = []
        if isinstance(layer, tlsstream.TLSServerProtocol):
            push = layer._push
            layer._push = lambda data: (pushes.append(len(data)),
                                        push(data))
        answers = yield threads.deferToThread(self._h1_requests, c, 3)
        for body in answers:
            m = dns.message.from_wire(body)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        if isinstance(layer, tlsstream.TLSServerProtocol):
            self.assertEqual(len(pushes), 3)

    def _h1_requests(self, c, count):
        import base64
        bodies = []
        for i in range(count):
            b64 = base64.urlsafe_b64encode(wire()).rstrip(b"=")
            c.tls.write(b"GET /dns-query?dns=%s HTTP/1.1\r\nHost: x\r\n\r\n"
                        % b64)
            c.sock.sendall(c.out.read())
            plain = b""
            while b"\r\n\r\n" not in plain or len(plain) < _h1_end(plain):
                plain += c.record()
            self.assertTrue(plain.startswith(b"HTTP/1.1 200 OK\r\n"))
            bodies.append(plain[plain.index(b"\r\n\r\n") + 4:])
        return bodies


def _h1_end(plain):
    head, _, _ = plain.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(head) + 4 + int(line.split(b":")[1])
    return len(plain) + 1


class DoHFallbackTest(DoHFastPathTest):
    """client_auth request: pyOpenSSL's path, the same behaviour."""

    opts = " {\n        client_auth request\n    }"

    def expected_layer(self):
        return TLSMemoryBIOProtocol


class DoHKeyLogTest(Base):
    """A key log: pyOpenSSL's path."""

    @defer.inlineCallbacks
    def setUp(self):
        self.keylog = self.mktemp()
        self.opts = " {\n        keylog %s\n    }" % self.keylog
        yield Base.setUp(self)

    @defer.inlineCallbacks
    def test_fallback(self):
        c = yield threads.deferToThread(self.client)
        yield threads.deferToThread(c.ask, 2)
        records = yield threads.deferToThread(c.records, 2)
        self.assertTrue(records)
        self.assertIsInstance(self.tls_layer(), TLSMemoryBIOProtocol)
        with open(self.keylog) as f:
            self.assertIn("CLIENT_HANDSHAKE_TRAFFIC_SECRET", f.read())


class GrpcTLSTest(Base):
    """gRPC over TLS on the standard library's path."""

    scheme = "grpc"

    @defer.inlineCallbacks
    def test_query(self):
        got = yield threads.deferToThread(
            grpcclient.query, self.port, wire(), self.ca, tlsutil.HOSTNAME)
        m = dns.message.from_wire(got)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIn("example.org. 0 IN A 127.0.0.1",
                      util.rrs(m, "additional"))
        layer = self.front.wrappedFactory.buildProtocol(None)
        self.check_layer(layer)
        self.assertIsInstance(layer.wrappedProtocol, grpcdns.GrpcH2)


class GrpcFallbackTest(GrpcTLSTest):

    opts = " {\n        client_auth request\n    }"

    def expected_layer(self):
        return TLSMemoryBIOProtocol
