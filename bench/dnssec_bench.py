#!/usr/bin/env python3
"""What DNSSEC costs: on-the-fly signing per query, and zone signing.

    .venv/bin/python bench/dnssec_bench.py [--queries 20000]
        [--records 10000] [--algorithm 13]

Part one builds ``dnssec`` in front of ``file`` without sockets (queries
go straight into the block mux, as tests' util.Direct does) and times
the same A query four ways: without DO (nothing signed), with DO once
the signature cache is warm, with DO through ``file`` alone (the same
answer unsigned, EDNS0 included), and with DO against an empty cache
(every answer signed anew: each query asks another name, so the black
lie is signed too).  It prints microseconds per query and the ratios of
the cached signed answer to the unsigned ones.

Part two signs a zone of RECORDS A records with the sign plugin's
Signer and prints the records signed per second (and RRSIGs made).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import dns.message  # noqa: E402
from twisted.internet import task  # noqa: E402

from corednstw.core import logger  # noqa: E402
from corednstw.engines.dnssec import keys  # noqa: E402
from corednstw.plugins.sign.signer import Signer  # noqa: E402
from corednstw.service.app import App  # noqa: E402

ZONE = """\
$TTL 300
$ORIGIN example.org.
@   IN SOA ns.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
    IN NS  ns.example.org.
ns  IN A   192.0.2.53
www IN A   192.0.2.80
"""


class _Quiet:
    def write(self, s):
        pass

    def flush(self):
        pass


def build(directory, alg, sign=True):
    """The mux of ``example.org { dnssec; file }`` and its dnssec
    (``sign`` False: ``file`` alone, and None)."""
    key = keys.generate("example.org", alg)
    base = keys.write_files(key, directory)
    db = os.path.join(directory, "db.example.org")
    with open(db, "w") as f:
        f.write(ZONE)
    corefile = os.path.join(directory, "Corefile")
    with open(corefile, "w") as f:
        f.write("example.org:0 {\n%s file %s {\n  reload 0\n }\n}\n" % (
            " dnssec {\n  key file %s\n }\n" % base if sign else "", db))
    app = App(corefile, reactor=task.Clock(), dns_port=0)
    app.config = cfg = app.load()
    mux = next(iter(app.build_muxes(cfg).values()))
    plugins = [p for p in cfg.plugins() if p.name == "dnssec"]
    return mux, (plugins[0] if plugins else None)


def per_query(mux, wires, rounds):
    """Microseconds per query, the best of ``rounds`` passes."""
    out = []
    sink = out.append
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        for wire in wires:
            mux.handle(wire, "127.0.0.1", 40000, "udp", None, sink)
        took = (time.perf_counter() - start) / len(wires) * 1e6
        best = took if best is None else min(best, took)
        out.clear()
    return best


def query(name, do):
    return dns.message.make_query(name, "A", want_dnssec=do).to_wire()


def bench_queries(n, alg):
    d = tempfile.mkdtemp(prefix="dnssec-bench-")
    try:
        mux, plugin = build(d, alg)
        plain = [query("www.example.org", False)] * n
        signed = [query("www.example.org", True)] * n
        mux.handle(signed[0], "127.0.0.1", 40000, "udp", None,
                   lambda r: None)      # warm the signature cache
        unsigned_us = per_query(mux, plain, 5)
        signed_us = per_query(mux, signed, 5)
        bare, _ = build(d, alg, sign=False)
        bare_do_us = per_query(bare, signed, 5)
        fresh = [query("n%d.example.org" % i, True)
                 for i in range(min(n, 2000))]
        plugin.cache.items.clear()
        miss_us = per_query(mux, fresh, 1)
    finally:
        shutil.rmtree(d, True)
    print("A query, unsigned (no DO):        %7.1f us/query" % unsigned_us)
    print("A query, signed, cache warm (DO): %7.1f us/query" % signed_us)
    print("A query, file alone (DO):         %7.1f us/query" % bare_do_us)
    print("ratio signed/unsigned, no DO:     %7.2f" % (signed_us
                                                    / unsigned_us))
    print("ratio signed/unsigned, both DO:   %7.2f" % (signed_us
                                                    / bare_do_us))
    print("NXDOMAIN, signed anew (DO):       %7.1f us/query" % miss_us)


def bench_signing(records, alg):
    d = tempfile.mkdtemp(prefix="sign-bench-")
    try:
        key = keys.generate("example.org", alg)
        db = os.path.join(d, "db.example.org")
        with open(db, "w") as f:
            f.write(ZONE)
            for i in range(records):
                f.write("h%d IN A 10.%d.%d.%d\n" % (
                    i, i >> 16 & 255, i >> 8 & 255, i & 255))
        signer = Signer(db, "example.org.", [key], d)
        start = time.perf_counter()
        signed = signer.sign(time.time())
        took = time.perf_counter() - start
        start = time.perf_counter()
        signer.write(signed)
        wrote = time.perf_counter() - start
    finally:
        shutil.rmtree(d, True)
    sigs = sum(rr.rtype == 46 for rr in signed.records)
    total = records + 4
    print("zone of %d records signed in %.2f s: %.0f records/s "
          "(%d RRSIGs, %.0f signatures/s); written in %.2f s"
          % (total, took, total / took, sigs, sigs / took, wrote))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--algorithm", type=int, default=keys.ECDSAP256SHA256)
    args = ap.parse_args()
    logger.out = _Quiet()
    print("algorithm %d (%s)" % (args.algorithm,
                                 keys.ALGORITHMS[args.algorithm]))
    bench_queries(args.queries, args.algorithm)
    bench_signing(args.records, args.algorithm)


if __name__ == "__main__":
    main()
