#!/usr/bin/env python3
"""Server CPU per DNS over TLS query under dnsperf ``-m dot``, for one or
more source trees alternated round by round.

    .venv/bin/python bench/dot_cpu_bench.py [--tree DIR ...] [--rounds 3]
        [--seconds 6] [--clients 20] [--outstanding 200] [--whoami]
        [--profile FILE]

Each ``--tree`` is a checkout of this repository (default: this one); the
server runs from it (``PYTHONPATH=DIR``, this venv's packages), pinned to
core 0, with the ``file`` workload of bench/compare.py on ``tls://`` (or
``whoami`` with ``--whoami``); dnsperf runs on core 1.  Per run it prints
the queries completed, QPS and the server's microseconds of user+system
CPU per query (/proc/PID/stat over the run, after a one second warm-up);
then, per tree, the range.  ``--profile FILE`` records the last tree's
last run with py-spy (raw format) instead of timing it alone.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dnsperf_run  # noqa: E402
from compare import FILE_ZONE  # noqa: E402
from transports_bench import certificate  # noqa: E402

QUERIES = ["example.org MX", "ns.example.org A", "mail.example.org A",
           "www.example.org A", "web.example.org AAAA",
           "nothere.example.org A"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def corefile(work, cert, key, dns, tport, whoami):
    body = ("    whoami\n" if whoami else
            "    file %s example.org\n    prometheus 127.0.0.1:0\n"
            % os.path.join(work, "example.org.zone"))
    return (".:%d {\n    bind 127.0.0.1\n%s}\ntls://.:%d {\n"
            "    bind 127.0.0.1\n    tls %s %s\n%s}\n"
            % (dns, body, tport, cert, key, body))


def wait_tls(port, deadline=20.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def run(tree, args, work, cert, key, qpath, profile=None):
    dns, tport = free_port(), free_port()
    path = os.path.join(work, "Corefile")
    with open(path, "w") as f:
        f.write(corefile(work, cert, key, dns, tport, args.whoami))
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = ["taskset", "-c", "0", sys.executable, "-c",
           "import sys; from corednstw.cli import main; "
           "sys.argv[0] = 'coredns'; main()", "-conf", path]
    server = subprocess.Popen(cmd, cwd=work, env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    spy = None
    try:
        wait_tls(tport)
        dnsperf_run.run_dnsperf(tport, qpath, 1, mode="dot",
                                clients=args.clients,
                                outstanding=args.outstanding)
        if profile:
            spy = subprocess.Popen(
                ["py-spy", "record", "-r", "200", "--format", "raw",
                 "-o", profile, "--pid", str(server.pid), "-d",
                 str(args.seconds)], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        t0 = cpu_ticks(server.pid)
        stats, _ = dnsperf_run.run_dnsperf(
            tport, qpath, args.seconds, mode="dot", clients=args.clients,
            outstanding=args.outstanding)
        cpu = (cpu_ticks(server.pid) - t0) / os.sysconf("SC_CLK_TCK")
        if spy is not None:
            spy.wait()
    finally:
        server.terminate()
        server.wait()
    done = stats["completed"]
    return done, stats["qps"], 1e6 * cpu / done if done else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--outstanding", type=int, default=200)
    ap.add_argument("--whoami", action="store_true")
    ap.add_argument("--profile")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in
             (args.tree or [os.path.dirname(HERE)])]
    work = tempfile.mkdtemp(prefix="dotbench")
    try:
        cert, key = certificate(work)
        with open(os.path.join(work, "example.org.zone"), "w") as f:
            f.write(FILE_ZONE)
        qpath = os.path.join(work, "queries")
        with open(qpath, "w") as f:
            f.write("\n".join(QUERIES) + "\n")
        print("start %s, load %s" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                     os.getloadavg()))
        got = {t: [] for t in trees}
        for r in range(args.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for t in order:
                last = r == args.rounds - 1 and t == trees[-1]
                done, qps, us = run(t, args, work, cert, key, qpath,
                                    args.profile if last else None)
                got[t].append(us)
                print("round %d %-30s %8d queries %8.0f QPS %6.1f us CPU"
                      "/query" % (r + 1, t, done, qps, us), flush=True)
        print("end %s, load %s" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                   os.getloadavg()))
        for t in trees:
            v = sorted(got[t])
            print("%-30s us CPU/query median %.1f [%.1f-%.1f]"
                  % (t, v[len(v) // 2], v[0], v[-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
