"""DNS over TCP: length-framed, pipelined queries, with miekg's read,
idle and write timeouts (DoT is this stream behind TLS)."""

import errno

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver
from twisted.protocols.policies import TimeoutMixin

from corednstw.core import logger
from corednstw.dnsserver.mux import client_address

#: Answers one connection may leave unsent in the server's buffers before
#: its next queries wait (the socket's own buffer in the kernel comes on
#: top): a client that pipelines queries for large answers and reads them
#: slowly holds this much of the server's memory, not all its answers.
UNSENT_LIMIT = 256 * 1024
#: Queries of one connection being answered at once (waiting on an
#: upstream, say); the next are read as these are answered.  miekg
#: answers a connection's queries one at a time; this keeps pipelining
#: fast and bounds the answers that can arrive together.
MAX_PENDING = 32


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


def socket_transport(transport):
    """The transport that writes to the socket, below TLS and PROXY
    wrappers (None when there is none, as for a test's stand-in)."""
    t = transport
    while t is not None and not hasattr(type(t), "writeSomeData"):
        t = getattr(t, "transport", None)
    return t


class DNSStreamProtocol(Int16StringReceiver, TimeoutMixin):
    """TCP: length-framed queries, pipelined.

    The read timeout bounds the wait for the first query, the idle timeout
    the wait between queries; an answer the client does not take within the
    write timeout ends the connection; after ``max_queries`` queries the
    connection is closed once their answers are written (miekg's rules).

    What one connection holds is bounded: the protocol is the streaming
    producer of its transport, which pauses it while more than
    UNSENT_LIMIT bytes of answers wait to be sent, and at most MAX_PENDING
    of its queries are answered at once.  Paused, it reads nothing from
    the socket (the client's queries wait in the kernel) and takes no
    further query from what it has read.
    """

    MAX_LENGTH = 65535

    def __init__(self, mux, local, timeouts):
        self.mux = mux
        self.local = local
        self.limits = timeouts
        self.host = None
        self.port = 0
        self.queries = 0
        self.pending = 0        # queries whose answer is still to come
        self._full = False      # the transport's buffer is over the limit
        self._reading = False   # inside dataReceived
        self._write_check = None
        self._sent = 0

    def connectionMade(self):
        nodelay(self.transport)
        bottom = socket_transport(self.transport)
        self._count_sent(bottom)
        if bottom is not None:
            bottom.bufferSize = UNSENT_LIMIT
        self.transport.registerProducer(self, True)
        peer = self.transport.getPeer()
        self.host, self.port = client_address((peer.host, peer.port))
        self.setTimeout(self.limits.read)

    def dataReceived(self, data):
        self._reading = True
        try:
            Int16StringReceiver.dataReceived(self, data)
        finally:
            self._reading = False

    def stringReceived(self, data):
        self.setTimeout(self.limits.idle)
        self.queries += 1
        # The factory's mux, not one kept per connection: after a reload
        # an open connection's next query goes to the new configuration.
        result = self.factory.mux.handle(data, self.host, self.port, "tcp",
                                         self.local, self._send)
        if result is not None and result is not False:
            self.pending += 1     # answered later: count it until then
            result.addBoth(self._answered)
        self._throttle()

    def _answered(self, _):
        self.pending -= 1
        self._throttle()

    def _finished(self):
        """All the queries ``max_queries`` allows have been read."""
        limit = self.limits.max_queries
        return limit > 0 and self.queries >= limit

    def _throttle(self):
        """Read queries, or stop reading them, as the limits say; close
        the connection once its last allowed query is answered."""
        t = self.transport
        if t is None or t.disconnected:
            return
        if self._finished():
            if not self.pending:
                self.close()
            hold = True
        else:
            hold = self._full or self.pending >= MAX_PENDING
        if hold:
            if not self.paused:
                self.paused = True
                t.pauseProducing()
        elif self.paused:
            self.paused = False
            t.resumeProducing()
            if not self._reading:
                self.dataReceived(b"")  # the queries read before the pause

    # The transport's producer callbacks (its send buffer).
    def pauseProducing(self):
        """More than UNSENT_LIMIT bytes wait: read nothing until they are
        sent.  The wait is the client's, not idleness: the idle timer
        stops, the write timeout watches the client."""
        self._full = True
        self.setTimeout(None)
        self._throttle()

    def resumeProducing(self):
        self._full = False
        self.setTimeout(self.limits.idle)
        self._throttle()

    def stopProducing(self):
        self.paused = True

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

    def _count_sent(self, t):
        """Count what the kernel takes from the socket's transport ``t``
        (below TLS, if any): the write timeout needs to know whether the
        client took anything, which the size of the buffer alone cannot
        tell on a busy connection (it refills as fast as it drains)."""
        self._sent = 0
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

    def close(self):
        """Close once the answers written are sent.  A transport does not
        close while a producer is registered (TLS never would): the
        protocol stops being one first."""
        t = self.transport
        if t is not None and not t.disconnecting:
            t.unregisterProducer()
            t.loseConnection()

    def lengthLimitExceeded(self, length):
        self.close()

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
        return self.adopt(DNSStreamProtocol(self.mux, self.local,
                                            self.timeouts))

    def adopt(self, p):
        """Make ``p`` (a DNSStreamProtocol, or a subclass such as DoT's)
        one of this factory's connections."""
        self._accept_failing = False
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
            p.close()
        return self._closed

    @staticmethod
    def reactor_call(delay, fn, *args):
        from twisted.internet import reactor
        return reactor.callLater(delay, fn, *args)
