"""file: answers from a zone file under dnsperf.

    .venv/bin/python bench/file_bench.py [--seconds 10] [--runs 2]

A zone of 1,000 A records (plus MX, CNAME and a wildcard); dnsperf asks
hits, NXDOMAINs and NODATAs; a sample of answers is checked for the right
address, AA and the SOA in negative answers.
"""

import os
import sys

import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402

ZONE = ["$ORIGIN example.org.", "$TTL 3600",
        "@ IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 300",
        "@ IN NS ns", "ns IN A 192.0.2.1", "@ IN MX 10 mail",
        "mail IN A 192.0.2.2",
        "www IN CNAME host1", "*.wild IN A 192.0.2.3"]
ZONE += ["host%d IN A 10.%d.%d.%d" % (i, i // 65536, (i // 256) % 256, i % 256)
         for i in range(1000)]

QUERIES = (["host%d.example.org A" % i for i in range(1000)]
           + ["nothere%d.example.org A" % i for i in range(100)]
           + ["host%d.example.org AAAA" % i for i in range(100)]
           + ["www.example.org A", "example.org MX", "x.wild.example.org A"])


def corefile(port, mport):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "example.org.zone")
    with open(path, "w") as f:
        f.write("\n".join(ZONE) + "\n")
    return (".:%d {\n    file %s example.org\n    prometheus 127.0.0.1:%d\n}\n"
            % (port, path, mport))


def check(port):
    bad = 0
    for i in range(0, 1000, 5):
        q = dns.message.make_query("Host%d.example.org." % i, "A")
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
        want = "10.%d.%d.%d" % (i // 65536, (i // 256) % 256, i % 256)
        if (r.rcode() != 0 or not r.flags & 0x400 or len(r.answer) != 1
                or r.answer[0][0].address != want
                or str(r.answer[0].name) != "host%d.example.org." % i):
            bad += 1
    for name, rtype, rcode in (("nothere.example.org.", "A", 3),
                               ("host1.example.org.", "AAAA", 0)):
        r = dns.query.udp(dns.message.make_query(name, rtype), "127.0.0.1",
                          port=port, timeout=2)
        if (r.rcode() != rcode or r.answer or len(r.authority) != 1
                or r.authority[0].rdtype != 6):
            bad += 1
    return bad


def run():
    sys.exit(dnsperf_run.main(sys.argv[1:], check=check, corefile=corefile,
                              queries=QUERIES, name="file",
                              all_noerror=False))


if __name__ == "__main__":
    run()
