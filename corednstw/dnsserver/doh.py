"""DNS over HTTPS (RFC 8484) on twisted.web, as CoreDNS's https:// server.

One resource answers ``/dns-query``: GET with the message base64url in
``?dns=``, or POST with the message as the body.  The message goes through
the listener's mux and the block chain as a query over TCP (CoreDNS's
DoHWriter gives the chain a TCP address, so request.Proto() says tcp); the
client is the address of the connection (X-Forwarded-For is not read, as
CoreDNS does not).  The HTTP statuses are CoreDNS's: 404 for another path,
400 for a request that holds no acceptable DNS message (bad method, no or
several ``dns`` values, bad base64, more than 64 KiB, a message miekg's
request policy rejects or cannot unpack), 500 when the chain writes no
answer, 200 with ``Cache-Control: max-age`` from the answer's TTLs.  Each
response is counted in ``coredns_dns_https_responses_total{server,
status}``.  HTTP/2 is negotiated by ALPN (h2 before http/1.1); without a
certificate the listener speaks plain HTTP (behind a TLS-terminating
proxy).
"""

import base64
import binascii
import struct
from urllib.parse import parse_qs

from twisted.internet import defer
from twisted.protocols import policies
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web import http, resource, server

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.request import Request
from corednstw.dnsserver import mux as muxlib
from corednstw.dnsserver import sockets, stream, tlsconfig

PATH = b"/dns-query"
MIME = b"application/dns-message"
#: Largest DNS message taken from a request (CoreDNS's maxDNSQuerySize).
MAX_MESSAGE = 65536
#: Longest ``dns`` value: the base64url of MAX_MESSAGE bytes.
MAX_BASE64 = (MAX_MESSAGE * 8 + 5) // 6
#: Concurrent connections of a listener unless ``https`` says otherwise.
DEFAULT_MAX_CONNECTIONS = 200
#: Answer TTL bounds for Cache-Control (CoreDNS's dnsutil).
MIN_AGE = 5
MAX_AGE = 3600

RESPONSES = metrics.counter(
    "coredns_dns_https_responses_total",
    "Counter of DoH responses per server and http status code.",
    ("server", "status"))

#: The body of a POST past MAX_MESSAGE (read and dropped).
TOO_LARGE = object()

_HDR = struct.Struct("!HHHHHH")
_RR_FIXED = struct.Struct("!HHIH")


class BadRequest(ValueError):
    """The HTTP request carries no DNS message we accept (400)."""


class StreamRequest:
    """A DoH request arriving in pieces on an HTTP/2 or HTTP/3 stream:
    its pseudo-headers, then its body (kept up to a limit, counted past
    it), then asked of the listener's ``DoHResource``."""

    __slots__ = ("method", "path", "args", "body", "size", "gone")

    def __init__(self, headers):
        method = target = b""
        for name, value in headers:
            if name == b":method":
                method = value
            elif name == b":path":
                target = value
        path, _, query = target.partition(b"?")
        self.method = method
        self.path = path
        self.args = parse_qs(query, keep_blank_values=True) if query else {}
        self.body = []
        self.size = 0
        self.gone = None        # cancels a pending answer (from query)

    def add(self, data, limit=MAX_MESSAGE):
        self.size += len(data)
        if self.size <= limit:
            self.body.append(data)

    def ask(self, resource, client, reply):
        """Hand the finished request to ``resource``."""
        body = None
        if self.method == b"POST":
            body = (TOO_LARGE if self.size > MAX_MESSAGE
                    else b"".join(self.body))
        self.gone = resource.query(self.method, self.path, self.args, body,
                                   client, reply)


class DoHRequest(server.Request):
    """A request whose body is kept only up to MAX_MESSAGE bytes: a larger
    body is read and dropped (the answer is 400), never stored."""

    received = 0

    def handleContentChunk(self, data):
        self.received += len(data)
        if self.received <= MAX_MESSAGE:
            server.Request.handleContentChunk(self, data)


class _Channel(http.HTTPChannel):
    """HTTP/1.1 with room for a GET of the largest message: Go's server
    reads up to a megabyte of request line and headers (twisted.web's
    default, 16 KiB, would cut a long ``?dns=`` with a bare 400).

    A request has the read timeout of *timeouts* to arrive whole, headers
    and body (Go's http.Server ReadTimeout, which CoreDNS's https server
    sets from it): from the connection's start for the first request (the
    TLS handshake included), from its first byte for the next ones.  The
    bytes that come meanwhile do not move the deadline (the idle timeout,
    which each byte restarts, would let a client sending a byte now and
    then hold the connection for good); a request not in by then ends
    the connection."""

    MAX_LENGTH = 1 << 20
    totalHeadersSize = 1 << 20
    _deadline = None

    def connectionMade(self):
        super().connectionMade()
        self._arm()

    def dataReceived(self, data):
        if self._deadline is None and not self._handlingRequest:
            self._arm()         # the first bytes of the next request
        super().dataReceived(data)

    def allContentReceived(self):
        self.disarm()
        super().allContentReceived()

    def _arm(self):
        self._deadline = self.callLater(self.site.resource.timeouts.read,
                                        self._too_slow)

    def disarm(self):
        """No request is on its way (or another protocol takes the
        connection over)."""
        if self._deadline is not None:
            if self._deadline.active():
                self._deadline.cancel()
            self._deadline = None

    def _too_slow(self):
        self._deadline = None
        self.transport.abortConnection()

    def connectionLost(self, reason):
        self.disarm()
        super().connectionLost(reason)


class _Switch(http._GenericHTTPChannelProtocol):
    """twisted.web's HTTP/1.1 channel, handing the connection to the lean
    HTTP/2 protocol (``dohh2``) when ALPN says h2."""

    def dataReceived(self, data):
        if self._negotiatedProtocol is None:
            transport = self._channel.transport
            if getattr(transport, "negotiatedProtocol", None) == b"h2":
                from corednstw.dnsserver import doh_h2
                self._channel._networkProducer.unregisterProducer()
                self._channel.setTimeout(None)
                self._channel.disarm()
                self._channel = doh_h2.DoHH2(self._site.resource,
                                            self._timeOut)
                self._channel.makeConnection(transport)
                self._negotiatedProtocol = b"h2"
        return super().dataReceived(data)

    def shutdown(self):
        channel = self._channel
        if hasattr(channel, "shutdown"):
            channel.shutdown()
        else:
            channel.transport.loseConnection()


def _channel():
    """The protocol of a DoH site: HTTP/1.1 on twisted.web, HTTP/2 on
    ``dohh2`` when ALPN says h2."""
    return _Switch(_Channel())


class DoHResource(resource.Resource):
    """The one resource of a DoH site; every path comes here.

    It is also the listener's DoH logic for the lean HTTP/2 protocol
    (``dohh2``): ``query`` takes the request's parts and answers through a
    ``reply(status, headers, body)`` callable, whichever HTTP carried it."""

    isLeaf = True

    #: What the chain is told the query came over: CoreDNS's DoH writer
    #: gives TCP addresses over HTTP/1.1 and HTTP/2, UDP ones over HTTP/3.
    proto = "tcp"
    #: The counter of responses per (server, status).
    responses = RESPONSES

    def __init__(self, mux, label, timeouts):
        super().__init__()
        self.mux = mux
        self.label = label
        self.timeouts = timeouts
        self.local = None

    def render(self, request):
        request.responseHeaders.removeHeader(b"server")   # Go sends none

        def reply(status, headers, body):
            if request.finished or request._disconnected:
                return
            request.setResponseCode(status)
            for name, value in headers:
                request.setHeader(name, value)
            request.write(body)
            request.finish()

        addr = request.getClientAddress()
        body = None
        if request.method == b"POST":
            if getattr(request, "received", 0) > MAX_MESSAGE:
                body = TOO_LARGE
            else:
                request.content.seek(0)
                body = request.content.read()
        gone = self.query(request.method, request.path, request.args, body,
                          (addr.host, addr.port), reply)
        if gone is not None:
            request.notifyFinish().addErrback(lambda _: gone())
        return server.NOT_DONE_YET

    def query(self, method, path, args, body, client, reply):
        """Answer one DoH request: ``args`` the parsed query string,
        ``body`` a POST's body (TOO_LARGE past MAX_MESSAGE).  Returns None,
        or for an answer still pending a callable to run if the client
        goes away first."""
        if path != PATH:
            self._error(reply, 404, b"")
            return None
        try:
            data = _message(method, args, body)
            _acceptable(data)
        except BadRequest:
            self._error(reply, 400, b"invalid request")
            return None
        return self._serve(data, client, reply)

    def _serve(self, data, client, reply):
        """Run the query through the mux; the answer, or 500 when the
        chain writes none."""
        return run_query(self.mux, data, client, self.proto, self.local,
                         self.timeouts.write,
                         lambda wire: self._answer(reply, wire))

    def _answer(self, reply, wire):
        if not wire:
            self._error(reply, 500, b"No response")
            return
        self._count(200)
        reply(200, [(b"content-type", MIME),
                    (b"cache-control", b"max-age=%d" % max_age(wire)),
                    (b"content-length", b"%d" % len(wire))], wire)

    def _error(self, reply, status, text):
        """Go's http.Error: the text and a newline as text/plain."""
        body = text + b"\n"
        self._count(status)
        reply(status, [(b"content-type", b"text/plain; charset=utf-8"),
                       (b"x-content-type-options", b"nosniff"),
                       (b"content-length", b"%d" % len(body))], body)

    def _count(self, status):
        self.responses.inc((self.label, str(status)))


def run_query(mux, data, client, proto, local, wait, answer):
    """Run one query of a request/response transport through the mux and
    call ``answer(wire)`` exactly once: with the chain's answer, or with
    None when it writes none (at once for a synchronous chain, after
    ``wait`` seconds otherwise, so that no request stays open for good).
    Returns None, or while the answer is pending a callable to run if the
    client goes away first."""
    done = []
    before = mux.inflight

    def send(wire):
        if done:
            return
        done.append(True)
        if timer is not None and timer.active():
            timer.cancel()
        answer(wire)

    timer = None
    host, port = muxlib.client_address(client)
    mux.handle(data, host, port, proto, local, send)
    if done:
        return None
    if mux.inflight == before:
        send(None)      # the chain finished and wrote nothing
        return None
    from twisted.internet import reactor
    timer = reactor.callLater(wait, send, None)
    return lambda: timer.active() and timer.cancel()


def _message(method, args, body):
    """The DNS message of a GET or POST request (BadRequest if none)."""
    if method == b"GET":
        values = args.get(b"dns")
        if not values:
            raise BadRequest("no 'dns' query parameter found")
        if len(values) != 1:
            raise BadRequest("multiple 'dns' query values found")
        b64 = values[0]
        if len(b64) > MAX_BASE64:
            raise BadRequest("dns query too large")
        return _b64decode(b64)
    if method == b"POST":
        if body is TOO_LARGE:
            raise BadRequest("http: request body too large")
        return body
    raise BadRequest("method not allowed")


def _b64decode(b64):
    """Unpadded base64url, strictly (Go's RawURLEncoding: no padding, no
    characters outside the alphabet)."""
    if b"=" in b64 or len(b64) % 4 == 1:
        raise BadRequest("illegal base64 data")
    try:
        return base64.b64decode(b64 + b"=" * (-len(b64) % 4), b"-_",
                                validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest("illegal base64 data") from e


def _acceptable(data):
    """miekg's request policy and unpacking, as CoreDNS applies them to a
    DoH message before the chain (where UDP and TCP would get FORMERR or
    NOTIMP, DoH gets 400)."""
    if len(data) < 12:
        raise BadRequest("dns: overflow unpacking")
    _, flags, qd, an, ns, ar = _HDR.unpack_from(data)
    opcode = (flags >> 11) & 0xF
    if (flags & w.QR or opcode not in (w.OPCODE_QUERY, w.OPCODE_NOTIFY)
            or qd != 1 or an > 1 or ns > 1 or ar > 2):
        raise BadRequest("dns request rejected")
    req = Request(data)
    req.parse_header()
    try:
        req.parse_question(an, ns, ar)
        _records(data, req.qend, an + ns + ar)
    except (w.FormatError, struct.error, IndexError) as e:
        raise BadRequest("dns: unpack failed") from e


def _records(data, offset, count):
    """Walk ``count`` records after the question (FormatError when one
    runs past the end)."""
    for _ in range(count):
        offset = _skip_name(data, offset)
        _, _, _, rdlen = _RR_FIXED.unpack_from(data, offset)
        offset += _RR_FIXED.size + rdlen
        if offset > len(data):
            raise w.FormatError("record overruns message")


def _skip_name(data, offset):
    while True:
        n = data[offset]
        if n == 0:
            return offset + 1
        if n & 0xC0 == 0xC0:
            return offset + 2
        if n & 0xC0:
            raise w.FormatError("bad label")
        offset += n + 1


def max_age(wire):
    """Cache-Control max-age of an answer: the lowest TTL of its records
    (OPT aside) capped at an hour; 5 s for an error answer, or one with
    no records (CoreDNS's MinimalTTL)."""
    try:
        _, flags, qd, an, ns, ar = _HDR.unpack_from(wire)
        rcode = flags & 0xF
        if rcode not in (w.NOERROR, w.NXDOMAIN):
            return MIN_AGE
        offset = 12
        for _ in range(qd):
            offset = _skip_name(wire, offset) + 4
        lowest = None
        for _ in range(an + ns + ar):
            offset = _skip_name(wire, offset)
            rtype, _, ttl, rdlen = _RR_FIXED.unpack_from(wire, offset)
            offset += _RR_FIXED.size + rdlen
            if rtype == w.OPT:
                continue
            lowest = ttl if lowest is None else min(lowest, ttl)
    except (struct.error, IndexError, w.FormatError):
        return MIN_AGE
    if lowest is None:
        return MIN_AGE
    return min(lowest, MAX_AGE)


class Front(policies.WrappingFactory):
    """The outermost factory of a DoH listener: counts the connections,
    stops accepting while ``limit`` are open (CoreDNS's LimitListener;
    0 is unbounded) and closes them all at shutdown.  It also stands for
    the listener's stream factory (``mux``, ``timeouts``)."""

    def __init__(self, wrapped, site, limit):
        super().__init__(wrapped)
        self.site = site
        self.limit = limit
        self.port = None
        self.paused = False
        self._closed = None

    @property
    def mux(self):
        return self.site.resource.mux

    @mux.setter
    def mux(self, mux):
        self.site.resource.mux = mux

    @property
    def timeouts(self):
        return self.site.resource.timeouts

    @timeouts.setter
    def timeouts(self, limits):
        self.site.resource.timeouts = limits
        self.site.timeOut = limits.idle

    @property
    def connections(self):
        return self.protocols

    def registerProtocol(self, p):
        super().registerProtocol(p)
        stream.nodelay(p.transport)
        if (self.limit and len(self.protocols) >= self.limit
                and self.port is not None and not self.paused):
            self.paused = True
            self.port.stopReading()

    def unregisterProtocol(self, p):
        super().unregisterProtocol(p)
        if self.paused and len(self.protocols) < (self.limit or 1 << 62):
            self.paused = False
            if self.port is not None and self.port.connected:
                self.port.startReading()
        if not self.protocols and self._closed is not None:
            d, self._closed = self._closed, None
            d.callback(None)

    def close_all(self):
        if not self.protocols:
            return defer.succeed(None)
        self._closed = defer.Deferred()
        for p in list(self.protocols):
            inner = p
            while inner is not None and not hasattr(inner, "shutdown"):
                inner = getattr(inner, "wrappedProtocol", None)
            if inner is None:
                p.loseConnection()
            else:
                inner.shutdown()        # HTTP/2's GOAWAY first
        return self._closed


class DoHSite(server.Site):
    """A site without an access log: CoreDNS writes no line per DoH
    request, and one log line per query would cost more than the
    answer."""

    noisy = False

    def log(self, request):
        pass


def listen_https(reactor, host, port, mux, timeouts, tls, limit,
                 wrap=None):
    """A DoH listener (plain HTTP without ``tls``; ``wrap``: the PROXY
    protocol reader, in front of TLS).

    Returns (port, Front, Switchable or None, actual port)."""
    res = DoHResource(mux, mux.label, timeouts)
    site = DoHSite(res, timeout=timeouts.idle)
    site.requestFactory = DoHRequest
    site.protocol = _channel
    creator = None
    inner = site
    if tls is not None:
        creator = tlsconfig.Switchable(tls, tlsconfig.HTTP_ALPN)
        inner = TLSMemoryBIOFactory(creator, False, site)
    if wrap is not None:
        inner = wrap(inner)
    front = Front(inner, site, limit)
    listening, actual = sockets.adopt_tcp(reactor, host, port, front)
    front.port = listening
    res.local = (host, actual)
    return listening, front, creator, actual
