"""rrl (contrib/rrl): its cost per query, in process (no sockets).

    .venv/bin/python bench/rrl_bench.py [--number 200000]

The rrl plugin's ``serve`` is timed with a stand-in for the rest of the
chain that hands back a ready answer; the stand-in's own time is
subtracted, so the figure is what rrl adds to a query.  Cases: clients
under their limit (one account; 1,000 clients of 1,000 /24s asking 10
names each; an NXDOMAIN in wire form, as forward and cache hand it over,
whose account name is read from the authority section), and a client
over it (the answer dropped).  Target: under 2 us per query while the
client is under its limit.
"""

import argparse
import os
import sys
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

import dns.message  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rrset  # noqa: E402
from twisted.internet import task  # noqa: E402

from corednstw.core import dnswire as w  # noqa: E402
from corednstw.core.request import (  # noqa: E402
    RawResponse,
    Request,
    Response,
    make_query,
)
from corednstw.service.app import App  # noqa: E402


def plugin(body):
    app = App(None, reactor=task.Clock(), dns_port=0,
              text=".:0 {\n%s\n}\n" % body)
    app.config = app.load()
    rrl = app.config.blocks[0].plugin("rrl")
    if rrl is None:
        sys.exit("rrl is not installed: pip install ./contrib/rrl")
    rrl.reactor = task.Clock()
    rrl.start()
    return rrl


def request(client, name):
    req = Request(make_query(name, w.A, msgid=1), client, 5300, "udp")
    req.parse_question(*req.parse_header()[1:])
    return req


class Fixed:
    """The rest of the chain: the same answer every time."""

    def __init__(self, resp):
        self.resp = resp

    def serve(self, req):
        return self.resp


def answer():
    rr = w.RR("www.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))
    return Response(0, [rr], aa=True, plugin="file")


def nxdomain(req):
    """An upstream's NXDOMAIN as forward hands it on: its SOA's owner
    compressed into the question."""
    q = dns.message.from_wire(req.data)
    m = dns.message.make_response(q)
    m.set_rcode(dns.rcode.NXDOMAIN)
    m.authority.append(dns.rrset.from_text(
        "example.org.", 60, "IN", "SOA",
        "ns.example.org. h.example.org. 1 2 3 4 5"))
    return RawResponse.prebuilt(m.to_wire(), "forward")


def cost(rrl, reqs, resp, number):
    """Microseconds rrl adds per query, over ``reqs`` in turn."""
    rrl.next = nxt = Fixed(resp)
    n = len(reqs)
    state = [0]

    def one():
        i = state[0]
        state[0] = i + 1 if i + 1 < n else 0
        return rrl.serve(reqs[i])

    def base():
        i = state[0]
        state[0] = i + 1 if i + 1 < n else 0
        return nxt.serve(reqs[i])

    one()
    # CPU time of this process: on a shared machine, time spent waiting
    # for a core is not rrl's.
    clock = time.process_time
    with_rrl = min(timeit.repeat(one, number=number, repeat=5,
                                 timer=clock)) / number
    without = min(timeit.repeat(base, number=number, repeat=5,
                                timer=clock)) / number
    return (with_rrl - without) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--number", type=int, default=200000)
    n = ap.parse_args().number
    fast = "rrl {\n responses-per-second 100000000\n}"
    one = [request("192.0.2.1", "www.example.org.")]
    many = [request("10.%d.%d.7" % (c // 256, c % 256),
                    "n%d.example.org." % k)
            for c in range(1000) for k in range(10)]
    rows = [
        ("under limit: one client, one name", plugin(fast), one,
         answer()),
        ("under limit: 1,000 /24s x 10 names", plugin(fast), many,
         answer()),
        ("under limit: NXDOMAIN in wire form", plugin(fast), one,
         nxdomain(one[0])),
    ]
    slow = plugin("rrl {\n responses-per-second 1\n}")
    cost(slow, one, answer(), 10)          # the account goes negative
    rows.append(("over limit: dropped", slow, one, answer()))
    print("%-42s %s" % ("case", "us/query added by rrl"))
    for name, rrl, reqs, resp in rows:
        print("%-42s %.2f" % (name, cost(rrl, reqs, resp, n)))


if __name__ == "__main__":
    main()
