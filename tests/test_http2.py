"""The listeners' own HTTP/2 server (``http2``, ``hpack_codec``) and
DoH's HTTP/1.1 reader (``doh_h1``): HPACK against RFC 7541's examples,
then frames written by hand (and by the h2 and grpcio clients) over
real sockets to grpc:// (h2c) and https:// listeners."""

import asyncio
import base64
import socket
import struct

import dns.message
import dns.rcode
import hpack
from twisted.internet import threads
from twisted.internet.defer import inlineCallbacks
from twisted.trial import unittest

from corednstw.dnsserver import grpcdns
from corednstw.dnsserver import hpack_codec as hc
from tests.support import grpcclient, util

# RFC 7541 Appendix C: (block in hex, fields, dynamic table size after).
C2 = [
    ("400a637573746f6d2d6b65790d637573746f6d2d686561646572",
     [(b"custom-key", b"custom-header")], 55),
    ("040c2f73616d706c652f70617468", [(b":path", b"/sample/path")], 0),
    ("100870617373776f726406736563726574", [(b"password", b"secret")], 0),
    ("82", [(b":method", b"GET")], 0),
]
_REQ1 = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"),
         (b":authority", b"www.example.com")]
_REQ2 = _REQ1 + [(b"cache-control", b"no-cache")]
_REQ3 = [(b":method", b"GET"), (b":scheme", b"https"),
         (b":path", b"/index.html"), (b":authority", b"www.example.com"),
         (b"custom-key", b"custom-value")]
C3 = [
    ("828684410f7777772e6578616d706c652e636f6d", _REQ1, 57),
    ("828684be58086e6f2d6361636865", _REQ2, 110),
    ("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565", _REQ3,
     164),
]
C4 = [
    ("828684418cf1e3c2e5f23a6ba0ab90f4ff", _REQ1, 57),
    ("828684be5886a8eb10649cbf", _REQ2, 110),
    ("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf", _REQ3, 164),
]
_RESP1 = [(b":status", b"302"), (b"cache-control", b"private"),
          (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
          (b"location", b"https://www.example.com")]
_RESP2 = [(b":status", b"307")] + _RESP1[1:]
_RESP3 = [(b":status", b"200"), (b"cache-control", b"private"),
          (b"date", b"Mon, 21 Oct 2013 20:13:22 GMT"),
          (b"location", b"https://www.example.com"),
          (b"content-encoding", b"gzip"),
          (b"set-cookie",
           b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")]
C5 = [
    ("4803333032580770726976617465611d4d6f6e2c203231204f6374203230313320"
     "32303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e"
     "636f6d", _RESP1, 222),
    ("4803333037c1c0bf", _RESP2, 222),
    ("88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c0"
     "5a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157"
     "454f49553b206d61782d6167653d333630303b2076657273696f6e3d31", _RESP3,
     215),
]
C6 = [
    ("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1b"
     "ff6e919d29ad171863c78f0b97c8e9ae82ae43d3", _RESP1, 222),
    ("4883640effc1c0bf", _RESP2, 222),
    ("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad"
     "94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f958731606"
     "5c003ed4ee5b1063d5007", _RESP3, 215),
]


class HpackTest(unittest.TestCase):
    """Decoding RFC 7541's examples, each sequence on one context."""

    def run_vectors(self, vectors, limit=hc.TABLE_SIZE, fresh=False):
        d = hc.Decoder(limit)
        for block, fields, size in vectors:
            if fresh:
                d = hc.Decoder(limit)
            got, listed = d.decode(bytes.fromhex(block))
            self.assertEqual(got, fields)
            self.assertEqual(d.size, size)
            self.assertEqual(listed, sum(len(n) + len(v) + 32
                                         for n, v in fields))

    def test_c2_literals(self):
        self.run_vectors(C2, fresh=True)

    def test_c3_requests(self):
        self.run_vectors(C3)

    def test_c4_requests_huffman(self):
        self.run_vectors(C4)

    def test_c5_responses_with_eviction(self):
        self.run_vectors(C5, 256)

    def test_c6_responses_huffman_with_eviction(self):
        self.run_vectors(C6, 256)

    def test_huffman_every_octet(self):
        data = bytes(range(256)) * 2
        self.assertEqual(hc.huffman_decode(hc.huffman_encode(data)), data)
        self.assertEqual(hc.huffman_encode(b"www.example.com"),
                         bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff"))

    def test_errors(self):
        for block in (
                "be",                   # no dynamic entry 62
                "80",                   # index 0
                "3fe21f",               # size update over 4096
                "8240",                 # size update after a field... cut
                "410f7777",             # string cut short
                "4187ffffffffffffff",   # Huffman with EOS inside
                "418100",               # padding not all ones
                "ff8080808080",         # integer too large
        ):
            with self.assertRaises(hc.HPACKError, msg=block):
                hc.Decoder().decode(bytes.fromhex(block))
        with self.assertRaises(hc.HPACKError):
            hc.Decoder().decode(bytes.fromhex("823f01"))  # update late

    def test_size_update(self):
        d = hc.Decoder()
        d.decode(bytes.fromhex(C3[0][0]))
        self.assertEqual(d.size, 57)
        d.decode(bytes.fromhex("20"))       # size 0: table emptied
        self.assertEqual((d.size, d.table), (0, []))

    def test_our_encoding_decodes(self):
        fields = [(b":status", b"200"),
                  (b"content-type", b"application/dns-message"),
                  (b"cache-control", b"max-age=300"),
                  (b"content-length", b"1234"),
                  (b"x-content-type-options", b"nosniff"),
                  (b"grpc-message", b"x" * 300)]
        self.assertEqual(hpack.Decoder().decode(hc.encode(fields), raw=True),
                         fields)
        self.assertEqual(hc.encode([(b":status", b"200")]), b"\x88")


# -- frames over the wire ------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW, CONT = (
    0, 1, 3, 4, 6, 7, 8, 9)


def frame(kind, flags, sid, payload=b""):
    n = len(payload)
    return struct.pack("!BHBBI", n >> 16, n & 0xFFFF, kind, flags,
                       sid) + payload


def settings(**kw):
    ids = {"initial_window": 4, "max_frame": 5}
    return frame(SETTINGS, 0, 0, b"".join(
        struct.pack("!HI", ids[k], v) for k, v in kw.items()))


GRPC_HEADERS = [(b":method", b"POST"), (b":scheme", b"http"),
                (b":path", b"/coredns.dns.DnsService/Query"),
                (b":authority", b"x"), (b"content-type", b"application/grpc"),
                (b"te", b"trailers")]


def grpc_body(name="example.org."):
    q = dns.message.make_query(name, "TXT", id=7).to_wire()
    return grpcdns.frame(grpcdns.encode_packet(q))


class Raw:
    """A blocking client socket speaking frames (run it in a thread)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), 5)
        self.buf = b""
        self.closed = False
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()

    def send(self, *frames):
        self.sock.sendall(b"".join(frames))

    def block(self, headers):
        return self.encoder.encode(headers)

    def read(self, until, timeout=5):
        """Frames (kind, flags, sid, payload) until ``until(frames)`` or
        the close."""
        got = []
        self.sock.settimeout(timeout)
        while not until(got):
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                kind, flags = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                got.append((kind, flags, sid, self.buf[9:9 + n]))
                self.buf = self.buf[9 + n:]
                if until(got):
                    return got
            data = self.sock.recv(65536)
            if not data:
                self.closed = True
                return got
            self.buf += data
        return got

    def close(self):
        self.sock.close()


def _goaway(frames):
    return [struct.unpack("!II", f[3][:8]) for f in frames
            if f[0] == GOAWAY]


ZONE = """$ORIGIN example.org.
@ 3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 3600
@ 3600 IN NS ns.example.org.
ns 3600 IN A 192.0.2.1
"""


class GrpcWireTest(unittest.TestCase):
    """Frames by hand against a grpc:// listener in the clear (h2c)."""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        big = "".join('big 60 IN TXT "%s"\n' % ("%03d" % i * 60)[:200]
                      for i in range(40))
        d = util.write_files(self, {"db": ZONE + big})
        self.app = yield util.start(self, (
            "grpc://.:0 {\n    bind 127.0.0.1\n"
            "    grpc_server {\n        max_streams 2\n    }\n"
            "    file %s/db example.org\n}\n") % d)
        self.port = self.app.port(transport="grpc")

    def raw(self):
        c = Raw(self.port)
        self.addCleanup(c.close)
        return c

    def call(self, fn):
        return threads.deferToThread(fn)

    @inlineCallbacks
    def test_settings_and_ping(self):
        def run():
            c = self.raw()
            c.send(PREFACE, settings(), frame(PING, 0, 0, b"12345678"))
            return c.read(lambda fs: any(f[0] == PING for f in fs))
        got = yield self.call(run)
        first = got[0]
        self.assertEqual((first[0], first[1]), (SETTINGS, 0))
        pairs = dict(struct.unpack("!HI", first[3][i:i + 6])
                     for i in range(0, len(first[3]), 6))
        # grpc-go's: 16 KiB frames, max_streams; default windows.
        self.assertEqual(pairs, {5: 16384, 3: 2})
        self.assertIn((SETTINGS, 1, 0, b""), got)
        self.assertIn((PING, 1, 0, b"12345678"), got)

    @inlineCallbacks
    def test_small_window_large_answer(self):
        """A client stream window of 100 octets: the answer (about 8 KiB)
        comes in DATA frames within it, the rest only after each of the
        client's WINDOW_UPDATEs; the trailers after the last."""
        def run():
            c = self.raw()
            c.send(PREFACE, settings(initial_window=100),
                   frame(HEADERS, 4, 1, c.block(GRPC_HEADERS)),
                   frame(DATA, 1, 1, grpc_body("big.example.org.")))
            frames, body, updates, within = [], b"", 0, True
            while True:
                got = c.read(lambda fs: any(f[2] == 1 for f in fs))
                frames += got
                mine = [f for f in got if f[2] == 1]
                if not mine or c.closed:
                    return frames, body, False, within
                body += b"".join(f[3] for f in mine if f[0] == DATA)
                within = within and len(body) <= 100 * (updates + 1)
                if any(f[1] & 1 for f in mine):
                    return frames, body, True, within
                c.send(frame(WINDOW, 0, 1, struct.pack("!I", 100)))
                updates += 1
        frames, body, ended, within = yield self.call(run)
        self.assertTrue(ended)
        self.assertTrue(within)
        sizes = [len(f[3]) for f in frames if f[0] == DATA]
        self.assertGreater(len(sizes), 40)
        self.assertTrue(all(s <= 100 for s in sizes), sizes)
        m = dns.message.from_wire(grpcdns.decode_packet(
            grpcdns.unframe(body)))
        self.assertEqual(len(m.answer[0]), 40)
        # The last HEADERS (trailers) ends the stream.
        last = [f for f in frames if f[2] == 1][-1]
        self.assertEqual((last[0], last[1] & 1), (HEADERS, 1))

    @inlineCallbacks
    def test_continuation(self):
        def run():
            c = self.raw()
            block = c.block(GRPC_HEADERS)
            a, b, rest = block[:3], block[3:7], block[7:]
            c.send(PREFACE, settings(), frame(HEADERS, 0, 1, a),
                   frame(CONT, 0, 1, b), frame(CONT, 4, 1, rest),
                   frame(DATA, 1, 1, grpc_body()))
            return c, c.read(lambda fs: any(
                f[0] == HEADERS and f[1] & 1 for f in fs))
        c, got = yield self.call(run)
        data = b"".join(f[3] for f in got if f[0] == DATA)
        m = dns.message.from_wire(grpcdns.decode_packet(
            grpcdns.unframe(data)))
        self.assertEqual((m.rcode(), m.id), (dns.rcode.NOERROR, 7))
        trailers = [f for f in got if f[0] == HEADERS][-1]
        self.assertEqual(c.decoder.decode(trailers[3], raw=True),
                         [(b"grpc-status", b"0")])

    @inlineCallbacks
    def test_padded_frames(self):
        def run():
            c = self.raw()
            block = c.block(GRPC_HEADERS)
            body = grpc_body()
            c.send(PREFACE, settings(),
                   frame(HEADERS, 4 | 8 | 0x20, 1, b"\x03" + b"\0" * 5
                         + block + b"\0\0\0"),
                   frame(DATA, 1 | 8, 1, b"\x02" + body + b"\0\0"))
            return c.read(lambda fs: any(
                f[0] == HEADERS and f[1] & 1 for f in fs))
        got = yield self.call(run)
        self.assertTrue([f for f in got if f[0] == DATA])

    @inlineCallbacks
    def check_goaway(self, frames, code):
        def run():
            c = self.raw()
            c.send(PREFACE, settings(), *frames)
            got = c.read(lambda fs: False)
            return got, c.closed
        got, closed = yield self.call(run)
        self.assertTrue(closed)
        self.assertEqual([e for _, e in _goaway(got)], [code])

    def test_bad_ping_size(self):
        return self.check_goaway([frame(PING, 0, 0, b"1234567")], 6)

    def test_data_on_stream_zero(self):
        return self.check_goaway([frame(DATA, 0, 0, b"x")], 1)

    def test_stray_continuation(self):
        return self.check_goaway([frame(CONT, 4, 1, b"\x82")], 1)

    def test_interrupted_header_block(self):
        return self.check_goaway([frame(HEADERS, 0, 1, b"\x83"),
                                  frame(PING, 0, 0, b"12345678")], 1)

    def test_even_stream(self):
        return self.check_goaway([frame(HEADERS, 5, 2, b"\x83")], 1)

    def test_bad_header_block(self):
        return self.check_goaway([frame(HEADERS, 5, 1, b"\xbe")], 9)

    def test_frame_too_large(self):
        return self.check_goaway([frame(DATA, 0, 1, b"x" * 16385)], 6)


    @inlineCallbacks
    def test_first_frame_not_settings(self):
        def run():
            c = self.raw()
            c.send(PREFACE, frame(PING, 0, 0, b"12345678"))
            return c.read(lambda fs: False), c.closed
        got, closed = yield self.call(run)
        self.assertTrue(closed)
        self.assertEqual([e for _, e in _goaway(got)], [1])

    @inlineCallbacks
    def test_max_streams(self):
        """max_streams 2: a third stream open at once is refused."""
        def run():
            c = self.raw()
            hdr = frame(HEADERS, 4, 1, c.block(GRPC_HEADERS))
            c.send(PREFACE, settings(), hdr,
                   frame(HEADERS, 4, 3, c.block(GRPC_HEADERS)),
                   frame(HEADERS, 4, 5, c.block(GRPC_HEADERS)))
            return c.read(lambda fs: any(f[0] == RST for f in fs))
        got = yield self.call(run)
        self.assertEqual([(f[2], f[3]) for f in got if f[0] == RST],
                         [(5, struct.pack("!I", 7))])

    @inlineCallbacks
    def test_graceful_shutdown(self):
        """At shutdown an open connection gets GOAWAY (NO_ERROR, the last
        stream taken), then the close."""
        c = yield self.call(self.raw)

        def first():
            c.send(PREFACE, settings(),
                   frame(HEADERS, 4, 1, c.block(GRPC_HEADERS)),
                   frame(DATA, 1, 1, grpc_body()))
            return c.read(lambda fs: any(
                f[0] == HEADERS and f[1] & 1 for f in fs))
        yield self.call(first)
        [lst] = self.app.listeners.values()
        yield lst.stream.close_all()
        got = yield self.call(lambda: c.read(lambda fs: False))
        self.assertEqual(_goaway(got), [(1, 0)])
        self.assertTrue(c.closed)

    @inlineCallbacks
    def test_grpc_aio_client(self):
        """grpcio's asyncio client, 20 calls at once on one channel."""
        def run():
            import grpc

            async def calls():
                async with grpc.aio.insecure_channel(
                        "127.0.0.1:%d" % self.port) as ch:
                    call = ch.unary_unary(
                        grpcdns.METHOD.decode(),
                        request_serializer=grpcdns.encode_packet,
                        response_deserializer=grpcdns.decode_packet)
                    qs = [dns.message.make_query("ns.example.org.", "A")
                          for _ in range(20)]
                    return await asyncio.gather(*(
                        call(q.to_wire(), timeout=5) for q in qs))
            return asyncio.run(calls())
        answers = yield threads.deferToThread(run)
        self.assertEqual(len(answers), 20)
        for wire in answers:
            self.assertEqual(util.rrs(dns.message.from_wire(wire)),
                             ["ns.example.org. 3600 IN A 192.0.2.1"])

    @inlineCallbacks
    def test_grpc_sync_client_large_answer(self):
        q = dns.message.make_query("big.example.org.", "TXT").to_wire()
        wire = yield threads.deferToThread(grpcclient.query, self.port, q)
        self.assertEqual(len(dns.message.from_wire(wire).answer[0]), 40)


class H1Test(unittest.TestCase):
    """DoH over HTTP/1.1 in the clear, byte by byte as clients send it."""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        self.app = yield util.start(
            self, "https://.:0 {\n    bind 127.0.0.1\n    whoami\n}\n")
        self.port = self.app.port(transport="https")
        self.q = dns.message.make_query("example.org.", "A").to_wire()

    def exchange(self, data, parts=1):
        def run():
            s = socket.create_connection(("127.0.0.1", self.port), 5)
            with s:
                step = -(-len(data) // parts)
                for i in range(0, len(data), step):
                    s.sendall(data[i:i + step])
                s.settimeout(1)
                out = b""
                try:
                    while True:
                        got = s.recv(65536)
                        if not got:
                            return out, True
                        out += got
                except socket.timeout:
                    return out, False
        return threads.deferToThread(run)

    def post(self, extra=b""):
        return (b"POST /dns-query HTTP/1.1\r\nHost: x\r\n%sContent-Length:"
                b" %d\r\n\r\n" % (extra, len(self.q)) + self.q)

    def answers(self, out):
        """(status line, headers, body) of each response in ``out``."""
        got = []
        while out:
            head, _, out = out.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            headers = dict(line.split(b": ", 1) for line in lines[1:])
            n = int(headers.get(b"Content-Length", 0))
            got.append((lines[0], headers, out[:n]))
            out = out[n:]
        return got

    @inlineCallbacks
    def test_pipelined_and_split(self):
        get = (b"GET /dns-query?dns=%s HTTP/1.1\r\nHost: x\r\n\r\n"
               % base64.urlsafe_b64encode(self.q).rstrip(b"="))
        out, closed = yield self.exchange(self.post() + get + self.post(),
                                          parts=7)
        self.assertFalse(closed)
        got = self.answers(out)
        self.assertEqual([g[0] for g in got], [b"HTTP/1.1 200 OK"] * 3)
        for _, headers, body in got:
            self.assertEqual(list(headers), [
                b"Date", b"Content-Type", b"Cache-Control",
                b"Content-Length"])
            self.assertEqual(dns.message.from_wire(body).rcode(),
                             dns.rcode.NOERROR)

    @inlineCallbacks
    def test_chunked_body(self):
        body = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (
            5, self.q[:5], len(self.q) - 5, self.q[5:])
        out, _ = yield self.exchange(
            b"POST /dns-query HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body)
        [(status, _, answer)] = self.answers(out)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        self.assertEqual(dns.message.from_wire(answer).id,
                         dns.message.from_wire(self.q).id)

    @inlineCallbacks
    def test_connection_close_and_http10(self):
        out, closed = yield self.exchange(
            self.post(b"Connection: close\r\n"))
        self.assertTrue(closed)
        [(status, headers, _)] = self.answers(out)
        self.assertEqual(headers[b"Connection"], b"close")
        out, closed = yield self.exchange(
            self.post().replace(b"HTTP/1.1", b"HTTP/1.0"))
        self.assertTrue(closed)
        self.assertTrue(out.startswith(b"HTTP/1.0 200 OK\r\n"))

    @inlineCallbacks
    def test_not_http(self):
        for data in (b"garbage\r\n\r\n",
                     b"POST /dns-query HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                     b"GET / HTTP/2.0\r\n\r\n"):
            out, closed = yield self.exchange(data)
            self.assertEqual((out, closed),
                             (b"HTTP/1.1 400 Bad Request\r\n\r\n", True))

    @inlineCallbacks
    def test_expect_continue(self):
        out, _ = yield self.exchange(self.post(b"Expect: 100-continue\r\n"))
        self.assertTrue(out.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"
                                       b"HTTP/1.1 200 OK\r\n"))

    @inlineCallbacks
    def test_statuses(self):
        out, _ = yield self.exchange(
            b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /dns-query HTTP/1.1\r\nHost: x\r\n\r\n")
        got = self.answers(out)
        self.assertEqual([(g[0], g[2]) for g in got], [
            (b"HTTP/1.1 404 Not Found", b"\n"),
            (b"HTTP/1.1 400 Bad Request", b"invalid request\n")])
        self.assertEqual(got[1][1][b"X-Content-Type-Options"], b"nosniff")


class WindowTest(unittest.TestCase):
    """Flow control overruns, on a connection driven in memory."""

    def connection(self):
        from twisted.internet import task
        from twisted.internet.testing import StringTransport

        from corednstw.dnsserver import listener
        p = grpcdns.GrpcH2(grpcdns.Service(None, listener.Timeouts(), 0),
                           10)
        clock = task.Clock()
        p.callLater = clock.callLater
        t = StringTransport()
        p.makeConnection(t)
        p.dataReceived(PREFACE + settings())
        t.clear()
        return p, t

    def test_connection_window(self):
        p, t = self.connection()
        p.recv_window = 10
        p.dataReceived(frame(HEADERS, 4, 1, hpack.Encoder().encode(
            GRPC_HEADERS)) + frame(DATA, 0, 1, b"x" * 11))
        self.assertIn(frame(GOAWAY, 0, 0, struct.pack("!II", 1, 3)),
                      t.value())
        self.assertTrue(t.disconnecting)

    def test_stream_window(self):
        p, t = self.connection()
        p.dataReceived(frame(HEADERS, 4, 1, hpack.Encoder().encode(
            GRPC_HEADERS)))
        p.streams[1].recv_window = 10
        p.dataReceived(frame(DATA, 0, 1, b"x" * 11))
        self.assertEqual(t.value(), frame(RST, 0, 1, struct.pack("!I", 3)))
        self.assertEqual(p.streams, {})

    def test_windows_given_back(self):
        """Go's rule: a WINDOW_UPDATE once 4 KiB is owed."""
        p, t = self.connection()
        p.dataReceived(frame(HEADERS, 4, 1, hpack.Encoder().encode(
            GRPC_HEADERS)) + frame(DATA, 0, 1, b"x" * 4000))
        self.assertEqual(t.value(), b"")
        p.dataReceived(frame(DATA, 0, 1, b"x" * 100))
        self.assertEqual(t.value(), frame(
            WINDOW, 0, 0, struct.pack("!I", 4100)) + frame(
            WINDOW, 0, 1, struct.pack("!I", 4100)))

    def test_header_list_too_large(self):
        """A header list past MAX_HEADER_LIST: grpc-go's INTERNAL status;
        the connection serves on."""
        p, t = self.connection()
        p.MAX_HEADER_LIST = 300
        enc = hpack.Encoder()
        p.dataReceived(frame(HEADERS, 5, 1, enc.encode(
            GRPC_HEADERS + [(b"x-big", b"y" * 300)])))
        kind, flags, sid = t.value()[3], t.value()[4], t.value()[5:9]
        self.assertEqual((kind, flags & 1, sid), (HEADERS, 1, b"\0\0\0\1"))
        got = hpack.Decoder().decode(t.value()[9:], raw=True)
        self.assertIn((b"grpc-status", b"13"), got)
        self.assertEqual(p.streams, {})


class ShutdownTest(unittest.TestCase):
    """A graceful shutdown with an answer still to come."""

    @inlineCallbacks
    def test_answer_sent_after_goaway(self):
        util.capture_log(self)
        app = yield util.start(self, (
            "grpc://.:0 {\n    bind 127.0.0.1\n"
            "    erratic {\n        delay 1 300ms\n    }\n}\n"))
        port = app.port(transport="grpc")
        c = Raw(port)
        self.addCleanup(c.close)

        def ask():
            c.send(PREFACE, settings(),
                   frame(HEADERS, 4, 1, c.block(GRPC_HEADERS)),
                   frame(DATA, 1, 1, grpc_body()))
            return c.read(lambda fs: any(f[0] == SETTINGS and f[1] & 1
                                         for f in fs))
        yield threads.deferToThread(ask)
        [lst] = app.listeners.values()
        closed = lst.stream.close_all()
        got = yield threads.deferToThread(lambda: c.read(lambda fs: False))
        yield closed
        kinds = [(f[0], f[2]) for f in got]
        # GOAWAY first (stream 1 taken), then the answer, then the close.
        self.assertEqual(_goaway(got), [(1, 0)])
        self.assertLess(kinds.index((GOAWAY, 0)), kinds.index((DATA, 1)))
        self.assertEqual(got[-1][0], HEADERS)
        self.assertTrue(c.closed)
