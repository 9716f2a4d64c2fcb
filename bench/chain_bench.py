#!/usr/bin/env python3
"""Microseconds per query of a whole chain, without sockets or dnsperf.

    .venv/bin/python bench/chain_bench.py [--workload whoami|file|kubeadm
        (each also -noprom)]
        [--queries 200000] [--repeat 5] [--profile out.prof] [--sockets]

Builds the configuration of one of bench/compare.py's workloads (its
Corefile and zone files) and feeds its query list, as wire messages,
straight into the server's mux with a send function that keeps nothing:
what remains is the per-query Python work of the core and the plugins,
without the system calls.  ``--sockets`` runs the listener's whole UDP path
instead: the queries go over loopback in batches of 64 and the server's
reader (recvmmsg, the mux, sendmmsg) is timed with the thread's CPU
clock, its system calls included, the client's work left out.  It
counts CPU time, not wall time, so that
the load of a shared machine matters little and changes can be measured
to a few percent.  Prints the best of ``--repeat``
runs; ``--profile`` writes cProfile statistics of one more run.
"""

import argparse
import cProfile
import os
import socket
import sys
import tempfile
import time

import dns.message

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

from corednstw.service.app import App  # noqa: E402

PORTS = {"dns": 53, "metrics": 9153, "health": 8080, "ready": 8181}


def build(workload, work):
    """The mux of ``workload``'s configuration (no listener is opened)."""
    workload.prepare(work)
    path = os.path.join(work, "Corefile")
    compare.write(path, workload.corefile(PORTS, work))
    app = App(path, dns_port=0)
    app.config = app.load()
    muxes = app.build_muxes(app.config)
    app.muxes.extend(muxes.values())
    return next(iter(muxes.values()))


def wires(workload):
    """The workload's queries as wire messages, IDs varying."""
    out = []
    for i, (name, rtype) in enumerate(workload.queries()):
        q = dns.message.make_query(name, rtype, use_edns=False)
        q.id = i & 0xFFFF
        out.append(q.to_wire())
    return out


def run(mux, queries, count):
    """Seconds taken by ``count`` queries, cycling through ``queries``."""
    handle = mux.handle
    sent = []
    send = sent.append
    n = len(queries)
    start = time.process_time()
    for i in range(count):
        handle(queries[i % n], "127.0.0.1", 40000, "udp", None, send)
        if len(sent) > 1000:
            sent.clear()
    return time.process_time() - start


def run_sockets(mux, queries, count):
    """CPU seconds of the server side of ``count`` queries sent over
    loopback 64 at a time and read by the UDP listener's reader."""
    from twisted.internet import reactor

    from corednstw.dnsserver import datagram

    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.setblocking(False)
    cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    cli.connect(srv.getsockname())
    proto = datagram.DNSDatagramProtocol(mux, srv.getsockname())
    port = datagram.adopt_udp(reactor, srv.fileno(), socket.AF_INET, proto)
    read = proto.read_batch if proto.batch is not None else port.doRead
    n = len(queries)
    clock = time.thread_time
    spent = 0.0
    done = 0
    try:
        while done < count:
            k = min(64, count - done)
            for j in range(done, done + k):
                cli.send(queries[j % n])
            start = clock()
            read()
            spent += clock() - start
            for _ in range(k):
                cli.recv(65536)
            done += k
    finally:
        port.stopListening()
        cli.close()
        srv.close()
    return spent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="whoami",
                    choices=[n + suffix for n in ("whoami", "file", "kubeadm")
                             for suffix in ("", "-noprom")])
    ap.add_argument("--queries", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", help="write cProfile statistics here")
    ap.add_argument("--sockets", action="store_true",
                    help="through the UDP listener over loopback")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="chain-bench-")
    mux = build(compare.WORKLOADS[args.workload](), work)
    queries = wires(compare.WORKLOADS[args.workload]())
    runner = run_sockets if args.sockets else run
    runner(mux, queries, len(queries) * 2)        # warm caches
    best = min(runner(mux, queries, args.queries)
               for _ in range(args.repeat))
    print("%s%s: %.2f us/query (best of %d x %d)"
          % (args.workload, " (sockets)" if args.sockets else "",
             best / args.queries * 1e6, args.repeat, args.queries))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(runner, mux, queries, args.queries)
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
