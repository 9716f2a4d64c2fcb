#!/usr/bin/env python3
"""Server CPU per query of one bench/compare.py workload, corednstw only.

    .venv/bin/python bench/transport_cpu.py doh|doh-h1|grpc|... [--seconds 5]
        [--profile FILE]

Starts corednstw on the workload's Corefile (pinned to core 0), sends
compare.py's load for that workload (dnsperf, or bench/stream_client.py,
on core 1) and prints the queries completed, the server's CPU seconds
(/proc), queries per CPU-second and CPU microseconds per query.  With
``--profile``, py-spy records the server meanwhile (raw format).  To
compare two trees, run it with PYTHONPATH set to the other tree's root
(the server inherits it), alternating the two."""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
import dnsperf_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(compare.WORKLOADS))
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--profile", help="py-spy raw output file")
    a = ap.parse_args()
    args = argparse.Namespace(seconds=a.seconds, client_cpu="1",
                              server_cpu="0", rate=None, probe="python",
                              sample_rate=200.0)
    w = compare.WORKLOADS[a.workload]()
    work = tempfile.mkdtemp(prefix="corednstw-transport-cpu-")
    w.prepare(work)
    ports = {k: compare.free_port()
             for k in ("dns", "metrics", "health", "ready", "tport")}
    proc = compare.start("corednstw", w.corefile(ports, work), work, "0")
    try:
        dnsperf_run.wait_answer(ports["dns"], w.probe)
        if w.transport != "udp":
            compare.wait_transport(w, ports["tport"])
        qpath = os.path.join(work, "queries.txt")
        compare.write(qpath, "".join("%s %s\n" % q for q in w.queries()))
        spy = None
        if a.profile:
            spy = subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "py-spy"),
                 "record", "-r", "200", "--format", "raw", "-o", a.profile,
                 "-d", str(a.seconds), "-p", str(proc.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu0 = compare.cpu_seconds(proc.pid)
        stats = compare.load(w, ports, qpath, args)
        cpu = compare.cpu_seconds(proc.pid) - cpu0
        if spy is not None:
            spy.wait()
        done = stats["completed"]
        print("%s: %d queries, %.2f CPU s, %d per CPU-second, %.1f us per "
              "query" % (a.workload, done, cpu, done / cpu,
                         cpu / done * 1e6))
    finally:
        compare.stop(proc)


if __name__ == "__main__":
    main()
