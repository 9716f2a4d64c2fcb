#!/usr/bin/env python3
"""CPU microseconds per query of the cluster mix, in process.

    .venv/bin/python bench/cluster_bench.py --kubeconfig FILE
        [--cache "cache 30"] [--queries 100000] [--repeat 3]
        [--profile out.prof]

Builds bench/compare.py's ``cluster`` workload (kubeadm's Corefile, the
kubernetes plugin against the API server of ``--kubeconfig``), starts its
plugins in process (no listener), waits for the first lists, then feeds
the mix's questions as wire messages straight into the mux, as
bench/chain_bench.py does.  The external names (answered through forward)
are left out: what remains is the kubernetes plugin's answers and, with
``--cache``, the cache's hits and misses (the name set is larger than the
cache, so misses evict).  Prints CPU microseconds per query, the best of
``--repeat`` runs, and the cache's hit rate.
"""

import argparse
import cProfile
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chain_bench  # noqa: E402
import compare  # noqa: E402
from chain_bench import run  # noqa: E402

PORTS = {"dns": 53, "metrics": 0, "health": 0, "ready": 0}


def build(kubeconfig, cache, work):
    from twisted.internet import reactor

    from corednstw.service.app import App

    compare.Upstream.start = staticmethod(lambda work, cpu: 9)
    wl = compare.ClusterMix()
    wl.kubeconfig = kubeconfig
    wl.services = 10000
    wl.client_cpu = "1"
    wl.cache = cache
    wl.prepare(work)
    path = os.path.join(work, "Corefile")
    compare.write(path, wl.corefile(PORTS, work))
    app = App(path, dns_port=0)
    d = app.start_in_process()
    done = []
    if d is not None:
        d.addBoth(lambda r: (done.append(r), reactor.stop()))
        reactor.run()
    return app, app.muxes[0], wl


class _Local:
    """The mix's questions without the external names."""

    def __init__(self, wl):
        self.wl = wl

    def queries(self):
        return [(name, rtype) for name, rtype in self.wl.queries()
                if name.rstrip(".").endswith(("cluster.local",
                                              "in-addr.arpa"))]


def wires(wl):
    return chain_bench.wires(_Local(wl))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--cache", default="",
                    help='e.g. "cache 30" (default: no cache)')
    ap.add_argument("--queries", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", help="write cProfile statistics here")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    app, mux, wl = build(args.kubeconfig, args.cache, work)
    queries = wires(wl)
    run(mux, queries, len(queries))       # warm
    times = [run(mux, queries, args.queries) for _ in range(args.repeat)]
    print("cluster%s: %s us/query (%d names, %d x %d)"
          % (" + " + args.cache if args.cache else "",
             " ".join("%.2f" % (t / args.queries * 1e6) for t in times),
             len(queries), args.repeat, args.queries))
    if args.cache:
        from corednstw.plugins.cache import plugin as cp
        print("cache hits %d of %d requests so far"
              % (sum(cp.HITS.values.values()),
                 sum(cp.REQUESTS.values.values())))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(run, mux, queries, args.queries)
        prof.dump_stats(args.profile)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
