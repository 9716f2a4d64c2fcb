"""Where dnstap messages go: ``Output`` connects to a collector (UNIX
socket, TCP or TLS) and reconnects with backoff; ``Listener`` accepts
collectors that connect to us.

Output never blocks a query: messages go into a bounded queue while the
collector is not connected (or the socket is full) and are dropped and
counted beyond it; the drop count is logged every 10 seconds, as CoreDNS
does.
"""

import collections
import socket
from typing import Optional

from twisted.internet import defer, protocol, task
from twisted.internet.protocol import ReconnectingClientFactory

from corednstw.core import logger
from corednstw.plugins.dnstap.framestream import NAME, TCP_TIMEOUT, FrameWriter

#: Messages queued per QUEUE unit, and TCP send buffer bytes per
#: WRITEBUFFER unit (CoreDNS's queueSize and tcpWriteBufSize).
QUEUE_SIZE = 10000
WRITE_BUFFER = 1024 * 1024
MAX_WRITE_BUFFER = 1024
MAX_QUEUE = 4096
#: Drop-report interval (CoreDNS's).
REPORT_INTERVAL = 10.0


class Output:
    """Connects to a collector and keeps the bounded queue."""

    def __init__(self, kind, address, queue, writebuffer, tls=None):
        self.kind = kind              # 'unix', 'tcp' or 'tls'
        self.address = address        # path, or (host, port)
        self.limit = queue * QUEUE_SIZE
        self.sndbuf = writebuffer * WRITE_BUFFER
        self.tls = tls                # client TLS options (tls only)
        self.queue: collections.deque[bytes] = collections.deque()
        self.dropped = 0
        self.conn = None              # a started FrameWriter
        self.factory: Optional[_Reconnecting] = None     # made by start
        self.reactor = None
        self._report = None
        self._logged = False

    # Frame Streams callbacks.
    def connected(self, conn):
        if self.kind != "unix" and self.sndbuf:
            try:
                conn.transport.getHandle().setsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
            except (OSError, AttributeError):
                pass

    def started(self, conn):
        self.conn = conn
        self._logged = False
        assert self.factory is not None     # conn is one it connected
        self.factory.resetDelay()
        self.resumed(conn)

    def resumed(self, conn):
        q = self.queue
        while q and not conn.paused:
            conn.write_frame(q.popleft())

    def lost(self, conn, reason):
        if self.conn is conn:
            self.conn = None

    def send(self, payload):
        conn = self.conn
        if conn is not None and not conn.paused and not self.queue:
            conn.write_frame(payload)
        elif len(self.queue) < self.limit:
            self.queue.append(payload)
        else:
            self.dropped += 1

    def report(self):
        """Log and reset the drop count (CoreDNS's 10 s error check)."""
        if self.dropped:
            logger.warning(NAME, "Dropped dnstap messages: %d" % self.dropped)
            self.dropped = 0

    def start(self, reactor):
        self.reactor = reactor
        self.factory = _Reconnecting(self)
        self._report = task.LoopingCall(self.report)
        self._report.clock = reactor
        self._report.start(REPORT_INTERVAL, now=False)
        self.factory.connect()

    def stop(self):
        if self._report is not None and self._report.running:
            self._report.stop()
        if self.factory is not None:
            self.factory.stopTrying()
        conn = self.conn
        if conn is not None:
            self.resumed(conn)      # what is still queued goes before STOP
            return conn.finish()
        return None

    def failed(self, reason):
        if not self._logged:
            self._logged = True
            logger.error(NAME, "No connection to dnstap endpoint: %s"
                      % reason.getErrorMessage())


class _Reconnecting(ReconnectingClientFactory):
    """Reconnects with exponential backoff (0.5 s, doubling, at most
    10 s, as often as CoreDNS's redial check)."""

    initialDelay = 0.5
    factor = 2.0
    maxDelay = int(REPORT_INTERVAL)     # the base class's type: int
    noisy = False

    def __init__(self, output):
        self.output = output
        self.clock = output.reactor
        self.delay = self.initialDelay

    def buildProtocol(self, addr):
        p = FrameWriter(self.output)
        p.factory = self
        return p

    def connect(self):
        out = self.output
        r = out.reactor
        if out.kind == "unix":
            r.connectUNIX(out.address, self, timeout=TCP_TIMEOUT)
        elif out.kind == "tls":
            r.connectSSL(out.address[0], out.address[1], self, out.tls,
                         timeout=TCP_TIMEOUT)
        else:
            r.connectTCP(out.address[0], out.address[1], self,
                         timeout=TCP_TIMEOUT)

    def clientConnectionFailed(self, connector, reason):
        self.output.failed(reason)
        ReconnectingClientFactory.clientConnectionFailed(self, connector,
                                                         reason)

    def clientConnectionLost(self, connector, reason):
        ReconnectingClientFactory.clientConnectionLost(self, connector,
                                                       reason)


class Listener(protocol.ServerFactory):
    """``dnstap listen``: collectors connect to us; every message goes to
    each started collector, none is queued.  A collector that cannot keep
    up (its socket buffer is full) loses the message and its connection."""

    noisy = False

    def __init__(self, kind, address, certs=None, skipverify=False):
        self.kind = kind
        self.address = address
        self.certs = certs            # CERT KEY [CA] paths (tls only)
        self.skipverify = skipverify
        self.clients = []
        self.port = None
        self.reactor = None
        self.dropped = 0

    def buildProtocol(self, addr):
        p = FrameWriter(self)
        p.factory = self
        return p

    def connected(self, conn):
        pass

    def started(self, conn):
        self.clients.append(conn)

    def resumed(self, conn):
        pass

    def lost(self, conn, reason):
        if conn in self.clients:
            self.clients.remove(conn)

    def send(self, payload):
        for conn in list(self.clients):
            if conn.paused:
                self.dropped += 1
                self.clients.remove(conn)
                conn.transport.abortConnection()
            else:
                conn.write_frame(payload)

    def start(self, reactor):
        self.reactor = reactor
        try:
            if self.kind == "unix":
                self.port = reactor.listenUNIX(self.address, self)
            elif self.kind == "tls":
                if self.certs is None:
                    logger.warning(NAME, "TLS listener requires cert and "
                                   "key files")
                    return
                self.port = reactor.listenSSL(
                    self.address[1], self,
                    server_tls(self.certs, self.skipverify),
                    interface=self.address[0])
            else:
                self.port = reactor.listenTCP(self.address[1], self,
                                              interface=self.address[0])
        except Exception as e:
            logger.error(NAME, "Failed to start dnstap listener: %s" % e)

    def stop(self):
        ds = [c.finish() for c in list(self.clients)]
        if self.port is not None:
            ds.append(defer.maybeDeferred(self.port.stopListening))
            self.port = None
        return defer.DeferredList(ds)


def server_tls(paths, skipverify):
    """Twisted server options from CERT KEY [CA]: with a CA (and without
    skipverify) clients must show a certificate it signed."""
    from twisted.internet import ssl
    with open(paths[0], "rb") as f:
        cert = f.read()
    with open(paths[1], "rb") as f:
        key = f.read()
    pc = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)
    if len(paths) > 2 and not skipverify:
        with open(paths[2], "rb") as f:
            ca = ssl.Certificate.loadPEM(f.read())
        return pc.options(ca)
    return pc.options()
