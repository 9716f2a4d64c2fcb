"""HTTP endpoints (metrics, health, ready, explain) shared per listen
address.

Several plugins may serve on one address (``prometheus :9153`` in many
blocks, health and ready on their own ports); each address gets one
listener whose path table maps exact paths to pages.

A ``Page`` answers GET and HEAD on its path; an address whose paths are
all pages is served by the small HTTP/1.1 server of this module (what a
probe or a scrape needs, without twisted.web's import at start and its
request machinery per request).  An address with any other twisted.web
resource on it (pprof's pages, prometheus's page behind a web
configuration's basic auth, rate limit or headers, a plugin's own
resource) is served by twisted.web (``website``), the pages adapted.

The small server, for what a client sees:

* keep-alive: HTTP/1.1 connections stay open, pipelined requests are
  answered in order; ``Connection: close`` (then sent back too) and
  HTTP/1.0 close after the answer;
* ``Date``, ``Content-Length`` and ``Content-Type`` on every answer; HEAD
  gets the headers of GET and no body;
* the path is matched exactly (the query string apart, percent escapes
  decoded, an absolute target's path used): an unknown path is 404
  (``404 page not found``, as Go's ServeMux says); a page answers any
  method as GET (HEAD without the body), as CoreDNS's health, ready and
  metrics handlers do;
* a request that is not HTTP/1.x (bad request line or header line) gets
  400 and the close, another HTTP version 505 and the close;
* limits: the request line and headers up to ``MAX_HEAD`` bytes (else
  431 and the close); a body up to ``MAX_BODY`` is read and dropped,
  a longer one, a chunked one or one the client waits to be asked for
  (``Expect: 100-continue``) is not read: the answer closes the
  connection;
* deadlines: a request has ``READ_TIMEOUT`` seconds to arrive whole,
  from its first byte (from the connection's start for the first
  request), bytes trickling in meanwhile do not move it; a kept-alive
  connection waits ``IDLE_TIMEOUT`` for its next request; a client that
  does not read its answers stops the reading of its further requests
  (the transport's buffer is bounded) and is cut off after
  ``WRITE_TIMEOUT``.  CoreDNS's endpoints (Go's http.Server without
  timeouts) keep such connections open for good.
"""

import socket
import time
from http import HTTPStatus
from typing import Any

from twisted.internet import error, protocol
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IPushProducer
from twisted.python import log
from zope.interface import implementer

#: The content type of a plain-text page.
TEXT = b"text/plain; charset=utf-8"

#: Longest request line and headers, in bytes.
MAX_HEAD = 65536
#: Longest request body read (and dropped) on a kept-alive connection.
MAX_BODY = 65536
#: Seconds a request has to arrive whole.
READ_TIMEOUT = 10.0
#: Seconds a kept-alive connection waits for its next request.
IDLE_TIMEOUT = 120.0
#: Seconds a client may leave an answer unread before it is cut off.
WRITE_TIMEOUT = 30.0


class Page:
    """An endpoint: GET and HEAD on one path.

    ``respond(query)`` gets the raw query string (bytes, empty without
    one) and returns ``(status, content_type, body)``, bytes but the
    status, or a Deferred firing with it."""

    def respond(self, query):
        raise NotImplementedError


class Text(Page):
    """A plain-text endpoint computed by ``fn() -> (status, body)``."""

    def __init__(self, fn):
        self.fn = fn

    def respond(self, query):
        status, body = self.fn()
        return status, TEXT, body.encode() if isinstance(body, str) else body


def address_arg(d, default, children=False):
    """The optional ADDRESS argument of prometheus, health and ready:
    at most one argument; no block unless ``children`` is allowed.  As
    CoreDNS, the address must split as Go's net.SplitHostPort splits it
    (``bla`` has no port); what it names is looked up when listening."""
    if len(d.args) > 1:
        raise d.arg_error()
    if d.children and not children:
        raise d.error("unknown property '%s'" % d.children[0].name)
    if not d.args:
        return default
    d.host_port(d.args[0])
    return d.args[0]


def split_address(address, default_port):
    """(host, port) from ':8080', '127.0.0.1:8080', '[::1]:8080' or ''.
    A port may be a service name (``localhost:http``), as Go's listener
    looks it up; ValueError when it names none."""
    if not address:
        return "", default_port
    if address.startswith("["):
        host, _, port = address[1:].partition("]")
        port = port.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    elif ":" in address:
        return address, default_port
    else:
        host, port = address, ""
    if not port:
        return host, default_port
    if port.isdigit():
        return host, int(port)
    try:
        return host, socket.getservbyname(port, "tcp")
    except OSError as e:
        raise ValueError("lookup tcp/%s: unknown port" % port) from e


_WEEKDAYS = (b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun")
_MONTHS = (None, b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul",
           b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")
_date = [0, b""]


def _http_date():
    """The Date header's value (RFC 9110's IMF-fixdate), made once a
    second."""
    now = int(time.time())
    if _date[0] != now:
        t = time.gmtime(now)
        _date[:] = [now, b"%s, %02d %s %04d %02d:%02d:%02d GMT" % (
            _WEEKDAYS[t.tm_wday], t.tm_mday, _MONTHS[t.tm_mon], t.tm_year,
            t.tm_hour, t.tm_min, t.tm_sec)]
    return _date[1]


_phrases: dict[int, bytes] = {}


def _status_line(version, status):
    if not _phrases:
        _phrases.update((s.value, s.phrase.encode()) for s in HTTPStatus)
    return b"%s %d %s\r\n" % (version, status,
                               _phrases.get(status, b"Unknown"))


_NOT_FOUND = (404, TEXT, b"404 page not found\n",
              b"X-Content-Type-Options: nosniff\r\n")
_FAILED = (500, TEXT, b"500 internal server error\n", b"")
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")
#: Bytes no method name (an HTTP token) holds.
_NOT_TOKEN = b" \t\r\n\x00()<>@,;:\\\"/[]?={}"


class _Refused(Exception):
    """A request not read: its status (400, 431, 505), then the close."""

    def __init__(self, status):
        Exception.__init__(self, status)
        self.status = status


@implementer(IPushProducer)
class Channel(protocol.Protocol):
    """One connection of the small server (see the module's docstring).

    Requests are taken from ``buf`` one at a time; an answer that is a
    Deferred holds the next ones (and the reading) until it is written.
    The connection is the producer of its answers: while the transport's
    buffer is full it reads and answers nothing more.  The buffer is
    searched for the end of the head only where it grew, and a head
    whose body is still to come is kept parsed, so a request sent a byte
    at a time costs no more than one sent whole."""

    #: A TCP or TLS transport (a producer too; it can be aborted).
    transport: Any

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.buf = bytearray()
        self.searched = 0        # buf[:searched] holds no end of head
        self.head = None         # a request parsed, its body to come
        self.busy = False        # a Deferred answer is pending
        self.paused = False      # the transport asked us to hold on
        self.closing = False
        self.lost = False
        self.idle = False        # between requests (the idle timeout)
        self.fresh = False       # an answer went since the last deadline
        self.timer = None
        self.reading = True      # the transport reads from the socket

    # -- the connection ------------------------------------------------

    def connectionMade(self):
        self.transport.registerProducer(self, True)
        self._deadline(READ_TIMEOUT)

    def dataReceived(self, data):
        if self.closing:
            return
        self.buf += data
        if self.idle:
            # The next request's first bytes: it has the read timeout.
            self.idle = False
            self._deadline(READ_TIMEOUT)
        self._serve()

    def connectionLost(self, reason=None):
        self.lost = self.closing = True
        self.buf = bytearray()
        if self.timer is not None:
            if self.timer.active():
                self.timer.cancel()
            self.timer = None

    # -- IPushProducer (of the answers) --------------------------------

    def pauseProducing(self):
        if not self.paused:
            self.paused = True
            self._read(False)
            self._deadline(WRITE_TIMEOUT)

    def resumeProducing(self):
        if self.paused:
            self.paused = False
            self.fresh = True
            self._serve()

    def stopProducing(self):
        self.closing = True

    # -- requests ------------------------------------------------------

    def _serve(self):
        """Answer the whole requests in the buffer, one at a time."""
        while self.buf and not (self.busy or self.paused or self.closing):
            try:
                got = self._parse()
            except _Refused as e:
                self._refuse(e.status)
                return
            if got is None:
                break
            self._answer(*got)
        self._after()

    def _parse(self):
        """(method, target, version, close) of the request at the head of
        the buffer, taken off it (its body too); None while it is not
        whole."""
        buf = self.buf
        got = self.head
        if got is None:
            got = self.head = self._parse_head()
            if got is None:
                return None
        start, length = got[4], got[5]
        if start + length > len(buf):
            return None         # the body is still to come
        del buf[:start + length]
        self.head = None
        self.searched = 0
        return got[:4]

    def _parse_head(self):
        """(method, target, version, close, size of the head, length of
        the body) of the request line and headers at the head of the
        buffer (not taken off it); None while they are not all there."""
        buf = self.buf
        if buf[:1] in (b"\r", b"\n"):
            # Blank lines before a request line are ignored (RFC 9112).
            while buf[:1] in (b"\r", b"\n"):
                del buf[:1]
            self.searched = 0
            if not buf:
                return None
        since = max(0, self.searched - 2)
        end = buf.find(b"\n\r\n", since, MAX_HEAD)
        bare = buf.find(b"\n\n", since, MAX_HEAD if end < 0 else end)
        if bare >= 0:
            end, start = bare, bare + 2
        elif end >= 0:
            start = end + 3
        elif len(buf) >= MAX_HEAD:
            raise _Refused(431)
        else:
            self.searched = len(buf)
            return None
        lines = bytes(buf[:end]).split(b"\n")
        line = lines[0]
        parts = (line[:-1] if line[-1:] == b"\r" else line).split(b" ")
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise _Refused(400)
        method, target, version = parts
        if version not in _VERSIONS:
            if version[:5] == b"HTTP/" and version[5:].replace(
                    b".", b"", 1).isdigit():
                raise _Refused(505)
            raise _Refused(400)
        if any(c in _NOT_TOKEN for c in method):
            raise _Refused(400)
        close = version == b"HTTP/1.0"
        unread = False          # a body not read: the close
        length = None
        for line in lines[1:]:
            if line[-1:] == b"\r":
                line = line[:-1]
            name, sep, value = line.partition(b":")
            if not sep or not name or name[-1:] in b" \t" \
                    or name[:1] in b" \t":
                raise _Refused(400)
            name = name.lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit() or (length is not None
                                           and int(value) != length):
                    raise _Refused(400)
                length = int(value)
            elif name == b"transfer-encoding" or name == b"expect":
                unread = True
            elif name == b"connection":
                if b"close" in [t.strip().lower()
                                for t in value.split(b",")]:
                    close = True
        if unread or (length or 0) > MAX_BODY:
            close = True
            length = 0
        return method, target, version, close, start, length or 0

    def _answer(self, method, target, version, close):
        path, _, query = target.partition(b"?")
        if path[:1] != b"/":
            path = _origin(path)
        if b"%" in path:
            from urllib.parse import unquote_to_bytes
            path = unquote_to_bytes(path)
        pages = self.endpoint.pages
        if pages is None:
            # The address now has twisted.web resources (a reload): the
            # client is to come back to them.
            self._abort()
            return
        head = method == b"HEAD"
        page = pages.get(path)
        if page is None:
            self._write(version, _NOT_FOUND, head, close)
            return
        try:
            got = page.respond(query)
        except Exception:
            log.err(None, "HTTP endpoint %s" % path.decode("latin-1"))
            got = _FAILED
        if not isinstance(got, Deferred):
            self._write(version, got, head, close)
            return
        self.busy = True
        waiting = False

        def failed(f):
            log.err(f, "HTTP endpoint %s" % path.decode("latin-1"))
            return _FAILED

        def done(answer):
            self.busy = False
            if not self.lost:
                self._write(version, answer, head, close)
                if waiting:
                    self._serve()
        got.addErrback(failed).addCallback(done).addErrback(log.err)
        if self.busy:
            # Nothing more is read or answered meanwhile.
            waiting = True
            self._read(False)
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def _write(self, version, answer, head, close):
        status, ctype, body = answer[:3]
        out = [_status_line(version, status), b"Date: ", _http_date(),
               b"\r\nContent-Length: %d\r\nContent-Type: " % len(body),
               ctype, b"\r\n"]
        if len(answer) > 3:
            out.append(answer[3])
        if close:
            out.append(b"Connection: close\r\n")
        out.append(b"\r\n")
        if not head:
            out.append(body)
        self.fresh = True
        if close:
            self.closing = True
            self.buf = bytearray()
            # The transport waits for a registered producer to go before
            # it closes.
            self.transport.unregisterProducer()
        self.transport.write(b"".join(out))
        if close:
            self.transport.loseConnection()
            # Cut off a client that does not read its last answer.
            self._deadline(WRITE_TIMEOUT)

    def _refuse(self, status):
        body = _status_line(b"", status)[1:-2]
        self._write(b"HTTP/1.1", (status, TEXT, body), False, True)

    def _after(self):
        """Between requests: read again.  After an answer, the next
        request's deadline starts: the read timeout when some of it is
        in the buffer, else the idle timeout."""
        if self.closing or self.busy or self.paused:
            return
        self._read(True)
        if not self.fresh:
            return
        self.fresh = False
        self.idle = not self.buf
        self._deadline(READ_TIMEOUT if self.buf else IDLE_TIMEOUT)

    # -- reading and deadlines -----------------------------------------

    def _read(self, on):
        if on != self.reading and not self.lost:
            self.reading = on
            if on:
                self.transport.resumeProducing()
            else:
                self.transport.pauseProducing()

    def _deadline(self, seconds):
        if self.lost:
            return
        timer = self.timer
        if timer is not None and timer.active():
            timer.reset(seconds)
        else:
            self.timer = self.endpoint.reactor.callLater(seconds,
                                                         self._abort)

    def _abort(self):
        self.timer = None
        self.closing = True
        self.transport.abortConnection()


def _origin(target):
    """The path of an absolute target (``http://host/path``)."""
    scheme, sep, rest = target.partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https"):
        return target
    slash = rest.find(b"/")
    return rest[slash:] if slash >= 0 else b"/"


class _Pages(protocol.Factory):
    """The small server's connections of an endpoint."""

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def buildProtocol(self, addr):
        return Channel(self.endpoint)


class Endpoint(protocol.Factory):
    """The factory of one address: the small server while its paths are
    all pages, else a twisted.web Site; over TLS when the address has a
    TLS configuration (``prometheus { tls FILE }``).  A reload swaps the
    paths and the TLS settings in place, so the port stays bound; open
    connections keep the TLS they were made with."""

    noisy = False

    def __init__(self, reactor, paths, tls=None):
        self.reactor = reactor
        self.pages = None
        self.site = None
        self.plain = _Pages(self)
        self.started = False
        self.update(paths, tls)

    def update(self, paths, tls):
        table = {p.encode() if isinstance(p, str) else p: r
                 for p, (r, _owner) in paths.items()}
        if all(isinstance(r, Page) for r in table.values()):
            self.pages = table
            inner = self.plain
        else:
            from corednstw.service import website
            self.pages = None
            if self.site is None:
                self.site = website.site(table)
                if self.started:
                    self.site.doStart()
            else:
                website.update(self.site, table)
            inner = self.site
        self.tls = tls
        self.wrapped = None
        if tls is not None:
            # twisted.protocols.tls (pyOpenSSL) only for an address on TLS
            from twisted.protocols.tls import TLSMemoryBIOFactory
            self.wrapped = TLSMemoryBIOFactory(tls.creator(), False, inner)
        self.inner = inner

    def startFactory(self):
        self.started = True
        if self.site is not None:
            self.site.doStart()

    def stopFactory(self):
        self.started = False
        if self.site is not None:
            self.site.doStop()

    def buildProtocol(self, addr):
        if self.wrapped is not None:
            return self.wrapped.buildProtocol(addr)
        return self.inner.buildProtocol(addr)


def serve(reactor, address, paths, tls=None):
    """Listen on ``address`` ("host:port") with the given path table
    (path -> (page or resource, owner)), over TLS with ``tls`` (a
    webconfig.WebTLS); CannotListenError when its port names no
    service."""
    try:
        host, port = split_address(address, 0)
    except ValueError as e:
        raise error.CannotListenError(address, None, e) from e
    return reactor.listenTCP(port, Endpoint(reactor, paths, tls),
                             interface=host)


def update(port, paths, tls=None):
    """Give a listening ``port`` of ``serve`` new paths and TLS."""
    port.factory.update(paths, tls)
