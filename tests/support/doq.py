"""A raw DNS-over-QUIC client on aioquic's state machine, for what
dnspython's client will not send (a non-zero ID, a bad length prefix)
and to read the server's transport parameters.  Blocking: run it in a
thread."""

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


def exchange(port, payloads, timeout=5.0, server_name="localhost"):
    """Send each payload (raw stream bytes) on its own stream of one
    connection; return a Result once every stream is answered, the
    server closed the connection, or ``timeout`` passed."""
    config = QuicConfiguration(is_client=True, alpn_protocols=["doq"],
                               server_name=server_name)
    config.verify_mode = ssl.CERT_NONE
    qc = QuicConnection(configuration=config)
    res = Result()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.02)
    addr = ("127.0.0.1", port)
    qc.connect(addr, now=time.time())
    deadline = time.time() + timeout
    pending = {}
    try:
        while time.time() < deadline:
            for data, to in qc.datagrams_to_send(now=time.time()):
                sock.sendto(data, to)
            try:
                data, frm = sock.recvfrom(65535)
                qc.receive_datagram(data, frm, now=time.time())
            except socket.timeout:
                at = qc.get_timer()
                if at is not None and at <= time.time():
                    qc.handle_timer(now=time.time())
            if _events(qc, res, pending, payloads):
                break
    finally:
        sock.close()
    return res


def _events(qc, res, pending, payloads):
    """Handle the connection's events; True when there is nothing more
    to wait for."""
    while True:
        ev = qc.next_event()
        if ev is None:
            break
        if isinstance(ev, events.HandshakeCompleted):
            res.handshake = True
            res.max_streams = qc._remote_max_streams_bidi
            for p in payloads:
                sid = qc.get_next_available_stream_id()
                pending[sid] = b""
                qc.send_stream_data(sid, p, end_stream=True)
        elif isinstance(ev, events.StreamDataReceived):
            pending[ev.stream_id] = pending.get(ev.stream_id, b"") + ev.data
            if ev.end_stream:
                res.answers[ev.stream_id] = pending.pop(ev.stream_id)[2:]
        elif isinstance(ev, events.ConnectionTerminated):
            res.closed_with = ev.error_code
            return True
    return res.handshake and not pending


def h3_request(port, method, path, body=b"", timeout=5.0, hold=None):
    """One HTTP/3 request on a new connection (ALPN h3); returns
    (status or None, body, the server's close code or None).  With
    ``hold`` (a threading.Event) the connection stays open, once the
    answer is in, until the event is set."""
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                               server_name="localhost")
    config.verify_mode = ssl.CERT_NONE
    qc = QuicConnection(configuration=config)
    h3 = None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.02)
    qc.connect(("127.0.0.1", port), now=time.time())
    status, out, closed, done = None, b"", None, False
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and closed is None:
            if done and (hold is None or hold.is_set()):
                break
            for data, to in qc.datagrams_to_send(now=time.time()):
                sock.sendto(data, to)
            try:
                data, frm = sock.recvfrom(65535)
                qc.receive_datagram(data, frm, now=time.time())
            except socket.timeout:
                at = qc.get_timer()
                if at is not None and at <= time.time():
                    qc.handle_timer(now=time.time())
            while True:
                ev = qc.next_event()
                if ev is None:
                    break
                if isinstance(ev, events.ConnectionTerminated):
                    closed = ev.error_code
                    break
                if isinstance(ev, events.HandshakeCompleted):
                    h3 = H3Connection(qc)
                    sid = qc.get_next_available_stream_id()
                    h3.send_headers(sid, [
                        (b":method", method), (b":scheme", b"https"),
                        (b":authority", b"localhost"), (b":path", path)],
                        end_stream=not body)
                    if body:
                        h3.send_data(sid, body, end_stream=True)
                    continue
                for hev in h3.handle_event(ev) if h3 else ():
                    if isinstance(hev, HeadersReceived):
                        status = int(dict(hev.headers)[b":status"])
                    elif isinstance(hev, DataReceived):
                        out += hev.data
                    if hev.stream_ended:
                        done = True
        if closed is None:
            qc.close()
            for data, to in qc.datagrams_to_send(now=time.time()):
                sock.sendto(data, to)
    finally:
        sock.close()
    return status, out, closed
