"""Listeners and the block mux: bytes in, bytes out.

One ``Mux`` per listening address routes each query to the server block with
the longest matching zone and runs that block's chain.  The malformed-input
rules are those of CoreDNS on miekg/dns: an unreadable header or a response
is ignored; opcodes other than QUERY and NOTIFY get NOTIMP; a wrong section
count or an unparsable question gets FORMERR (the query's header only, as
miekg writes it), an unreadable later record FORMERR with the question; a
bare header (no question) gets SERVFAIL; a question cut after its name or
type has type/class 0; record counts past the end of the message are
ignored.  Sockets are created here with SO_REUSEPORT and adopted by the
reactor.
"""

import errno
import socket
import struct
import sys
import time
import traceback
from functools import partial

from twisted.internet import defer, protocol, udp
from twisted.internet.posixbase import PosixReactorBase
from twisted.protocols.basic import Int16StringReceiver
from twisted.protocols.policies import TimeoutMixin
from twisted.python import log

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics, udpbatch
from corednstw.core.plugin import END, is_deferred
from corednstw.core.request import RecordError, Request, Response

_HDR = struct.Struct("!HHHHHH")

# Errors sending a datagram that mean "the kernel is busy": drop the answer
# (the client retries), never a traceback per packet.
_SEND_DROP = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS,
                        errno.ECONNREFUSED, errno.EHOSTUNREACH,
                        errno.ENETUNREACH, errno.EPERM, errno.EINTR))


#: Header bits miekg's reject reply keeps from the query (AA and Z cleared).
_KEPT = w.TC | w.RD | w.RA | w.AD | w.CD


def header_only(req, rcode, opcode, question=b""):
    """miekg's reject reply: the query's own header with QR, the rcode and
    no records; ``question`` when it was read before a later record
    failed."""
    flags = (w.QR | (opcode << 11) | (req.flags & _KEPT) | rcode)
    return _HDR.pack(req.id, flags, 1 if question else 0, 0, 0,
                     0) + question


def no_question(req):
    """CoreDNS's answer to a message that is only a header (miekg reads
    it as one without a question): SERVFAIL, as SetRcode builds it."""
    keep = (w.RD | w.CD) if req.opcode == w.OPCODE_QUERY else 0
    flags = w.QR | (req.opcode << 11) | (req.flags & keep) | w.SERVFAIL
    return _HDR.pack(req.id, flags, 0, 0, 0, 0)


def badvers(req):
    """EDNS version other than 0: BADVERS with an OPT of version 0."""
    data = req.data
    keep = (w.RD | w.CD) if req.opcode == w.OPCODE_QUERY else 0
    flags = w.QR | (req.opcode << 11) | (req.flags & keep)
    out = (_HDR.pack(req.id, flags, 1, 0, 0, 1) + data[12:req.qend]
           + w.opt_wire(0, (w.BADVERS >> 4) << 24))
    return out


def _stacktrace(req):
    """Print tracebacks of failures: ``debug``, or errors' ``stacktrace``."""
    b = req.block
    return b is not None and (b.debug or b.settings.get("stacktrace", False))


class Mux:
    """Routes the queries of one listening address to server blocks.

    ``zones`` maps a zone to the (zone, block) pairs serving it on this
    address, in Corefile order (several when bind/view filters differ).
    """

    def __init__(self, app, label, zones, chaos=False):
        self.app = app
        self.label = label
        self.zones = zones
        self.chaos = chaos
        self.inflight = 0

    # -- routing --------------------------------------------------------------

    def route(self, req):
        """The (zone, block) for ``req``: CoreDNS's longest-suffix walk.

        DS queries keep walking so the parent's block answers; the root zone
        is tried last; None means REFUSED (also for a matching zone whose
        block has no plugin on the request path, as CoreDNS's nil chain).
        """
        q = req.qname
        zones = self.zones
        if len(zones) == 1 and "." in zones:
            q = "."     # only the root zone here: no suffix walk to do
        ds = req.qtype == w.DS
        found = None
        while q != ".":
            entries = zones.get(q)
            if entries is not None:
                for entry in entries:
                    block = entry[1]
                    if block.chain is END:
                        return None     # a zone without plugins: REFUSED
                    if block.filters and not block.accepts(req):
                        continue
                    if not ds:
                        return entry
                    found = entry
                    break
            i = q.find(".")
            q = q[i + 1:] or "."
        if found is not None:
            return found
        entries = zones.get(".")
        if entries is not None:
            for entry in entries:
                block = entry[1]
                if block.chain is END:
                    continue
                if not block.filters or block.accepts(req):
                    return entry
        return None

    # -- the request path -----------------------------------------------------

    def handle(self, data, client, port, proto, local, send, depth=0):
        """Answer one query; ``send(bytes)`` writes to the client.
        ``depth`` counts nested internal lookups (App.lookup's loop guard).
        Returns False when the message is ignored (no answer will come)."""
        if len(data) < 12:
            return False
        req = Request(data, client, port, proto, local, self.label)
        if depth:
            req.depth = depth
        qd, an, ns, ar = req.parse_header()
        if req.flags & w.QR:
            return False
        op = req.opcode
        if op != w.OPCODE_QUERY and op != w.OPCODE_NOTIFY:
            send(header_only(req, w.NOTIMP, op))
            return
        if qd != 1 or an > 1 or ns > 1 or ar > 2:
            send(header_only(req, w.FORMERR, 0))
            return
        if len(data) == 12:
            self._no_question(req, send)
            return
        try:
            req.parse_question(an, ns, ar)
        except RecordError:
            send(header_only(req, w.FORMERR, 0, data[12:req.qend]))
            return
        except w.FormatError:
            send(header_only(req, w.FORMERR, 0))
            return
        if req.qclass != w.CLASS_IN and not self.chaos:
            self._drop(req, w.REFUSED, send)
            return
        if req.edns is not None and req.edns.ttl & 0xFF0000:
            send(badvers(req))
            return
        entry = self.route(req)
        if entry is None:
            self._drop(req, w.REFUSED, send)
            return
        req.zone, block = entry
        req.block = block
        req.view = block.view
        req.start = self.app.clock()
        self.inflight += 1
        try:
            result = block.chain.serve(req)
        except Exception:
            self.inflight -= 1
            self._panic(req, send)
            return
        if is_deferred(result):
            result.addCallbacks(self._deliver, self._failed,
                                callbackArgs=(req, send),
                                errbackArgs=(req, send))
            return
        self._deliver(result, req, send)

    def _deliver(self, resp, req, send):
        self.inflight -= 1
        if resp is None:
            resp = Response(w.SERVFAIL)
        try:
            wire = resp.wire
            if wire is None:
                wire = resp.finish(req)
        except Exception:
            self._panic(req, send)
            return
        if not wire:
            return          # the plugin chose to write nothing
        sign = req.sign
        if sign is not None:
            wire = sign(wire)
        send(wire)
        more = resp.more
        if more:            # further messages (zone transfers over TCP)
            for m in more:
                send(m if sign is None else sign(m))

    def _failed(self, failure, req, send):
        self.inflight -= 1
        logger.error("", "Recovered from panic in server: %r %s" % (
            self.label, failure.getErrorMessage()))
        if _stacktrace(req):
            failure.printTraceback(file=sys.__stdout__)
        metrics.PANICS.inc()
        self._drop(req, w.SERVFAIL, send)

    def _panic(self, req, send):
        """A plugin raised: log as CoreDNS does, count, answer SERVFAIL
        (counted under zone "dropped", as errorAndMetricsFunc does)."""
        exc = sys.exc_info()[1]
        logger.error("", "Recovered from panic in server: %r %s" % (
            self.label, exc))
        if _stacktrace(req):
            traceback.print_exc(file=sys.__stdout__)
        metrics.PANICS.inc()
        try:
            self._drop(req, w.SERVFAIL, send)
        except Exception:
            pass

    def _no_question(self, req, send):
        """No question: SERVFAIL, counted under zone "dropped"."""
        req.qtype = 0
        wire = no_question(req)
        metrics.report(self.label, req, metrics.DROPPED, "", w.SERVFAIL, "",
                    len(wire), 0.0)
        send(wire)

    def _drop(self, req, rcode, send):
        """Answer ``rcode`` outside any chain (no block takes the query, or
        a plugin panicked); counted under zone "dropped"."""
        wire = Response(rcode).finish(req)
        metrics.report(self.label, req, metrics.DROPPED, "", rcode, "",
                       len(wire), 0.0)
        send(wire)


# -- protocols ---------------------------------------------------------------

def _client(addr):
    """(address, port) with ``::ffff:`` mapped addresses turned into IPv4."""
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, addr[1]


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
            for i in range(start, n):
                data, raw = batch.datagram(i)
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
        peers = self._peers
        if len(peers) >= self.PEERS:
            peers.clear()
        p = peers[raw] = (host, port, partial(self._reply, raw, addr))
        return p

    def _reply(self, raw, addr, wire):
        """An answer: staged while its batch is being read, else sent."""
        if self._batching:
            self.batch.stage(wire, raw)
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
        return port
    port = reactor.adoptDatagramPort(fd, family, proto, maxPacketSize=65535)
    # Twisted reads up to 256 KiB of datagrams per readiness event:
    # thousands of queries under overload, a reactor stall of several
    # hundred milliseconds (probes and timers wait).  About a batch's
    # worth, as the recvmmsg reader takes.
    port.maxThroughput = ONE_READ
    return port


class Timeouts:
    """TCP connection limits (the timeouts plugin; CoreDNS's defaults)."""

    __slots__ = ("read", "write", "idle", "max_queries")

    def __init__(self, read=3.0, write=5.0, idle=10.0, max_queries=-1):
        self.read = read
        self.write = write
        self.idle = idle
        self.max_queries = max_queries


def nodelay(transport):
    """Turn Nagle's algorithm off, as Go does on every TCP connection.

    With it on, an answer written while the previous one is still
    unacknowledged waits for the client's delayed ACK (40 ms on Linux):
    pipelining clients (DoT, DoH over HTTP/2) then see tens of
    milliseconds per answer.  TLS and PROXY wrappers pass the call on to
    the TCP transport."""
    try:
        transport.setTcpNoDelay(True)
    except (AttributeError, OSError):
        pass


class DNSStreamProtocol(Int16StringReceiver, TimeoutMixin):
    """TCP: length-framed queries, pipelined.

    The read timeout bounds the wait for the first query, the idle timeout
    the wait between queries; an answer the client does not take within the
    write timeout ends the connection; after ``max_queries`` queries the
    connection is closed once their answers are written (miekg's rules).
    """

    MAX_LENGTH = 65535

    def __init__(self, mux, local, timeouts):
        self.mux = mux
        self.local = local
        self.limits = timeouts
        self.host = None
        self.port = 0
        self.queries = 0
        self.unanswered = 0
        self._write_check = None
        self._sent = 0

    def connectionMade(self):
        nodelay(self.transport)
        self._count_sent()
        peer = self.transport.getPeer()
        self.host, self.port = _client((peer.host, peer.port))
        self.setTimeout(self.limits.read)

    def stringReceived(self, data):
        self.setTimeout(self.limits.idle)
        limit = self.limits.max_queries
        send = self._send
        if limit > 0:
            self.queries += 1
            self.unanswered += 1
            send = self._counted_sender()
            if self.queries >= limit:
                # Read no further queries; close once the answers are out
                # (the idle timeout ends it should one never come).
                self.transport.pauseProducing()
        # The factory's mux, not one kept per connection: after a reload
        # an open connection's next query goes to the new configuration.
        if self.factory.mux.handle(data, self.host, self.port, "tcp",
                                   self.local, send) is False and limit > 0:
            send(None)      # ignored: counts as done (miekg reads on)

    def _counted_sender(self):
        answered = []

        def send(wire):
            if wire is not None:
                self._send(wire)
            if not answered:
                answered.append(True)
                self.unanswered -= 1
                if (self.queries >= self.limits.max_queries
                        and not self.unanswered and self.transport):
                    self.transport.loseConnection()
        return send

    def _send(self, wire):
        t = self.transport
        if t is None or t.disconnecting or t.disconnected:
            return      # an answer that arrives after the client left
        if len(wire) > 65535:
            wire = wire[:65535]
        self.sendString(wire)
        if self._write_check is None and _buffered(t):
            self._write_check = self.callLater(
                self.limits.write, self._check_write, self._sent)

    def _count_sent(self):
        """Count what the kernel takes from the socket's transport (below
        TLS, if any): the write timeout needs to know whether the client
        took anything, which the size of the buffer alone cannot tell on
        a busy connection (it refills as fast as it drains)."""
        self._sent = 0
        t = self.transport
        while t is not None and not hasattr(type(t), "writeSomeData"):
            t = getattr(t, "transport", None)
        if t is None:
            return
        write_some = t.writeSomeData

        def counted(data):
            n = write_some(data)
            if type(n) is int and n > 0:
                self._sent += n
            return n
        t.writeSomeData = counted

    def _check_write(self, before):
        """The client took nothing of what we wrote in the write timeout:
        give up on it (Go's write deadline)."""
        self._write_check = None
        t = self.transport
        if t is None or t.disconnected:
            return
        if not _buffered(t):
            return
        if self._sent == before:
            t.abortConnection()
        else:
            self._write_check = self.callLater(self.limits.write,
                                               self._check_write, self._sent)

    def lengthLimitExceeded(self, length):
        self.transport.loseConnection()

    def timeoutConnection(self):
        self.transport.abortConnection()

    def connectionLost(self, reason):
        self.setTimeout(None)
        if self._write_check is not None and self._write_check.active():
            self._write_check.cancel()
        self._write_check = None
        self.factory.lost(self)


def _buffered(transport):
    """Bytes written to a TCP transport but not yet taken by the kernel."""
    return (len(getattr(transport, "dataBuffer", b""))
            + getattr(transport, "_tempDataLen", 0)
            - getattr(transport, "offset", 0))


#: accept() errors that mean "no resources for one more connection".
_ACCEPT_SHORT = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
                           errno.ENOMEM))


class _AcceptWatch:
    """A listening socket whose accept errors are reported once.

    Out of descriptors, Twisted's accept loop closes the connections it
    cannot serve and logs nothing we show; every client would otherwise
    be a log line.  The first failure of a run is logged; the next run
    starts when a connection is served again (``buildProtocol``).
    """

    def __init__(self, sock, factory):
        self._sock = sock
        self._factory = factory

    def accept(self):
        try:
            return self._sock.accept()
        except OSError as e:
            if e.errno in _ACCEPT_SHORT:
                self._factory.accept_failed(e)
            raise

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _watch_accepts(port):
    port.socket = _AcceptWatch(port.socket, port.factory)
    return port


class DNSStreamFactory(protocol.ServerFactory):
    def __init__(self, mux, local, timeouts=None):
        self.mux = mux
        self.local = local
        self.timeouts = timeouts or Timeouts()
        self.connections = set()
        self._closed = None
        self._accept_failing = False

    def accept_failed(self, error):
        """Log the first accept failure of a run (see _AcceptWatch)."""
        if not self._accept_failing:
            self._accept_failing = True
            logger.error("", "TCP accept on %s failed: %s (not logged "
                         "again until a connection is accepted)"
                         % (self.mux.label, error.strerror or error))

    def buildProtocol(self, addr):
        self._accept_failing = False
        p = DNSStreamProtocol(self.mux, self.local, self.timeouts)
        p.factory = self
        p.callLater = self.reactor_call
        self.connections.add(p)
        return p

    def lost(self, p):
        self.connections.discard(p)
        if not self.connections and self._closed is not None:
            d, self._closed = self._closed, None
            d.callback(None)

    def close_all(self):
        """Close every open connection (answers already written are sent
        first); fires when all are gone."""
        if not self.connections:
            return defer.succeed(None)
        self._closed = defer.Deferred()
        for p in list(self.connections):
            if p.transport is not None:
                p.transport.loseConnection()
        return self._closed

    @staticmethod
    def reactor_call(delay, fn, *args):
        from twisted.internet import reactor
        return reactor.callLater(delay, fn, *args)


# -- sockets -----------------------------------------------------------------

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
    one free port for both): (udp, tcp, actual_port)."""
    for _ in range(20):
        u = _socket(host, port, socket.SOCK_DGRAM)
        actual = u.getsockname()[1]
        try:
            t = _socket(host, actual, socket.SOCK_STREAM)
        except OSError as e:
            u.close()
            if port == 0 and e.errno == errno.EADDRINUSE:
                continue
            raise
        break
    else:
        raise OSError(errno.EADDRINUSE, "no free port for UDP and TCP")
    try:
        t.listen(1024)
    except BaseException:
        u.close()
        t.close()
        raise
    return u, t, actual


def listen(reactor, host, port, mux, timeouts=None, udp=True, sockets=None):
    """Open UDP and TCP on host:port (port 0: one free port for both).

    Returns (udp_port, tcp_port, actual_port).  The reactor adopts sockets
    we made, because listenUDP/listenTCP cannot set SO_REUSEPORT.  With
    ``udp`` False only TCP is opened and udp_port is None.  ``sockets``: a
    (udp, tcp) pair bound elsewhere (bind_pair) to adopt instead, as a
    multisocket worker adopts its supervisor's; closed here once adopted
    (the reactor holds its own descriptors).
    """
    if not udp:
        return (None,) + _listen_tcp(reactor, host, port, mux, timeouts)
    if sockets is None:
        u, t, actual = bind_pair(host, port)
    else:
        u, t = sockets
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
