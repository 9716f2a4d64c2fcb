#!/usr/bin/env python3
"""CPU microseconds of the cache's own work per miss and per hit in front
of a plugin that keeps its answers cut (kubernetes), in process.

    .venv/bin/python bench/cache_kept_bench.py [--names 30000] [--rounds 7]

A ``cache`` plugin (9,984 entries) in front of a stand-in for kubernetes
whose ``kept_answer`` hands back, for each of NAMES distinct service
names, the same cut answer kubernetes keeps (one A record, made once
before the rounds): a miss is the cache's key, look-ups, counters, entry,
store (evicting once full) and bytes, and nothing of the plugin behind.
The miss rounds ask every name once from an empty cache, as the first
pass of bench/compare.py's cluster mix does; the hit rounds ask the
first 5,000 names of a filled cache again.  Prints the best and the
median of ROUNDS rounds of each.
"""

import argparse
import gc
import time

import dns.message
from zope.interface import implementer

from corednstw.core import request as rq
from corednstw.core.interfaces import IKeptAnswers
from corednstw.core.plugin import Plugin
from corednstw.plugins.cache.plugin import Cache


def questions(n):
    """Parsed requests for ``n`` service names, as the server makes them."""
    reqs = []
    for i in range(n):
        q = dns.message.make_query(
            "svc%d.ns%d.svc.cluster.local." % (i, i % 100), "A")
        q.id = i & 0xFFFF
        req = rq.Request(q.to_wire(), "127.0.0.1", 4000)
        qd, an, ns, ar = req.parse_header()
        req.parse_question(an, ns, ar)
        req.server, req.view = "dns://:53", ""
        reqs.append(req)
    return reqs


@implementer(IKeptAnswers)
class Kept(Plugin):
    """kubernetes' kept answers without kubernetes: a cut per question."""

    name = "kubernetes"

    def __init__(self, reqs):
        self.cuts = {r.data[12:r.qend]: rq.address_pieces(
            r, [bytes([10, 0, i >> 8 & 255, i & 255])], 30, self.name)
            for i, r in enumerate(reqs)}

    def kept_answer(self, req):
        return self.cuts[req.data[12:req.qend]]

    def keep_answer(self, req, cut):
        pass

    def serve(self, req):
        raise AssertionError("every answer is kept")


def fresh(kept):
    c = Cache()
    c.pcap = c.ncap = 9984
    c.build()
    c.next = kept
    return c


def timed(serve, reqs):
    gc.collect()
    t = time.process_time()
    for r in reqs:
        serve(r)
    return (time.process_time() - t) / len(reqs) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    reqs = questions(args.names)
    kept = Kept(reqs)
    hot = reqs[:5000]
    misses, hits = [], []
    for _ in range(args.rounds):
        c = fresh(kept)
        misses.append(timed(c.serve, reqs))
        c = fresh(kept)
        timed(c.serve, hot)
        hits.append(timed(c.serve, hot))
    for what, times in (("miss", misses), ("hit", hits)):
        times.sort()
        print("cache %s in front of kept answers: best %.2f, median %.2f us"
              % (what, times[0], times[len(times) // 2]))


if __name__ == "__main__":
    main()
