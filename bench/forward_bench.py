#!/usr/bin/env python3
"""Forwarding throughput of one corednstw process, measured with dnsperf.

    .venv/bin/python bench/forward_bench.py [--seconds 10] [--runs 3]
        [--upstream unbound|file] [--names 100] [--proto udp|tcp]
        [--profile out.prof]

``twistd -n coredns`` with only ``forward`` (no cache: every query goes
upstream) is pinned to core 0; the upstream (unbound with a local zone, or
a second corednstw serving the same names from a zone file with ``file``)
and dnsperf (``-c 50 -T 1 -q 500``) share core 1.  Afterwards the run is
checked: no query lost, every answer NOERROR, every query counted in
coredns_dns_requests_total, and a sample of answers compared with the zone
(address, the client's ID and question case, the upstream's RA).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import dns.flags
import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402

TWISTD = dnsperf_run.TWISTD


def address(i):
    return "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)


def start_unbound(tmp, port, names, core):
    zone = "".join('    local-data: "n%d.bench.test. 3600 IN A %s"\n'
                   % (i, address(i)) for i in range(names))
    conf = os.path.join(tmp, "unbound.conf")
    with open(conf, "w") as fh:
        fh.write("""server:
    interface: 127.0.0.1@{port}
    port: {port}
    do-ip6: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{dir}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    access-control: 127.0.0.0/8 allow
    so-rcvbuf: 8m
    so-sndbuf: 8m
    incoming-num-tcp: 1024
    module-config: "iterator"
    local-zone: "bench.test." static
{zone}""".format(port=port, dir=tmp, zone=zone))
    unbound = shutil.which("unbound") or "/usr/sbin/unbound"
    return subprocess.Popen(["taskset", "-c", core, unbound, "-d", "-p", "-c",
                             conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def start_file_upstream(tmp, port, names, core):
    d = os.path.join(tmp, "upstream")
    os.makedirs(d)
    with open(os.path.join(d, "bench.test.zone"), "w") as fh:
        fh.write("$ORIGIN bench.test.\n$TTL 3600\n"
                 "@ IN SOA ns admin 1 7200 3600 1209600 300\n@ IN NS ns\n"
                 "ns IN A 192.0.2.1\n")
        fh.write("".join("n%d IN A %s\n" % (i, address(i))
                         for i in range(names)))
    text = ".:%d {\n    file bench.test.zone bench.test\n}\n" % port
    with open(os.path.join(d, "Corefile"), "w") as fh:
        fh.write(text)
    return subprocess.Popen(
        ["taskset", "-c", core, TWISTD, "-n", "--pidfile=", "coredns", "-q",
         "-c", os.path.join(d, "Corefile")], cwd=d,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def check(port, names, ra):
    """Sampled answers against the zone; returns the number of bad ones.
    ``ra``: the upstream is a resolver (RA must come back)."""
    bad = 0
    for i in range(0, names, max(1, names // 20)):
        name = "N%d.Bench.test." % i
        q = dns.message.make_query(name, "A")
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=5)
        got = [rd.to_text() for rr in r.answer for rd in rr]
        if (r.id != q.id or r.rcode() != 0 or got != [address(i)]
                or str(r.question[0].name) != name
                or ra != bool(r.flags & dns.flags.RA)):
            print("wrong answer for %s:\n%s" % (name, r))
            bad += 1
    q = dns.message.make_query("nothere.bench.test.", "A")
    r = dns.query.udp(q, "127.0.0.1", port=port, timeout=5)
    if r.rcode() != 3 or r.answer:
        print("wrong answer for nothere.bench.test.:\n%s" % r)
        bad += 1
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--names", type=int, default=100)
    ap.add_argument("--upstream", choices=("unbound", "file"),
                    default="unbound")
    ap.add_argument("--proto", choices=("udp", "tcp"), default="udp",
                    help="transport from forward to the upstream")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--profile", help="run the server under cProfile")
    args = ap.parse_args()
    for tool in ("dnsperf", "taskset"):
        if not shutil.which(tool):
            raise SystemExit("%s is not installed" % tool)

    tmp = tempfile.mkdtemp(prefix="forward-bench-")
    procs = []
    server = None
    ok = True
    try:
        up = dnsperf_run.free_port()
        start = start_unbound if args.upstream == "unbound" else \
            start_file_upstream
        procs.append(start(tmp, up, args.names, args.client_cpu))
        dnsperf_run.wait_answer(up, "n0.bench.test.")

        port = dnsperf_run.free_port()
        mport = dnsperf_run.free_port()
        opts = " {\n        force_tcp\n    }" if args.proto == "tcp" else ""
        text = (".:%d {\n    forward . 127.0.0.1:%d%s\n"
                "    prometheus 127.0.0.1:%d\n}\n" % (port, up, opts, mport))
        with open(os.path.join(tmp, "Corefile"), "w") as fh:
            fh.write(text)
        cmd = [TWISTD, "-n", "--pidfile="]
        if args.profile:
            cmd += ["--profile", os.path.abspath(args.profile), "--profiler",
                    "cprofile", "--savestats"]
        cmd += ["coredns", "-q", "-c", os.path.join(tmp, "Corefile")]
        server = subprocess.Popen(["taskset", "-c", args.server_cpu] + cmd,
                                  cwd=tmp, stdout=subprocess.DEVNULL)
        procs.append(server)
        dnsperf_run.wait_answer(port, "n0.bench.test.")

        qfile = os.path.join(tmp, "queries")
        with open(qfile, "w") as fh:
            fh.write("".join("n%d.bench.test. A\n" % i
                             for i in range(args.names)))
        url = "http://127.0.0.1:%d/metrics" % mport
        before = dnsperf_run.requests_total(dnsperf_run.scrape(url))
        results = []
        for _ in range(args.runs):
            stats, raw = dnsperf_run.run_dnsperf(port, qfile, args.seconds,
                                                 args.client_cpu)
            results.append(stats)
            codes = re.search(r"Response codes:\s+(.*)", raw)
            stats["codes"] = codes.group(1) if codes else "?"
        text = dnsperf_run.scrape(url)
        counted = dnsperf_run.requests_total(text) - before
        for line in text.splitlines():
            if line.startswith(("coredns_dns_responses_total{",
                                "coredns_proxy_request_duration_seconds_count",
                                "coredns_proxy_conn_cache")):
                print("  " + line)
        bad = check(port, args.names, args.upstream == "unbound")
        sent = sum(r["sent"] for r in results)
        for r in results:
            print("forward (%s upstream, %s): %.0f QPS, %d completed, %d "
                  "lost, avg latency %.3f ms" % (
                      args.upstream, args.proto, r["qps"], r["completed"],
                      r["lost"], r["latency"] * 1000))
            print("  rcodes: %s" % r["codes"])
            if r["lost"] or r["noerror"] != r["completed"]:
                ok = False
        if counted != sent:
            print("metrics counted %d queries, dnsperf sent %d"
                  % (counted, sent))
            ok = False
        if bad:
            print("%d sampled answers were wrong" % bad)
            ok = False
        print("answers %s" % ("OK" if ok else "WRONG"))
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if p is server and args.profile
                              else signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
