"""DNS over TLS (RFC 7858).

A DoT listener is the plain DNS stream listener behind Twisted's TLS
layer: the same framing, pipelining, timeouts and query limits, the same
mux and chain; the chain sees the query as ``tcp``, as CoreDNS's does (its
request.Proto() names the address family of the connection, never the
encryption).
"""

from twisted.protocols.tls import TLSMemoryBIOFactory

from corednstw.dnsserver.sockets import adopt_tcp
from corednstw.dnsserver.stream import DNSStreamFactory
from corednstw.dnsserver.tlsconfig import Switchable


def listen_tls(reactor, host, port, mux, timeouts, tls, wrap=None):
    """A DoT listener: the plain DNS stream factory behind TLS (and
    behind ``wrap``, the PROXY protocol reader, when given).

    Returns (port, stream factory, Switchable, actual port)."""
    stream = DNSStreamFactory(mux, None, timeouts)
    creator = Switchable(tls)
    wrapped = TLSMemoryBIOFactory(creator, False, stream)
    if wrap is not None:
        wrapped = wrap(wrapped)
    listening, actual = adopt_tcp(reactor, host, port, wrapped)
    stream.local = (host, actual)
    return listening, stream, creator, actual
