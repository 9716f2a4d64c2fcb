"""health's self-check client: GET /health over one kept-alive HTTP/1.1
connection to the plugin's own listener.

twisted.web's Agent did this before, and its first use (one interval
after the start) imported twisted.web.client, its endpoints and with
them Twisted's TLS layer: 0.1-0.25 s of CPU, inside the start -> /ready
time of a slow start.  The check only needs the answer's end: a status
line, headers, then a body by Content-Length, chunked, or up to the
close.  A connection the server closed, or one closing after its answer,
is replaced at the next request; a request that cannot be answered fails
its Deferred with the connection's error (refused, lost).
"""

from typing import Any, Optional

from twisted.internet import defer, error, protocol
from twisted.python.failure import Failure

#: Longest status line and headers read.
MAX_HEAD = 65536


class _BadResponse(Exception):
    """Not an HTTP/1.x answer."""


class _Connection(protocol.Protocol):
    """One connection; one request on it at a time."""

    transport: Any      # a tcp.Client

    def __init__(self):
        self.buf = b""
        self.waiting = None     # the Deferred of the request in flight
        self.keep = True
        self.open = False
        self.head = None        # (length or None, chunked) once read
        self.lost = []          # Deferreds of close()

    def connectionMade(self):
        self.open = True
        self.factory.made(self)

    def request(self, host, path):
        self.waiting = defer.Deferred(self._cancel)
        self.buf = b""
        self.head = None
        self.transport.write(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                             % (path, host))
        return self.waiting

    def _cancel(self, d):
        self.waiting = None
        self.keep = False
        self.transport.abortConnection()

    def dataReceived(self, data):
        if self.waiting is None:
            self.transport.abortConnection()
            return
        self.buf += data
        try:
            done = self._complete()
        except _BadResponse as e:
            self.keep = False
            self.transport.abortConnection()
            self._fire(Failure(e))
            return
        if done:
            if not self.keep:
                self.transport.loseConnection()
            self._fire(None)

    def _complete(self):
        """True once the whole answer is in the buffer."""
        if self.head is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    raise _BadResponse("response headers too long")
                return False
            lines = self.buf[:end].split(b"\r\n")
            version = lines[0].split(b" ", 1)[0]
            if version not in (b"HTTP/1.1", b"HTTP/1.0"):
                raise _BadResponse("not an HTTP response")
            length = None
            chunked = False
            self.keep = version == b"HTTP/1.1"
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                value = value.strip().lower()
                if name == b"content-length" and value.isdigit():
                    length = int(value)
                elif name == b"transfer-encoding":
                    chunked = value == b"chunked"
                elif name == b"connection":
                    if b"close" in value:
                        self.keep = False
                    elif b"keep-alive" in value:
                        self.keep = True
            self.head = (length, chunked)
            self.buf = self.buf[end + 4:]
        length, chunked = self.head
        if chunked:
            return _chunks_end(self.buf)
        if length is None:
            self.keep = False
            return False        # the body runs to the close
        return len(self.buf) >= length

    def _fire(self, result):
        d, self.waiting = self.waiting, None
        if d is not None:
            d.callback(result)

    def connectionLost(self, reason: Failure = protocol.connectionDone):
        self.open = False
        lost, self.lost = self.lost, []
        for w in lost:
            w.callback(None)
        d, self.waiting = self.waiting, None
        if d is None:
            return
        if self.head is not None and self.head[0] is None and \
                not self.head[1] and reason.check(error.ConnectionDone):
            d.callback(None)    # a body up to the close
        else:
            d.errback(reason)


def _chunks_end(buf):
    """True when ``buf`` holds a whole chunked body."""
    i = 0
    while True:
        eol = buf.find(b"\r\n", i)
        if eol < 0:
            return False
        try:
            n = int(buf[i:eol].split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadResponse("bad chunk size") from None
        i = eol + 2
        if n == 0:
            while True:
                eol = buf.find(b"\r\n", i)
                if eol < 0:
                    return False
                if eol == i:
                    return True
                i = eol + 2
        i += n + 2
        if i > len(buf):
            return False


class _Factory(protocol.ClientFactory):
    """Fires ``connected`` with the connection, or fails it."""

    protocol = _Connection

    def __init__(self):
        self.connected: Optional[defer.Deferred] = defer.Deferred(
            self._cancel)
        self.connector: Any = None

    def _cancel(self, d):
        self.connected = None
        self.connector.disconnect()

    def made(self, conn):
        d, self.connected = self.connected, None
        if d is not None:
            d.callback(conn)
        else:
            conn.transport.abortConnection()    # cancelled meanwhile

    def clientConnectionFailed(self, connector, reason):
        d, self.connected = self.connected, None
        if d is not None:
            d.errback(reason)


class Prober:
    """GETs of ``path`` on ``host``:``port``, one at a time, over a
    kept-alive connection; ``get()`` is a Deferred firing (with None)
    once the whole answer is in, whatever its status; cancelling it
    drops the connection."""

    def __init__(self, reactor, host, port, path, timeout):
        self.reactor = reactor
        self.host = host
        self.port = port
        self.path = path
        self.timeout = timeout
        self.conn = None
        name = "[%s]" % host if ":" in host else host
        self.host_header = b"%s:%d" % (name.encode(), port)

    def get(self):
        conn = self.conn
        if conn is not None and conn.open and conn.keep:
            return conn.request(self.host_header, self.path)
        self.close()
        f = _Factory()
        f.connector = self.reactor.connectTCP(self.host, self.port, f,
                                              timeout=self.timeout)

        def made(conn):
            self.conn = conn
            return conn.request(self.host_header, self.path)

        assert f.connected is not None
        return f.connected.addCallback(made)

    def close(self):
        """Drop the connection (the plugin stops); a Deferred firing once
        it is closed."""
        conn, self.conn = self.conn, None
        if conn is None or not conn.open:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        conn.lost.append(d)
        conn.transport.loseConnection()
        return d
