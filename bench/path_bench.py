"""CPU time per query through the whole server path, in process.

    .venv/bin/python bench/path_bench.py [--queries 20000] [--rounds 7]

No sockets and no dnsperf: each configuration is built as the server
builds it, and raw queries go into its block mux (parse, route, chain,
encode), as ``tests/support/util.Direct`` does.  The figure is CPU time
(``time.process_time``), best of several rounds, so other processes on a
shared machine move it far less than a QPS figure; run it before and after
a change to see what the change costs.
"""

import argparse
import os
import tempfile
import time

import dns.message
from twisted.internet import reactor

from corednstw.service.app import App

ZONE = """$ORIGIN example.org.
@ 3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 3600
@ 3600 IN NS ns.example.org.
ns 3600 IN A 192.0.2.53
www 3600 IN A 192.0.2.1
www 3600 IN AAAA 2001:db8::1
mail 3600 IN MX 10 www.example.org.
"""

COREFILES = {
    "whoami": ".:0 {\n whoami\n prometheus 127.0.0.1:0\n}\n",
    "file": "example.org:0 {\n file db.example.org\n"
            " prometheus 127.0.0.1:0\n errors\n}\n",
    "kubeadm-like": ".:0 {\n errors\n health 127.0.0.1:0\n"
                    " ready 127.0.0.1:0\n"
                    " file db.example.org example.org\n"
                    " prometheus 127.0.0.1:0\n cache 30\n loop\n reload\n"
                    " loadbalance\n}\n",
}

#: The same six questions as the dnsperf benchmarks: hits, NXDOMAIN, NODATA.
QUESTIONS = [("www.example.org", "A"), ("www.example.org", "AAAA"),
             ("nx.example.org", "A"), ("mail.example.org", "MX"),
             ("example.org", "NS"), ("www.example.org", "TXT")]


def build(text):
    """The block mux of a configuration written to a temporary folder."""
    d = tempfile.mkdtemp(prefix="corednstw-bench-")
    with open(os.path.join(d, "db.example.org"), "w") as f:
        f.write(ZONE)
    with open(os.path.join(d, "Corefile"), "w") as f:
        f.write(text)
    os.chdir(d)
    app = App(os.path.join(d, "Corefile"), reactor=reactor, dns_port=0)
    app.config = app.load()
    muxes = app.build_muxes(app.config)
    app.muxes.extend(muxes.values())
    return next(iter(muxes.values()))


def queries():
    out = []
    for i, (name, rdtype) in enumerate(QUESTIONS):
        m = dns.message.make_query(name, rdtype)
        m.id = i + 1
        out.append(m.to_wire())
    return out


def measure(mux, wires, n, rounds):
    """Best CPU µs per query over ``rounds`` rounds of ``n`` queries."""
    sent = []
    for wire in wires * 10:        # warm caches, compile paths
        mux.handle(wire, "127.0.0.1", 40000, "udp", None, sent.append)
    if len(sent) != len(wires) * 10:
        raise SystemExit("a query went unanswered")
    best = None
    k = len(wires)
    for _ in range(rounds):
        del sent[:]
        t0 = time.process_time()
        for i in range(n):
            mux.handle(wires[i % k], "127.0.0.1", 40000, "udp", None,
                       sent.append)
        us = (time.process_time() - t0) / n * 1e6
        best = us if best is None else min(best, us)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    wires = queries()
    for name, text in COREFILES.items():
        us = measure(build(text), wires, a.queries, a.rounds)
        print("%-14s %6.2f µs CPU per query" % (name, us))


if __name__ == "__main__":
    main()
