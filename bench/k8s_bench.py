"""Benchmark of the kubernetes plugin (not part of the test suite).

10,000 services (every tenth headless, with a 3-endpoint slice) in 100
namespaces on the test API server (a separate process).  Measures:

- time from process start to /ready 200 and to a correct answer for the
  last service;
- peak RSS (VmHWM) over sync, a full query sweep (every service, answers
  checked) and a forced 410 relist;
- QPS of service lookups with dnsperf (-c 50 -T 1 -q 500), the server and
  dnsperf pinned to different cores, every answer's rcode checked.

Run from the repository root:  .venv/bin/python bench/k8s_bench.py
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import dns.message
import dns.rdatatype

from corednstw.plugins.kubernetes.watch import PAGE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
TWISTD = os.path.join(ROOT, ".venv", "bin", "twistd")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dnsperf_run import free_port  # noqa: E402


def expected(i, headless_every=10):
    if i % headless_every == 0:
        base = "10.%d.%d." % (100 + (i >> 16) % 100, (i >> 8) & 255)
        return sorted("%s%d" % (base, (i & 63) * 3 + j + 1) for j in range(3))
    return ["10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255 or 1)]


def ask(sock, port, name):
    q = dns.message.make_query(name, "A")
    sock.sendto(q.to_wire(), ("127.0.0.1", port))
    while True:
        data = sock.recv(4096)
        m = dns.message.from_wire(data)
        if m.id == q.id:
            return m


def addrs(m):
    return sorted(rd.address for rrset in m.answer for rd in rrset
                  if rrset.rdtype == dns.rdatatype.A)


def http(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if
                                 method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def vmhwm(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024


def metric(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all('%s="%s"' % kv in line
                                         for kv in labels.items()):
            total += float(line.split()[-1])
    return total


# kubeadm's default Corefile; forward points at a closed local port (only
# cluster names are asked), so loop's probe fails quietly.
KUBEADM = """.:%(port)d {
    bind 127.0.0.1
    errors
    health 127.0.0.1:%(health)d {
        lameduck 5s
    }
    ready 127.0.0.1:%(ready)d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        endpoint %(url)s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus 127.0.0.1:%(metrics)d
    forward . 127.0.0.1:%(upstream)d {
        max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--kubeadm", action="store_true",
                    help="serve with kubeadm's whole default Corefile "
                         "(errors, health, ready, kubernetes, prometheus, "
                         "forward, cache, loop, reload, loadbalance)")
    a = ap.parse_args()
    n, nns = a.services, a.namespaces
    # This process (probes, the sweep) stays off the server's core.
    os.sched_setaffinity(0, {int(c) for c in a.client_cpu.split(",")})

    api = subprocess.Popen(
        ["taskset", "-c", a.client_cpu, PY, "-m",
         "tests.support.k8s_apiserver",
         "--services", str(n), "--namespaces", str(nns)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    url = api.stdout.readline().strip()
    dport, rport, mport = free_port(), free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="k8s-bench-")
    corefile = os.path.join(tmp, "Corefile")
    with open(corefile, "w") as f:
        if a.kubeadm:
            f.write(KUBEADM % dict(port=dport, url=url, ready=rport,
                                   metrics=mport, health=free_port(),
                                   upstream=free_port()))
        else:
            f.write(".:%d {\n    bind 127.0.0.1\n    kubernetes cluster.local "
                    "{\n        endpoint %s\n    }\n    ready 127.0.0.1:%d\n"
                    "    prometheus 127.0.0.1:%d\n}\n"
                    % (dport, url, rport, mport))
    t0 = time.monotonic()
    srv = subprocess.Popen(["taskset", "-c", a.server_cpu, TWISTD, "-n",
                            "--pidfile=", "coredns", "-c", corefile],
                           cwd=tmp, stdout=subprocess.DEVNULL)
    try:
        while http("http://127.0.0.1:%d/ready" % rport)[0] != 200:
            if srv.poll() is not None:
                sys.exit("server exited")
            time.sleep(0.02)   # a probe every 20 ms: its own cost stays small
        t_ready = time.monotonic() - t0
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(2)
        last = n - 1
        lname = "svc%d.ns%d.svc.cluster.local." % (last, last % nns)
        while addrs(ask(sock, dport, lname)) != expected(last):
            time.sleep(0.005)
        t_answer = time.monotonic() - t0

        bad = 0
        t1 = time.monotonic()
        for i in range(n):
            m = ask(sock, dport,
                    "svc%d.ns%d.svc.cluster.local." % (i, i % nns))
            if addrs(m) != expected(i):
                bad += 1
        sweep = time.monotonic() - t1

        mtext = http("http://127.0.0.1:%d/metrics" % mport)[1]
        lists = metric(mtext, "coredns_kubernetes_rest_client_requests_total",
                       code="200")
        http(url + "/_control/expire", "POST")
        t2 = time.monotonic()
        # A relist: every page of every kind again.
        pages = (n // PAGE + 1) + 1 + 1
        while metric(http("http://127.0.0.1:%d/metrics" % mport)[1],
                     "coredns_kubernetes_rest_client_requests_total",
                     code="200") < lists + pages:
            time.sleep(0.01)
        relist = time.monotonic() - t2
        for i in range(0, n, 97):
            m = ask(sock, dport,
                    "svc%d.ns%d.svc.cluster.local." % (i, i % nns))
            if addrs(m) != expected(i):
                bad += 1
        peak = vmhwm(srv.pid)

        qfile = os.path.join(tmp, "queries")
        with open(qfile, "w") as f:
            for i in range(n):
                if i % 10:
                    f.write("svc%d.ns%d.svc.cluster.local A\n" % (i, i % nns))
        out = subprocess.run(
            ["taskset", "-c", a.client_cpu, "dnsperf", "-s", "127.0.0.1",
             "-p", str(dport), "-d", qfile, "-c", "50", "-T", "1", "-q",
             "500", "-l", str(a.seconds)], capture_output=True, text=True
        ).stdout
        qps = float(re.search(r"Queries per second:\s+([\d.]+)", out).group(1))
        codes = re.search(r"Response codes:\s+(.*)", out).group(1)
        lost = re.search(r"Queries lost:\s+(\d+)", out).group(1)
        print("services: %d (%d headless), namespaces: %d" % (
            n, (n + 9) // 10, nns))
        print("ready after: %.3f s" % t_ready)
        print("last service answered after: %.3f s" % t_answer)
        print("sweep: %d queries in %.2f s, wrong answers: %d" % (
            n, sweep, bad))
        print("forced 410 relist took: %.3f s" % relist)
        print("peak RSS (VmHWM): %.1f MiB" % peak)
        print("dnsperf QPS: %.0f (response codes: %s; lost: %s)" % (
            qps, codes, lost))
    finally:
        srv.terminate()
        api.terminate()
        srv.wait()
        api.wait()


if __name__ == "__main__":
    main()
