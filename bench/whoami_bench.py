"""Core budget: a block with whoami and prometheus, under dnsperf.

    .venv/bin/python bench/whoami_bench.py [--seconds 10] [--runs 3]

Target: >= 45,000 QPS on one core with every query counted.
Every sampled answer must carry the client's address and port.
"""

import os
import sys

import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402

COREFILE = """.:%d {
    whoami
    prometheus 127.0.0.1:%d
}
"""

QUERIES = ["host%d.example.org A" % i for i in range(1000)] + [
    "example.org AAAA", "srv.example.org SRV", "example.org MX"]


def corefile(port, mport):
    return COREFILE % (port, mport)


def check(port):
    """Ask 200 names and verify each answer is whoami's, for this client."""
    bad = 0
    for i in range(200):
        q = dns.message.make_query("Check%d.Example.org." % i, "A")
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
        add = {rrset.rdtype: rrset for rrset in r.additional}
        a = add.get(1)
        srv = add.get(33)
        if (r.rcode() != 0 or a is None or srv is None
                or str(a.name) != "Check%d.Example.org." % i
                or a[0].address != "127.0.0.1"
                or str(srv.name) != "_udp.Check%d.Example.org." % i
                or srv[0].port == 0):
            bad += 1
    return bad


if __name__ == "__main__":
    sys.exit(dnsperf_run.main(sys.argv[1:], check=check, corefile=corefile,
                              queries=QUERIES, name="whoami+prometheus"))
