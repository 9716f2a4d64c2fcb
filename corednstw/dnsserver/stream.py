"""DNS over TCP: length-framed, pipelined queries, with miekg's read,
idle and write timeouts (DoT is this stream behind TLS)."""

import errno

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver
from twisted.protocols.policies import TimeoutMixin

from corednstw.core import logger
from corednstw.dnsserver.mux import client_address


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
        self.host, self.port = client_address((peer.host, peer.port))
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
