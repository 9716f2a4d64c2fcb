#!/usr/bin/env python3
"""Where a start's CPU goes, up to /ready, against a real API server.

    .venv/bin/python bench/start_split.py --apiserver KUBECONFIG [--rounds 5]

``twistd -n coredns`` on kubeadm's Corefile (bench/k8s_bench.py's,
without cache), on the server's one core (``--server-cpu``), started
ROUNDS times; at the first /ready 200 the CPU of each of the process's
threads is read from /proc: the main thread (twistd's and our imports,
the configuration, the store's updates, the reactor) apart from the
threads that read and decode the kubernetes lists.  Prints the median
and range of the time to /ready and of each CPU figure.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_bench  # noqa: E402
from dnsperf_run import free_port  # noqa: E402


def threads_cpu(pid):
    """{thread id: CPU seconds} of the process ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def one_start(corefile, rport, cpu):
    """(seconds to /ready, main thread CPU, other threads' CPU)."""
    t0 = time.monotonic()
    srv = subprocess.Popen(["taskset", "-c", cpu, k8s_bench.TWISTD, "-n",
                            "--pidfile=", "coredns", "-c", corefile],
                           cwd=os.path.dirname(corefile),
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        while k8s_bench.http("http://127.0.0.1:%d/ready" % rport)[0] != 200:
            if srv.poll() is not None:
                sys.exit("server exited")
            time.sleep(0.01)
        took = time.monotonic() - t0
        cpu_by_thread = threads_cpu(srv.pid)
        main = cpu_by_thread.pop(srv.pid)
        return took, main, sum(cpu_by_thread.values())
    finally:
        srv.terminate()
        srv.wait()


def summary(xs):
    return "median %.3f [%.3f-%.3f]" % (statistics.median(xs), min(xs),
                                        max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--apiserver", required=True, metavar="KUBECONFIG")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--server-cpu", default="0")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="start-split-")
    corefile = os.path.join(tmp, "Corefile")
    rport = free_port()
    with open(corefile, "w") as f:
        f.write(k8s_bench.KUBEADM % dict(
            port=free_port(), source="kubeconfig " +
            os.path.abspath(a.apiserver), ready=rport, cache="",
            metrics=free_port(), health=free_port(), upstream=free_port()))
    print("load average: %s" % open("/proc/loadavg").read().strip())
    starts = [one_start(corefile, rport, a.server_cpu)
              for _ in range(a.rounds)]
    print("start -> /ready: %s s" % summary([s[0] for s in starts]))
    print("  CPU of the main thread: %s s" % summary([s[1] for s in starts]))
    print("  CPU of the other threads: %s s"
          % summary([s[2] for s in starts]))
    print("load average: %s" % open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
