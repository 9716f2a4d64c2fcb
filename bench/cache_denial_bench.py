#!/usr/bin/env python3
"""CPU microseconds per cache miss that is a denial, in process.

    .venv/bin/python bench/cache_denial_bench.py [--queries 9000]
        [--rounds 3]

A pod's search path sends most external names through three NXDOMAINs
of the cluster zone first; under a name set larger than the cache most
of them are misses.  This builds ``cache 30`` in front of a ``file``
zone for cluster.local (the SOA a kubernetes denial carries) and feeds
``--queries`` distinct search-path names straight into the mux (no
sockets), each one a miss the cache stores, with cache's quick path for
structured denials on and, alternately, off (the general path: encode
the answer, parse the bytes back).  Prints the CPU microseconds per
query of each, per round.
"""

import argparse
import os
import sys
import tempfile
import time

import dns.message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from corednstw.service.app import App  # noqa: E402

ZONE = """$ORIGIN cluster.local.
$TTL 30
@ IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30
@ IN NS ns.dns
ns.dns IN A 10.96.0.10
"""


def build(work):
    """The mux and the cache plugin of ``cache 30`` + ``file``."""
    zone = os.path.join(work, "cluster.local.zone")
    with open(zone, "w") as f:
        f.write(ZONE)
    path = os.path.join(work, "Corefile")
    with open(path, "w") as f:
        f.write(".:0 {\n    cache 30\n    file %s cluster.local\n}\n" % zone)
    app = App(path, dns_port=0)
    app.config = app.load()
    mux = next(iter(app.build_muxes(app.config).values()))
    cache = [p for p in app.config.plugins() if p.name == "cache"][0]
    return mux, cache


def run(mux, cache, n, quick, tag):
    """CPU microseconds per query of ``n`` distinct misses."""
    if quick:
        cache.__dict__.pop("_store_denial", None)
    else:
        cache._store_denial = lambda *a: None
    wires = [dns.message.make_query(
        "name%d-%s.ns%d.svc.cluster.local" % (i, tag, i % 100), "A",
        use_edns=False).to_wire() for i in range(n)]
    out = []
    t = time.process_time()
    for q in wires:
        mux.handle(q, "127.0.0.1", 40000, "udp", None, out.append)
    spent = time.process_time() - t
    if len(out) != n or any(o[3] & 0xF != 3 for o in out):
        raise SystemExit("not every answer was NXDOMAIN")
    return spent / n * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=9000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    mux, cache = build(tempfile.mkdtemp(prefix="cache-denial-bench-"))
    for rnd in range(args.rounds):
        general = run(mux, cache, args.queries, False, "g%d" % rnd)
        quick = run(mux, cache, args.queries, True, "q%d" % rnd)
        print("round %d: general path %.2f us, quick path %.2f us per miss"
              % (rnd + 1, general, quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
