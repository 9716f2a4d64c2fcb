"""dnstap: structured logs of client queries and responses (dnstap.info).

``dnstap SOCKET [full] [WRITEBUFFER] [QUEUE] { identity; version; extra;
skipverify }`` sends to a collector (a UNIX socket, ``tcp://`` or
``tls://``); ``dnstap listen SOCKET [full] { ...; tls CERT KEY [CA] }``
accepts collectors that connect to us.

Every message is a protobuf ``dnstap.Dnstap`` in a data frame of a
bidirectional Frame Streams connection (READY, ACCEPT, START, data frames,
STOP, FINISH; content type ``protobuf:dnstap.Dnstap``).  The few fields we
write are encoded by hand: the protobuf wire format of bytes, varints and
fixed32 is simple, and this keeps a tap to a few microseconds per query
with no runtime dependency (the tests decode every frame with the protobuf
library to check the encoding).

Output never blocks a query: messages go into a bounded queue while the
collector is not connected (or the socket is full) and are dropped and
counted beyond it; the drop count is logged every 10 seconds, as CoreDNS
does.  A lost connection is re-established with backoff.

The forward plugin (or any plugin talking to an upstream) finds the taps of
its block with ``block.find(IForwarderTap)`` and calls
``tap_forwarder_query`` / ``tap_forwarder_response`` on each.
"""

import collections
import socket
import struct
import time

from twisted.internet import defer, protocol, task
from twisted.internet.protocol import ReconnectingClientFactory
from zope.interface import implementer

from corednstw.core import logger
from corednstw.core.interfaces import IForwarderTap
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import NoReply

NAME = "dnstap"
CONTENT_TYPE = b"protobuf:dnstap.Dnstap"

#: Messages queued per QUEUE unit, and TCP send buffer bytes per
#: WRITEBUFFER unit (CoreDNS's queueSize and tcpWriteBufSize).
QUEUE_SIZE = 10000
WRITE_BUFFER = 1024 * 1024
MAX_WRITE_BUFFER = 1024
MAX_QUEUE = 4096
#: Connect and handshake timeout, drop-report interval (CoreDNS's).
TCP_TIMEOUT = 4.0
REPORT_INTERVAL = 10.0

# dnstap.Message.Type values.
AUTH_QUERY, AUTH_RESPONSE = 1, 2
RESOLVER_QUERY, RESOLVER_RESPONSE = 3, 4
CLIENT_QUERY, CLIENT_RESPONSE = 5, 6
FORWARDER_QUERY, FORWARDER_RESPONSE = 7, 8
# SocketFamily and SocketProtocol values.
INET, INET6 = 1, 2
UDP, TCP = 1, 2

# Frame Streams control frame types and the content-type field.
FS_ACCEPT, FS_START, FS_STOP, FS_READY, FS_FINISH = 1, 2, 3, 4, 5
FS_CONTENT_TYPE = 1

_U32 = struct.Struct("!I")
_FIXED32 = struct.Struct("<I")


# -- protobuf encoding ---------------------------------------------------------

def varint(n):
    """Protobuf base-128 varint of a non-negative integer."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_bytes(key, data):
    return key + varint(len(data)) + data


# Field keys (field number << 3 | wire type) of dnstap.Message ...
_K_TYPE = b"\x08"
_K_FAMILY = b"\x10"
_K_PROTOCOL = b"\x18"
_K_QADDR = b"\x22"
_K_RADDR = b"\x2a"
_K_QPORT = b"\x30"
_K_RPORT = b"\x38"
_K_QSEC = b"\x40"
_K_QNSEC = b"\x4d"
_K_QMSG = b"\x52"
_K_RSEC = b"\x60"
_K_RNSEC = b"\x6d"
_K_RMSG = b"\x72"
# ... and of dnstap.Dnstap.
_K_IDENTITY = b"\x0a"
_K_VERSION = b"\x12"
_K_EXTRA = b"\x1a"
_K_MESSAGE = b"\x72"
_DNSTAP_MESSAGE = b"\x78\x01"       # type = MESSAGE


def _ip(host):
    """(family, address bytes): IPv4 and IPv4-mapped IPv6 as 4 bytes."""
    if ":" in host:
        if host.startswith("::ffff:") and "." in host:
            return INET, socket.inet_aton(host[7:])
        return INET6, socket.inet_pton(socket.AF_INET6, host.split("%")[0])
    return INET, socket.inet_aton(host)


def encode_message(mtype, proto=None, query=None, response=None,
                   qtime=None, rtime=None, qmsg=None, rmsg=None):
    """A dnstap.Message.

    ``query``/``response``: (host, port) of the two ends (the socket
    family comes from whichever is given, the response end last, as
    CoreDNS's setters do); ``proto``: 'udp' or 'tcp'; times are
    nanoseconds since the epoch; ``qmsg``/``rmsg`` the DNS wire messages.
    """
    out = [_K_TYPE, bytes((mtype,))]
    fam = None
    qa = ra = None
    if query is not None:
        fam, qa = _ip(query[0])
    if response is not None:
        fam, ra = _ip(response[0])
    if fam is not None:
        out.append(_K_FAMILY + bytes((fam,)))
    if proto is not None:
        out.append(_K_PROTOCOL + (b"\x02" if proto == "tcp" else b"\x01"))
    if qa is not None:
        out.append(_field_bytes(_K_QADDR, qa))
    if ra is not None:
        out.append(_field_bytes(_K_RADDR, ra))
    if query is not None:
        out.append(_K_QPORT + varint(query[1]))
    if response is not None:
        out.append(_K_RPORT + varint(response[1]))
    if qtime is not None:
        sec, nsec = divmod(qtime, 1000000000)
        out.append(_K_QSEC + varint(sec) + _K_QNSEC + _FIXED32.pack(nsec))
    if qmsg is not None:
        out.append(_field_bytes(_K_QMSG, qmsg))
    if rtime is not None:
        sec, nsec = divmod(rtime, 1000000000)
        out.append(_K_RSEC + varint(sec) + _K_RNSEC + _FIXED32.pack(nsec))
    if rmsg is not None:
        out.append(_field_bytes(_K_RMSG, rmsg))
    return b"".join(out)


def encode_dnstap(message, identity=b"", version=b"", extra=None):
    """A dnstap.Dnstap of type MESSAGE wrapping an encoded Message."""
    return envelope_head(identity, version) + _envelope_tail(message, extra)


def envelope_head(identity, version):
    """The constant start of every Dnstap a tap writes."""
    out = b""
    if identity:
        out += _field_bytes(_K_IDENTITY, identity)
    if version:
        out += _field_bytes(_K_VERSION, version)
    return out


def _envelope_tail(message, extra):
    out = b""
    if extra:
        out = _field_bytes(_K_EXTRA, extra)
    return out + _field_bytes(_K_MESSAGE, message) + _DNSTAP_MESSAGE


# -- Frame Streams ---------------------------------------------------------------

def control_frame(ftype, content_type=None):
    """An escaped control frame, with an optional content-type field."""
    body = _U32.pack(ftype)
    if content_type is not None:
        body += _U32.pack(FS_CONTENT_TYPE) + _U32.pack(len(content_type))
        body += content_type
    return b"\x00\x00\x00\x00" + _U32.pack(len(body)) + body


def parse_control(body):
    """(type, [content types]) of a control frame body."""
    ftype = _U32.unpack_from(body, 0)[0]
    off = 4
    types = []
    while off + 8 <= len(body):
        field, n = struct.unpack_from("!II", body, off)
        off += 8
        if field == FS_CONTENT_TYPE:
            types.append(bytes(body[off:off + n]))
        off += n
    return ftype, types


class FrameWriter(protocol.Protocol):
    """The sending side of a bidirectional Frame Streams connection.

    READY goes out on connect; on the collector's ACCEPT we send START and
    tell ``sink`` we are ``started``; data frames follow.  We register as a
    streaming producer, so the transport tells us when its buffer is full
    (``paused``) and when it has drained.  ``finish()`` sends STOP and
    waits (bounded) for FINISH.
    """

    def __init__(self, sink):
        self.sink = sink
        self.started = False
        self.paused = False
        self.buf = b""
        self.stopping = None
        self._timer = None

    def connectionMade(self):
        self.sink.connected(self)
        self.transport.write(control_frame(FS_READY, CONTENT_TYPE))
        clock = self.sink.reactor
        self._timer = clock.callLater(TCP_TIMEOUT, self._handshake_timeout)

    def _handshake_timeout(self):
        self._timer = None
        if not self.started:
            logger.error(NAME, "No connection to dnstap endpoint: handshake "
                      "timed out")
            self.transport.abortConnection()

    def dataReceived(self, data):
        self.buf += data
        while len(self.buf) >= 4:
            n = _U32.unpack_from(self.buf, 0)[0]
            if n != 0:
                # A data frame from a collector is a protocol error.
                self.transport.abortConnection()
                return
            if len(self.buf) < 8:
                return
            clen = _U32.unpack_from(self.buf, 4)[0]
            if len(self.buf) < 8 + clen:
                return
            body, self.buf = self.buf[8:8 + clen], self.buf[8 + clen:]
            self._control(*parse_control(body))

    def _control(self, ftype, types):
        if ftype == FS_ACCEPT and not self.started:
            if types and CONTENT_TYPE not in types:
                logger.error(NAME, "No connection to dnstap endpoint: content "
                          "type not accepted")
                self.transport.abortConnection()
                return
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            self._timer = None
            self.transport.write(control_frame(FS_START, CONTENT_TYPE))
            self.started = True
            self.transport.registerProducer(self, True)
            self.sink.started(self)
        elif ftype == FS_FINISH:
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            self.transport.loseConnection()

    def write_frame(self, payload):
        self.transport.write(_U32.pack(len(payload)) + payload)

    # IPushProducer
    def pauseProducing(self):
        self.paused = True

    def resumeProducing(self):
        self.paused = False
        self.sink.resumed(self)

    def stopProducing(self):
        self.paused = True

    def finish(self):
        """STOP, then FINISH from the collector (or a timeout)."""
        if self.stopping is None:
            self.stopping = defer.Deferred()
            if self.started:
                self.transport.unregisterProducer()
                self.transport.write(control_frame(FS_STOP))
                self._timer = self.sink.reactor.callLater(
                    1.0, self.transport.loseConnection)
            else:
                self.transport.loseConnection()
        return self.stopping

    def connectionLost(self, reason):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self.started = False
        self.sink.lost(self, reason)
        if self.stopping is not None and not self.stopping.called:
            self.stopping.callback(None)


# -- outputs -------------------------------------------------------------------

class Output:
    """Connects to a collector and keeps the bounded queue."""

    def __init__(self, kind, address, queue, writebuffer, tls=None):
        self.kind = kind              # 'unix', 'tcp' or 'tls'
        self.address = address        # path, or (host, port)
        self.limit = queue * QUEUE_SIZE
        self.sndbuf = writebuffer * WRITE_BUFFER
        self.tls = tls                # client TLS options (tls only)
        self.queue = collections.deque()
        self.dropped = 0
        self.conn = None              # a started FrameWriter
        self.factory = None
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
    maxDelay = REPORT_INTERVAL
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

    def __init__(self, kind, address, tls=None):
        self.kind = kind
        self.address = address
        self.tls = tls                # server TLS options (tls only)
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
                self.port = reactor.listenSSL(self.address[1], self, self.tls,
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


# -- the plugin --------------------------------------------------------------------

def _now():
    return time.time_ns()


@implementer(IForwarderTap)
class Dnstap(Plugin):
    """One ``dnstap`` line: a tap in the chain and its output."""

    name = NAME
    once = False

    def __init__(self, output, full, identity, version, extra):
        self.output = output
        self.full = full
        self.identity = identity
        self.version = version
        self.extra_format = extra
        self.head = envelope_head(identity, version)
        self._extra = None          # compiled pieces when it has placeholders
        self._extra_const = None
        if extra:
            self._compile_extra(extra)

    def _compile_extra(self, fmt):
        from corednstw.plugins import log as logplugin
        pieces = logplugin.compile_format(fmt)
        if all(isinstance(p, str) for p in pieces):
            self._extra_const = "".join(pieces).encode()
            return
        # No response is known to the replacer here: CoreDNS writes "-"
        # for the response placeholders in dnstap's extra.
        resp_fns = set(logplugin._LABELS[k] for k in (
            "{rcode}", "{rsize}", "{duration}", "{>rflags}"))
        self._extra = [logplugin.EMPTY if p in resp_fns else p
                       for p in pieces]

    def extra(self, req):
        if self._extra_const is not None:
            return self._extra_const
        if self._extra is None or req is None:
            return None
        from corednstw.plugins.log import render
        return render(self._extra, req, None, 0.0).encode()

    def tap(self, message, req=None):
        """Send one encoded dnstap.Message (TapMessageWithMetadata)."""
        self.output.send(self.head + _envelope_tail(message,
                                                    self.extra(req)))

    # -- the chain ------------------------------------------------------------

    def serve(self, req):
        qtime = _now()
        self.tap(encode_message(
            CLIENT_QUERY, req.proto, (req.client, req.port), None, qtime,
            None, req.data if self.full else None), req)
        return then(self.next.serve(req), self._response, req, qtime)

    def _response(self, resp, req, qtime):
        if resp is None or resp.__class__ is NoReply:
            return resp     # nothing written to the client
        rmsg = resp.finish(req) if self.full else None
        self.tap(encode_message(
            CLIENT_RESPONSE, req.proto, (req.client, req.port), None, qtime,
            _now(), None, rmsg), req)
        return resp

    # -- the interface for forwarders -------------------------------------------

    def tap_forwarder_query(self, req, upstream, wire=None, proto="udp",
                            local=None, start=None):
        """A FORWARDER_QUERY: ``req`` (for extra), ``upstream`` (host,
        port), ``wire`` the query bytes sent (kept only with ``full``),
        ``proto`` 'udp' or 'tcp', ``local`` our (host, port) of that
        socket if known, ``start`` the send time in ns (default now)."""
        if start is None:
            start = _now()
        self.tap(encode_message(
            FORWARDER_QUERY, proto, local, upstream, start, None,
            wire if self.full else None), req)
        return start

    def tap_forwarder_response(self, req, upstream, wire=None, proto="udp",
                               local=None, start=None):
        """A FORWARDER_RESPONSE for the reply ``wire`` from ``upstream``;
        ``start`` is the query's send time in ns (from
        ``tap_forwarder_query``)."""
        self.tap(encode_message(
            FORWARDER_RESPONSE, proto, local, upstream, start, _now(), None,
            wire if self.full else None), req)

    # -- life cycle -------------------------------------------------------------

    def start(self):
        self.output.start(self.reactor)

    def stop(self):
        return self.output.stop()


# -- setup ---------------------------------------------------------------------------

def _endpoint(d, text, listen):
    """(kind, address) from SOCKET, unix://SOCKET, tcp:// or tls://."""
    for scheme in ("tcp", "tls"):
        if text.startswith(scheme + "://"):
            hostport = text[len(scheme) + 3:]
            host, sep, port = hostport.rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise d.arg_error()
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            return scheme, (host, int(port))
    if text.startswith("unix://"):
        text = text[7:]
    return "unix", text


def _multiple(d, text, what, units, top):
    try:
        v = int(text)
    except ValueError:
        raise d.error("dnstap: invalid %s %r" % (what, text))
    if v < 1 or v > top:
        raise d.error("dnstap: %s must be between 1 and %d (%s): %d"
                      % (what, top, units, v))
    return v


def setup(d, block):
    args = list(d.args)
    if not args:
        raise d.arg_error()
    listen = args[0] == "listen"
    if listen:
        if len(args) < 2:
            raise d.error("dnstap listen requires an endpoint argument")
        args = args[1:]
    if len(args) > 4:
        raise d.arg_error()
    writebuf = queue = 1
    if len(args) >= 3:
        writebuf = _multiple(d, args[2], "MultipleTcpWriteBuf", "MiB units",
                             MAX_WRITE_BUFFER)
    if len(args) >= 4:
        queue = _multiple(d, args[3], "MultipleQueue", "x10k messages",
                          MAX_QUEUE)
    kind, address = _endpoint(d, args[0], listen)
    full = len(args) >= 2 and args[1] == "full"
    from corednstw import COREDNS_VERSION
    identity = socket.gethostname().encode()
    version = ("CoreDNS-" + COREDNS_VERSION).encode()
    extra = ""
    skipverify = False
    certs = None
    for c in d.children:
        if c.name == "skipverify":
            if c.args:
                raise c.arg_error()
            skipverify = True
        elif c.name == "tls":
            if not listen:
                raise d.error("tls directive only valid for listeners")
            if len(c.args) < 2:
                raise d.error("tls requires cert and key file paths")
            if len(c.args) > 3:
                raise c.arg_error()
            certs = list(c.args)
        elif c.name in ("identity", "version", "extra"):
            if len(c.args) != 1:
                raise c.arg_error(c.name)
            if c.name == "identity":
                identity = c.args[0].encode()
            elif c.name == "version":
                version = c.args[0].encode()
            else:
                extra = c.args[0]
        else:
            raise d.error("unknown property '%s'" % c.name)
    if listen:
        tls = None
        if kind == "tls":
            if certs is None:
                raise d.error("TLS listener requires cert and key files")
            tls = _server_tls(d, block, certs, skipverify)
        output = Listener(kind, address, tls)
    else:
        tls = _client_tls(address[0], skipverify) if kind == "tls" else None
        output = Output(kind, address, queue, writebuf, tls)
    return Dnstap(output, full, identity, version, extra)


def _client_tls(host, skipverify):
    from twisted.internet import ssl
    if skipverify:
        return ssl.CertificateOptions(verify=False)
    return ssl.optionsForClientTLS(host)


def _server_tls(d, block, certs, skipverify):
    from twisted.internet import ssl
    paths = [block.path(p) for p in certs]
    try:
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
    except (OSError, Exception) as e:
        raise d.error("unable to load TLS certificate: %s" % e)
