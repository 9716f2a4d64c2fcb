"""DNS over HTTPS on HTTP/2, straight on the ``h2`` state machine.

twisted.web's HTTP/2 channel builds a full web Request per stream (header
objects, a producer, a priority tree, a write loop run by the reactor),
which cost about half a millisecond per query: DoH served a twentieth of
DoT's rate.  A DoH listener needs much less: one path, GET or POST, a
small answer.  This protocol speaks HTTP/2 with the ``h2`` library that
twisted.web uses too, hands each finished stream to the listener's
``DoHResource.query`` (the same rules, statuses and metrics as HTTP/1.1)
and writes the answer with one HEADERS and one DATA frame.

Deadlines (Go's http.Server ReadTimeout and IdleTimeout, which CoreDNS's
https server takes from *timeouts*): a request must arrive whole within
the read timeout of its HEADERS frame, or its stream is reset (CANCEL);
bytes that do not yet make a whole frame (the preface at the start, the
TLS handshake too under gRPC) must make one within the read timeout,
or the connection ends; and the idle timeout runs from the last request
received, not from the last byte, so that frames that carry no request
(PING, SETTINGS) do not keep a connection open either.  A client
sending a byte now and then thus holds a connection for the read
timeout at most, instead of for good.

Header validation of ``h2`` is off both ways: it cost a tenth of the
time of a query, our own answers' few fixed headers need no checking, and
of a client's headers only ``:method`` and ``:path`` are read (anything
else, valid or not, is ignored; a request without them gets 404/400).
"""

import functools
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from twisted.internet import protocol
from twisted.protocols.policies import TimeoutMixin
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.web import http

from corednstw.dnsserver import doh

_CONFIG = h2.config.H2Configuration(
    client_side=False, header_encoding=None,
    validate_inbound_headers=False,
    validate_outbound_headers=False, normalize_outbound_headers=False)


class DoHH2(protocol.Protocol, TimeoutMixin):
    """One HTTP/2 connection of a DoH listener."""

    #: A request body is kept up to this size (the rest is counted only).
    MAX_BODY = doh.MAX_MESSAGE

    def __init__(self, resource, idle):
        self.resource = resource
        self.idle = idle
        self.conn = h2.connection.H2Connection(config=_CONFIG)
        self.streams = {}
        self.pending = {}       # stream id -> body bytes not yet sent
        self.receiving = {}     # stream id -> its read deadline (or None)
        self.deadline = None    # for bytes short of a whole frame
        self.client = None
        self.write = None

    def connectionMade(self):
        self.write = _record_writer(self.transport)
        peer = self.transport.getPeer()
        self.client = (peer.host, peer.port)
        self.conn.initiate_connection()
        self._flush()
        self.setTimeout(self.idle)
        self.deadline = self._later(self._too_slow)     # the preface

    def dataReceived(self, data):
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._flush()
            self.transport.loseConnection()
            return
        received = False
        receiving = self.receiving
        for event in events:
            kind = type(event)
            if kind is h2.events.RequestReceived:
                receiving[event.stream_id] = None
            elif kind is h2.events.StreamEnded:
                received = True
                self._received(event.stream_id)
            elif kind is h2.events.StreamReset:
                self._received(event.stream_id)
            handler = _HANDLERS.get(kind)
            if handler is not None:
                getattr(self, handler)(event)
        self._flush()
        self._watch(received)

    def _watch(self, received):
        """Set the deadlines after a read: a request received restarts the
        idle timer and the deadline of a partial frame; a stream still
        receiving its request gets its deadline."""
        if received:
            self.resetTimeout()
        if _partial(self.conn.incoming_buffer):
            if self.deadline is None:
                self.deadline = self._later(self._too_slow)
            elif received:
                self.deadline.reset(self.resource.timeouts.read)
        elif self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        receiving = self.receiving
        if receiving:
            for sid, timer in receiving.items():
                if timer is None:
                    receiving[sid] = self._later(self._stream_too_slow, sid)

    def _later(self, fn, *args):
        """A read-timeout deadline."""
        return self.callLater(self.resource.timeouts.read,
                              functools.partial(fn, *args))

    def _received(self, sid):
        timer = self.receiving.pop(sid, None)
        if timer is not None and timer.active():
            timer.cancel()

    def _too_slow(self):
        """A frame (or the preface) did not arrive within the read
        timeout."""
        self.deadline = None
        self.transport.abortConnection()

    def _stream_too_slow(self, sid):
        """A request did not arrive whole within the read timeout."""
        self.receiving.pop(sid, None)
        self.streams.pop(sid, None)
        try:
            self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        except h2.exceptions.H2Error:
            return
        self._flush()

    def connectionLost(self, reason):
        self.setTimeout(None)
        if self.deadline is not None and self.deadline.active():
            self.deadline.cancel()
        self.deadline = None
        for timer in self.receiving.values():
            if timer is not None and timer.active():
                timer.cancel()
        self.receiving.clear()
        for stream in self.streams.values():
            if stream.gone is not None:
                stream.gone()
        self.streams.clear()
        self.pending.clear()

    def timeoutConnection(self):
        if len(self.streams) > len(self.receiving):
            # Answers still to come (within the write timeout): the
            # connection is not idle.
            self.setTimeout(self.idle)
            return
        self.conn.close_connection()
        self._flush()
        self.transport.loseConnection()

    # -- events ---------------------------------------------------------

    def _request(self, event):
        self.streams[event.stream_id] = doh.StreamRequest(event.headers)

    def _data(self, event):
        self.conn.acknowledge_received_data(
            event.flow_controlled_length, event.stream_id)
        stream = self.streams.get(event.stream_id)
        if stream is None:
            return
        stream.add(event.data, self.MAX_BODY)

    def _ended(self, event):
        sid = event.stream_id
        stream = self.streams.get(sid)
        if stream is None:
            return

        def reply(status, headers, payload):
            self._reply(sid, status, headers, payload)
        stream.ask(self.resource, self.client, reply)

    def _reset(self, event):
        stream = self.streams.pop(event.stream_id, None)
        self.pending.pop(event.stream_id, None)
        if stream is not None and stream.gone is not None:
            stream.gone()

    def _window(self, event):
        for sid in list(self.pending):
            self._send_body(sid, *self.pending.pop(sid))
        self._flush()

    def _terminated(self, event):
        self.transport.loseConnection()

    # -- answers --------------------------------------------------------

    def _reply(self, sid, status, headers, payload, trailers=None):
        if self.streams.pop(sid, None) is None:
            return              # reset by the client, or connection gone
        headers = [(b":status", b"%d" % status), *headers,
                   (b"date", _date())]
        try:
            self.conn.send_headers(sid, headers)
            self._send_body(sid, payload, trailers)
        except h2.exceptions.H2Error:
            return              # the stream closed meanwhile
        self._flush()

    def _send_body(self, sid, payload, trailers=None):
        """Send what flow control allows (then ``trailers``, which end the
        stream, if any); the rest waits for a window update."""
        conn = self.conn
        while True:
            room = min(conn.local_flow_control_window(sid),
                       conn.max_outbound_frame_size)
            if room >= len(payload):
                conn.send_data(sid, payload, end_stream=trailers is None)
                if trailers is not None:
                    conn.send_headers(sid, trailers, end_stream=True)
                return
            if room > 0:
                conn.send_data(sid, payload[:room])
                payload = payload[room:]
            else:
                self.pending[sid] = (payload, trailers)
                return

    def _flush(self):
        out = self.conn.data_to_send()
        if out and self.transport is not None:
            self.write(out)


#: The method of DoHH2 (or of a subclass) for each h2 event.
_HANDLERS = {
    h2.events.RequestReceived: "_request",
    h2.events.DataReceived: "_data",
    h2.events.StreamEnded: "_ended",
    h2.events.StreamReset: "_reset",
    h2.events.WindowUpdated: "_window",
    h2.events.ConnectionTerminated: "_terminated",
}

def _partial(buffer):
    """Whether h2's frame buffer holds bytes short of a whole frame (or of
    the preface, or a header block waiting for its CONTINUATION)."""
    return bool(getattr(buffer, "_data", None) or getattr(buffer, "data", b"")
                or getattr(buffer, "_preamble_len", 0)
                or getattr(buffer, "_headers_buffer", None))


def _record_writer(transport):
    """Write each answer as its own TLS record, as Go's server does.

    Twisted's TLS transport gathers the writes of a reactor turn into one
    record; dnsperf (2.10) reads one record per readiness event and stalls
    with answers left in OpenSSL's buffer, so the aggregation is bypassed
    here (one SSL_write per answer)."""
    if isinstance(transport, TLSMemoryBIOProtocol):
        return functools.partial(TLSMemoryBIOProtocol.write, transport)
    return transport.write


_date_cache = [0, b""]


def _date():
    """The Date header Go's server sends, formatted once a second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0] = now
        _date_cache[1] = http.datetimeToString(now)
    return _date_cache[1]
