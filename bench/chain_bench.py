#!/usr/bin/env python3
"""Microseconds per query of a whole chain, without sockets or dnsperf.

    .venv/bin/python bench/chain_bench.py [--workload whoami|file|kubeadm
        (each also -noprom)]
        [--queries 200000] [--repeat 5] [--profile out.prof]

Builds the configuration of one of bench/compare.py's workloads (its
Corefile and zone files) and feeds its query list, as wire messages,
straight into the server's mux with a send function that keeps nothing:
what remains is the per-query Python work of the core and the plugins,
without the system calls.  It counts CPU time, not wall time, so that
the load of a shared machine matters little and changes can be measured
to a few percent.  Prints the best of ``--repeat``
runs; ``--profile`` writes cProfile statistics of one more run.
"""

import argparse
import cProfile
import os
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="whoami",
                    choices=[n + suffix for n in ("whoami", "file", "kubeadm")
                             for suffix in ("", "-noprom")])
    ap.add_argument("--queries", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", help="write cProfile statistics here")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="chain-bench-")
    mux = build(compare.WORKLOADS[args.workload](), work)
    queries = wires(compare.WORKLOADS[args.workload]())
    run(mux, queries, len(queries) * 2)           # warm caches
    best = min(run(mux, queries, args.queries) for _ in range(args.repeat))
    print("%s: %.2f us/query (best of %d x %d)"
          % (args.workload, best / args.queries * 1e6, args.repeat,
             args.queries))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(run, mux, queries, args.queries)
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
