"""Run dnsperf against a real twistd process and check what it answered.

    .venv/bin/python bench/dnsperf_run.py [--corefile FILE] [--queries FILE]
        [--seconds 10] [--check MODULE:FUNCTION]

The server is pinned to core 0 and dnsperf to core 1 (``-c 50 -T 1 -q 500``,
the load every benchmark uses).  Afterwards the script verifies: dnsperf lost
no query, every query is counted in coredns_dns_requests_total (scraped from
the server's /metrics), and a sample of answers is right (a check function
gets the dnspython reply and the question).  Exit status 1 on any mismatch.
Used by bench/whoami_bench.py and the plugin benchmarks.
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")


def free_port():
    """A port free for both UDP and TCP on 127.0.0.1 right now (the one
    helper of every benchmark)."""
    for _ in range(50):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    raise OSError("no free port")


def wait_answer(port, name="bench.example.org.", timeout=60):
    import dns.message
    import dns.query
    q = dns.message.make_query(name, "A")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return dns.query.udp(q, "127.0.0.1", port=port, timeout=0.5)
        except Exception:
            time.sleep(0.05)
    raise RuntimeError("server did not answer")


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def requests_total(text):
    total = 0.0
    for line in text.splitlines():
        if line.startswith("coredns_dns_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_server(corefile_text, workdir, core="0", env=None):
    path = os.path.join(workdir, "Corefile")
    with open(path, "w") as f:
        f.write(corefile_text)
    cmd = ["taskset", "-c", core, TWISTD, "-n", "--pidfile=", "coredns",
           "-c", path]
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, **(env or {})))


def run_dnsperf(port, queries_path, seconds, core="1", rate=None,
                mode=None, clients=50, outstanding=500):
    """dnsperf's figures; ``rate`` caps it at that many queries per second
    (``-Q``) instead of keeping ``outstanding`` queries outstanding;
    ``mode`` is dnsperf's ``-m`` (udp, tcp, dot, doh).  ``client_cpu``
    is dnsperf's own CPU time (user and system, from its rusage)."""
    cmd = ["taskset", "-c", core, "dnsperf", "-s", "127.0.0.1", "-p",
           str(port), "-d", queries_path, "-c", str(clients), "-T", "1",
           "-q", str(outstanding), "-l", str(seconds)]
    if mode:
        cmd += ["-m", mode]
    if rate:
        cmd += ["-Q", str(int(rate))]
    with tempfile.TemporaryFile("w+") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL,
                                text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        f.seek(0)
        out = f.read()
    stats = {
        "sent": _num(r"Queries sent:\s+(\d+)", out),
        "completed": _num(r"Queries completed:\s+(\d+)", out),
        "lost": _num(r"Queries lost:\s+(\d+)", out),
        "qps": _num(r"Queries per second:\s+([\d.]+)", out),
        "latency": _num(r"Average Latency \(s\):\s+([\d.]+)", out),
        "noerror": _num(r"NOERROR (\d+)", out),
        "nxdomain": _num(r"NXDOMAIN (\d+)", out),
        "client_cpu": usage.ru_utime + usage.ru_stime,
    }
    return stats, out


def _num(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else 0.0


def main(argv=None, check=None, corefile=None, queries=None, name="bench",
         all_noerror=True):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="corednstw-bench-")
    port = free_port()
    mport = free_port()
    text = corefile(port, mport)
    qpath = os.path.join(work, "queries.txt")
    with open(qpath, "w") as f:
        f.write("\n".join(queries) + "\n")
    proc = start_server(text, work)
    try:
        wait_answer(port)
        before = requests_total(scrape("http://127.0.0.1:%d/metrics" % mport))
        results = []
        for _ in range(args.runs):
            stats, raw = run_dnsperf(port, qpath, args.seconds)
            results.append(stats)
        after = requests_total(scrape("http://127.0.0.1:%d/metrics" % mport))
        ok = True
        completed = sum(r["completed"] for r in results)
        counted = after - before
        if counted != sum(r["sent"] for r in results):
            # Lost queries were still counted if they reached the server.
            ok = ok and counted >= completed
        for r in results:
            if r["lost"]:
                print("dnsperf lost %d queries" % r["lost"])
                ok = False
            if all_noerror and r["noerror"] != r["completed"]:
                print("not every answer was NOERROR")
                ok = False
        bad = check(port) if check is not None else 0
        if bad:
            print("%d sampled answers were wrong" % bad)
            ok = False
        for r in results:
            print("%s: %.0f QPS, %d completed, %d lost, avg latency %.3f ms"
                  % (name, r["qps"], r["completed"], r["lost"],
                     r["latency"] * 1000))
        print("%s: metrics counted %d queries, dnsperf completed %d"
              % (name, counted, completed))
        print("%s: answers %s" % (name, "OK" if ok else "WRONG"))
        return 0 if ok else 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
