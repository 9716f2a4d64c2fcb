#!/usr/bin/env python3
"""CPU per call of the DoH and gRPC listeners' HTTP/2 layer, in process.

    .venv/bin/python bench/http2_bench.py grpc|doh [--calls 5000]
        [--rounds 5]

One server connection (``grpcdns.GrpcH2`` or ``doh_h2.DoHH2``) over an
in-memory transport is fed the bytes an HTTP/2 client (the ``h2``
library) sends for each call: a gRPC Query (grpcio's headers, a
grpc-timeout that changes, the DnsPacket) or a DoH GET (a ``?dns=`` path
that changes every time), each followed by the client's WINDOW_UPDATEs.
The mux answers at once with the query itself, so what is timed is the
HTTP/2 and DoH/gRPC work around the DNS: frames, HPACK, the stream and
the answer's frames.  Prints the best and median CPU microseconds per
call over the rounds.  Run it with PYTHONPATH pointing at another tree
to compare two versions (the listeners' constructor has not changed).
"""

import argparse
import base64
import time

import dns.message
import h2.config
import h2.connection
from twisted.internet import task
from twisted.internet.testing import StringTransport

from corednstw.dnsserver import doh, doh_h2, grpcdns, listener


class Mux:
    """Answers every query at once with itself."""

    inflight = 0
    label = "bench"

    def handle(self, data, host, port, proto, local, send):
        send(data)


def client_bytes(kind, calls):
    """The client's preface and SETTINGS, and the bytes of each call."""
    c = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None))
    c.initiate_connection()
    preface = c.data_to_send()
    q = dns.message.make_query("www.example.org.", "A").to_wire()
    out = []
    for i in range(calls):
        sid = c.get_next_available_stream_id()
        c.outbound_flow_control_window = 1 << 30
        if kind == "grpc":
            c.send_headers(sid, [
                (b":method", b"POST"), (b":scheme", b"http"),
                (b":path", grpcdns.METHOD), (b":authority", b"127.0.0.1:53"),
                (b"te", b"trailers"), (b"content-type", b"application/grpc"),
                (b"user-agent", b"grpc-python-asyncio/1.85 grpc-c/51.0.0"),
                (b"grpc-accept-encoding", b"identity, deflate, gzip"),
                (b"grpc-timeout", b"%dm" % (4999 - i % 50))])
            c.send_data(sid, grpcdns.frame(grpcdns.encode_packet(q)),
                        end_stream=True)
        else:
            one = bytearray(q)
            one[0:2] = (i & 0xFFFF).to_bytes(2, "big")
            path = b"/dns-query?dns=" + base64.urlsafe_b64encode(
                bytes(one)).rstrip(b"=")
            c.send_headers(sid, [
                (b":method", b"GET"), (b":scheme", b"https"),
                (b":path", path), (b":authority", b"127.0.0.1"),
                (b"accept", b"application/dns-message")], end_stream=True)
        c.increment_flow_control_window(100)
        c.increment_flow_control_window(100, sid)
        out.append(c.data_to_send())
    return preface, out


def run(kind, calls):
    """CPU microseconds per call of one connection's ``calls`` calls."""
    transport = StringTransport()
    timeouts = listener.Timeouts()
    if kind == "grpc":
        p = grpcdns.GrpcH2(grpcdns.Service(Mux(), timeouts, 256), 10)
    else:
        p = doh_h2.DoHH2(doh.DoHResource(Mux(), "bench", timeouts), 10)
    p.callLater = task.Clock().callLater
    p.makeConnection(transport)
    preface, chunks = client_bytes(kind, calls)
    p.dataReceived(preface)
    transport.clear()
    t0 = time.process_time()
    for chunk in chunks:
        p.dataReceived(chunk)
    spent = time.process_time() - t0
    if len(transport.value()) < calls * 50:
        raise RuntimeError("the calls were not answered")
    return spent / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("grpc", "doh"))
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    run(a.kind, 500)        # warm: Huffman rows, caches
    got = sorted(run(a.kind, a.calls) for _ in range(a.rounds))
    print("%s: %.1f us per call best, %.1f median (%d x %d calls)"
          % (a.kind, got[0], got[len(got) // 2], a.rounds, a.calls))


if __name__ == "__main__":
    main()
