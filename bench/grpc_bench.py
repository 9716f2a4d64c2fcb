#!/usr/bin/env python3
"""Server CPU per query over grpc:// next to plain UDP, as a ratio.

    .venv/bin/python bench/grpc_bench.py [--reference PATH]
        [--queries 5000] [--rounds 3]

One Corefile serves whoami on ``dns://`` and ``grpc://`` (h2c).  Each
round starts corednstw (and, with ``--reference``, the CoreDNS binary on
the same Corefile) pinned to core 0, then a client loop on core 1 asks
``--queries`` questions one after the other over UDP (a connected
socket) and the same number with grpcio's unary call on one channel.
The server's CPU time (/proc, all threads) divided by the queries gives
microseconds per query; every answer is checked to be NOERROR.  A
sequential loop keeps the figure independent of how far a transport's
concurrency goes: it is the cost of one query, not a throughput.
"""

import argparse
import os
import socket
import sys
import tempfile
import time

import dns.message
import grpc

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import cpu_seconds, start, stop  # noqa: E402
from dnsperf_run import free_port, wait_answer  # noqa: E402

from corednstw.dnsserver.grpcdns import (  # noqa: E402
    METHOD,
    decode_packet,
    encode_packet,
)

COREFILE = """.:%d {
    whoami
}
grpc://.:%d {
    whoami
}
"""


def udp_asker(port, wire):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", port))

    def ask():
        s.send(wire)
        return s.recv(4096)
    return ask, s.close


def grpc_asker(port, wire):
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    call = channel.unary_unary(METHOD.decode(),
                               request_serializer=encode_packet,
                               response_deserializer=decode_packet)
    return (lambda: call(wire, timeout=5)), channel.close


def per_query(pid, ask, n):
    """Server CPU µs per query and the loop's queries per second."""
    answer = ask()      # the first call opens the connection
    c0, t0 = cpu_seconds(pid), time.monotonic()
    for _ in range(n):
        answer = ask()
        if len(answer) < 12 or answer[3] & 0xF:
            raise SystemExit("bad answer: %r" % answer)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    return (c1 - c0) / n * 1e6, n / (t1 - t0)


def measure(server, work, n):
    dport, gport = free_port(), free_port()
    proc = start(server, COREFILE % (dport, gport), work, "0")
    try:
        wait_answer(dport)
        wire = dns.message.make_query("example.org.", "A").to_wire()
        out = {}
        for name, maker, port in (("udp", udp_asker, dport),
                                  ("grpc", grpc_asker, gport)):
            ask, close = maker(port, wire)
            try:
                out[name] = per_query(proc.pid, ask, n)
            finally:
                close()
        return out
    finally:
        stop(proc)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--reference")
    p.add_argument("--queries", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {1})
    names = ["corednstw"] + ([args.reference] if args.reference else [])
    with tempfile.TemporaryDirectory() as work:
        for rnd in range(args.rounds):
            for server in names:
                r = measure(server, work, args.queries)
                label = os.path.basename(server)
                for t in ("udp", "grpc"):
                    print("round %d %-10s %-4s %6.1f us CPU/query "
                          "%7.0f q/s" % ((rnd, label, t) + r[t]))
                print("round %d %-10s grpc/udp CPU %.1fx" % (
                    rnd, label, r["grpc"][0] / r["udp"][0]))


if __name__ == "__main__":
    main()
