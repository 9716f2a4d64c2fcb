"""DNS over UDP: one datagram, one query, read in batches where the
system has recvmmsg (``udpbatch``)."""

import errno
import struct
import time
from functools import partial

from twisted.internet import protocol, udp
from twisted.internet.posixbase import PosixReactorBase
from twisted.python import log

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.request import remember
from corednstw.dnsserver import udpbatch

_HDR = struct.Struct("!HHHHHH")

# Errors sending a datagram that mean "the kernel is busy": drop the answer
# (the client retries), never a traceback per packet.
_SEND_DROP = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS,
                        errno.ECONNREFUSED, errno.EHOSTUNREACH,
                        errno.ENETUNREACH, errno.EPERM, errno.EINTR))


#: Header bits miekg's reject reply keeps from the query (AA and Z cleared).
_KEPT = w.TC | w.RD | w.RA | w.AD | w.CD


# -- protocols ---------------------------------------------------------------

class DNSDatagramProtocol(protocol.DatagramProtocol):
    """UDP: one datagram, one query.

    Two ways in.  Where the system has recvmmsg (``batch`` set by
    ``adopt_udp``), ``read_batch`` reads up to udpbatch.SIZE datagrams per
    readiness event, and the answers that are ready before the batch ends
    go out together with one sendmmsg; answers that come later (a
    Deferred) are sent on their own with sendto.  Elsewhere Twisted's read
    loop calls ``datagramReceived`` per datagram, answers sent with sendto.
    Either way the answers go through the ``writer`` the shed plugin
    installs, when there is one."""

    #: An object whose ``write(wire, addr)`` sends the answers (shed's
    #: bounded stack); None: straight to the socket.
    writer = None
    #: udpbatch.Batch of the socket when it is read in batches.
    batch: "udpbatch.Batch | None" = None
    #: Seconds a datagram may wait in the socket before it is dropped
    #: unread (the shed plugin's; None: never), and what counts a drop.
    stale: "float | None" = None
    on_stale = None
    #: The plugin that set ``stale`` (a reload's new one takes over).
    stale_owner = None
    #: Client addresses remembered (raw address -> client, port, sender):
    #: a busy client's next query costs no address decoding.
    PEERS = 4096

    def __init__(self, mux, local):
        self.mux = mux
        self.local = local
        self._sendto = None
        self._peers = {}
        self._batching = False
        self._stage = None

    def startProtocol(self):
        self._sendto = self.transport.socket.sendto

    def set_writer(self, writer):
        """Send the answers through ``writer`` (None: the socket again,
        unless it is closed already).  Costs nothing per answer."""
        self.writer = writer
        if writer is not None:
            self._sendto = writer.write
        elif getattr(self.transport, "socket", None) is not None:
            self._sendto = self.transport.socket.sendto

    def datagramReceived(self, data, addr):
        host = addr[0]
        if host.startswith("::ffff:") and "." in host:
            host = host[7:]
        self.mux.handle(data, host, addr[1], "udp", self.local,
                        partial(self._send, addr))

    def _send(self, addr, wire):
        try:
            self._sendto(wire, addr)
        except OSError as e:
            if e.errno not in _SEND_DROP:
                logger.error("", "UDP write to %s failed: %s" % (addr[0], e))

    # -- batched ---------------------------------------------------------

    def read_batch(self):
        """One recvmmsg: answer every datagram it read, then send the
        answers already made with one sendmmsg."""
        batch = self.batch
        n = batch.recv()
        if not n:
            return
        start = 0
        if self.stale is not None:
            start = self._shed_stale(n)
        peers = self._peers
        handle = self.mux.handle
        local = self.local
        self._batching = self.writer is None
        try:
            for data, raw in batch.datagrams(start, n):
                p = peers.get(raw)
                if p is None:
                    p = self._peer(raw)
                    if p is None:
                        continue
                try:
                    handle(data, p[0], p[1], "udp", local, p[2])
                except Exception:
                    log.err()
        finally:
            self._batching = False
            if batch.staged:
                self._flush()

    def set_stale(self, seconds, on_drop=None):
        """Drop the datagrams that waited in the socket longer than
        ``seconds`` (None: answer all), calling ``on_drop(count)``.
        Only where the socket is read in batches (the kernel's receive
        times come with recvmmsg); returns whether it applies."""
        batch = self.batch
        if batch is None:
            return False
        batch.timestamps(seconds is not None)
        self.stale = seconds
        self.on_stale = on_drop
        return True

    def _shed_stale(self, n):
        """The index of the first datagram of the batch that is fresh
        enough: the ones before it (the oldest, read first) are dropped
        and counted.  Only the first one's age is looked at when the
        socket has no backlog."""
        batch = self.batch
        bound = time.time() - self.stale
        k = 0
        while k < n:
            t = batch.arrived(k)
            if t is None or t >= bound:
                break
            k += 1
        if k:
            for i in range(k):
                batch.datagram(i)       # frees the slot
            if self.on_stale is not None:
                self.on_stale(k)
        return k

    def _peer(self, raw):
        """Decode and remember a client address (None: not IP)."""
        info = udpbatch.peer(raw)
        if info is None:
            return None
        host, port, addr = info
        return remember(self._peers, raw,
                        (host, port, partial(self._reply, raw, addr)),
                        self.PEERS)

    def _reply(self, raw, addr, wire):
        """An answer: staged while its batch is being read, else sent."""
        if self._batching:
            self._stage(wire, raw)
        else:
            self._send(addr, wire)

    def _flush(self):
        for err, raw in self.batch.flush():
            if err not in _SEND_DROP:
                p = udpbatch.peer(raw)
                logger.error("", "UDP write to %s failed: %s" % (
                    p[0] if p else "?", errno.errorcode.get(err, err)))


class _BatchPort(udp.Port):
    """A UDP port read with recvmmsg: one call per readiness event (epoll
    reports the socket again while datagrams wait)."""

    def doRead(self):
        self.protocol.read_batch()


#: Bytes of datagrams the one-datagram UDP reader takes per readiness
#: event (about 64 queries).
ONE_READ = 4096

#: Read UDP in batches where the system can (tests turn it off to run
#: the one-datagram path).
BATCH = udpbatch.available()


def adopt_udp(reactor, fd, family, proto, batch=None):
    """The reactor's port for UDP socket ``fd`` serving ``proto``: read
    in batches when ``batch`` (default BATCH) and the reactor is a POSIX
    one, else Twisted's own one-datagram port."""
    if batch is None:
        batch = BATCH
    if batch and isinstance(reactor, PosixReactorBase):
        port = _BatchPort._fromListeningDescriptor(
            reactor, fd, family, proto, maxPacketSize=65535)
        port.startListening()
        proto.batch = udpbatch.Batch(port.fileno())
        proto._stage = proto.batch.stage
        return port
    port = reactor.adoptDatagramPort(fd, family, proto, maxPacketSize=65535)
    # Twisted reads up to 256 KiB of datagrams per readiness event:
    # thousands of queries under overload, a reactor stall of several
    # hundred milliseconds (probes and timers wait).  About a batch's
    # worth, as the recvmmsg reader takes.
    port.maxThroughput = ONE_READ
    return port
