"""DNS over HTTPS (RFC 8484), as CoreDNS's https:// server.

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

from twisted.internet import defer, protocol
from twisted.protocols import policies

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.request import Request
from corednstw.dnsserver import mux as muxlib
from corednstw.dnsserver import sockets, stream, tlsconfig, tlsstream

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
        self.args = query_args(query)
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


class DoHResource:
    """The listener's DoH logic, whichever HTTP carries the request
    (``doh_h1``, ``doh_h2``, ``doh3``): ``query`` takes the request's parts
    and answers through a ``reply(status, headers, body)`` callable."""

    #: What the chain is told the query came over: CoreDNS's DoH writer
    #: gives TCP addresses over HTTP/1.1 and HTTP/2, UDP ones over HTTP/3.
    proto = "tcp"
    #: The counter of responses per (server, status).
    responses = RESPONSES

    def __init__(self, mux, label, timeouts):
        self.mux = mux
        self.label = label
        self.timeouts = timeouts
        self.local = None

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


def query_args(query):
    """The parsed query string of a request target (as twisted.web's
    ``request.args``): the common ``dns=VALUE`` alone without parsing."""
    if not query:
        return {}
    if (query.startswith(b"dns=") and b"&" not in query and b"%" not in query
            and b"+" not in query):
        return {b"dns": [query[4:]]}
    return parse_qs(query, keep_blank_values=True)


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


class _Site(protocol.Factory):
    """What ``Front`` expects of a site: ``resource`` and ``timeOut``.
    No access log: CoreDNS writes no line per DoH request."""

    noisy = False

    def __init__(self, resource, idle):
        self.resource = resource
        self.timeOut = idle

    def buildProtocol(self, addr):
        from corednstw.dnsserver import doh_h1
        p = doh_h1.DoHH1(self.resource, self.timeOut)
        p.factory = self
        return p


def listen_https(reactor, host, port, mux, timeouts, tls, limit,
                 wrap=None):
    """A DoH listener (plain HTTP without ``tls``; ``wrap``: the PROXY
    protocol reader, in front of TLS).

    Returns (port, Front, Switchable or None, actual port)."""
    res = DoHResource(mux, mux.label, timeouts)
    site = _Site(res, timeouts.idle)
    creator = None
    inner = site
    if tls is not None:
        creator = tlsconfig.Switchable(tls, tlsconfig.HTTP_ALPN)
        inner = tlsstream.TLSFactory(creator, site)
    if wrap is not None:
        inner = wrap(inner)
    front = Front(inner, site, limit)
    listening, actual = sockets.adopt_tcp(reactor, host, port, front)
    front.port = listening
    res.local = (host, actual)
    return listening, front, creator, actual
