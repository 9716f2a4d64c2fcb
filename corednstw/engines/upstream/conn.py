"""Connections to one upstream: a connected UDP socket, TCP and TLS
streams.

A query is handed to a connection with a *waiter*: an object with
``reply(data, conn)`` and ``fail(exc, conn)`` (a plugin's per-query
exchange).  Plain method calls, no Deferred per upstream query.  The
connection's owner (a ``Upstream``) supplies the reactor, the clock, and
takes stream connections back into its pool (``yield_conn``,
``forget_conn``).
"""

import _socket as _socketmod
import errno
import os
import select
import socket
import struct
import weakref
from collections import deque

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver
from twisted.python import log

from corednstw.engines.upstream.errors import CachedClosed, UpstreamError
from corednstw.engines.upstream.ids import new_id

_ID = struct.Struct("!H")
#: The query sockets: ``_socket.socket`` itself (what the queries use of
#: a socket is all there; socket.socket's Python layer costs a little on
#: every query), created non-blocking where the flag exists.
_socket = _socketmod.socket
_NONBLOCK = getattr(socket, "SOCK_NONBLOCK", 0)
_DGRAM = socket.SOCK_DGRAM | _NONBLOCK
_SETBLOCKING = not _NONBLOCK
_epoll = getattr(select, "epoll", None)
_IN = getattr(select, "EPOLLIN", 1)
#: Where replies are read (then copied out at their size): one buffer
#: for every query, so no 64 KiB buffer is allocated per reply.
_BUF = bytearray(65535)
_VIEW = memoryview(_BUF)
#: Forks this process is from its first (bumped in each forked child):
#: an epoll set or a socket copied by a fork is still the parent's.
_FORKS = [0]
#: Every open UDPConn, whose copies a forked child closes at once.
_CONNS: "weakref.WeakSet[UDPConn]" = weakref.WeakSet()


def _after_fork():
    _FORKS[0] += 1
    for conn in list(_CONNS):
        conn.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def local_end(transport):
    """(host, port) of our end of a Twisted port or transport, or None."""
    if transport is None:
        return None
    try:
        a = transport.getHost()
        return (a.host, a.port)
    except (AttributeError, OSError):
        return None


#: Queries one UDP socket carries at most before it is closed, so that a
#: busy upstream still sees fresh source ports (see UDPConn).  Opening,
#: watching and closing a socket costs about 7.5 µs of CPU: spread over
#: 64 queries that is about 0.1 µs a query, under 0.5% of a forwarded
#: query, while the port still changes every 64 queries.
MAX_USES = 64


class UDPConn:
    """The UDP queries to one upstream, over a pool of connected sockets
    (CoreDNS's persistent UDP connections), one query at a time each.

    A query takes the idle socket that has waited longest, or opens one
    (a fresh random source port from the kernel), sends with a random
    message ID and reads until the reply with that ID comes; then the
    socket goes back to the pool.  A reply with another ID is ignored
    (the query waits on; on an idle socket every datagram is dropped), a
    datagram from elsewhere too (the socket is connected: the kernel
    drops it).  A socket whose query timed out or failed is closed, never
    reused, so a late reply cannot meet the next query there.  Unlike
    CoreDNS a socket carries at most ``max_uses`` queries (``MAX_USES``):
    an off-path attacker forging replies must still find a port that
    keeps changing as well as the ID.  Idle sockets unused for the
    upstream's ``expire`` are closed (when a query meets them, and by
    one timer for the whole pool), as are those older than ``max_age``;
    ``max_idle`` caps the pool.

    The sockets are plain non-blocking sockets.  Where the platform has
    epoll they are watched by an epoll set of the connection's own, and
    the reactor watches that one descriptor (``doRead`` reads every
    socket that is ready): adding a socket is one ``epoll_ctl``, closing
    it removes it, and the reactor's bookkeeping and dispatch are paid
    once per wake-up instead of once per query.  Elsewhere (or with
    ``use_epoll`` false) each socket is a reader of the reactor's own
    while it is open.

    Every query has the same read timeout, so the pending map (insertion
    ordered) is also ordered by deadline: one timer, armed for the
    oldest query, replaces a timer per query."""

    proto = "udp"
    #: Watch the sockets through an epoll set of our own (class-wide
    #: switch; tests turn it off to run the per-socket reader path).
    use_epoll = _epoll is not None
    max_uses = MAX_USES

    def __init__(self, proxy, created):
        self.proxy = proxy
        self.created = created
        self.pending = {}        # UDPQuery (a busy socket) -> deadline
        self.idle = deque()      # idle sockets, least recently used first
        self.timer = None
        self.sweeper = None      # the idle sockets' expiry
        self.spent = []          # sockets to close on the next turn
        self.reaper = None
        self.epoll = self.use_epoll and _epoll is not None
        self.poller = None       # our epoll set (self.epoll), once opened
        self.forks = _FORKS[0]   # _FORKS when our sockets were opened
        self.byfd = {}           # our epoll set's sockets: fd -> UDPQuery
        host = proxy.host
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.peer = (host, proxy.port)
        self.source = (proxy.source, 0) if proxy.source else None
        _CONNS.add(self)

    def query(self, wire, timeout, waiter, now):
        """Send ``wire`` for ``waiter``; True when an idle socket took it
        (a connection cache hit), False when one was opened (or opening
        failed: ``waiter.fail`` was called)."""
        if self.forks != _FORKS[0] or (self.epoll and self.poller is None):
            self._watch()
        idle = self.idle
        reused = False
        while idle:
            q = idle.popleft()
            if q.sock is None:
                continue            # closed while idle (a socket error)
            proxy = self.proxy
            if now - q.used > proxy.expire or (
                    proxy.max_age and now - q.created > proxy.max_age):
                q.close()
                continue
            q.msgid = msgid = new_id()
            try:
                q.sock.send(_ID.pack(msgid) + wire[2:])
            except OSError:
                # An error an earlier datagram left on the socket (an
                # ICMP): not this query's, which takes another socket.
                q.close()
                continue
            reused = True
            break
        else:
            q = self._open(wire, waiter, now)
            if q is None:
                return False
        q.waiter = waiter
        self.pending[q] = now + timeout
        if self.timer is None:
            self.timer = self.proxy.reactor.callLater(timeout, self._expire)
        return reused

    def _open(self, wire, waiter, now):
        """A new socket sending ``wire``, watched; None when that failed
        (``waiter`` is told)."""
        q = UDPQuery(self, now)
        try:
            q.sock = sock = _socket(self.family, _DGRAM)
            if _SETBLOCKING:
                sock.setblocking(False)
            if self.source is not None:
                sock.bind(self.source)
            sock.connect(self.peer)
            sock.send(_ID.pack(q.msgid) + wire[2:])
        except OSError as e:
            if q.sock is not None:
                q.sock.close()
                q.sock = None
            waiter.fail(UpstreamError(str(e)), q)
            return None
        if self.epoll:
            fd = sock.fileno()
            self.poller.register(fd, _IN)
            self.byfd[fd] = q
        else:
            self.proxy.reactor.addReader(q)
        return q

    def done(self, q):
        """``q``'s query is answered or failed: no longer waited for."""
        return self.pending.pop(q, None) is not None

    def release(self, q):
        """``q``'s query was answered: its socket goes back to the pool,
        unless it has carried its share of queries, the pool is full or
        the upstream stopped."""
        if q.sock is None:
            return                  # closed meanwhile (the pool stopped)
        q.uses += 1
        proxy = self.proxy
        idle = self.idle
        if q.uses >= self.max_uses or proxy.stopped or (
                proxy.max_idle and len(idle) >= proxy.max_idle):
            q.local()               # still known to the waiter (dnstap)
            return q.close()
        q.used = proxy.clock()
        idle.append(q)
        if self.sweeper is None:
            self.sweeper = proxy.reactor.callLater(proxy.expire, self._sweep)

    def _sweep(self):
        """Close the idle sockets unused for ``expire``; again when the
        next one will be."""
        self.sweeper = None
        idle = self.idle
        proxy = self.proxy
        expire = proxy.expire
        now = proxy.clock()
        while idle and now - idle[0].used >= expire:
            idle.popleft().close()
        if idle:
            self.sweeper = proxy.reactor.callLater(
                max(idle[0].used + expire - now, 0.0), self._sweep)

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

    # -- our epoll set, one reader of the reactor ----------------------------

    def _watch(self):
        if self.forks != _FORKS[0]:
            self.forked()
        if self.epoll:
            self.poller = _epoll()
            self.proxy.reactor.addReader(self)

    def forked(self):
        """In a forked child (a multisocket worker): our sockets, epoll
        set and timers are copies of the parent's (its queries, its
        reactor).  Close our copies only (the parent's stay open) and
        start afresh; the reactor is not touched (a worker's starts with
        no reader or timer of the parent's)."""
        socks = list(self.pending) + list(self.idle) + list(
            self.byfd.values())
        for q in socks:
            if q.sock is not None:
                q.sock.close()
                q.sock = None
        for sock in self.spent:
            sock.close()
        self.pending = {}
        self.idle = deque()
        self.byfd = {}
        self.spent = []
        self.timer = self.sweeper = self.reaper = None
        poller, self.poller = self.poller, None
        if poller is not None:
            poller.close()
        self.forks = _FORKS[0]

    def fileno(self):
        return self.poller.fileno() if self.poller is not None else -1

    def logPrefix(self):
        return "UDPConn"

    def doRead(self):
        poller = self.poller
        if poller is None:
            return
        byfd = self.byfd
        # Every ready query first: reading one may close sockets and open
        # others (a retry) that reuse a descriptor number of this list.
        ready = [byfd.get(fd) for fd, _ev in poller.poll(0)]
        for q in ready:
            if q is not None and q.sock is not None:
                try:
                    q.doRead()
                except Exception:
                    # One query's waiter failing must not stop the others
                    # (the reactor would drop this whole reader).
                    log.err(None, "UDP reply to %s" % (self.peer,))

    def connectionLost(self, reason):
        # Our epoll descriptor failed (it does not, short of a bug):
        # whatever waits on it fails now rather than at its timeout.
        self.close()

    def forget(self, q, sock):
        """``q`` is done with ``sock``: close it (now when our epoll set
        watches it, closing takes it out of the set; else it leaves the
        reactor now and is closed on its next turn, see ``retire``)."""
        if self.epoll:
            fd = sock.fileno()
            if self.byfd.get(fd) is q:
                del self.byfd[fd]
            sock.close()
        else:
            self.proxy.reactor.removeReader(q)
            self.retire(sock)

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
        for timer in (self.timer, self.sweeper):
            if timer is not None and timer.active():
                timer.cancel()
        self.timer = self.sweeper = None
        for q in list(self.pending):
            q.fail(UpstreamError("transport stopped"))
        idle, self.idle = self.idle, deque()
        for q in idle:
            q.close()
        poller, self.poller = self.poller, None
        if poller is not None:
            self.proxy.reactor.removeReader(self)
            for q in list(self.byfd.values()):
                q.close()
            poller.close()
        if self.reaper is not None:
            self.reaper.cancel()
            self._reap()
        _CONNS.discard(self)


class UDPQuery:
    """One connected UDP socket of the pool and the query it carries now,
    if any (the conn handed to the waiter): read until the reply with the
    query's ID comes; while idle, whatever comes is dropped."""

    __slots__ = ("owner", "waiter", "sock", "msgid", "_local", "created",
                 "used", "uses")
    proto = "udp"

    def __init__(self, owner, created):
        self.owner = owner
        self.waiter = None
        self.sock = None
        self.msgid = new_id()
        self._local = None
        self.created = self.used = created
        self.uses = 0

    def local(self):
        """Our (host, port) on this socket (CoreDNS's LocalAddr)."""
        if self._local is None and self.sock is not None:
            try:
                self._local = self.sock.getsockname()[:2]
            except OSError:
                pass
        return self._local

    # The reactor's IReadDescriptor (when not watched by the owner's
    # epoll set).
    def fileno(self):
        return self.sock.fileno() if self.sock is not None else -1

    def logPrefix(self):
        return "UDPQuery"

    def doRead(self):
        sock = self.sock
        while sock is not None:
            try:
                n = sock.recv_into(_BUF)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                if self.waiter is None:
                    return self.close()
                return self.owner.refused()
            except OSError as e:
                if self.waiter is None:
                    return self.close()
                return self.fail(UpstreamError(str(e)))
            if (n >= 12 and (_BUF[0] << 8 | _BUF[1]) == self.msgid
                    and self.waiter is not None):
                data = _VIEW[:n].tobytes()
                owner = self.owner
                if owner.done(self):
                    waiter, self.waiter = self.waiter, None
                    owner.release(self)
                    waiter.reply(data, self)
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
        if self.waiter is None:
            return self.close()
        if err == errno.ECONNREFUSED:
            return self.owner.refused()
        self.fail(UpstreamError(os.strerror(err) if err else
                                "socket closed"))

    def fail(self, exc):
        if self.owner.done(self):
            waiter, self.waiter = self.waiter, None
            self.local()            # for the error text, before closing
            try:
                waiter.fail(exc, self)
            finally:
                self.close()

    def close(self):
        sock = self.sock
        if sock is not None:
            # Out of the reactor (by the owner) while fileno() still
            # names it.
            self.owner.forget(self, sock)
            self.sock = None


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
