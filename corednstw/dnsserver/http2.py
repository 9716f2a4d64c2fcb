"""The server side of an HTTP/2 connection (RFC 9113), for the DoH and
gRPC listeners.

Both listeners ask one thing of HTTP/2: requests with small bodies, each
answered with one header block, a body and maybe trailers.  This is that
much of the protocol, with the rules a conforming server keeps, as Go's
``net/http`` server and grpc-go apply them:

* frames are read straight from the received octets (no object per
  frame); a frame over our SETTINGS_MAX_FRAME_SIZE, a frame on the wrong
  stream, a header block interrupted before its CONTINUATION ends, a
  bad preface or first frame, a header block that does not decode: the
  connection ends with GOAWAY and the error's code;
* SETTINGS are applied and acknowledged, PING answered, PRIORITY (and
  the priority of HEADERS) ignored, padding stripped;
* flow control both ways: the client's DATA is charged to the connection's
  and the stream's windows (overrun: FLOW_CONTROL_ERROR) and the windows are
  replenished as Go's server does (a WINDOW_UPDATE once 4 KiB or half of
  the window is owed); our DATA is sent within the client's windows and
  frame size, the rest waiting for its WINDOW_UPDATEs;
* at most ``max_streams`` streams at once (past that RST_STREAM, as Go:
  REFUSED_STREAM until the client acknowledged our SETTINGS, then
  PROTOCOL_ERROR); a header list over ``MAX_HEADER_LIST`` gets the
  subclass's ``_too_large`` answer;
* a shutdown is graceful: GOAWAY with the last stream taken, the pending
  answers sent, then the close.

Deadlines (Go's http.Server ReadTimeout and IdleTimeout, which CoreDNS's
servers take from *timeouts*): a request must arrive whole within the
read timeout of its HEADERS frame, or its stream is reset (CANCEL); bytes
that do not yet make a whole frame (the preface at the start, a header
block waiting for its CONTINUATION) must make one within the read
timeout, or the connection ends; the idle timeout runs from the last
request received, not from the last octet, so that frames carrying no
request (PING, SETTINGS) do not keep a connection open either.

Subclasses say what a request is: ``_request(headers)`` makes the object
kept for a stream, ``_data(stream, data)`` takes a piece of its body,
``_ended(stream)`` runs it; they answer with ``respond``.
"""

import functools
import struct

from twisted.internet import protocol
from twisted.protocols.policies import TimeoutMixin
from twisted.protocols.tls import TLSMemoryBIOProtocol

from corednstw.dnsserver import hpack_codec

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0, 1, 2, 3, 4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 5, 6, 7, 8, 9

END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL = 5, 6, 7, 8
COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 9, 11

S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS = 1, 2, 3
S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE = 4, 5, 6

DEFAULT_WINDOW = 65535
MAX_WINDOW = (1 << 31) - 1
MIN_FRAME = 16384
#: Go's inflowMinRefresh: a WINDOW_UPDATE is sent once this much is owed
#: (or as much as the window still open).
MIN_REFRESH = 4096

_HEAD = struct.Struct("!BHBBI")         # length (24 bits), type, flags, id
_SETTING = struct.Struct("!HI")
_U32 = struct.Struct("!I")
_GOAWAY = struct.Struct("!II")


class ConnectionError(Exception):
    """A connection error (RFC 9113 5.4.1): GOAWAY with ``code``."""

    def __init__(self, code, why=""):
        super().__init__(why)
        self.code = code


def frame(kind, flags, sid, payload=b""):
    """One frame's octets."""
    n = len(payload)
    return _HEAD.pack(n >> 16, n & 0xFFFF, kind, flags, sid) + payload


def settings(pairs):
    """A SETTINGS frame with ``pairs`` of (identifier, value)."""
    return frame(SETTINGS, 0, 0, b"".join(_SETTING.pack(k, v)
                                          for k, v in pairs))


class Stream:
    """One client stream until its answer is sent or it is reset."""

    __slots__ = ("sid", "req", "receiving", "recv_window", "owed",
                 "send_window", "pending", "timer")

    def __init__(self, sid, recv_window, send_window):
        self.sid = sid
        self.req = None
        self.receiving = True       # the request is not whole yet
        self.recv_window = recv_window
        self.owed = 0               # received, not yet given back
        self.send_window = send_window
        self.pending = None         # (body left, trailers) over the window
        self.timer = None           # the request's read deadline


class H2Server(protocol.Protocol, TimeoutMixin):
    """One HTTP/2 server connection; ``resource`` has ``timeouts``
    (read, write), ``idle`` is the idle timeout."""

    #: What our SETTINGS say (Go's net/http server's values).
    MAX_FRAME = 1 << 20
    MAX_STREAMS = 250
    MAX_HEADER_LIST = (1 << 20) + 320
    INITIAL_WINDOW = 1 << 20
    CONN_WINDOW = 1 << 20

    def __init__(self, resource, idle):
        self.resource = resource
        self.idle = idle
        self.max_streams = self.MAX_STREAMS
        self.buf = b""
        self.out = []
        self.streams = {}
        self.blocked = {}           # sid -> stream waiting for a window
        self.fresh = []             # streams opened by this read
        self.decoder = hpack_codec.Decoder()
        self.preface = True         # the client's preface still to come
        self.first = True           # its first frame (SETTINGS) too
        self.acked = False          # it acknowledged our SETTINGS
        self.last_sid = 0
        self.cont = None            # (sid, end stream, [fragments])
        self.recv_window = self.CONN_WINDOW
        self.owed = 0
        self.send_window = DEFAULT_WINDOW
        self.peer_window = DEFAULT_WINDOW
        self.peer_frame = MIN_FRAME
        self.going = False          # GOAWAY sent
        self.reading = False        # in dataReceived: answers wait
        self.dead = False
        self.deadline = None        # for octets short of a whole frame
        self.abandon = None         # a shutdown's end of waiting
        self.client = None
        self.write = None

    def local_settings(self):
        """Our SETTINGS: (identifier, value) pairs."""
        return [(S_MAX_FRAME_SIZE, self.MAX_FRAME),
                (S_MAX_CONCURRENT_STREAMS, self.max_streams),
                (S_MAX_HEADER_LIST_SIZE, self.MAX_HEADER_LIST),
                (S_HEADER_TABLE_SIZE, hpack_codec.TABLE_SIZE),
                (S_INITIAL_WINDOW_SIZE, self.INITIAL_WINDOW)]

    def connectionMade(self):
        self.write = _record_writer(self.transport)
        peer = self.transport.getPeer()
        self.client = (getattr(peer, "host", ""), getattr(peer, "port", 0))
        self.out.append(settings(self.local_settings()))
        if self.CONN_WINDOW > DEFAULT_WINDOW:
            self.out.append(frame(WINDOW_UPDATE, 0, 0, _U32.pack(
                self.CONN_WINDOW - DEFAULT_WINDOW)))
        self.recv_window = max(self.CONN_WINDOW, DEFAULT_WINDOW)
        self.flush()
        self.setTimeout(self.idle)
        self.deadline = self._later(self._too_slow)     # the preface

    # -- reading ---------------------------------------------------------

    def dataReceived(self, data):
        if self.dead:
            return
        if self.buf:
            self.buf += data
            buf = self.buf
        else:
            buf = data
        received = False
        self.reading = True
        try:
            pos = 0
            if self.preface:
                if len(buf) < 24:
                    if not PREFACE.startswith(bytes(buf)):
                        raise ConnectionError(PROTOCOL_ERROR, "preface")
                    self.buf = bytearray(buf)
                    self._watch(False)
                    return
                if buf[:24] != PREFACE:
                    raise ConnectionError(PROTOCOL_ERROR, "preface")
                self.preface = False
                pos = 24
            end = len(buf)
            head = _HEAD.unpack_from
            while end - pos >= 9:
                hi, lo, kind, flags, sid = head(buf, pos)
                length = hi << 16 | lo
                if length > self.MAX_FRAME:
                    raise ConnectionError(FRAME_SIZE_ERROR, "frame size")
                stop = pos + 9 + length
                if stop > end:
                    break
                if kind == WINDOW_UPDATE and length == 4 and not self.first \
                        and self.cont is None:
                    # The common ones, without a call: the connection's
                    # window with no answer waiting for it, or the window
                    # of a stream already answered.
                    inc = int.from_bytes(buf[pos + 9:stop], "big") \
                        & 0x7FFFFFFF
                    if inc:
                        sid &= 0x7FFFFFFF
                        if sid == 0:
                            if not self.blocked and \
                                    self.send_window + inc <= MAX_WINDOW:
                                self.send_window += inc
                                pos = stop
                                continue
                        elif sid <= self.last_sid and \
                                sid not in self.streams:
                            pos = stop
                            continue
                payload = buf[pos + 9:stop]
                pos = stop
                sid &= 0x7FFFFFFF
                if self.cont is not None and kind != CONTINUATION:
                    raise ConnectionError(PROTOCOL_ERROR, "CONTINUATION")
                if self.first:
                    if kind != SETTINGS or flags & ACK:
                        raise ConnectionError(PROTOCOL_ERROR, "no SETTINGS")
                    self.first = False
                if kind == DATA:
                    received |= self._on_data(flags, sid, payload)
                elif kind == HEADERS:
                    received |= self._on_headers(flags, sid, payload)
                elif kind == WINDOW_UPDATE:
                    self._on_window(sid, payload)
                elif kind == CONTINUATION:
                    received |= self._on_continuation(flags, sid, payload)
                elif kind == SETTINGS:
                    self._on_settings(flags, sid, payload)
                elif kind == PING:
                    self._on_ping(flags, sid, payload)
                elif kind == RST_STREAM:
                    self._on_reset(sid, payload)
                elif kind == PRIORITY:
                    if sid == 0:
                        raise ConnectionError(PROTOCOL_ERROR, "PRIORITY")
                    if length != 5:
                        self._reset(sid, FRAME_SIZE_ERROR)
                elif kind == GOAWAY:
                    if sid:
                        raise ConnectionError(PROTOCOL_ERROR, "GOAWAY")
                    self._gone_away()
                    return
                elif kind == PUSH_PROMISE:
                    raise ConnectionError(PROTOCOL_ERROR, "PUSH_PROMISE")
                if self.dead:
                    return
            self.buf = bytearray(buf[pos:]) if pos < end else b""
        except ConnectionError as e:
            self.fail(e.code)
            return
        finally:
            self.reading = False
        self.flush()
        self._watch(received)

    def _watch(self, received):
        """Set the deadlines after a read: a request received restarts the
        idle timer and the deadline of a partial frame; a stream still
        receiving its request gets its deadline."""
        if received:
            self.resetTimeout()
        if self.buf or self.cont is not None or self.preface:
            if self.deadline is None:
                self.deadline = self._later(self._too_slow)
            elif received:
                self.deadline.reset(self.resource.timeouts.read)
        elif self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        if self.fresh:
            for st in self.fresh:
                if st.receiving and st.timer is None \
                        and self.streams.get(st.sid) is st:
                    st.timer = self._later(self._stream_too_slow, st)
            self.fresh = []

    def _later(self, fn, *args):
        """A read-timeout deadline."""
        return self.callLater(self.resource.timeouts.read,
                              functools.partial(fn, *args))

    def _too_slow(self):
        """A frame (or the preface) did not arrive within the read
        timeout."""
        self.deadline = None
        self.dead = True
        self.transport.abortConnection()

    def _stream_too_slow(self, st):
        """A request did not arrive whole within the read timeout."""
        st.timer = None
        if self.streams.get(st.sid) is st:
            self._reset(st.sid, CANCEL)
            self.flush()

    # -- frames ----------------------------------------------------------

    def _on_data(self, flags, sid, payload):
        if sid == 0:
            raise ConnectionError(PROTOCOL_ERROR, "DATA on stream 0")
        n = len(payload)
        self.recv_window -= n
        if self.recv_window < 0:
            raise ConnectionError(FLOW_CONTROL_ERROR, "connection window")
        self.owed += n
        if self.owed >= MIN_REFRESH or self.owed >= self.recv_window:
            self.out.append(frame(WINDOW_UPDATE, 0, 0,
                                  _U32.pack(self.owed)))
            self.recv_window += self.owed
            self.owed = 0
        st = self.streams.get(sid)
        if st is None:
            if sid > self.last_sid:
                raise ConnectionError(PROTOCOL_ERROR, "DATA on idle stream")
            return False        # a stream we closed: dropped
        if not st.receiving:
            self._reset(sid, STREAM_CLOSED)
            return False
        st.recv_window -= n
        if st.recv_window < 0:
            self._reset(sid, FLOW_CONTROL_ERROR)
            return False
        if flags & PADDED:
            if n == 0 or payload[0] >= n:
                raise ConnectionError(PROTOCOL_ERROR, "padding")
            payload = payload[1:n - payload[0]]
        if payload:
            self._data(st, payload)
        if flags & END_STREAM:
            return self._whole(st)
        st.owed += n
        if st.owed >= MIN_REFRESH or st.owed >= st.recv_window:
            self.out.append(frame(WINDOW_UPDATE, 0, sid,
                                  _U32.pack(st.owed)))
            st.recv_window += st.owed
            st.owed = 0
        return False

    def _on_headers(self, flags, sid, payload):
        if sid == 0:
            raise ConnectionError(PROTOCOL_ERROR, "HEADERS on stream 0")
        if flags & PADDED:
            if not payload or payload[0] >= len(payload):
                raise ConnectionError(PROTOCOL_ERROR, "padding")
            payload = payload[1:len(payload) - payload[0]]
        if flags & PRIORITY_FLAG:
            if len(payload) < 5:
                raise ConnectionError(FRAME_SIZE_ERROR, "priority")
            payload = payload[5:]
        if not flags & END_HEADERS:
            self.cont = (sid, flags & END_STREAM, [payload], len(payload))
            return False
        return self._header_block(sid, flags & END_STREAM, payload)

    def _on_continuation(self, flags, sid, payload):
        if self.cont is None or self.cont[0] != sid:
            raise ConnectionError(PROTOCOL_ERROR, "CONTINUATION")
        _, end, parts, size = self.cont
        size += len(payload)
        if size > self.MAX_HEADER_LIST:
            raise ConnectionError(ENHANCE_YOUR_CALM, "header block size")
        parts.append(payload)
        if not flags & END_HEADERS:
            self.cont = (sid, end, parts, size)
            return False
        self.cont = None
        return self._header_block(sid, end, b"".join(parts))

    def _header_block(self, sid, end, block):
        try:
            headers, size = self.decoder.decode(bytes(block),
                                                self.MAX_HEADER_LIST)
        except hpack_codec.HPACKError as e:
            raise ConnectionError(COMPRESSION_ERROR, str(e)) from e
        st = self.streams.get(sid)
        if st is not None:
            if not st.receiving:
                self._reset(sid, STREAM_CLOSED)
            elif not end:
                raise ConnectionError(PROTOCOL_ERROR, "second HEADERS")
            else:
                return self._whole(st)      # trailers: not read
            return False
        if sid <= self.last_sid or not sid & 1:
            raise ConnectionError(PROTOCOL_ERROR, "stream id")
        self.last_sid = sid
        if self.going:
            return False
        if len(self.streams) >= self.max_streams:
            self._reset(sid, PROTOCOL_ERROR if self.acked
                        else REFUSED_STREAM)
            return False
        st = Stream(sid, self.INITIAL_WINDOW, self.peer_window)
        self.streams[sid] = st
        if size > self.MAX_HEADER_LIST:
            st.receiving = not end
            self._too_large(st)
            return False
        st.req = self._request(headers)
        if end:
            return self._whole(st)
        self.fresh.append(st)
        return False

    def _whole(self, st):
        """The request on ``st`` has arrived whole."""
        st.receiving = False
        if st.timer is not None:
            st.timer.cancel()
            st.timer = None
        if st.req is not None:
            self._ended(st)
        return True

    def _on_window(self, sid, payload):
        if len(payload) != 4:
            raise ConnectionError(FRAME_SIZE_ERROR, "WINDOW_UPDATE")
        inc = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if sid == 0:
            if inc == 0:
                raise ConnectionError(PROTOCOL_ERROR, "window increment 0")
            self.send_window += inc
            if self.send_window > MAX_WINDOW:
                raise ConnectionError(FLOW_CONTROL_ERROR, "window overflow")
            if self.blocked:
                self._unblock()
            return
        st = self.streams.get(sid)
        if st is None:
            if sid > self.last_sid:
                raise ConnectionError(PROTOCOL_ERROR, "idle stream")
            return
        if inc == 0:
            self._reset(sid, PROTOCOL_ERROR)
            return
        st.send_window += inc
        if st.send_window > MAX_WINDOW:
            self._reset(sid, FLOW_CONTROL_ERROR)
            return
        if st.pending is not None:
            self._unblock()

    def _on_settings(self, flags, sid, payload):
        if sid:
            raise ConnectionError(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ConnectionError(FRAME_SIZE_ERROR, "SETTINGS ack")
            self.acked = True
            return
        if len(payload) % 6:
            raise ConnectionError(FRAME_SIZE_ERROR, "SETTINGS size")
        for i in range(0, len(payload), 6):
            key, value = _SETTING.unpack_from(payload, i)
            if key == S_INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionError(FLOW_CONTROL_ERROR, "window")
                delta = value - self.peer_window
                self.peer_window = value
                for st in self.streams.values():
                    st.send_window += delta
                    if st.send_window > MAX_WINDOW:
                        raise ConnectionError(FLOW_CONTROL_ERROR, "window")
            elif key == S_MAX_FRAME_SIZE:
                if not MIN_FRAME <= value < 1 << 24:
                    raise ConnectionError(PROTOCOL_ERROR, "frame size")
                self.peer_frame = value
            elif key == S_ENABLE_PUSH and value > 1:
                raise ConnectionError(PROTOCOL_ERROR, "ENABLE_PUSH")
        self.out.append(frame(SETTINGS, ACK, 0))
        if self.blocked:
            self._unblock()

    def _on_ping(self, flags, sid, payload):
        if sid:
            raise ConnectionError(PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ConnectionError(FRAME_SIZE_ERROR, "PING size")
        if not flags & ACK:
            self.out.append(frame(PING, ACK, 0, bytes(payload)))

    def _on_reset(self, sid, payload):
        if sid == 0:
            raise ConnectionError(PROTOCOL_ERROR, "RST_STREAM on 0")
        if len(payload) != 4:
            raise ConnectionError(FRAME_SIZE_ERROR, "RST_STREAM size")
        if sid > self.last_sid:
            raise ConnectionError(PROTOCOL_ERROR, "RST_STREAM idle stream")
        st = self.streams.get(sid)
        if st is not None:
            self._close(st)

    def _gone_away(self):
        """The client's GOAWAY: it opens no more streams."""
        self.dead = True
        self.flush()
        self.transport.loseConnection()

    # -- streams ---------------------------------------------------------

    def _close(self, st):
        """Forget a stream (answered, or reset either way)."""
        self.streams.pop(st.sid, None)
        self.blocked.pop(st.sid, None)
        if st.timer is not None:
            st.timer.cancel()
            st.timer = None
        req = st.req
        st.req = None
        if req is not None:
            self._forget(req)
        if self.going and not self.dead and not self._answering():
            self.dead = True
            self.flush()
            self.transport.loseConnection()

    def _reset(self, sid, code):
        """RST_STREAM ``code`` on ``sid``."""
        self.out.append(frame(RST_STREAM, 0, sid, _U32.pack(code)))
        st = self.streams.get(sid)
        if st is not None:
            st.pending = None
            self._close(st)

    def _answering(self):
        """Whether an answer is still to come on some stream."""
        return any(not st.receiving for st in self.streams.values())

    # -- answers ---------------------------------------------------------

    def respond(self, st, block, body=b"", trailers=None):
        """Answer on ``st``: the header block ``block``, ``body`` as DATA
        within the client's windows, then the header block ``trailers``
        if any; the stream ends with the last of them."""
        if self.streams.get(st.sid) is not st or self.dead:
            return              # reset by the client, or connection gone
        st.req = None
        sid = st.sid
        n = len(body)
        size = self.peer_frame
        if (0 < n <= size and n <= self.send_window and n <= st.send_window
                and len(block) <= size
                and (trailers is None or len(trailers) <= size)):
            # All of it at once (the usual small answer).
            self.send_window -= n
            st.send_window -= n
            pack = _HEAD.pack
            m = len(block)
            if trailers is None:
                self.out += (pack(m >> 16, m & 0xFFFF, HEADERS, END_HEADERS,
                                  sid), block,
                             pack(n >> 16, n & 0xFFFF, DATA, END_STREAM,
                                  sid), body)
            else:
                t = len(trailers)
                self.out += (pack(m >> 16, m & 0xFFFF, HEADERS, END_HEADERS,
                                  sid), block,
                             pack(n >> 16, n & 0xFFFF, DATA, 0, sid), body,
                             pack(t >> 16, t & 0xFFFF, HEADERS,
                                  END_HEADERS | END_STREAM, sid), trailers)
        else:
            self._header_frames(sid, block, not body and trailers is None)
            if body or trailers is not None:
                self._send(st, body, trailers)
        if st.pending is None:
            self._close_sent(st)
        if not self.reading:
            self.flush()

    def _header_frames(self, sid, block, end):
        size = self.peer_frame
        flags = END_STREAM if end else 0
        if len(block) <= size:
            self.out.append(frame(HEADERS, flags | END_HEADERS, sid, block))
            return
        self.out.append(frame(HEADERS, flags, sid, block[:size]))
        rest = block[size:]
        while rest:
            piece, rest = rest[:size], rest[size:]
            self.out.append(frame(CONTINUATION, 0 if rest else END_HEADERS,
                                  sid, piece))

    def _send(self, st, body, trailers):
        """DATA within the windows; what does not fit waits in
        ``st.pending``."""
        out = self.out
        sid = st.sid
        while body:
            room = min(self.send_window, st.send_window, self.peer_frame)
            if room <= 0:
                st.pending = (body, trailers)
                self.blocked[sid] = st
                return
            piece, body = body[:room], body[room:]
            n = len(piece)
            self.send_window -= n
            st.send_window -= n
            out.append(frame(DATA, 0 if body or trailers is not None
                             else END_STREAM, sid, piece))
        st.pending = None
        self.blocked.pop(sid, None)
        if trailers is not None:
            self._header_frames(sid, trailers, True)

    def _close_sent(self, st):
        """The answer on ``st`` is all sent; a request still arriving is
        cut short (RST_STREAM NO_ERROR, RFC 9113 8.1)."""
        if st.receiving:
            self.out.append(frame(RST_STREAM, 0, st.sid,
                                  _U32.pack(NO_ERROR)))
        self._close(st)

    def _unblock(self):
        for st in list(self.blocked.values()):
            if self.send_window <= 0:
                return
            body, trailers = st.pending
            self._send(st, body, trailers)
            if st.pending is None:
                self._close_sent(st)

    def flush(self):
        out = self.out
        if out and self.transport is not None:
            data = b"".join(out)
            out.clear()
            self.write(data)

    # -- the end ---------------------------------------------------------

    def fail(self, code):
        """A connection error: GOAWAY ``code``, then the close."""
        if self.dead:
            return
        self.out.append(frame(GOAWAY, 0, 0, _GOAWAY.pack(self.last_sid,
                                                         code)))
        self.dead = True
        self.flush()
        self.transport.loseConnection()

    def shutdown(self):
        """Close gracefully: GOAWAY (NO_ERROR) naming the last stream
        taken, the answers under way sent, then the close."""
        if self.dead:
            return
        if not self.going:
            self.going = True
            self.out.append(frame(GOAWAY, 0, 0, _GOAWAY.pack(
                self.last_sid, NO_ERROR)))
        for st in list(self.streams.values()):
            if st.receiving:
                self._reset(st.sid, CANCEL)
        if not self._answering():
            self.dead = True
            self.flush()
            self.transport.loseConnection()
            return
        self.flush()
        if self.abandon is None:
            self.abandon = self.callLater(self.resource.timeouts.write,
                                          self._abandon)

    def _abandon(self):
        self.abandon = None
        if not self.dead:
            self.dead = True
            self.transport.loseConnection()

    def timeoutConnection(self):
        if self._answering():
            # Answers still to come (within the write timeout): the
            # connection is not idle.
            self.setTimeout(self.idle)
            return
        self.shutdown()

    def connectionLost(self, reason):
        self.dead = True
        self.setTimeout(None)
        if self.deadline is not None and self.deadline.active():
            self.deadline.cancel()
        self.deadline = None
        if self.abandon is not None and self.abandon.active():
            self.abandon.cancel()
        self.abandon = None
        for st in list(self.streams.values()):
            st.pending = None
            self._close(st)
        self.blocked.clear()

    # -- what a subclass says --------------------------------------------

    def _request(self, headers):
        """The object kept for a new stream whose headers are ``headers``
        ((name, value) pairs)."""
        raise NotImplementedError

    def _data(self, st, data):
        """A piece of the request body of ``st``."""

    def _ended(self, st):
        """The request of ``st`` is whole: answer it (``respond``)."""
        raise NotImplementedError

    def _too_large(self, st):
        """The header list of ``st`` is over MAX_HEADER_LIST."""
        self._reset(st.sid, REFUSED_STREAM)

    def _forget(self, req):
        """The stream of ``req`` closed (answered, reset, or the connection
        lost): a pending answer is not wanted any more."""


def _record_writer(transport):
    """Write each answer as its own TLS record, as Go's server does.

    Twisted's TLS transport gathers the writes of a reactor turn into one
    record; dnsperf (2.10) reads one record per readiness event and stalls
    with answers left in OpenSSL's buffer, so the aggregation is bypassed
    here (one SSL_write per answer)."""
    if isinstance(transport, TLSMemoryBIOProtocol):
        return functools.partial(TLSMemoryBIOProtocol.write, transport)
    return transport.write
