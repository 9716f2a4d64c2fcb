#!/usr/bin/env python3
"""Per-query cost of the rewrite plugin, measured in-process (no sockets).

    .venv/bin/python bench/rewrite_bench.py [--number 200000]

The plugin is set up from Corefile lines and linked to a stub that answers
every query with one ready-made A record, so the figures are the plugin's
own work.  Prints microseconds per query for:

- the stub alone (the baseline every other line includes), and with the
  answer encoded (what the matching cases include besides the rewrite),
- a name rule that does not match (the cost every other query pays),
- a type rule that does not match,
- an exact name rule that matches (new Request, answer rewritten back),
- a regex name rule with ``answer auto`` that matches.
"""

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from corednstw.core import dnswire as w  # noqa: E402
from corednstw.core.directive import Directive  # noqa: E402
from corednstw.core.request import Request, Response, make_query  # noqa
from corednstw.plugins import rewrite  # noqa: E402


class _Block:
    plugins = ()


class _Stub:
    """The rest of the chain: one A record for whatever name is asked."""

    rdata = w.a_rdata("192.0.2.1")

    def serve(self, req):
        return Response(answer=[w.RR(req.name, w.A, 300, self.rdata)],
                        aa=True)


def plugin(line):
    """A Rewrite plugin for one ``rewrite`` line, linked to the stub."""
    args = line.split()
    d = Directive("rewrite", args[1:], [], "bench", 1)
    p = rewrite.setup(d, _Block())
    p.next = _Stub()
    return p


def request(name):
    """A parsed query, as the server hands it to the chain."""
    req = Request(make_query(name, w.A, msgid=1, edns=1232))
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req


def per_query(fn, number):
    """Best of five runs, in microseconds per call."""
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=200000)
    args = ap.parse_args()
    n = args.number
    stub = _Stub()
    other = request("www.example.org")
    cases = [
        ("stub alone (baseline)", lambda: stub.serve(other)),
    ]
    miss = plugin("rewrite name foo.example.com foo.default.svc.cluster.local")
    cases.append(("name rule, no match", lambda: miss.serve(other)))
    tmiss = plugin("rewrite type ANY HINFO")
    cases.append(("type rule, no match", lambda: tmiss.serve(other)))
    hit_req = request("foo.example.com")
    cases.append(("exact name rule, match + answer back",
                  lambda: miss.serve(hit_req).finish(hit_req)))
    cases.append(("stub alone + encode (baseline of matches)",
                  lambda: stub.serve(hit_req).finish(hit_req)))
    rx = plugin(r"rewrite name regex (.*)\.example\.com {1}.svc.local "
                "answer auto")
    cases.append(("regex name rule + answer auto, match",
                  lambda: rx.serve(hit_req).finish(hit_req)))
    base = None
    for label, fn in cases:
        us = per_query(fn, n if "match +" not in label else n // 10)
        if base is None:
            base = us
            print("%-42s %7.3f us/query" % (label, us))
        else:
            print("%-42s %7.3f us/query (%+.3f over the stub)"
                  % (label, us, us - base))


if __name__ == "__main__":
    main()
