#!/usr/bin/env python3
"""What ``autopath @kubernetes`` saves a pod with ``ndots:5``, in process.

    .venv/bin/python bench/autopath_bench.py [--names 500] [--rounds 30]

No sockets: queries go straight into the server's block mux, as the
tests' ``util.Direct`` does, so the figures are the server's own work.
The kubernetes store is filled directly (one namespace of services and a
client pod at 10.244.0.7), the host's search list is ``corp.internal``,
and templates answer the names outside the cluster.

A pod resolving ``host.example.com`` with ``ndots:5`` and the search path
``podns.svc.cluster.local svc.cluster.local cluster.local corp.internal``
sends five queries, four of them NXDOMAIN, without autopath.  With it the
pod sends the first one only and the server walks the rest.  Printed: µs
of server time per name resolved, both ways, for external names, for
services of another namespace (two queries without autopath) and of the
pod's own namespace (one query either way).
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from corednstw.core import dnswire as w  # noqa: E402
from corednstw.core.request import make_query  # noqa: E402
from corednstw.plugins.kubernetes import records as rec  # noqa: E402
from corednstw.plugins.kubernetes import store as st  # noqa: E402
from corednstw.service.app import App  # noqa: E402

CLIENT = "10.244.0.7"
SEARCH = ["podns.svc.cluster.local.", "svc.cluster.local.",
          "cluster.local.", "corp.internal.", ""]

COREFILE = """.:0 {
%s    kubernetes cluster.local {
        endpoint http://127.0.0.1:1
        pods verified
    }
    template IN A example.com {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
    template ANY ANY corp.internal {
        rcode NXDOMAIN
    }
}
"""


def build(autopath):
    """A mux of the Corefile, its kubernetes store filled by hand."""
    d = tempfile.mkdtemp(prefix="autopath-bench-")
    path = os.path.join(d, "Corefile")
    with open(path, "w") as f:
        f.write(COREFILE % ("    autopath @kubernetes\n" if autopath
                            else ""))
    app = App(path, dns_port=0)
    app.config = cfg = app.load()
    mux = next(iter(app.build_muxes(cfg).values()))
    block = cfg.blocks[0]
    k = block.plugin("kubernetes")
    k.store = fill(k.make_store())
    k.autopath_search = ["corp.internal."]
    if autopath:
        block.plugin("autopath").start()
    return mux


def fill(store, services=200):
    """Namespaces podns and other, ``services`` services in each, the
    client pod."""
    def obj(name, ns, ip):
        return {"metadata": {"name": name, "namespace": ns,
                             "resourceVersion": "1"},
                "spec": {"type": "ClusterIP", "clusterIP": ip,
                         "clusterIPs": [ip],
                         "ports": [{"name": "http", "protocol": "TCP",
                                    "port": 80}]}}
    lists = {
        st.NAMESPACES: [rec.namespace({"metadata": {"name": n,
                                                    "resourceVersion": "1"}})
                        for n in ("podns", "other")],
        st.SERVICES: [rec.service(obj("svc%d" % i, ns, "10.%d.%d.%d" % (
            j, i >> 8, i & 255))) for j, ns in enumerate(("podns", "other"))
            for i in range(services)],
        st.SLICES: [],
        st.PODS: [rec.pod({"metadata": {"name": "client", "namespace":
                                        "podns", "resourceVersion": "1"},
                           "status": {"podIP": CLIENT}})],
    }
    for kind in store.kinds:
        store.begin_list(kind)
        store.apply(kind, [("ADDED", r) for r in lists.get(kind, ())])
        store.end_list(kind)
    return store


def tries(name, autopath):
    """The names a ndots:5 client sends until one is not NXDOMAIN."""
    first = name + "." + SEARCH[0]
    if autopath:
        return [first]
    return [name + "." + s if s else name + "." for s in SEARCH]


def check(mux, names, autopath):
    """Every name resolves to an answer in the tries given."""
    for name in names:
        out = []
        for q in tries(name, autopath):
            out = []
            mux.handle(make_query(q, w.A), CLIENT, 40000, "udp", None,
                       out.append)
            if out and (out[0][3] & 0xF) != w.NXDOMAIN:
                break
        if not out or out[0][3] & 0xF or out[0][7] == 0:
            raise SystemExit("no answer for %s (autopath %s)"
                             % (name, autopath))


def wires(names, autopath, answered_at):
    """The query bytes a client sends for each name: its tries up to the
    one that gets the answer (``answered_at``: index in SEARCH)."""
    out = []
    for name in names:
        qs = tries(name, autopath)
        if not autopath:
            qs = qs[:answered_at + 1]
        out.append([make_query(q, w.A) for q in qs])
    return out


def timed(mux, batches):
    """µs per name of one pass over ``batches``."""
    handle = mux.handle
    sink = [].append
    t0 = time.perf_counter()
    for batch in batches:
        for q in batch:
            handle(q, CLIENT, 40000, "udp", None, sink)
    return (time.perf_counter() - t0) / len(batches) * 1e6


def compare(plain, walked, without, with_ap, rounds):
    """Best µs per name of each way over ``rounds`` interleaved passes
    (interleaved so that a busy machine slows both alike)."""
    best = [None, None]
    for _ in range(rounds):
        for i, (mux, batches) in enumerate(((plain, without),
                                            (walked, with_ap))):
            dt = timed(mux, batches)
            best[i] = dt if best[i] is None else min(best[i], dt)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    plain, walked = build(False), build(True)
    n = min(a.names, 200)
    kinds = [
        ("external name", ["host%d.example.com" % i
                           for i in range(a.names)], 4),
        ("service, other namespace", ["svc%d.other" % (i % n)
                                      for i in range(a.names)], 1),
        ("service, own namespace", ["svc%d" % (i % n)
                                    for i in range(a.names)], 0),
    ]
    print("µs of server time per name resolved (best of %d, %d names)"
          % (a.rounds, a.names))
    print("%-26s %8s %8s %8s %8s" % ("", "queries", "without", "with",
                                     "ratio"))
    for label, names, at in kinds:
        check(plain, names[:20], False)
        check(walked, names[:20], True)
        without, with_ap = compare(plain, walked, wires(names, False, at),
                                   wires(names, True, at), a.rounds)
        print("%-26s %4d / 1 %8.1f %8.1f %7.2fx" % (
            label, at + 1, without, with_ap, without / with_ap))


if __name__ == "__main__":
    main()
