#!/usr/bin/env python3
"""Soak: the kubeadm Corefile under steady load and cluster churn.

    .venv/bin/python bench/soak.py [--minutes 10] [--load 0.8]
        [--services 10000] [--writes 20] [--server-cpu 0] [--client-cpu 1]

Runs, for ``--minutes``:

* corednstw on kubeadm's default Corefile (errors, health, ready,
  kubernetes, prometheus, forward, cache 30, loop, reload, loadbalance),
  pinned to one core, its forward pointed at a second corednstw serving
  whoami (the "internet");
* the test API server (tests/support/k8s_apiserver) in this process with
  ``--services`` services in 100 namespaces (every tenth headless), and a
  churn of ``--writes`` writes per second: a set of 200 services whose
  cluster IP changes, and the endpoint slices of 50 headless ones;
* dnsperf at ``--load`` of the rate measured first with a short
  unthrottled run (``-Q``), 90% Kubernetes names and 10% external ones;
* a sampler asking 20 names a second over UDP and checking each answer:
  a stable service must answer its one address; a churned one an address
  it held within the last 40 s (``cache 30`` and ttl 30 may keep the one
  before); an external name whoami's answer.

Reports the RSS every 30 s, its growth after the first minute (goal
under 5%), dnsperf's queries lost (goal 0), the sampler's wrong answers
(goal 0) and unanswered ones, and the longest reactor stall.
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dns.message
import dns.rcode
import dns.rdatatype

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dnsperf_run import free_port, run_dnsperf, wait_answer  # noqa: E402
from k8s_bench import KUBEADM, TWISTD, expected, max_lateness  # noqa: E402

from tests.support import k8s_apiserver as k8s  # noqa: E402

NS = 100
CHURNED = 200           # services whose cluster IP changes
CHURNED_SLICES = 50     # headless services whose endpoints change
REMEMBER = 40.0         # seconds an old value may still be answered


def cname(i):
    return "svc%d.ns%d.svc.cluster.local." % (i, i % NS)


class Churn(threading.Thread):
    """Writes to the API server at a steady rate; remembers when each
    churned name held which addresses."""

    def __init__(self, api, services, rate, stop):
        super().__init__(daemon=True)
        self.api, self.rate, self.stop = api, rate, stop
        self.writes = 0
        self.lock = threading.Lock()
        plain = [i for i in range(services) if i % 10][:CHURNED]
        headless = [i for i in range(0, services, 10)][:CHURNED_SLICES]
        self.history = {i: [(0.0, expected(i))] for i in plain + headless}
        self.plain, self.headless = plain, headless

    def run(self):
        period = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stop.is_set():
            self.write_one()
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def write_one(self):
        n = self.writes
        self.writes += 1
        if n % 2 == 0:
            i = self.plain[(n // 2) % len(self.plain)]
            ip = "10.250.%d.%d" % ((n >> 8) & 255, n & 255 or 1)
            self.api.update("services", k8s.service(
                "svc%d" % i, "ns%d" % (i % NS), ips=(ip,)))
            value = [ip]
        else:
            i = self.headless[(n // 2) % len(self.headless)]
            ips = ["10.251.%d.%d" % ((n >> 8) & 255, (n & 63) * 3 + j + 1)
                   for j in range(3)]
            self.api.update("endpointslices", k8s.endpoint_slice(
                "svc%d-abcde" % i, "ns%d" % (i % NS), "svc%d" % i,
                [k8s.endpoint([a], target="svc%d-%d" % (i, j))
                 for j, a in enumerate(ips)]))
            value = sorted(ips)
        with self.lock:
            self.history[i].append((time.monotonic(), value))

    def acceptable(self, i):
        """The address sets ``i`` held within the last REMEMBER seconds."""
        now = time.monotonic()
        with self.lock:
            hist = self.history.get(i)
            if hist is None:
                return [expected(i)]
            ok = [v for t, v in hist if now - t < REMEMBER]
            # The value set before that window, if still current then.
            older = [v for t, v in hist if now - t >= REMEMBER]
            return ok + older[-1:]


class Sampler(threading.Thread):
    def __init__(self, port, churn, services, stop, external, rate=20):
        super().__init__(daemon=True)
        self.external = external
        self.port, self.churn, self.stop = port, churn, stop
        self.services, self.rate = services, rate
        self.asked = self.wrong = self.unanswered = 0
        self.examples = []

    def run(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(2)
        rnd = random.Random(7)
        while not self.stop.is_set():
            if self.external and rnd.random() < 0.1:
                self.check_external(sock, rnd.randrange(1000))
            else:
                pick = rnd.random()
                if pick < 0.3:
                    i = rnd.choice(self.churn.plain + self.churn.headless)
                else:
                    i = rnd.randrange(self.services)
                self.check_service(sock, i)
            time.sleep(1.0 / self.rate)

    def ask(self, sock, name):
        self.asked += 1
        q = dns.message.make_query(name, "A")
        sock.sendto(q.to_wire(), ("127.0.0.1", self.port))
        while True:
            try:
                data = sock.recv(65535)
            except socket.timeout:
                self.unanswered += 1
                return None
            m = dns.message.from_wire(data)
            if m.id == q.id:
                return m

    def check_service(self, sock, i):
        m = self.ask(sock, cname(i))
        if m is None:
            return
        got = sorted(rr.address for rrset in m.answer for rr in rrset
                     if rr.rdtype == dns.rdatatype.A)
        if got not in self.churn.acceptable(i):
            self.bad("%s: %s %s" % (cname(i), dns.rcode.to_text(m.rcode()),
                                    got))

    def check_external(self, sock, n):
        m = self.ask(sock, "ext%d.example.com." % n)
        if m is None:
            return
        if m.rcode() != dns.rcode.NOERROR or not m.additional:
            self.bad("ext%d.example.com.: %s" % (
                n, dns.rcode.to_text(m.rcode())))

    def bad(self, what):
        self.wrong += 1
        if len(self.examples) < 5:
            self.examples.append(what)


def lists(api, what):
    """Requests of one sort (list or watch) the API server has had."""
    return sum(api.count(kind, what) for kind in api.objects)


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def dnsperf(port, qfile, seconds, core, rate=None):
    stats, out = run_dnsperf(port, qfile, seconds, core, rate)
    codes = re.search(r"Response codes:\s+(.*)", out)
    stats["codes"] = codes.group(1) if codes else ""
    return stats


def start(corefile_text, work, core, log=None):
    path = os.path.join(work, "Corefile-%d" % free_port())
    with open(path, "w") as f:
        f.write(corefile_text)
    out = open(log, "w") if log else subprocess.DEVNULL
    return subprocess.Popen(["taskset", "-c", core, TWISTD, "-n",
                             "--pidfile=", "coredns", "-c", path],
                            cwd=work, stdout=out, stderr=subprocess.STDOUT)


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--writes", type=float, default=20)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--no-external", dest="external", action="store_false",
                    help="ask only cluster names (no forwarding)")
    ap.add_argument("--log", help="the server's output (default: a "
                    "temporary file, its last lines printed)")
    a = ap.parse_args(argv)
    os.sched_setaffinity(0, {int(c) for c in a.client_cpu.split(",")})
    work = tempfile.mkdtemp(prefix="corednstw-soak-")
    api = k8s.APIServer()
    k8s.generate(api, a.services, NS)
    api.start()
    up_port, port = free_port(), free_port()
    ports = dict(port=port, source="endpoint " + api.url, ready=free_port(),
                 cache="cache 30", metrics=free_port(), health=free_port(),
                 upstream=up_port)
    upstream = start(".:%d {\n    bind 127.0.0.1\n    whoami\n}\n" % up_port,
                     work, a.client_cpu)
    log = a.log or os.path.join(work, "server.log")
    server = start(KUBEADM % ports, work, a.server_cpu, log)
    stop_ev = threading.Event()
    try:
        wait_answer(up_port, "x.example.com.")
        wait_answer(port, cname(a.services - 1))
        max_lateness(ports["metrics"])      # start-up is not the soak
        qfile = os.path.join(work, "queries")
        with open(qfile, "w") as f:
            for i in range(a.services):
                f.write("%s A\n" % cname(i).rstrip("."))
                if a.external and i % 9 == 0:
                    f.write("ext%d.example.com A\n" % (i % 1000))
        top = dnsperf(port, qfile, 5, a.client_cpu)
        rate = top["qps"] * a.load
        print("maximum rate: %.0f QPS; soak at %.0f QPS for %.1f min"
              % (top["qps"], rate, a.minutes), flush=True)
        churn = Churn(api, a.services, a.writes, stop_ev)
        sampler = Sampler(port, churn, a.services, stop_ev, a.external)
        churn.start()
        sampler.start()
        seconds = int(a.minutes * 60)
        result = {}
        load = threading.Thread(target=lambda: result.update(
            dnsperf(port, qfile, seconds, a.client_cpu, rate)))
        t0 = time.monotonic()
        load.start()
        rss, stall = [], 0.0
        while load.is_alive():
            load.join(10)
            now = time.monotonic() - t0
            rss.append((now, rss_mib(server.pid)))
            late = max_lateness(ports["metrics"])
            stall = max(stall, late)
            print("  %5.0f s: RSS %.1f MiB, %d writes, sampler %d asked "
                  "%d wrong, longest stall %.1f ms, lists %d, watches %d"
                  % (now, rss[-1][1], churn.writes, sampler.asked,
                     sampler.wrong, late * 1000, lists(api, "list"),
                     lists(api, "watch")), flush=True)
        stop_ev.set()
        sampler.join(5)
        base = next((r for t, r in rss if t >= 60), rss[0][1])
        growth = (rss[-1][1] - base) / base * 100
        print("dnsperf: %.0f QPS, %d sent, %d lost, codes: %s" % (
            result["qps"], result["sent"], result["lost"], result["codes"]))
        print("RSS after the first minute %.1f MiB, at the end %.1f MiB: "
              "growth %.1f%%" % (base, rss[-1][1], growth))
        print("churn: %d writes (%.1f/s)" % (
            churn.writes, churn.writes / max(1.0, time.monotonic() - t0)))
        print("sampler: %d asked, %d wrong, %d unanswered %s" % (
            sampler.asked, sampler.wrong, sampler.unanswered,
            sampler.examples))
        print("longest reactor stall under load: %.1f ms" % (stall * 1000))
        with open(log) as f:
            lines = f.readlines()
        print("server log: %d lines; last: %s" % (
            len(lines), "".join(lines[-5:]).rstrip()))
        ok = growth < 5 and not result["lost"] and not sampler.wrong
        print("soak: %s" % ("OK" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        stop_ev.set()
        stop(server)
        stop(upstream)
        api.stop()


if __name__ == "__main__":
    sys.exit(main())
