"""DNS over QUIC (RFC 9250), as CoreDNS's quic:// server.

aioquic is used as a state machine only (``QuicConnection``): datagrams
come from a Twisted UDP port and go to ``receive_datagram``, then the
connection's events are drained, what it wants to send goes out with
``transport.write`` (``datagrams_to_send``), and its one timer
(``get_timer``) is a ``reactor.callLater``.  aioquic's asyncio layer is
not used, so the server keeps Twisted's default epoll reactor: the
asyncio reactor would put every transport, plain UDP included, behind
asyncio's event loop and Twisted's adapter to it, costing each query for
the sake of this one listener, and the sans-I/O connection needs no
event loop at all.

Per RFC 9250 and CoreDNS: ALPN ``doq``; one query per client-initiated
bidirectional stream, as a 2-octet length and the message; the answer
likewise, then the stream's FIN.  As CoreDNS, the query is answered once
its length's worth of bytes is in, without waiting for the client's FIN.
A message with a non-zero ID, an edns-tcp-keepalive option, a length of
0, a FIN before the length's worth of bytes, a message that does not
unpack, or a stream that does not bring its message within the read
timeout of *timeouts*, is a protocol error: the connection is closed
with DOQ_PROTOCOL_ERROR (2).  Queries go through the listener's mux as
UDP queries, since CoreDNS's DoQ writer gives the chain the UDP
addresses of the QUIC connection (``{proto}`` is udp, answers are sized
as for UDP).  ``coredns_dns_quic_responses_total{server, status}``
counts answers (0x0) and connections closed with an error (0x1, 0x2).
Past ``max_connections`` (200, as CoreDNS's DoQ server) a connection is
closed with code 0 once its handshake is done.

Handshakes are bounded too, for a flood of Initials (each would cost a
connection and a TLS handshake, and a spoofed source never finishes
one): past RETRY_AFTER handshakes in progress, a new client is sent a
Retry (RFC 9000 8.1.2) and gets a connection only once it comes back
with the token, proving it receives at its address; past MAX_HANDSHAKES
an Initial is dropped; a handshake not done within the read timeout of
*timeouts* is forgotten.
"""

import hashlib
import hmac
import os
import struct
from collections import deque

from aioquic.buffer import Buffer
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import (
    RETRY_AEAD_KEY_VERSION_1,
    RETRY_AEAD_KEY_VERSION_2,
    RETRY_AEAD_NONCE_VERSION_1,
    RETRY_AEAD_NONCE_VERSION_2,
    QuicPacketType,
    QuicProtocolVersion,
    encode_long_header_first_byte,
    encode_quic_version_negotiation,
    pull_quic_header,
)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from twisted.internet import defer, protocol

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.request import Request
from corednstw.dnsserver import mux as muxlib

#: CoreDNS's defaults for the quic directive (its README says 512
#: workers; its code, which we follow, has 1024) and its DoQ server's
#: connection limit (no directive sets it).
DEFAULT_MAX_STREAMS = 256
DEFAULT_WORKER_POOL = 1024
DEFAULT_MAX_CONNECTIONS = 200
#: RFC 9250's application error codes.
NO_ERROR, INTERNAL_ERROR, PROTOCOL_ERROR = 0, 1, 2
#: A QUIC Initial must be padded to this size (RFC 9000 14.1).
MIN_INITIAL = 1200
#: Handshakes in progress past which a new client must answer a Retry.
RETRY_AFTER = 64
#: Handshakes in progress at most; Initials past it are dropped.
MAX_HANDSHAKES = 512
_EDNS_TCP_KEEPALIVE = 11

RESPONSES = metrics.counter(
    "coredns_dns_quic_responses_total",
    "Counter of DoQ responses per server and QUIC application code.",
    ("server", "status"))

_LEN = struct.Struct("!H")


class Settings:
    """The options of a QUIC listener (the quic and https3 directives):
    ``max_streams`` 0 keeps aioquic's own credit, ``max_connections`` 0
    is no limit."""

    def __init__(self, max_streams=DEFAULT_MAX_STREAMS,
                 worker_pool_size=DEFAULT_WORKER_POOL,
                 max_connections=DEFAULT_MAX_CONNECTIONS):
        self.max_streams = max_streams
        self.worker_pool_size = worker_pool_size
        self.max_connections = max_connections


class QuicServer(protocol.DatagramProtocol):
    """The UDP side of a QUIC listener: routes datagrams to their
    connection by connection ID, and starts connections on Initials.
    What a connection's streams carry is its application's business
    (``_DoQ`` here, ``h3.DoH3`` for https3://)."""

    alpn = "doq"

    def __init__(self, reactor, mux, tls, timeouts, settings):
        self.reactor = reactor
        self.mux = mux
        self.timeouts = timeouts
        self.settings = settings
        self.local = None
        self.conns = {}         # connection ID -> _Connection
        self.admitted = 0       # connections past their handshake
        self.handshakes = 0     # connections not yet past it
        self.retry_after = RETRY_AFTER
        self.max_handshakes = MAX_HANDSHAKES
        self.retry = RetryTokens()
        self.busy = 0           # streams being answered (all connections)
        self.waiting = deque()  # streams waiting for a worker
        self._tls = None
        self.config = None
        self.tls = tls

    # The listener's reload hooks: ``tls`` (as ``creator.tls``), ``mux``,
    # ``timeouts``, ``close_all``.
    @property
    def tls(self):
        return self._tls

    @tls.setter
    def tls(self, tls):
        self._tls = tls
        config = QuicConfiguration(is_client=False,
                                   alpn_protocols=[self.alpn])
        config.load_cert_chain(tls.cert, tls.key)
        config.idle_timeout = self.timeouts.idle
        config.secrets_log_file = tls.keylog
        self.config = config

    def close_all(self):
        """Shut down: every connection is told (CONNECTION_CLOSE) and
        forgotten at once, timers and all."""
        for conn in set(self.conns.values()):
            conn.close(NO_ERROR)
            conn._gone()
        self.waiting.clear()
        return defer.succeed(None)

    # -- datagrams ------------------------------------------------------

    def datagramReceived(self, data, addr):
        try:
            header = pull_quic_header(
                Buffer(data=data),
                host_cid_length=self.config.connection_id_length)
        except ValueError:
            return
        conn = self.conns.get(header.destination_cid)
        if conn is None:
            if (header.version is not None
                    and header.packet_type
                    != QuicPacketType.VERSION_NEGOTIATION
                    and header.version not in self.config.supported_versions):
                self.transport.write(encode_quic_version_negotiation(
                    source_cid=header.destination_cid,
                    destination_cid=header.source_cid,
                    supported_versions=self.config.supported_versions),
                    addr)
                return
            if (header.packet_type != QuicPacketType.INITIAL
                    or len(data) < MIN_INITIAL):
                return
            conn = self._initial(header, addr)
            if conn is None:
                return
        conn.datagram(data, addr)

    def _initial(self, header, addr):
        """A new client's Initial: a connection for it, or None when it is
        sent a Retry (too many handshakes in progress, no token), brings
        a token that is not ours, or finds MAX_HANDSHAKES in progress."""
        retry_cid = None
        original = header.destination_cid
        if header.token:
            original = self.retry.validate(addr, header.destination_cid,
                                           header.token,
                                           self.reactor.seconds())
            if original is None:
                return None
            retry_cid = header.destination_cid
        elif self.handshakes >= self.retry_after:
            source_cid = os.urandom(8)
            token = self.retry.create(addr, header.destination_cid,
                                      source_cid, self.reactor.seconds())
            self.transport.write(retry_packet(
                header.version, source_cid, header.source_cid,
                header.destination_cid, token), addr)
            return None
        if self.handshakes >= self.max_handshakes:
            return None
        return self._accept(header.destination_cid, addr, original,
                            retry_cid)

    def _accept(self, cid, addr, original=None, retry_cid=None):
        qc = QuicConnection(
            configuration=self.config,
            original_destination_connection_id=original or cid,
            retry_source_connection_id=retry_cid)
        if self.settings.max_streams:
            # The streams a client may have open at once (aioquic keeps
            # no setting for it, only this initial credit).
            # ``sent`` too, or aioquic would think the client still has
            # its default 128 and never send MAX_STREAMS.
            limit = qc._local_max_streams_bidi
            limit.value = limit.sent = self.settings.max_streams
        conn = _Connection(self, qc, addr)
        conn.app = self.application(conn)
        conn.cid(cid)
        conn.cid(qc.host_cid)
        self.handshakes += 1
        conn.deadline = self.reactor.callLater(
            self.timeouts.read, conn.handshake_expired)
        return conn

    def application(self, conn):
        return _DoQ(conn)

    def admit(self, conn):
        """Whether a connection whose handshake is done may stay: as
        CoreDNS, connections are counted once accepted (handshake done),
        and one past ``max_connections`` is closed at once."""
        conn.handshake_done()
        limit = self.settings.max_connections
        if limit and self.admitted >= limit:
            return False
        self.admitted += 1
        conn.admitted = True
        return True

    def forget(self, conn):
        conns = self.conns
        for cid in conn.cids:
            if conns.get(cid) is conn:
                del conns[cid]
        conn.cids.clear()

    # -- the worker pool ------------------------------------------------

    def run(self, conn, sid, data):
        """Answer a stream's query now, or once a worker is free (CoreDNS's
        worker_pool_size bounds the streams answered at once)."""
        if self.busy >= self.settings.worker_pool_size:
            self.waiting.append((conn, sid, data))
            return
        self.busy += 1
        conn.answer(sid, data)

    def done(self):
        self.busy -= 1
        while self.waiting and self.busy < self.settings.worker_pool_size:
            conn, sid, data = self.waiting.popleft()
            if conn.open:
                self.busy += 1
                conn.answer(sid, data)

    def count(self, code):
        RESPONSES.inc((self.mux.label, "0x%x" % code))


class _Connection:
    """One QUIC connection: its streams' bytes, the timer, the output."""

    def __init__(self, server, qc, addr):
        self.server = server
        self.qc = qc
        self.addr = addr
        self.client = muxlib.client_address(addr[:2])
        self.app = None
        self.timer = None
        self.open = True
        self.closing = False    # closed by us, not yet terminated
        self.admitted = False   # counted in the server's connections
        self.receiving = False  # handling a datagram's events
        self.cids = set()       # its connection IDs in the server's map
        self.deadline = None    # of the handshake, while in progress

    def cid(self, cid):
        self.server.conns[cid] = self
        self.cids.add(cid)

    def handshake_done(self):
        """No longer counted among the handshakes in progress."""
        deadline = self.deadline
        if deadline is not None:
            self.deadline = None
            self.server.handshakes -= 1
            if deadline.active():
                deadline.cancel()

    def handshake_expired(self):
        """The handshake did not finish within the read timeout (a client
        gone, or a spoofed address that never saw our answer): forget the
        connection without a word."""
        self.deadline = None
        self.server.handshakes -= 1
        self._gone()

    def now(self):
        return self.server.reactor.seconds()

    def datagram(self, data, addr):
        self.addr = addr
        self.receiving = True
        try:
            self.qc.receive_datagram(data, addr, now=self.now())
            self._events()
        finally:
            self.receiving = False
        self.flush()

    def wrote(self):
        """An answer was written: send it now, unless it was written
        while a datagram's events were handled (a synchronous chain),
        when one flush after them sends all the datagram's answers."""
        if not self.receiving:
            self.flush()

    def _events(self):
        qc = self.qc
        conns = self.server.conns
        while True:
            ev = qc.next_event()
            if ev is None:
                return
            if isinstance(ev, events.ConnectionIdIssued):
                self.cid(ev.connection_id)
            elif isinstance(ev, events.ConnectionIdRetired):
                if conns.get(ev.connection_id) is self:
                    del conns[ev.connection_id]
                self.cids.discard(ev.connection_id)
            elif isinstance(ev, events.ConnectionTerminated):
                self._gone()
            elif isinstance(ev, events.HandshakeCompleted):
                if not self.server.admit(self):
                    self.close(self.app.EXCESSIVE_LOAD,
                               "too many connections")
            elif self.open and not self.closing:
                self.app.event(ev)

    def answer(self, sid, data):
        self.app.answer(sid, data)

    def close(self, code, reason=""):
        if not self.open or self.closing:
            return
        self.closing = True
        self.qc.close(error_code=code, reason_phrase=reason)
        if code != NO_ERROR:
            self.server.count(code)
        self.flush()

    def flush(self):
        """Send what the connection has to send; set its timer."""
        qc = self.qc
        now = self.now()
        self._send(qc.datagrams_to_send(now=now))
        limit = qc._local_max_streams_bidi
        if (limit.value != limit.sent
                and limit.sent - limit.used < limit.value - limit.sent):
            # Streams the last call found finished gave their credit
            # back, but aioquic writes MAX_STREAMS before it looks at
            # the streams: without a second call the client would wait
            # for a packet the server has no other reason to send.
            self._send(qc.datagrams_to_send(now=now))
        at = qc.get_timer()
        timer = self.timer
        if at is None or not self.open:
            if timer is not None and timer.active():
                timer.cancel()
            self.timer = None
        elif timer is not None and timer.active():
            if timer.getTime() != at:
                timer.reset(max(0.0, at - now))
        else:
            self.timer = self.server.reactor.callLater(
                max(0.0, at - now), self._expired)

    def _send(self, datagrams):
        transport = self.server.transport
        if transport is not None:
            for data, addr in datagrams:
                transport.write(data, addr)

    def _expired(self):
        self.timer = None
        self.qc.handle_timer(now=self.now())
        self._events()
        if self.open:
            self.flush()

    def _gone(self):
        if not self.open:
            return
        self.open = False
        self.handshake_done()
        if self.admitted:
            self.admitted = False
            self.server.admitted -= 1
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        self.app.gone()
        self.server.forget(self)


class _DoQ:
    """RFC 9250 on one connection: a query per stream, length-prefixed;
    the answer, then the stream's FIN."""

    EXCESSIVE_LOAD = NO_ERROR       # CoreDNS: "too many connections", 0

    def __init__(self, conn):
        self.conn = conn
        self.streams = {}       # stream id -> bytearray, query not all in
        self.timers = {}        # stream id -> its read timeout
        self.early = set()      # answered before the client's FIN

    def event(self, ev):
        if isinstance(ev, events.StreamDataReceived):
            self._data(ev)
        elif isinstance(ev, events.StreamReset):
            self._drop(ev.stream_id)
            self.early.discard(ev.stream_id)

    def gone(self):
        for timer in self.timers.values():
            if timer.active():
                timer.cancel()
        self.timers.clear()
        self.streams.clear()
        self.early.clear()

    def _data(self, ev):
        sid = ev.stream_id
        buf = self.streams.get(sid)
        if buf is None:
            if sid in self.early:       # the rest of an answered stream
                if ev.end_stream:
                    self.early.discard(sid)
                return
            buf = ev.data               # most often the whole query
        else:
            buf += ev.data
        size = _LEN.unpack_from(buf)[0] + 2 if len(buf) >= 2 else 0
        if size == 2:                   # a length of 0
            self.conn.close(PROTOCOL_ERROR)
        elif size and len(buf) >= size:
            self._drop(sid)
            if not ev.end_stream:
                self.early.add(sid)
            self._query(sid, bytes(buf[2:size]))
        elif ev.end_stream:             # FIN before the whole message
            self.conn.close(PROTOCOL_ERROR)
        elif sid not in self.streams:
            self.streams[sid] = bytearray(buf)
            server = self.conn.server
            self.timers[sid] = server.reactor.callLater(
                server.timeouts.read, self._stalled, sid)

    def _drop(self, sid):
        """Forget a stream's partial query and its read timeout."""
        if self.streams.pop(sid, None) is not None:
            timer = self.timers.pop(sid)
            if timer.active():
                timer.cancel()

    def _stalled(self, sid):
        """A stream did not bring its query within the read timeout:
        CoreDNS's read deadline fails the read, a protocol error."""
        self.timers.pop(sid, None)
        if self.streams.pop(sid, None) is not None:
            self.conn.close(PROTOCOL_ERROR)

    def _query(self, sid, data):
        if not _valid(data):
            self.conn.close(PROTOCOL_ERROR)
            return
        self.conn.server.run(self.conn, sid, data)

    def answer(self, sid, data):
        """Run one query through the mux; the answer ends the stream."""
        conn = self.conn
        server = conn.server
        done = []

        def send(wire):
            if done:
                return
            done.append(True)
            server.done()
            if not conn.open:
                return
            server.count(NO_ERROR)
            try:
                conn.qc.send_stream_data(sid, _LEN.pack(len(wire)) + wire,
                                         end_stream=True)
            except (ValueError, AssertionError):
                return          # the client reset the stream meanwhile
            conn.wrote()

        host, port = conn.client
        server.mux.handle(data, host, port, "udp", server.local, send)


class RetryTokens:
    """The tokens of Retry packets: the original destination connection
    ID and the time, authenticated (with a key of the process)
    together with the client's address and the Retry's source connection
    ID, to which the client must send its next Initial (RFC 9000 8.1.2,
    17.2.5).  Valid for TOKEN_LIFETIME seconds: clients answer a Retry at
    once.  A keyed BLAKE2b MAC rather than aioquic's encrypted token,
    which costs several times as much under a flood, for a secrecy the
    token does not need."""

    TOKEN_LIFETIME = 30.0
    _MAC = 16

    def __init__(self):
        self._key = os.urandom(32)

    def _mac(self, addr, retry_cid, body):
        bound = b"%s|%d|%s|" % (addr[0].encode(), addr[1], retry_cid)
        return hashlib.blake2b(bound + body, key=self._key,
                               digest_size=self._MAC).digest()

    def create(self, addr, original_cid, retry_cid, now):
        body = (struct.pack("!QB", int(now * 1000), len(original_cid))
                + original_cid)
        return body + self._mac(addr, retry_cid, body)

    def validate(self, addr, retry_cid, token, now):
        """The original destination connection ID of a valid token, else
        None."""
        body, mac = token[:-self._MAC], token[-self._MAC:]
        if len(body) < 9 or not hmac.compare_digest(
                mac, self._mac(addr, retry_cid, body)):
            return None
        issued, size = struct.unpack_from("!QB", body)
        if (len(body) != 9 + size
                or not 0 <= now - issued / 1000 <= self.TOKEN_LIFETIME):
            return None
        return body[9:]


#: The Retry Integrity Tag's cipher and nonce per QUIC version (RFC 9001
#: 5.8, RFC 9369 3.3.3), made once (aioquic makes the cipher per packet).
_RETRY_AEAD = {
    QuicProtocolVersion.VERSION_1: (AESGCM(RETRY_AEAD_KEY_VERSION_1),
                                    RETRY_AEAD_NONCE_VERSION_1),
    QuicProtocolVersion.VERSION_2: (AESGCM(RETRY_AEAD_KEY_VERSION_2),
                                    RETRY_AEAD_NONCE_VERSION_2),
}


def retry_packet(version, source_cid, destination_cid, original_cid,
                 token):
    """A Retry packet (RFC 9000 17.2.5) with its integrity tag."""
    packet = (struct.pack("!BI", encode_long_header_first_byte(
        version, QuicPacketType.RETRY, 0), version)
              + bytes((len(destination_cid),)) + destination_cid
              + bytes((len(source_cid),)) + source_cid + token)
    aead, nonce = _RETRY_AEAD.get(
        version, _RETRY_AEAD[QuicProtocolVersion.VERSION_1])
    return packet + aead.encrypt(
        nonce, b"", bytes((len(original_cid),)) + original_cid + packet)


def _valid(data):
    """Whether a stream's DNS message is one RFC 9250 (4.3.3) lets a
    server answer, as CoreDNS checks it: it unpacks, has ID 0 and no
    edns-tcp-keepalive option."""
    if len(data) < 12 or _LEN.unpack_from(data)[0] != 0:
        return False
    req = Request(data)
    try:
        req.parse_header()
        req.parse_question(*struct.unpack_from("!HHH", data, 6))
        edns = req.edns
    except (w.FormatError, struct.error, IndexError, ValueError):
        return False
    return edns is None or not any(o[0] == _EDNS_TCP_KEEPALIVE
                                   for o in edns.options)


def listen_quic(reactor, host, port, mux, timeouts, tls, settings,
                server_class=QuicServer):
    """A QUIC listener (DoQ, or ``server_class``'s) on UDP (host, port);
    returns (port, server, actual port)."""
    server = server_class(reactor, mux, tls, timeouts, settings)
    listening = reactor.listenUDP(port, server, interface=host or "",
                                  maxPacketSize=65535)
    actual = listening.getHost().port
    server.local = (host, actual)
    return listening, server, actual
