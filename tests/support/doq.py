"""A raw DNS-over-QUIC (and HTTP/3) client on aioquic's state machine, for
what dnspython's clients will not send (a non-zero ID, a bad length
prefix, a bad request) and to read the server's transport parameters.
Blocking: run it in a thread.  ``drive`` is also the client loop of
bench/quic_cpu_bench.py."""

import socket
import ssl
import struct
import time

from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


class Result:
    def __init__(self):
        self.answers = {}           # stream id -> bytes (prefix removed)
        self.closed_with = None     # the server's error code, if it closed
        self.max_streams = None     # the server's initial_max_streams_bidi
        self.handshake = False


def prefixed(wire):
    return struct.pack("!H", len(wire)) + wire


def drive(port, alpn, on_event, timeout, close=True):
    """Run one client connection until ``on_event(qc, event)`` returns
    True (it is also asked with None after every read, for conditions
    outside the connection), the server closes it (its error code is
    returned) or ``timeout`` passes; with ``close``, end it cleanly
    ourselves."""
    config = QuicConfiguration(is_client=True, alpn_protocols=alpn,
                               server_name="localhost")
    config.verify_mode = ssl.CERT_NONE
    qc = QuicConnection(configuration=config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.02)
    qc.connect(("127.0.0.1", port), now=time.time())
    deadline = time.time() + timeout
    closed = None
    try:
        while time.time() < deadline and closed is None:
            for data, to in qc.datagrams_to_send(now=time.time()):
                sock.sendto(data, to)
            try:
                data, frm = sock.recvfrom(65535)
                qc.receive_datagram(data, frm, now=time.time())
            except socket.timeout:
                at = qc.get_timer()
                if at is not None and at <= time.time():
                    qc.handle_timer(now=time.time())
            done = False
            while closed is None and not done:
                ev = qc.next_event()
                if ev is None:
                    break
                if isinstance(ev, events.ConnectionTerminated):
                    closed = ev.error_code
                else:
                    done = on_event(qc, ev)
            if done or (closed is None and on_event(qc, None)):
                break
        if closed is None:
            # What is pending goes out (the handshake's last flight, a
            # CONNECTION_CLOSE with ``close``); without ``close`` the
            # connection is left open, as a client gone quiet.
            if close:
                qc.close()
            for data, to in qc.datagrams_to_send(now=time.time()):
                sock.sendto(data, to)
    finally:
        sock.close()
    return closed


def exchange(port, payloads, timeout=5.0, fin=True, overrun=False):
    """Send each payload (raw stream bytes) on its own stream of one DoQ
    connection, ended with a FIN unless ``fin`` is false; a Result once
    every stream is answered, the server closed the connection, or
    ``timeout`` passed.  Streams past the server's credit wait for more;
    with ``overrun`` the payloads go instead on the first stream past
    the credit and on, as a client ignoring the limit would send them."""
    res = Result()
    pending = {}

    def on_event(qc, ev):
        if isinstance(ev, events.HandshakeCompleted):
            res.handshake = True
            res.max_streams = qc._remote_max_streams_bidi
            if overrun:
                sid = 4 * qc._remote_max_streams_bidi - 4
                qc._remote_max_streams_bidi = 1 << 20
            for p in payloads:
                if overrun:
                    sid += 4
                else:
                    sid = qc.get_next_available_stream_id()
                pending[sid] = b""
                qc.send_stream_data(sid, p, end_stream=fin)
        elif isinstance(ev, events.StreamDataReceived):
            pending[ev.stream_id] = pending.get(ev.stream_id, b"") + ev.data
            if ev.end_stream:
                res.answers[ev.stream_id] = pending.pop(ev.stream_id)[2:]
        return res.handshake and not pending

    res.closed_with = drive(port, ["doq"], on_event, timeout, close=False)
    return res


def h3_request(port, method, path, body=b"", timeout=5.0, hold=None):
    """One HTTP/3 request on a new connection (ALPN h3); returns
    (status or None, body, the server's close code or None).  With
    ``hold`` (a threading.Event) the connection stays open, once the
    answer is in, until the event is set."""
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived

    state = {"h3": None, "status": None, "body": b"", "done": False}

    def on_event(qc, ev):
        if isinstance(ev, events.HandshakeCompleted):
            h3 = state["h3"] = H3Connection(qc)
            sid = qc.get_next_available_stream_id()
            h3.send_headers(sid, [
                (b":method", method), (b":scheme", b"https"),
                (b":authority", b"localhost"), (b":path", path)],
                end_stream=not body)
            if body:
                h3.send_data(sid, body, end_stream=True)
        elif state["h3"] is not None:
            for hev in state["h3"].handle_event(ev):
                if isinstance(hev, HeadersReceived):
                    state["status"] = int(dict(hev.headers)[b":status"])
                elif isinstance(hev, DataReceived):
                    state["body"] += hev.data
                if hev.stream_ended:
                    state["done"] = True
        return state["done"] and (hold is None or hold.is_set())

    closed = drive(port, H3_ALPN, on_event, timeout)
    return state["status"], state["body"], closed
