"""DNS over HTTPS (RFC 8484) to one upstream, as CoreDNS's DoH client.

twisted.web's ``Agent`` over a persistent ``HTTPConnectionPool``: HTTP/1.1
with keep-alive (twisted.web's client speaks no HTTP/2, so ALPN offers
``http/1.1`` only).  The connection is opened to the upstream's address
directly (no name resolution) with the proxy's TLS options, source address
and dial timeout.  A query goes out with message ID 0 (RFC 8484 asks for
it; the server puts the client's ID back) as a POST with an
``application/dns-message`` body, or a GET with the message base64url in
``?dns=``.  Whatever is not a DNS message in a 200 reply of that content
type, at most 64 KiB, fails the attempt (``UpstreamError``), and so does
no reply within the timeout: the waiter hears of every query, never a hang.
"""

import base64

from twisted.internet import defer, error, protocol
from twisted.internet.endpoints import (
    TCP4ClientEndpoint,
    TCP6ClientEndpoint,
    wrapClientTLS,
)
from twisted.web import client
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, IBodyProducer
from zope.interface import implementer

from corednstw.engines.upstream.errors import CachedClosed, UpstreamError

PATH = "/dns-query"
MIME = b"application/dns-message"
#: Largest body read from an upstream (CoreDNS's maxDNSQuerySize).
MAX_BODY = 65536
#: Idle connections kept per upstream when max_idle_conns is 0 (no cap,
#: as for TCP and TLS).  HTTP/1.1 carries one query at a time per
#: connection, so a small cap (Go's two per host, fine for its HTTP/2)
#: would close and reopen connections under load.
UNCAPPED = 1 << 30
METHODS = ("GET", "POST")

#: A reused connection that failed before any answer: the peer had closed
#: it; the attempt is retried on a fresh one.
_STALE = (client.ResponseNeverReceived, client.RequestTransmissionFailed,
          client.RequestNotSent)


class HTTPSConn:
    """What a waiter is told the answer came over: the DoH transport.

    twisted.web's pool hides which connection carried a request, so our
    end of it is not known (``local()`` is None)."""

    proto = "https"

    def local(self):
        return None


@implementer(IBodyProducer)
class _Body:
    """A POST body already in memory: written at once."""

    def __init__(self, data):
        self.data = data
        self.length = len(data)

    def startProducing(self, consumer):
        consumer.write(self.data)
        return defer.succeed(None)

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def stopProducing(self):
        pass


class _Reader(protocol.Protocol):
    """Reads a response body up to MAX_BODY; fires ``d`` with it, or fails
    it for a body that is too long, cut short, or not a DNS answer."""

    def __init__(self, d, response):
        self.d = d
        self.status = response.code
        types = response.headers.getRawHeaders(b"content-type") or [b""]
        self.ctype = types[0].split(b";")[0].strip().lower()
        self.parts = []
        self.size = 0

    def dataReceived(self, data):
        if self.d.called:
            return
        self.size += len(data)
        if self.size > MAX_BODY:
            self.parts = []
            self.d.errback(UpstreamError("response body too large"))
            self.transport.stopProducing()
            return
        self.parts.append(data)

    def abort(self):
        if self.transport is not None:
            self.transport.stopProducing()

    def connectionLost(self, reason):
        if self.d.called:
            return
        if not reason.check(client.ResponseDone, client.PotentialDataLoss):
            return self.d.errback(UpstreamError(
                "reading body: %s" % reason.getErrorMessage()))
        if self.status != 200:
            return self.d.errback(UpstreamError(
                "unexpected HTTP status %d" % self.status))
        if self.ctype != MIME:
            return self.d.errback(UpstreamError(
                "unexpected content type %r" % self.ctype.decode("latin-1")))
        data = b"".join(self.parts)
        if len(data) < 12:
            return self.d.errback(UpstreamError(
                "dns: overflow unpacking uint16"))
        self.d.callback(data)


class _Pool(client.HTTPConnectionPool):
    """The persistent pool, counting the connections it had to open (the
    rest of the requests were cache hits)."""

    opened = 0

    def _newConnection(self, key, endpoint):
        self.opened += 1
        return client.HTTPConnectionPool._newConnection(self, key, endpoint)


@implementer(IAgentEndpointFactory)
class DoHClient:
    """The HTTP side of one ``https://`` upstream (a ``Upstream``)."""

    conn = HTTPSConn()

    def __init__(self, proxy, method="POST"):
        self.proxy = proxy
        self.method = method
        h = "[%s]" % proxy.host if ":" in proxy.host else proxy.host
        netloc = "%s:%d" % (h, proxy.port)
        self.url = "https://%s%s" % (netloc, PATH)
        self._url = self.url.encode("ascii")
        self._headers = {
            "GET": Headers({b"Host": [netloc.encode("ascii")],
                            b"Accept": [MIME]}),
            "POST": Headers({b"Host": [netloc.encode("ascii")],
                             b"Accept": [MIME], b"Content-Type": [MIME]}),
        }
        self.pool = None
        self.agent = None
        self.inflight = set()
        #: Whether the last request went on a pooled connection.
        self.reused = False

    def start(self, reactor):
        p = self.proxy
        self.pool = _Pool(reactor, persistent=True)
        self.pool.maxPersistentPerHost = p.max_idle or UNCAPPED
        self.pool.cachedConnectionTimeout = p.expire
        self.agent = client.Agent.usingEndpointFactory(reactor, self,
                                                       self.pool)

    def stop(self):
        """Cancel the requests under way, close the idle connections."""
        for d in list(self.inflight):
            d.cancel()
        self.inflight.clear()
        if self.pool is None:
            return None
        pool, self.pool, self.agent = self.pool, None, None
        return pool.closeCachedConnections()

    def endpointForURI(self, uri):
        """A TLS connection to the upstream's address (the URI's host is
        that address: nothing to resolve)."""
        p = self.proxy
        cls = TCP6ClientEndpoint if ":" in p.host else TCP4ClientEndpoint
        bind = (p.source, 0) if p.source else None
        ep = cls(p.reactor, p.host, p.port, timeout=p.dial_timeout(),
                 bindAddress=bind)
        return wrapClientTLS(p.tls, ep)

    def fetch(self, wire, timeout, method=None):
        """Send query ``wire`` (its ID is replaced by 0); Deferred firing
        with the answer's bytes or failing with ``UpstreamError``
        (``CachedClosed`` when a reused connection had been closed);
        ``reused`` then tells whether a pooled connection carries it."""
        if self.agent is None:
            return defer.fail(UpstreamError("transport stopped"))
        method = method or self.method
        msg = b"\x00\x00" + wire[2:]
        if method == "GET":
            url = self._url + b"?dns=" + \
                base64.urlsafe_b64encode(msg).rstrip(b"=")
            body = None
        else:
            url, body = self._url, _Body(msg)
        pool = self.pool
        opened = pool.opened
        d = self.agent.request(method.encode("ascii"), url,
                               self._headers[method], body)
        self.reused = reused = pool.opened == opened
        return _Call(self, d, method, reused, timeout).d

    def _read(self, response):
        reader = _Reader(None, response)
        reader.d = defer.Deferred(lambda _d: reader.abort())
        response.deliverBody(reader)
        return reader.d


class _Call:
    """One request under way: its timer, and its failure worded as Go's
    http.Client words it ('Post "URL": reason')."""

    __slots__ = ("client", "d", "method", "reused", "timer", "timed_out")

    def __init__(self, client, d, method, reused, timeout):
        self.client = client
        self.d = d
        self.method = method
        self.reused = reused
        self.timed_out = False
        client.inflight.add(d)
        self.timer = client.proxy.reactor.callLater(timeout, self._timeout)
        d.addCallback(client._read)
        d.addBoth(self._done)
        d.addErrback(self._failed)

    def _timeout(self):
        self.timed_out = True
        self.d.cancel()

    def _done(self, result):
        self.client.inflight.discard(self.d)
        if self.timer.active():
            self.timer.cancel()
        return result

    def _failed(self, failure):
        exc = failure.value
        client = self.client
        if self.timed_out:
            text = ("context deadline exceeded (Client.Timeout exceeded "
                    "while awaiting headers)")
        elif client.agent is None:
            raise UpstreamError("transport stopped")
        elif isinstance(exc, UpstreamError):
            text = str(exc)
        elif isinstance(exc, error.ConnectionRefusedError):
            text = "dial tcp %s: connect: connection refused" % (
                client.url[8:-len(PATH)])
        elif isinstance(exc, _STALE):
            if self.reused:
                raise CachedClosed("EOF")
            text = _reasons(exc)
        else:
            text = failure.getErrorMessage()
        method = "Get" if self.method == "GET" else "Post"
        raise UpstreamError('%s "%s": %s' % (method, client.url, text))


def _reasons(exc):
    """The first underlying failure of twisted.web's wrapped errors."""
    reasons = getattr(exc, "reasons", None)
    if reasons:
        f = reasons[0]
        if f.check(error.ConnectionDone, error.ConnectionLost):
            return "EOF"
        return f.getErrorMessage()
    return str(exc)
