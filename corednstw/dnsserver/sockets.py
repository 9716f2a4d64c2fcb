"""Sockets for every listener, made here with SO_REUSEPORT (as CoreDNS's
are) and adopted by the reactor: listenUDP/listenTCP cannot set it."""

import errno
import socket

from corednstw.dnsserver.datagram import DNSDatagramProtocol, adopt_udp
from corednstw.dnsserver.stream import DNSStreamFactory, _watch_accepts

#: Socket buffer size asked for UDP listeners (the kernel caps it at
#: net.core.rmem_max / wmem_max).
UDP_BUFFER = 4 * 1024 * 1024


def _family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _socket(host, port, kind):
    fam = _family(host)
    s = socket.socket(fam, kind)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if kind == socket.SOCK_DGRAM:
            # Room for bursts: a full receive queue drops queries silently.
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    s.setsockopt(socket.SOL_SOCKET, opt, UDP_BUFFER)
                except OSError:
                    pass
        if fam == socket.AF_INET6 and host == "::":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind((host, port))
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


def reserve_tcp(host, port):
    """A bound TCP socket that never listens: it holds host:port (port 0:
    a free one) while other SO_REUSEPORT sockets there take the
    connections (a multisocket supervisor keeps its workers' port so)."""
    return _socket(host, port, socket.SOCK_STREAM)


def default_host():
    """'::' (dual stack) when the kernel has IPv6, else '0.0.0.0'."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::", 0))
        s.close()
        return "::"
    except OSError:
        return "0.0.0.0"


def bind_pair(host, port):
    """A bound UDP socket and a listening TCP socket on host:port (port 0:
    one free port for both): (udp, tcp, actual_port).

    With port 0 the kernel picks a number for UDP that TCP may not have:
    another process can hold it, bound or as the local port of a
    connection (then ``bind`` passes under SO_REUSEADDR and ``listen``
    fails).  Either failure takes a new number, on a busy machine too."""
    for _ in range(50):
        u = _socket(host, port, socket.SOCK_DGRAM)
        actual = u.getsockname()[1]
        t = None
        try:
            t = _socket(host, actual, socket.SOCK_STREAM)
            t.listen(1024)
        except OSError as e:
            u.close()
            if t is not None:
                t.close()
            if port == 0 and e.errno == errno.EADDRINUSE:
                continue
            raise
        except BaseException:
            u.close()
            if t is not None:
                t.close()
            raise
        return u, t, actual
    raise OSError(errno.EADDRINUSE, "no free port for UDP and TCP")


def listen(reactor, host, port, mux, timeouts=None, udp=True, bound=None):
    """Open UDP and TCP on host:port (port 0: one free port for both).

    Returns (udp_port, tcp_port, actual_port).  The reactor adopts sockets
    we made, because listenUDP/listenTCP cannot set SO_REUSEPORT.  With
    ``udp`` False only TCP is opened and udp_port is None.  ``bound``: a
    (udp, tcp) pair bound elsewhere (bind_pair) to adopt instead, as a
    multisocket worker adopts its supervisor's; closed here once adopted
    (the reactor holds its own descriptors).
    """
    if not udp:
        return (None,) + _listen_tcp(reactor, host, port, mux, timeouts)
    if bound is None:
        u, t, actual = bind_pair(host, port)
    else:
        u, t = bound
        actual = u.getsockname()[1]
    try:
        local = (host, actual)
        udp = adopt_udp(reactor, u.fileno(), _family(host),
                        DNSDatagramProtocol(mux, local))
        tcp = _watch_accepts(reactor.adoptStreamPort(
            t.fileno(), _family(host), DNSStreamFactory(mux, local,
                                                        timeouts)))
    finally:
        u.close()
        t.close()
    return udp, tcp, actual


def _listen_tcp(reactor, host, port, mux, timeouts):
    """TCP alone on host:port: (tcp_port, actual_port)."""
    t = _socket(host, port, socket.SOCK_STREAM)
    try:
        t.listen(1024)
        actual = t.getsockname()[1]
        tcp = _watch_accepts(reactor.adoptStreamPort(
            t.fileno(), _family(host),
            DNSStreamFactory(mux, (host, actual), timeouts)))
    finally:
        t.close()
    return tcp, actual


def adopt_tcp(reactor, host, port, factory):
    """Listen on TCP host:port with ``factory`` on a socket of our own
    (SO_REUSEPORT, as every listener); returns (port, actual_port)."""
    s = _socket(host, port, socket.SOCK_STREAM)
    try:
        s.listen(1024)
        actual = s.getsockname()[1]
        listening = reactor.adoptStreamPort(s.fileno(), _family(host),
                                            factory)
    finally:
        s.close()
    return listening, actual

