"""Connections to one upstream: a connected UDP socket, TCP and TLS
streams.

A query is handed to a connection with a *waiter*: an object with
``reply(data, conn)`` and ``fail(exc, conn)`` (a plugin's per-query
exchange).  Plain method calls, no Deferred per upstream query.  The
connection's owner (a ``Upstream``) supplies the reactor, the clock, and
takes stream connections back into its pool (``yield_conn``,
``forget_conn``).
"""

import socket
import struct

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.engines.upstream.errors import CachedClosed, UpstreamError
from corednstw.engines.upstream.ids import new_id

_ID = struct.Struct("!H")

#: Receive buffer of an upstream UDP socket.  All queries to an upstream
#: share one socket (CoreDNS spreads them over a pool of sockets, each with
#: its own buffer), so a burst of replies needs more room than the
#: default; the kernel caps it at net.core.rmem_max.
UDP_RCVBUF = 1 << 20


def grow_rcvbuf(port):
    """Raise the receive buffer of UDP ``port`` to UDP_RCVBUF (best
    effort: left as it is where the OS refuses)."""
    try:
        sock = port.socket
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < UDP_RCVBUF:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)
    except (AttributeError, OSError):
        pass


def local_end(transport):
    """(host, port) of our end of a Twisted port or transport, or None."""
    if transport is None:
        return None
    try:
        a = transport.getHost()
        return (a.host, a.port)
    except (AttributeError, OSError):
        return None


class UDPConn(protocol.DatagramProtocol):
    """One connected UDP socket to an upstream; replies are matched to
    queries by message ID (replies with an unknown ID are ignored).

    Every query on a socket has the same read timeout, so the pending map
    (insertion ordered) is also ordered by deadline: one timer per socket,
    armed for the oldest query, replaces a timer per query."""

    proto = "udp"

    def __init__(self, proxy, created):
        self.proxy = proxy
        self.created = created
        self.pending = {}        # msgid -> (waiter, deadline)
        self.retired = False
        self.dead = False
        self.port = None
        self.timer = None
        self._local = None

    def local(self):
        """Our (host, port) on this socket (CoreDNS's LocalAddr)."""
        if self._local is None:
            self._local = local_end(self.port)
        return self._local

    def stopProtocol(self):
        # The reactor closed the socket (a read error): replace it.
        self.dead = True
        self._fail_all(UpstreamError("socket closed"))

    def query(self, wire, timeout, waiter, now):
        pending = self.pending
        msgid = new_id()
        while msgid in pending:
            msgid = new_id()
        pending[msgid] = (waiter, now + timeout)
        if self.timer is None:
            self.timer = self.proxy.reactor.callLater(timeout, self._expire)
        try:
            self.transport.write(_ID.pack(msgid) + wire[2:])
        except OSError as e:
            entry = pending.pop(msgid, None)
            if entry is not None:
                entry[0].fail(UpstreamError(str(e)), self)

    def datagramReceived(self, data, addr):
        if len(data) < 12:
            return
        entry = self.pending.pop((data[0] << 8) | data[1], None)
        if entry is None:
            return
        entry[0].reply(data, self)
        if self.retired and not self.pending:
            self.close()

    def _expire(self):
        self.timer = None
        pending = self.pending
        now = self.proxy.reactor.seconds()
        late = []
        for msgid, entry in pending.items():
            if entry[1] > now:
                break
            late.append(msgid)
        for msgid in late:
            entry = pending.pop(msgid, None)
            if entry is not None:
                entry[0].fail(UpstreamError("i/o timeout"), self)
        if pending and self.timer is None and self.port is not None:
            first = next(iter(pending.values()))[1]
            self.timer = self.proxy.reactor.callLater(
                max(first - self.proxy.reactor.seconds(), 0), self._expire)
        if self.retired and not pending:
            self.close()

    def _fail_all(self, exc):
        pending, self.pending = self.pending, {}
        for waiter, _deadline in pending.values():
            waiter.fail(exc, self)

    def connectionRefused(self):
        # ICMP port unreachable: every query on this socket went to the
        # same dead upstream.
        self._fail_all(UpstreamError("connection refused"))

    def close(self):
        if self.timer is not None:
            if self.timer.active():
                self.timer.cancel()
            self.timer = None
        self._fail_all(UpstreamError("transport stopped"))
        if self.port is not None:
            port, self.port = self.port, None
            port.stopListening()


class StreamConn(Int16StringReceiver):
    """A TCP or TLS connection carrying one query at a time."""

    MAX_LENGTH = 65535

    def __init__(self, proxy, proto):
        self.proxy = proxy
        self.proto = proto
        self.ready = defer.Deferred()
        self.pending = None      # (msgid, waiter, timer)
        self.created = self.used = proxy.clock()
        self.reused = False
        self.closed = False
        self.idle_timer = None
        self._local = None

    def local(self):
        if self._local is None:
            self._local = local_end(self.transport)
        return self._local

    def connectionMade(self):
        self.local()
        d, self.ready = self.ready, None
        d.callback(self)

    def query(self, wire, timeout, waiter):
        msgid = new_id()
        timer = self.proxy.reactor.callLater(timeout, self._timeout)
        self.pending = (msgid, waiter, timer)
        self.sendString(_ID.pack(msgid) + wire[2:])

    def stringReceived(self, data):
        p = self.pending
        if p is None or len(data) < 12 or _ID.unpack_from(data)[0] != p[0]:
            return
        self.pending = None
        p[2].cancel()
        self.used = self.proxy.clock()
        self.proxy.yield_conn(self)
        p[1].reply(data, self)

    def _timeout(self):
        p, self.pending = self.pending, None
        self.close()
        if p is not None:
            p[1].fail(UpstreamError("i/o timeout"), self)

    def lengthLimitExceeded(self, length):
        self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abortConnection()

    def connectionLost(self, reason):
        self.closed = True
        if self.idle_timer is not None and self.idle_timer.active():
            self.idle_timer.cancel()
        self.proxy.forget_conn(self)
        p, self.pending = self.pending, None
        if p is not None:
            if p[2].active():
                p[2].cancel()
            cls = CachedClosed if self.reused else UpstreamError
            p[1].fail(cls("connection closed: %s"
                          % reason.getErrorMessage()), self)


class StreamFactory(protocol.ClientFactory):
    """Hands the one prepared StreamConn to the reactor; a failed dial
    fails its ``ready`` Deferred."""

    def __init__(self, conn):
        self.conn = conn

    def buildProtocol(self, addr):
        return self.conn

    def clientConnectionFailed(self, connector, reason):
        d, self.conn.ready = self.conn.ready, None
        if d is not None:
            d.errback(UpstreamError(reason.getErrorMessage()))
