"""DNS over HTTPS on HTTP/1.1: a reader for the one thing a DoH listener
serves, in place of twisted.web's full request machinery.

Requests are read from a keep-alive connection one after another (a
pipelined request waits in the buffer until the answer before it is
sent): the request line, the headers (of which Content-Length,
Transfer-Encoding, Connection and Expect are read), then a body by
Content-Length or chunked.  Each request goes to the listener's
``DoHResource.query`` (the same rules, statuses and metrics as HTTP/2)
and the answer carries the headers twisted.web's did: the status line in
the request's HTTP version, ``Connection: close`` when the client asked
for it, ``Date``, then the resource's headers.  HTTP/1.0 connections
close after their answer; a request that is not HTTP (bad request line,
header or length) gets a bare 400 and the close.  Go's server reads up
to a megabyte of request line and headers, and so does this one.

A request has the read timeout of *timeouts* to arrive whole, headers
and body (Go's http.Server ReadTimeout, which CoreDNS's https server
sets from it): from the connection's start for the first request (the
TLS handshake included), from its first byte for the next ones.  The
bytes that come meanwhile do not move the deadline (the idle timeout,
which each read restarts, would let a client sending a byte now and then
hold the connection for good); a request not in by then ends the
connection.

ALPN h2 hands the connection to ``doh_h2``.
"""

from http import HTTPStatus

from twisted.internet import protocol, reactor
from twisted.protocols.policies import TimeoutMixin

from corednstw.dnsserver import doh, doh_h2, http2

#: Longest request line and headers (Go's DefaultMaxHeaderBytes).
MAX_HEAD = 1 << 20
_BAD = b"HTTP/1.1 400 Bad Request\r\n\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_seconds = reactor.seconds
_reasons = {}
_names = {}


def _status_line(version, status):
    key = (version, status)
    line = _reasons.get(key)
    if line is None:
        try:
            phrase = HTTPStatus(status).phrase.encode()
        except ValueError:
            phrase = b"Unknown"
        line = _reasons[key] = b"%s %d %s\r\n" % (version, status, phrase)
    return line


def _name(name):
    """A header's name as twisted.web wrote it (Content-Type)."""
    out = _names.get(name)
    if out is None:
        out = _names[name] = b"-".join(
            p.capitalize() for p in name.split(b"-"))
    return out


class _Bad(Exception):
    """Not an HTTP request we read: a bare 400, then the close."""


class DoHH1(protocol.Protocol, TimeoutMixin):
    """One HTTP/1.1 connection of a DoH listener (or, with ALPN h2, the
    door to its HTTP/2 one)."""

    def __init__(self, resource, idle):
        self.resource = resource
        self.idle = idle
        self.buf = b""
        self.busy = False       # an answer is pending: read no further
        self.gone = None        # cancels that pending answer
        self.closing = False
        self.h2 = None
        self.started = False
        self.continued = False  # 100 Continue sent for this request
        self.write = None
        self.deadline = None    # the timer of the read deadline
        self.due = None         # the deadline of the request arriving
        self.client = None

    def connectionMade(self):
        self.write = http2._record_writer(self.transport)
        peer = self.transport.getPeer()
        self.client = (getattr(peer, "host", ""), getattr(peer, "port", 0))
        self.setTimeout(self.idle)
        self._arm()

    def dataReceived(self, data):
        if self.h2 is not None:
            self.h2.dataReceived(data)
            return
        if not self.started:
            self.started = True
            if getattr(self.transport, "negotiatedProtocol", None) == b"h2":
                self._to_h2(data)
                return
        if self.closing:
            return
        self.resetTimeout()
        self.buf = self.buf + data if self.buf else data
        if not self.busy:
            self._serve()

    def _to_h2(self, data):
        self.setTimeout(None)
        self._disarm()
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.h2 = doh_h2.DoHH2(self.resource, self.idle)
        self.h2.makeConnection(self.transport)
        self.h2.dataReceived(data)

    def _serve(self):
        """Answer the whole requests in the buffer, one at a time."""
        while self.buf and not self.busy and not self.closing:
            if self.due is None:
                self._arm()     # the first bytes of the next request
            try:
                got = self._parse()
            except _Bad:
                self._bad()
                return
            if got is None:
                return
            self._disarm()
            self._ask(*got)

    def _parse(self):
        """(method, target, version, keep, body) of the request at the
        head of the buffer, taken off it; None while it is not whole."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                raise _Bad()
            return None
        lines = buf[:end].split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3:
            raise _Bad()
        method, target, version = parts
        if version not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise _Bad()
        length = None
        chunked = close = expect = False
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise _Bad()
            name = name.lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit() or (length is not None
                                           and int(value) != length):
                    raise _Bad()
                length = int(value)
            elif name == b"transfer-encoding":
                if value.strip().lower() != b"chunked":
                    raise _Bad()
                chunked = True
            elif name == b"connection":
                tokens = [t.strip().lower() for t in value.split(b",")]
                close = close or b"close" in tokens
            elif name == b"expect":
                expect = value.strip().lower() == b"100-continue"
        if chunked and length is not None:
            raise _Bad()
        start = end + 4
        if chunked:
            got = _chunked(buf, start)
            if got is None:
                return self._wait(expect and version == b"HTTP/1.1")
            body, size, stop = got
        else:
            size = length or 0
            stop = start + size
            if stop > len(buf):
                return self._wait(expect and version == b"HTTP/1.1")
            body = buf[start:start + min(size, doh.MAX_MESSAGE)]
        if expect and version == b"HTTP/1.1" and not self.continued:
            self.transport.write(_CONTINUE)
        self.continued = False
        self.buf = buf[stop:]
        if size > doh.MAX_MESSAGE:
            body = doh.TOO_LARGE
        keep = version == b"HTTP/1.1" and not close
        return method, target, version, keep, close, body

    def _wait(self, expect):
        """The body is still to come; 100 Continue first if asked."""
        if expect and not self.continued:
            self.continued = True
            self.transport.write(_CONTINUE)
        return None

    def _ask(self, method, target, version, keep, close, body):
        path, _, query = target.partition(b"?")
        if method != b"POST":
            body = None
        self.busy = True
        head = method == b"HEAD"

        def reply(status, headers, payload):
            if self.transport is None or self.closing:
                return
            out = [_status_line(version, status)]
            if close:
                out.append(b"Connection: close\r\n")
            out.append(b"Date: %s\r\n" % doh_h2._date())
            for name, value in headers:
                out.append(b"%s: %s\r\n" % (_name(name), value))
            out.append(b"\r\n")
            if not head:
                out.append(payload)
            self.write(b"".join(out))
            self.busy = False
            self.gone = None
            if not keep:
                self.closing = True
                self.transport.loseConnection()
            elif pending:
                self._serve()
        pending = False
        self.gone = self.resource.query(method, path, doh.query_args(query),
                                        body, self.client, reply)
        pending = True

    def _bad(self):
        self.closing = True
        self._disarm()
        self.transport.write(_BAD)
        self.transport.loseConnection()

    # -- deadlines -------------------------------------------------------

    def _arm(self):
        """The read deadline of the request now arriving.  One timer
        serves many requests: it is not cancelled when a request is in
        (``due`` is cleared), and when it fires for a later request's
        deadline it waits on till then."""
        read = self.resource.timeouts.read
        self.due = _seconds() + read
        if self.deadline is None:
            self.deadline = self.callLater(read, self._check)

    def _disarm(self):
        self.due = None

    def _check(self):
        self.deadline = None
        if self.due is None or self.closing:
            return
        left = self.due - _seconds()
        if left > 0:
            self.deadline = self.callLater(left, self._check)
            return
        self.closing = True
        self.transport.abortConnection()

    def timeoutConnection(self):
        self.closing = True
        self.transport.loseConnection()

    def shutdown(self):
        if self.h2 is not None:
            self.h2.shutdown()
        else:
            self.closing = True
            self.transport.loseConnection()

    def connectionLost(self, reason):
        if self.h2 is not None:
            self.h2.connectionLost(reason)
            return
        self.setTimeout(None)
        self._disarm()
        if self.deadline is not None:
            if self.deadline.active():
                self.deadline.cancel()
            self.deadline = None
        if self.gone is not None:
            gone, self.gone = self.gone, None
            gone()


def _chunked(buf, i):
    """(body kept, size, end) of a chunked body from ``buf[i]``; None
    while it is not all there."""
    parts = []
    size = 0
    while True:
        eol = buf.find(b"\r\n", i)
        if eol < 0:
            if len(buf) - i > 4096:
                raise _Bad()
            return None
        text = buf[i:eol].split(b";", 1)[0].strip()
        try:
            n = int(text, 16)
        except ValueError:
            raise _Bad() from None
        if n < 0:
            raise _Bad()
        i = eol + 2
        if n == 0:
            # Trailers, up to the empty line.
            while True:
                eol = buf.find(b"\r\n", i)
                if eol < 0:
                    return None
                if eol == i:
                    body = b"".join(parts)
                    return body, size, eol + 2
                i = eol + 2
        if i + n + 2 > len(buf):
            return None
        if buf[i + n:i + n + 2] != b"\r\n":
            raise _Bad()
        if size < doh.MAX_MESSAGE:
            parts.append(buf[i:i + n])
        size += n
        i += n + 2
