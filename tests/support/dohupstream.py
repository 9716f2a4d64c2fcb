"""A scriptable DNS-over-HTTPS server (twisted.web over TLS, HTTP/1.1)
for tests of forward's https:// upstreams.

It records every request (method, path, content type, the DNS message)
and answers an A query with one A record (``address``), anything else
with NOERROR and no records.  Tests change the answer at any time:

- ``status``: answer with that HTTP status (and a text body);
- ``content_type``: the Content-Type of a 200 answer;
- ``body``: these bytes instead of the DNS answer;
- ``oversize``: a DNS answer padded past 64 KiB;
- ``hold``: never answer (the request stays open until ``stop``);
- ``drop_idle()``: close every idle keep-alive connection.
"""

import base64

import dns.message
import dns.rrset
from twisted.internet import reactor, ssl
from twisted.web import http, resource, server

MIME = "application/dns-message"


class _DNSQuery(resource.Resource):
    isLeaf = True

    def __init__(self, up):
        resource.Resource.__init__(self)
        self.up = up

    def render(self, request):
        up = self.up
        if request.method == b"GET":
            b64 = request.args.get(b"dns", [b""])[0]
            wire = base64.urlsafe_b64decode(b64 + b"=" * (-len(b64) % 4))
        else:
            wire = request.content.read()
        q = dns.message.from_wire(wire)
        ctype = request.getHeader("content-type")
        up.requests.append((request.method.decode(),
                            request.path.decode(), ctype, q))
        if up.hold:
            up.held.append(request)
            return server.NOT_DONE_YET
        if up.status != 200:
            request.setResponseCode(up.status)
            request.setHeader("content-type", "text/plain")
            return b"no\n"
        request.setHeader("content-type", up.content_type)
        if up.body is not None:
            return up.body
        return self.answer(q)

    def answer(self, q):
        r = dns.message.make_response(q)
        r.id = q.id
        if q.question[0].rdtype == 1:
            r.answer.append(dns.rrset.from_text(
                q.question[0].name, 300, "IN", "A", self.up.address))
        wire = r.to_wire()
        if self.up.oversize:
            wire += b"\x00" * 70000
        return wire


class _Channel(http.HTTPChannel):
    """HTTP/1.1, known to its server while connected."""

    live: list = []

    def connectionMade(self):
        http.HTTPChannel.connectionMade(self)
        self.live.append(self)

    def connectionLost(self, reason):
        if self in self.live:
            self.live.remove(self)
        http.HTTPChannel.connectionLost(self, reason)


class DoHUpstream:

    def __init__(self, cert, key, address="192.0.2.7", **script):
        self.cert, self.key = cert, key
        self.address = address
        self.status = 200
        self.content_type = MIME
        self.body = None
        self.oversize = False
        self.hold = False
        self.held = []
        self.requests = []
        self.port = None
        self.channels = []
        for k, v in script.items():
            if not hasattr(self, k):
                raise TypeError("no such setting: %s" % k)
            setattr(self, k, v)

    def start(self):
        root = resource.Resource()
        root.putChild(b"dns-query", _DNSQuery(self))
        site = server.Site(root)
        channels = self.channels

        def proto():
            ch = _Channel()
            ch.live = channels
            return ch
        site.protocol = proto
        with open(self.cert, "rb") as f:
            cert = f.read()
        with open(self.key, "rb") as f:
            key = f.read()
        opts = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key).options()
        self.port = reactor.listenSSL(0, site, opts, interface="127.0.0.1")
        return self

    @property
    def number(self):
        return self.port.getHost().port

    def methods(self):
        return [m for m, _p, _c, _q in self.requests]

    def drop_idle(self):
        """Close the keep-alive connections that carry no request, as Go's
        server does on its idle timeout: close_notify, then the socket."""
        for ch in list(self.channels):
            if not ch.requests:
                ch.transport.abortConnection()

    def stop(self):
        for ch in list(self.channels):
            ch.transport.abortConnection()
        return self.port.stopListening()
