#!/usr/bin/env python3
"""multisocket: CPU per 1,000 answered queries and memory of the process
group, one process against a supervisor with N workers.

    .venv/bin/python bench/multisocket_bench.py [--workloads whoami,k8s]
        [--modes one,two,shared] [--rate 20000] [--seconds 10]
        [--rounds 3] [--services 10000] [--server-cpus 0]

On a 2-core machine throughput cannot show scaling (dnsperf needs the
other core), so every process of the server is pinned to core 0, dnsperf
to core 1, and dnsperf sends a fixed rate every mode answers in full.
What is compared is the CPU time the whole group spent (the supervisor and
every worker, user and system, from /proc) per 1,000 answered queries:
the price of spreading one load over several processes.  ``--rate 0``
sends without a cap (500 queries outstanding): the server's core is then
busy all the time in every mode, and CPU per query is 1 / QPS.

Modes: ``one``, a single process (no multisocket); ``two``,
``multisocket 2`` with a SO_REUSEPORT socket pair per worker; ``shared``,
``multisocket 2`` with both workers reading one socket pair
(COREDNSTW_MULTISOCKET_SHARED=1).

Workloads: ``whoami``; ``k8s``, the kubernetes plugin over the test API
server holding ``--services`` services (10% headless) in 100 namespaces,
queried by service name.  Memory: the proportional set size (Pss from
/proc/PID/smaps_rollup, shared pages divided among their sharers) and the
RSS, each summed over the group, after the run.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import dnsperf_run  # noqa: E402
from compare import stop  # noqa: E402
from dnsperf_run import free_port, requests_total, scrape  # noqa: E402

SHARED_ENV = "COREDNSTW_MULTISOCKET_SHARED"
STARTED = re.compile(r"worker (\d+) started, pid (\d+)")


def corefile(workload, mode, ports, api_url):
    lines = [".:%d {" % ports["dns"]]
    if mode != "one":
        lines.append("    multisocket 2")
    if workload == "whoami":
        lines.append("    whoami")
    else:
        lines += ["    kubernetes cluster.local {",
                  "        endpoint %s" % api_url, "    }"]
    lines += ["    prometheus 127.0.0.1:%d" % ports["metrics"],
              "    ready 127.0.0.1:%d" % ports["ready"], "}", ""]
    return "\n".join(lines)


def queries(workload, services):
    if workload == "whoami":
        return ["host%d.example.org A" % i for i in range(1000)]
    return ["svc%d.ns%d.svc.cluster.local A" % (i, i % 100)
            for i in range(services) if i % 10]


def probe(workload):
    return ("probe.example.org." if workload == "whoami"
            else "svc1.ns1.svc.cluster.local.")


def group(pid):
    """The server's pid and its children's (the workers)."""
    pids = [pid]
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def memory_mib(pids):
    """(Pss, Rss) summed over ``pids``, in MiB."""
    pss = rss = 0
    for pid in pids:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
    return pss / 1024.0, rss / 1024.0


def wait_ready(proc, rport, workers, limit=120):
    deadline = time.monotonic() + limit
    url = "http://127.0.0.1:%d/ready" % rport
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            scrape(url)
            if len(group(proc.pid)) == workers + 1 or workers == 0:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("server not ready")


def measure(workload, mode, args, api_url, work):
    ports = {k: free_port() for k in ("dns", "metrics", "ready")}
    run_dir = tempfile.mkdtemp(dir=work)
    env = {SHARED_ENV: "1" if mode == "shared" else ""}
    proc = dnsperf_run.start_server(
        corefile(workload, mode, ports, api_url), run_dir,
        core=args.server_cpus,
        env=env)
    try:
        wait_ready(proc, ports["ready"], 0 if mode == "one" else 2)
        dnsperf_run.wait_answer(ports["dns"], probe(workload))
        pids = group(proc.pid)
        qpath = os.path.join(run_dir, "queries.txt")
        with open(qpath, "w") as f:
            f.write("\n".join(queries(workload, args.services)) + "\n")
        murl = "http://127.0.0.1:%d/metrics" % ports["metrics"]
        before = requests_total(scrape(murl))
        cpu = cpu_seconds(pids)
        sup = cpu_seconds(pids[:1])
        stats, _ = dnsperf_run.run_dnsperf(ports["dns"], qpath,
                                           args.seconds, core="1",
                                           rate=args.rate)
        cpu = cpu_seconds(pids) - cpu
        sup = cpu_seconds(pids[:1]) - sup
        counted = requests_total(scrape(murl)) - before
        pss, rss = memory_mib(pids)
    finally:
        stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)
    done = stats["completed"]
    return dict(mode=mode, qps=stats["qps"], lost=stats["lost"],
                noerror=stats["noerror"], completed=done, counted=counted,
                cpu=cpu, per1000=cpu * 1e6 / done if done else 0.0,
                pss=pss, rss=rss, processes=len(pids),
                supervisor=sup if len(pids) > 1 else 0.0)


def api_server(services):
    from tests.support import k8s_apiserver as k8s
    srv = k8s.APIServer()
    k8s.generate(srv, services=services)
    return srv.start()


COLUMNS = ("workload", "mode", "round", "processes", "QPS", "lost",
           "NOERROR", "counted", "CPU s (supervisor)", "CPU ms / 1000",
           "ratio to one", "Pss MiB", "Rss MiB")


def row(workload, rnd, r, base):
    """One table row; the ratio is to the single process of the round."""
    ratio = (r["per1000"] / base["per1000"]
             if base and base["per1000"] else 0.0)
    cells = (workload, r["mode"], rnd + 1, r["processes"],
             "%.0f" % r["qps"], "%d" % r["lost"], "%d" % r["noerror"],
             "%d" % r["counted"], "%.2f (%.2f)" % (r["cpu"], r["supervisor"]),
             "%.1f" % r["per1000"], "%.3f" % ratio, "%.1f" % r["pss"],
             "%.1f" % r["rss"])
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="whoami,k8s")
    ap.add_argument("--modes", default="one,two,shared")
    ap.add_argument("--rate", type=int, default=20000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpus", default="0",
                    help="taskset list for the server's processes")
    ap.add_argument("--services", type=int, default=10000)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="corednstw-msock-")
    api = None
    print("load average at start: %s" % open("/proc/loadavg").read().strip())
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    try:
        for workload in args.workloads.split(","):
            if workload == "k8s" and api is None:
                api = api_server(args.services)
            url = api.url if api is not None else ""
            for rnd in range(args.rounds):
                modes = args.modes.split(",")
                if rnd % 2:
                    modes.reverse()
                rows = [measure(workload, m, args, url, work)
                        for m in modes]
                base = {r["mode"]: r for r in rows}.get("one")
                for r in rows:
                    print(row(workload, rnd, r, base), flush=True)
    finally:
        if api is not None:
            api.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("load average at end: %s" % open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
