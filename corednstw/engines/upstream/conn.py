"""Connections to one upstream: a connected UDP socket, TCP and TLS
streams.

A query is handed to a connection with a *waiter*: an object with
``reply(data, conn)`` and ``fail(exc, conn)`` (a plugin's per-query
exchange).  Plain method calls, no Deferred per upstream query.  The
connection's owner (a ``Upstream``) supplies the reactor, the clock, and
takes stream connections back into its pool (``yield_conn``,
``forget_conn``).
"""

import errno
import os
import socket
import struct

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.engines.upstream.errors import CachedClosed, UpstreamError
from corednstw.engines.upstream.ids import new_id

_ID = struct.Struct("!H")

def local_end(transport):
    """(host, port) of our end of a Twisted port or transport, or None."""
    if transport is None:
        return None
    try:
        a = transport.getHost()
        return (a.host, a.port)
    except (AttributeError, OSError):
        return None


class UDPConn:
    """The UDP queries to one upstream, each on a socket of its own.

    A fresh socket per query gets a fresh random source port from the
    kernel: an off-path attacker forging a reply must guess the port as
    well as the message ID (16 + about 15 bits), where one socket kept
    for every query would leave the ID alone to guess.  A reply with
    another ID is ignored (the query waits on), as is a datagram from
    elsewhere (the socket is connected).

    Every query has the same read timeout, so the pending map (insertion
    ordered) is also ordered by deadline: one timer, armed for the
    oldest query, replaces a timer per query."""

    proto = "udp"

    def __init__(self, proxy, created):
        self.proxy = proxy
        self.created = created
        self.pending = {}        # UDPQuery -> deadline
        self.timer = None
        self.spent = []          # sockets to close on the next turn
        self.reaper = None
        host = proxy.host
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.peer = (host, proxy.port)

    def query(self, wire, timeout, waiter, now):
        q = UDPQuery(self, waiter)
        try:
            q.open(self.family, self.proxy.source, self.peer)
            q.sock.send(_ID.pack(q.msgid) + wire[2:])
        except OSError as e:
            q.close()
            return waiter.fail(UpstreamError(str(e)), q)
        self.pending[q] = now + timeout
        self.proxy.reactor.addReader(q)
        if self.timer is None:
            self.timer = self.proxy.reactor.callLater(timeout, self._expire)

    def done(self, q):
        """``q`` is answered or failed: no longer waited for."""
        if self.pending.pop(q, None) is not None:
            self.proxy.reactor.removeReader(q)
            return True
        return False

    def _expire(self):
        self.timer = None
        pending = self.pending
        reactor = self.proxy.reactor
        now = reactor.seconds()
        late = []
        for q, deadline in pending.items():
            if deadline > now:
                break
            late.append(q)
        for q in late:
            # The reactor runs timers before it reads: a reply that came
            # in time may still wait in the socket.
            q.doRead()
            q.fail(UpstreamError("i/o timeout"))
        if pending and self.timer is None:
            first = next(iter(pending.values()))
            self.timer = reactor.callLater(max(first - reactor.seconds(), 0),
                                           self._expire)

    def retire(self, sock):
        """Close ``sock`` on the reactor's next turn, not now: the events
        the reactor is dispatching may still name its descriptor, and a
        socket opened meanwhile (a retry) would get the same number and
        the other socket's event (an error from a dead upstream)."""
        self.spent.append(sock)
        if self.reaper is None:
            self.reaper = self.proxy.reactor.callLater(0, self._reap)

    def _reap(self):
        self.reaper = None
        spent, self.spent = self.spent, []
        for sock in spent:
            sock.close()

    def refused(self):
        """ICMP port unreachable on one query's socket: nobody listens at
        the upstream, so no query waiting on it will be answered."""
        for q in list(self.pending):
            q.fail(UpstreamError("connection refused"))

    def close(self):
        if self.timer is not None:
            if self.timer.active():
                self.timer.cancel()
            self.timer = None
        for q in list(self.pending):
            q.fail(UpstreamError("transport stopped"))
        if self.reaper is not None:
            self.reaper.cancel()
            self._reap()


class UDPQuery:
    """One query's connected UDP socket, read by the reactor until the
    reply with the query's ID comes (the conn handed to the waiter)."""

    __slots__ = ("owner", "waiter", "sock", "msgid", "_local")
    proto = "udp"

    def __init__(self, owner, waiter):
        self.owner = owner
        self.waiter = waiter
        self.sock = None
        self.msgid = new_id()
        self._local = None

    def open(self, family, source, peer):
        self.sock = s = socket.socket(family, socket.SOCK_DGRAM)
        s.setblocking(False)
        if source:
            s.bind((source, 0))
        s.connect(peer)

    def local(self):
        """Our (host, port) on this socket (CoreDNS's LocalAddr)."""
        if self._local is None and self.sock is not None:
            try:
                self._local = self.sock.getsockname()[:2]
            except OSError:
                pass
        return self._local

    # The reactor's IReadDescriptor.
    def fileno(self):
        return self.sock.fileno() if self.sock is not None else -1

    def logPrefix(self):
        return "UDPQuery"

    def doRead(self):
        sock = self.sock
        while sock is not None:
            try:
                data = sock.recv(65535)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                return self.owner.refused()
            except OSError as e:
                return self.fail(UpstreamError(str(e)))
            if len(data) >= 12 and (data[0] << 8 | data[1]) == self.msgid:
                if self.owner.done(self):
                    try:
                        self.waiter.reply(data, self)
                    finally:
                        self.close()
                return

    def connectionLost(self, reason):
        # The reactor saw an error without data (EPOLLERR): the socket's
        # pending error says which.
        err = 0
        if self.sock is not None:
            try:
                err = self.sock.getsockopt(socket.SOL_SOCKET,
                                           socket.SO_ERROR)
            except OSError:
                pass
        if err == errno.ECONNREFUSED:
            return self.owner.refused()
        self.fail(UpstreamError(os.strerror(err) if err else
                                "socket closed"))

    def fail(self, exc):
        if self.owner.done(self):
            self.local()            # for the error text, before closing
            try:
                self.waiter.fail(exc, self)
            finally:
                self.close()

    def close(self):
        sock, self.sock = self.sock, None
        if sock is not None:
            self.owner.retire(sock)


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
