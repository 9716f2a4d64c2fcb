"""DNS over HTTPS over HTTP/3 (https3://), as CoreDNS's DoH3 server.

The QUIC side is ``dnsserver.doq``'s (aioquic's state machine on the Twisted
reactor); each connection's streams go through aioquic's HTTP/3 layer,
and each finished request to the listener's ``doh.DoHResource``: the same
rules and statuses as DoH over HTTP/1.1 and HTTP/2 (404 for another path,
400, 500, 200 with Cache-Control), counted in
``coredns_dns_https3_responses_total``.  The chain is told the query came
over UDP, with the QUIC connection's address, as CoreDNS's DoH3 writer
tells it.  Over ``max_connections`` a new connection is closed with
H3_EXCESSIVE_LOAD once its handshake is done.
"""

from aioquic.h3.connection import ErrorCode, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.h3.exceptions import H3Error
from aioquic.quic import events

from corednstw.core import metrics
from corednstw.dnsserver import doh, doq

DEFAULT_MAX_STREAMS = 256
DEFAULT_MAX_CONNECTIONS = 200
#: Request headers beyond this are refused (CoreDNS's MaxHeaderBytes).
MAX_HEADER_BYTES = 16 << 10

RESPONSES = metrics.counter(
    "coredns_dns_https3_responses_total",
    "Counter of DoH3 responses per server and http status code.",
    ("server", "status"))


class _Resource(doh.DoHResource):
    proto = "udp"
    responses = RESPONSES


class DoH3Server(doq.QuicServer):
    """A https3:// listener."""

    alpn = "h3"

    def __init__(self, reactor, mux, tls, timeouts, settings):
        super().__init__(reactor, mux, tls, timeouts, settings)
        self.resource = _Resource(mux, mux.label, timeouts)

    # The listener switches ``mux`` and ``timeouts`` on reload.
    @property
    def mux(self):
        return self._mux

    @mux.setter
    def mux(self, mux):
        self._mux = mux
        if getattr(self, "resource", None) is not None:
            self.resource.mux = mux

    def application(self, conn):
        return _DoH3(conn)

    def count(self, code):
        """QUIC close codes are not counted (only HTTP statuses are, in
        coredns_dns_https3_responses_total)."""


class _DoH3:
    """HTTP/3 on one QUIC connection."""

    EXCESSIVE_LOAD = ErrorCode.H3_EXCESSIVE_LOAD

    def __init__(self, conn):
        self.conn = conn
        self.h3 = None
        self.requests = {}

    def event(self, ev):
        if isinstance(ev, events.ProtocolNegotiated):
            self.h3 = H3Connection(self.conn.qc)
            return
        if self.h3 is None:
            return
        for hev in self.h3.handle_event(ev):
            if isinstance(hev, HeadersReceived):
                self._headers(hev)
            elif isinstance(hev, DataReceived):
                self._data(hev)

    def gone(self):
        self.requests.clear()

    def _headers(self, hev):
        if sum(len(n) + len(v) for n, v in hev.headers) > MAX_HEADER_BYTES:
            self.conn.close(ErrorCode.H3_EXCESSIVE_LOAD)
            return
        self.requests[hev.stream_id] = doh.StreamRequest(hev.headers)
        if hev.stream_ended:
            self._ended(hev.stream_id)

    def _data(self, hev):
        req = self.requests.get(hev.stream_id)
        if req is None:
            return
        req.add(hev.data)
        if hev.stream_ended:
            self._ended(hev.stream_id)

    def _ended(self, sid):
        req = self.requests.pop(sid)

        def reply(status, headers, payload):
            self._reply(sid, status, headers, payload)
        req.ask(self.conn.server.resource, self.conn.client, reply)

    def _reply(self, sid, status, headers, payload):
        conn = self.conn
        if not conn.open:
            return
        try:
            self.h3.send_headers(sid, [(b":status", b"%d" % status),
                                       *headers])
            self.h3.send_data(sid, payload, end_stream=True)
        except (H3Error, ValueError, AssertionError):
            return              # the stream is gone (reset by the client)
        conn.wrote()

    def answer(self, sid, data):
        raise AssertionError("HTTP/3 requests are answered as they end")


def listen_https3(reactor, host, port, mux, timeouts, tls, settings):
    """A DoH3 listener on UDP (host, port); returns (port, server, actual
    port)."""
    return doq.listen_quic(reactor, host, port, mux, timeouts, tls,
                            settings, DoH3Server)
