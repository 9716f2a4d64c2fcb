"""DNS over TLS (RFC 7858).

A DoT listener is the plain DNS stream listener with TLS in front: the
same framing, pipelining, timeouts and query limits, the same mux and
chain; the chain sees the query as ``tcp``, as CoreDNS's does (its
request.Proto() names the address family of the connection, never the
encryption).

Each connection is served by the standard library's ssl where the
settings allow it (tlsstream.DoTProtocol: TLS and framing in one
protocol), else by Twisted's TLS layer over pyOpenSSL in front of the
plain stream protocol (client_auth request and require, a key log).
The choice is made per connection from the current settings, so a
reload that changes them applies to the next connection.
"""

from twisted.protocols.tls import TLSMemoryBIOFactory

from corednstw.dnsserver.sockets import adopt_tcp
from corednstw.dnsserver.stream import DNSStreamFactory
from corednstw.dnsserver.tlsconfig import Switchable
from corednstw.dnsserver.tlsstream import DoTProtocol, fast_context


class DoTFactory(TLSMemoryBIOFactory):
    """Builds each connection on the standard library's ssl when the
    current settings have an ssl context, else on pyOpenSSL (Twisted's
    TLS layer around ``stream``'s protocol)."""

    def __init__(self, creator, stream):
        super().__init__(creator, False, stream)
        self.creator = creator
        self.stream = stream

    def buildProtocol(self, addr):
        context = fast_context(self.creator)
        if context is None:
            return super().buildProtocol(addr)
        s = self.stream
        return s.adopt(DoTProtocol(s.mux, s.local, s.timeouts, context))


def listen_tls(reactor, host, port, mux, timeouts, tls, wrap=None):
    """A DoT listener: the plain DNS stream factory behind TLS (and
    behind ``wrap``, the PROXY protocol reader, when given).

    Returns (port, stream factory, Switchable, actual port)."""
    stream = DNSStreamFactory(mux, None, timeouts)
    creator = Switchable(tls)
    wrapped = DoTFactory(creator, stream)
    if wrap is not None:
        wrapped = wrap(wrapped)
    listening, actual = adopt_tcp(reactor, host, port, wrapped)
    stream.local = (host, actual)
    return listening, stream, creator, actual
