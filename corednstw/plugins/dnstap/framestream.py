"""Frame Streams, the transport of dnstap: a bidirectional connection
(READY, ACCEPT, START, data frames, STOP, FINISH) carrying content type
``protobuf:dnstap.Dnstap``; ``FrameWriter`` is its sending side."""

import struct
from typing import Optional

from twisted.internet import defer, protocol, tcp
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from corednstw.core import logger

#: The plugin's name (its log lines) and the content type it carries.
NAME = "dnstap"
CONTENT_TYPE = b"protobuf:dnstap.Dnstap"

#: Connect and handshake timeout (CoreDNS's).
TCP_TIMEOUT = 4.0

# Frame Streams control frame types and the content-type field.
FS_ACCEPT, FS_START, FS_STOP, FS_READY, FS_FINISH = 1, 2, 3, 4, 5
FS_CONTENT_TYPE = 1

_U32 = struct.Struct("!I")


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


@implementer(IPushProducer)
class FrameWriter(protocol.Protocol):
    """The sending side of a bidirectional Frame Streams connection.

    READY goes out on connect; on the collector's ACCEPT we send START and
    tell ``sink`` we are ``started``; data frames follow.  We register as a
    streaming producer, so the transport tells us when its buffer is full
    (``paused``) and when it has drained.  ``finish()`` sends STOP and
    waits (bounded) for FINISH.
    """

    #: Output connects to the collector with the reactor's connectUNIX,
    #: connectTCP or connectSSL: a socket connection.
    transport: Optional[tcp.Connection]

    def __init__(self, sink):
        self.sink = sink
        self.started = False
        self.paused = False
        self.buf = b""
        self.stopping = None
        self._timer = None

    @property
    def _out(self) -> tcp.Connection:
        """The connection: every method but connectionMade's caller runs
        once it is made."""
        assert self.transport is not None
        return self.transport

    def connectionMade(self):
        self.sink.connected(self)
        self._out.write(control_frame(FS_READY, CONTENT_TYPE))
        clock = self.sink.reactor
        self._timer = clock.callLater(TCP_TIMEOUT, self._handshake_timeout)

    def _handshake_timeout(self):
        self._timer = None
        if not self.started:
            logger.error(NAME, "No connection to dnstap endpoint: handshake "
                      "timed out")
            self._out.abortConnection()

    def dataReceived(self, data):
        self.buf += data
        while len(self.buf) >= 4:
            n = _U32.unpack_from(self.buf, 0)[0]
            if n != 0:
                # A data frame from a collector is a protocol error.
                self._out.abortConnection()
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
                self._out.abortConnection()
                return
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            self._timer = None
            self._out.write(control_frame(FS_START, CONTENT_TYPE))
            self.started = True
            self._out.registerProducer(self, True)
            self.sink.started(self)
        elif ftype == FS_FINISH:
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            self._out.loseConnection()

    def write_frame(self, payload):
        self._out.write(_U32.pack(len(payload)) + payload)

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
                self._out.unregisterProducer()
                self._out.write(control_frame(FS_STOP))
                self._timer = self.sink.reactor.callLater(
                    1.0, self._out.loseConnection)
            else:
                self._out.loseConnection()
        return self.stopping

    def connectionLost(self, reason=protocol.connectionDone):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self.started = False
        self.sink.lost(self, reason)
        if self.stopping is not None and not self.stopping.called:
            self.stopping.callback(None)
