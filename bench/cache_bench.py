#!/usr/bin/env python3
"""Cache-hit throughput of one corednstw process, measured with dnsperf.

    .venv/bin/python bench/cache_bench.py [--seconds 10] [--names 100]
        [--server-cpu 0] [--client-cpu 1] [--profile out.prof]

Starts unbound (the upstream, a local zone of NAMES A records) and
``twistd -n coredns`` with ``cache`` in front of ``forward``, the server
pinned to one core and dnsperf (``-c 50 -T 1 -q 500``) to another with
taskset.  The cache is warmed first, so the run measures cache hits.  The
answers are checked: dnsperf must see only NOERROR, and a sample of names
is queried and compared with the zone.  Prints the QPS.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward_bench  # noqa: E402
from dnsperf_run import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


address = forward_bench.address


def wait_answer(port, name, timeout=20.0):
    deadline = time.time() + timeout
    q = dns.message.make_query(name, "A")
    while time.time() < deadline:
        try:
            return dns.query.udp(q, "127.0.0.1", port=port, timeout=0.5)
        except Exception:
            time.sleep(0.1)
    raise SystemExit("no answer from 127.0.0.1:%d" % port)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--names", type=int, default=100)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--profile", help="run the server under cProfile")
    args = ap.parse_args()
    for tool in ("unbound", "dnsperf", "taskset"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            raise SystemExit("%s is not installed" % tool)

    tmp = tempfile.mkdtemp(prefix="cache-bench-")
    procs = []
    try:
        up = free_port()
        procs.append(forward_bench.start_unbound(tmp, up, args.names,
                                                 args.client_cpu))
        wait_answer(up, "n0.bench.test.")

        port = free_port()
        with open(os.path.join(tmp, "Corefile"), "w") as fh:
            fh.write(".:%d {\n    cache\n    forward . 127.0.0.1:%d\n}\n"
                     % (port, up))
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        cmd = [twistd, "-n", "--pidfile=", "coredns", "-q", "-c",
               os.path.join(tmp, "Corefile")]
        if args.profile:
            cmd = [twistd, "-n", "--pidfile=", "--profile", args.profile,
                   "--profiler", "cprofile", "--savestats", "coredns", "-q",
                   "-c", os.path.join(tmp, "Corefile")]
        server = subprocess.Popen(["taskset", "-c", args.server_cpu] + cmd,
                                  cwd=tmp, stdout=subprocess.DEVNULL)
        procs.append(server)
        wait_answer(port, "n0.bench.test.")

        names = ["n%d.bench.test." % i for i in range(args.names)]
        for n in names:          # warm the cache
            wait_answer(port, n)
        qfile = os.path.join(tmp, "queries")
        with open(qfile, "w") as fh:
            fh.write("".join("%s A\n" % n for n in names))
        out = subprocess.run(
            ["taskset", "-c", args.client_cpu, "dnsperf", "-s", "127.0.0.1",
             "-p", str(port), "-d", qfile, "-c", "50", "-T", "1", "-q", "500",
             "-l", str(args.seconds)],
            capture_output=True, text=True, check=True).stdout
        qps = float(re.search(r"Queries per second:\s+([\d.]+)", out).group(1))
        line = re.search(r"Response codes:\s+(.*)", out).group(1)
        codes = dict(re.findall(r"([A-Z]+) \d+ \(([\d.]+)%\)", line))
        lost = re.search(r"Queries lost:\s+(\d+)", out).group(1)
        # verify a sample of answers
        bad = 0
        for i in range(0, args.names, max(1, args.names // 10)):
            m = wait_answer(port, names[i])
            got = [rd.to_text() for rr in m.answer for rd in rr]
            if got != [address(i)] or not m.flags & 0x0400:
                bad += 1
        print(out)
        print("rcodes: %s, lost: %s, sample mismatches: %d"
              % (codes, lost, bad))
        print("cache-hit QPS: %.0f" % qps)
        if codes.get("NOERROR") != "100.00" or bad:
            raise SystemExit("wrong answers")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if p is procs[-1] else
                              signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
