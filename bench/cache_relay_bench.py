#!/usr/bin/env python3
"""CPU microseconds of a cache miss answered by an upstream's reply, in
process.

    .venv/bin/python bench/cache_relay_bench.py [--names 20000] [--rounds 7]

A ``cache`` plugin (9,984 entries) in front of a stand-in for forward
that returns, for each of NAMES distinct names, the reply an upstream
sends (one A record, an OPT, the owner compressed to the question):
every query is a miss whose answer the cache reads, stores and sends.
Prints the best and the median of ROUNDS rounds over all the names,
each from an empty cache.
"""

import argparse
import gc
import time

import dns.message
import dns.rrset

from corednstw.core import request as rq
from corednstw.plugins.cache.plugin import Cache


def questions(n):
    reqs, replies = [], {}
    for i in range(n):
        name = "n%d.bench.test." % i
        q = dns.message.make_query(name, "A")
        q.use_edns(0, 0, 1232)
        m = dns.message.make_response(q)
        m.answer.append(dns.rrset.from_text(
            name, 3600, "IN", "A", "10.1.%d.%d" % (i >> 8 & 255, i & 255)))
        req = rq.Request(q.to_wire(), "127.0.0.1", 4000)
        qd, an, ns, ar = req.parse_header()
        req.parse_question(an, ns, ar)
        req.server, req.view = "dns://:53", ""
        reqs.append(req)
        replies[req.qname] = m.to_wire()
    return reqs, replies


class Upstream:
    name = "forward"

    def __init__(self, replies):
        self.replies = replies

    def serve(self, req):
        return rq.RawResponse.prebuilt(self.replies[req.qname], "forward")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    reqs, replies = questions(args.names)
    times = []
    for _ in range(args.rounds):
        c = Cache()
        c.pcap = c.ncap = 9984
        c.build()
        c.next = Upstream(replies)
        gc.collect()
        t = time.process_time()
        for r in reqs:
            c.serve(r)
        times.append((time.process_time() - t) / len(reqs) * 1e6)
    times.sort()
    print("cache miss from an upstream's reply: best %.2f, median %.2f us"
          % (times[0], times[len(times) // 2]))


if __name__ == "__main__":
    main()
