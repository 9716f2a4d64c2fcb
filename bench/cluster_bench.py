#!/usr/bin/env python3
"""CPU microseconds per query of the cluster mix, in process.

    .venv/bin/python bench/cluster_bench.py --kubeconfig FILE
        [--cache "cache 30"] [--queries 100000] [--repeat 3]
        [--profile out.prof] [--cold [--passes 2]] [--gc 700,10,10]
        [--alternate N [--passes 2] [--names 1500]]

Builds bench/compare.py's ``cluster`` workload (kubeadm's Corefile, the
kubernetes plugin against the API server of ``--kubeconfig``), starts its
plugins in process (no listener), waits for the first lists, then feeds
the mix's questions as wire messages straight into the mux, as
bench/chain_bench.py does.  The external names (answered through forward)
are left out: what remains is the kubernetes plugin's answers and, with
``--cache``, the cache's hits and misses (the name set is larger than the
cache, so misses evict).  Prints CPU microseconds per query, the best of
``--repeat`` runs, and the cache's hit rate.

``--cold``: no warm pass; the names are asked ``--passes`` times in
their order from the first lists on, as in one of bench/compare.py's
short rounds of a fresh server (most names asked once or twice, every
first question a first miss of the cache and of kubernetes' kept
answers).  Prints the CPU microseconds per query of each pass and the
time the cyclic garbage collector took in it.

``--alternate N`` (with ``--cache``): N rounds of cold passes without and
with the cache in this one process (see ``alternate``), then the medians
per pass and of the pairs' differences; ``--names`` keeps a small name
set, every pass from empty tables (the first misses' own work).
``--gc``: the collector's thresholds for the passes (0: off).
"""

import argparse
import cProfile
import gc
import os
import sys
import tempfile
import time

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


class GCClock:
    """CPU seconds the cyclic collector takes, and its collections."""

    def __init__(self):
        self.spent = 0.0
        self.runs = [0, 0, 0]
        self.per = [0.0, 0.0, 0.0]
        self._t = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase, info):
        if phase == "start":
            self._t = time.process_time()
        else:
            t = time.process_time() - self._t
            self.spent += t
            self.runs[info["generation"]] += 1
            self.per[info["generation"]] += t

    def take(self):
        out = (self.spent, self.runs, self.per)
        self.spent, self.runs, self.per = 0.0, [0, 0, 0], [0.0, 0.0, 0.0]
        return out


def cold(mux, queries, passes):
    clock = GCClock()
    for i in range(passes):
        clock.take()
        t = run(mux, queries, len(queries))
        spent, runs, per = clock.take()
        print("pass %d: %.2f us/query, collector %.2f us/query "
              "(collections %s, ms %s)"
              % (i + 1, t / len(queries) * 1e6, spent / len(queries) * 1e6,
                 runs, "/".join("%.0f" % (x * 1e3) for x in per)))


def alternate(app, mux, queries, rounds, passes, names=0):
    """Cold passes with the cache and without it (the chain's link to
    the cache swapped), one after the other in this process, ``rounds``
    times, the order swapped every round: before each, kubernetes' kept
    tables start again (as a change of its store makes them), the
    cache's stores are new and what lives is frozen out of the
    collector's walks, as after a server's start.  With ``names``, each
    pass asks only that many names, every pass from empty tables (the
    first misses' own work, with little memory touched)."""
    block = app.config.blocks[0]
    cache = block.plugin("cache")
    before = next(p for p in block.plugins if p.next is cache)
    k8s = block.plugin("kubernetes")
    if names:
        queries = queries[:names]

    def reset():
        k8s.store.version += 1
        k8s.store.cache.clear()
        k8s._fast, k8s._answers, k8s._pieces = ({}, {}), {}, {}
        k8s._fast_version = k8s.store.version
        cache.build()
        gc.collect()
        gc.freeze()

    clock = GCClock()
    out = {True: [], False: []}
    for r in range(rounds):
        for with_cache in ((False, True) if r % 2 == 0 else (True, False)):
            before.next = cache if with_cache else cache.next
            reset()
            figures = []
            for _ in range(passes):
                if names:
                    reset()
                clock.take()
                t = run(mux, queries, len(queries))
                spent = clock.take()[0]
                figures.append((t / len(queries) * 1e6,
                                spent / len(queries) * 1e6))
            out[with_cache].append(figures)
            print("%-8s %s" % ("cache" if with_cache else "no cache",
                                "  ".join("%.2f (gc %.2f)" % f
                                          for f in figures)))
    before.next = cache
    for i in range(passes):
        a = sorted(f[i][0] for f in out[False])
        b = sorted(f[i][0] for f in out[True])
        gaps = sorted(y[i][0] - x[i][0]
                      for x, y in zip(out[False], out[True]))
        print("pass %d medians: no cache %.2f, cache %.2f, difference of "
              "the pairs %.2f (%.2f to %.2f)"
              % (i + 1, a[len(a) // 2], b[len(b) // 2],
                 gaps[len(gaps) // 2], gaps[0], gaps[-1]))
    if names:
        # Every pass starts from empty tables: all of them are alike.
        a = sorted(x[0] for f in out[False] for x in f)
        b = sorted(x[0] for f in out[True] for x in f)
        gaps = sorted(y[0] - x[0] for fx, fy in zip(out[False], out[True])
                      for x, y in zip(fx, fy))
        print("all passes: no cache %.2f, cache %.2f, difference %.2f "
              "(quartiles %.2f to %.2f)"
              % (a[len(a) // 2], b[len(b) // 2], gaps[len(gaps) // 2],
                 gaps[len(gaps) // 4], gaps[3 * len(gaps) // 4]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--cache", default="",
                    help='e.g. "cache 30" (default: no cache)')
    ap.add_argument("--queries", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", help="write cProfile statistics here")
    ap.add_argument("--cold", action="store_true",
                    help="no warm pass: each pass asks every name once")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--alternate", type=int, metavar="N",
                    help="with --cache: N rounds of cold passes, with and "
                    "without the cache, in one process")
    ap.add_argument("--names", type=int, default=0,
                    help="with --alternate: ask only this many names, "
                    "every pass from empty tables")
    ap.add_argument("--gc", help="the collector's thresholds for the "
                    "passes, e.g. 10000,10,10 (0: collector off)")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    app, mux, wl = build(args.kubeconfig, args.cache, work)
    queries = wires(wl)
    if args.gc == "0":
        gc.disable()
    elif args.gc:
        gc.set_threshold(*(int(x) for x in args.gc.split(",")))
    if args.alternate:
        import corednstw
        print(corednstw.__file__)
        print("cluster, cold passes without and with %s, %d names; us per "
              "query (of which the collector)" % (args.cache, len(queries)))
        alternate(app, mux, queries, args.alternate, args.passes,
                  args.names)
        os._exit(0)
    if args.cold:
        print("cluster%s, cold, %d names"
              % (" + " + args.cache if args.cache else "", len(queries)))
        if args.profile:
            cProfile.runctx("cold(mux, queries, args.passes)", globals(),
                            locals(), args.profile)
        else:
            cold(mux, queries, args.passes)
        if args.cache:
            from corednstw.plugins.cache import plugin as cp
            print("cache hits %d of %d requests"
                  % (sum(cp.HITS.values.values()),
                     sum(cp.REQUESTS.values.values())))
        os._exit(0)
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
