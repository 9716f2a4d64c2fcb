"""DNS over gRPC (grpc://), as CoreDNS's gRPC server.

CoreDNS serves one unary method, ``coredns.dns.DnsService/Query``, whose
request and response are both ``DnsPacket { bytes msg = 1; }``: a DNS
message in, its answer out.  gRPC is HTTP/2 with a 5-octet prefix per
message and the status in trailers, so this server speaks it on the same
lean HTTP/2 protocol as DoH (``dohh2``, the ``h2`` state machine on the
reactor) rather than through grpcio's server: grpcio runs its own threads
and event loop, and each query would cross to the reactor thread and back
(two thread hand-offs per query, and the GIL between them), where this
costs what an HTTP/2 DoH query costs.  Measured (bench/grpc_bench.py,
docs/development.md): about 290 µs of server CPU per query here, 350 µs
for grpcio's server handing a do-nothing handler to the reactor.
grpcio is what the tests and the *grpc* plugin use as the client.

As CoreDNS: the chain sees a TCP query from the connection's address; a
message over 65,535 octets or one that does not unpack ends the call with
a gRPC error (UNKNOWN, the text of Go's error); another method gets
UNIMPLEMENTED; a chain that writes nothing returns the query (CoreDNS's
writer starts out holding it).  TLS comes from the block's *tls* (ALPN
h2), and without it the listener speaks HTTP/2 in the clear (h2c), as
CoreDNS's does.
``grpc_server`` sets max_streams (per connection) and max_connections.
"""

from twisted.internet import protocol

from corednstw.dnsserver import (
    doh,
    doh_h2,
    hpack_codec,
    sockets,
    tlsconfig,
    tlsstream,
)
from corednstw.dnsserver import http2 as h2server

METHOD = b"/coredns.dns.DnsService/Query"
DEFAULT_MAX_STREAMS = 256
DEFAULT_MAX_CONNECTIONS = 200
#: gRPC status codes used here.
OK, UNKNOWN, INTERNAL, UNIMPLEMENTED = 0, 2, 13, 12
_MAX_DNS = 65535


def encode_packet(msg):
    """``DnsPacket{msg}`` as protobuf: field 1, length-delimited."""
    n = len(msg)
    if n < 0x80:
        return b"\x0a" + bytes((n,)) + msg
    if n < 0x4000:
        return b"\x0a" + bytes(((n & 0x7F) | 0x80, n >> 7)) + msg
    out = bytearray(b"\x0a")
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + msg


def decode_packet(data):
    """The ``msg`` field of a ``DnsPacket`` (b"" when absent); ValueError
    for bytes that are not protobuf."""
    n = len(data)
    if n > 2 and data[0] == 0x0A:           # the usual: msg alone
        if data[1] < 0x80 and data[1] == n - 2:
            return data[2:]
        if n > 3 and data[2] < 0x80 and (data[1] & 0x7F) | (
                data[2] << 7) == n - 3 and data[1] & 0x80 and data[2]:
            return data[3:]
    msg = b""
    i, end = 0, len(data)
    while i < end:
        key, i = _varint(data, i)
        field, wtype = key >> 3, key & 7
        if wtype == 0:
            _, i = _varint(data, i)
        elif wtype == 2:
            n, i = _varint(data, i)
            if i + n > end:
                raise ValueError("truncated field")
            if field == 1:
                msg = data[i:i + n]
            i += n
        elif wtype == 1:
            i += 8
        elif wtype == 5:
            i += 4
        else:
            raise ValueError("bad wire type %d" % wtype)
    if i > end:
        raise ValueError("truncated field")
    return msg


def _varint(data, i):
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def frame(message):
    """A gRPC length-prefixed message (not compressed)."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def unframe(body):
    """The one message of a unary call's body; ValueError otherwise."""
    if len(body) < 5 or body[0] != 0:
        raise ValueError("compressed or cut gRPC message")
    n = int.from_bytes(body[1:5], "big")
    if len(body) != 5 + n:
        raise ValueError("gRPC message length mismatch")
    return body[5:]


class Service:
    """The listener's DnsService: mux, labels and limits (reload switches
    ``mux`` and ``timeouts``)."""

    def __init__(self, mux, timeouts, max_streams):
        self.mux = mux
        self.timeouts = timeouts
        self.max_streams = max_streams
        self.local = None


class GrpcH2(doh_h2.DoHH2):
    """One HTTP/2 connection of a grpc:// listener, with grpc-go's
    settings: 16 KiB frames, the default 64 KiB windows, ``max_streams``
    streams at once (none advertised when 0, unbounded) and a header
    list of up to 16 MiB."""

    MAX_BODY = 5 + 8 + _MAX_DNS + 1
    MAX_FRAME = h2server.MIN_FRAME
    MAX_HEADER_LIST = 16 << 20
    INITIAL_WINDOW = CONN_WINDOW = h2server.DEFAULT_WINDOW

    def __init__(self, resource, idle):
        super().__init__(resource, idle)
        self.max_streams = resource.max_streams or 1 << 31

    def local_settings(self):
        pairs = [(h2server.S_MAX_FRAME_SIZE, self.MAX_FRAME)]
        if self.resource.max_streams:
            pairs.append((h2server.S_MAX_CONCURRENT_STREAMS,
                          self.resource.max_streams))
        return pairs

    def _ended(self, st):
        req = st.req
        if req.method != b"POST" or req.path != METHOD:
            self._status(st, UNIMPLEMENTED, "unknown method")
            return
        try:
            msg = decode_packet(unframe(b"".join(req.body)))
        except ValueError as e:
            self._status(st, INTERNAL, "grpc: error unmarshalling "
                         "request: %s" % e)
            return
        if req.size > self.MAX_BODY or len(msg) > _MAX_DNS:
            self._status(st, UNKNOWN, "dns message exceeds size limit: "
                         "%d" % len(msg))
            return
        try:
            doh._acceptable(msg)
        except doh.BadRequest as e:
            self._status(st, UNKNOWN, str(e))
            return
        self._serve(st, msg)

    def _serve(self, st, msg):
        res = self.resource

        def answer(wire):
            # CoreDNS's gRPC writer starts out holding the query: a chain
            # that writes nothing sends the query itself back.
            self.respond(st, _HEADERS, frame(encode_packet(wire or msg)),
                         _TRAILERS)
        gone = doh.run_query(res.mux, msg, self.client, "tcp", res.local,
                             res.timeouts.write, answer)
        if gone is not None and st.req is not None:
            st.req.gone = gone

    def _too_large(self, st):
        """grpc-go's answer to a header list over the limit."""
        self._status(st, INTERNAL, "header list size to recv exceeds "
                     "the limit")

    def _status(self, st, code, message):
        """A trailers-only response: the call ends with ``code``."""
        self.respond(st, _HEADERS + hpack_codec.encode([
            (b"grpc-status", b"%d" % code),
            (b"grpc-message", _percent(message))]))


#: The answer's header block (:status 200, content-type) and trailers.
_HEADERS = hpack_codec.encode([(b":status", b"200"),
                               (b"content-type", b"application/grpc")])
_TRAILERS = hpack_codec.encode([(b"grpc-status", b"0")])


def _percent(text):
    """grpc-message's percent-encoding of anything outside printable
    ASCII (and of %)."""
    out = bytearray()
    for b in text.encode():
        if 0x20 <= b <= 0x7E and b != 0x25:
            out.append(b)
        else:
            out += b"%%%02X" % b
    return bytes(out)


class _Site(protocol.Factory):
    """What doh.Front expects of a site: ``resource`` and ``timeOut``."""

    def __init__(self, service, idle):
        self.resource = service
        self.timeOut = idle

    def buildProtocol(self, addr):
        p = GrpcH2(self.resource, self.timeOut)
        p.factory = self
        return p


def listen_grpc(reactor, host, port, mux, timeouts, tls, max_streams,
                max_connections, wrap=None):
    """A gRPC listener (TLS with ``tls``, else h2c).

    Returns (port, Front, Switchable or None, actual port)."""
    service = Service(mux, timeouts, max_streams)
    site = _Site(service, timeouts.idle)
    creator = None
    inner = site
    if tls is not None:
        creator = tlsconfig.Switchable(tls, (b"h2",))
        inner = tlsstream.TLSFactory(creator, site)
    if wrap is not None:
        inner = wrap(inner)
    front = doh.Front(inner, site, max_connections)
    listening, actual = sockets.adopt_tcp(reactor, host, port, front)
    front.port = listening
    service.local = (host, actual)
    return listening, front, creator, actual
