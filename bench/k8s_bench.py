"""Benchmark of the kubernetes plugin (not part of the test suite).

10,000 services (every tenth headless, with a 3-endpoint slice) in 100
namespaces on the test API server (a separate process).  Measures:

- time from process start to /ready 200 and to a correct answer for the
  last service;
- peak RSS (VmHWM) over sync, a full query sweep (every service, answers
  checked) and a forced 410 relist;
- QPS of service lookups with dnsperf (-c 50 -T 1 -q 500), the server and
  dnsperf pinned to different cores, every answer's rcode checked;
- the longest reactor stall (the stall monitor's gauge, scraped after each
  phase).

``--apiserver KUBECONFIG`` measures against a real API server instead:
it first loads it (if needed) with the same services and slices plus
``--pods`` pods, through the kubernetes client with a bounded-parallel
loader, then measures start to /ready, RSS, the programming latency
(``--changes`` EndpointSlice updates written through the API, each timed
until our answer changes) and, with ``--outage-cmd``, an API outage:
/ready and /health probed every ``--probe-every`` seconds, log lines
counted, a change made during the outage timed after the API is back.

Start-up times are taken with corednstw's bytecode compiled first, as
``pip install`` leaves an installed package (``compiled()``): a work
tree run with PYTHONDONTWRITEBYTECODE would otherwise compile every
module from source at every start (about 0.1 s of CPU).

Run from the repository root:  .venv/bin/python bench/k8s_bench.py
"""

import argparse
import compileall
import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import dns.message
import dns.rdatatype

from corednstw.engines.kubernetes.watch import PAGE

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
        %(source)s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus 127.0.0.1:%(metrics)d
    forward . 127.0.0.1:%(upstream)d {
        max_concurrent 1000
    }
    %(cache)s
    loop
    reload
    loadbalance
}
"""


def max_lateness(mport):
    """The stall monitor's gauge: the longest reactor stall (seconds) since
    the previous scrape."""
    return metric(http("http://127.0.0.1:%d/metrics" % mport)[1],
                  "coredns_corednstw_reactor_max_lateness_seconds")


# -- a real API server -------------------------------------------------------

def kube(kubeconfig, pool=16):
    """CoreV1Api and DiscoveryV1Api on ``kubeconfig``, ``pool`` connections."""
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    api = client.ApiClient(cfg)
    return client.CoreV1Api(api), client.DiscoveryV1Api(api)


def raw_list(fn, **kw):
    """Items of a list call as plain JSON (no model objects)."""
    resp = fn(_preload_content=False, resource_version="0", **kw)
    return json.loads(resp.data)["items"]


def load_parallel(calls, workers=16):
    """Run ``calls`` (fn, args, kwargs) with at most ``workers`` requests
    in flight; 409 (already there) counts as done."""
    from kubernetes.client.exceptions import ApiException

    def one(call):
        fn, args, kw = call
        try:
            fn(*args, **kw)
        except ApiException as e:
            if e.status != 409:
                raise

    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        for f in [ex.submit(one, c) for c in calls]:
            f.result()
    return len(calls)


PORTS = [{"name": "http", "port": 80, "protocol": "TCP"}]


def populate(core, disc, n, nns, npods):
    """Create what is missing: ``nns`` namespaces, ``n`` services (every
    tenth headless with a 3-endpoint slice), ``npods`` pods."""
    t0 = time.monotonic()
    have = {o["metadata"]["name"] for o in raw_list(core.list_namespace)}
    calls = [(core.create_namespace, ({"metadata": {"name": "ns%d" % i}},),
              {}) for i in range(nns) if "ns%d" % i not in have]
    load_parallel(calls)
    have = {(o["metadata"]["name"], o["metadata"]["namespace"])
            for o in raw_list(core.list_service_for_all_namespaces)}
    calls, slices = [], []
    for i in range(n):
        name, ns = "svc%d" % i, "ns%d" % (i % nns)
        spec = {"ports": PORTS}
        if i % 10 == 0:
            spec["clusterIP"] = "None"
            slices.append((disc.create_namespaced_endpoint_slice, (ns, {
                "metadata": {"name": name + "-abcde", "labels": {
                    "kubernetes.io/service-name": name}},
                "addressType": "IPv4", "ports": PORTS,
                "endpoints": [{"addresses": [ip], "conditions": {
                    "ready": True}} for ip in expected(i)]}), {}))
        if (name, ns) not in have:
            calls.append((core.create_namespaced_service, (ns, {
                "metadata": {"name": name}, "spec": spec}), {}))
    created = load_parallel(calls)
    have = {(o["metadata"]["name"], o["metadata"]["namespace"]) for o in
            raw_list(disc.list_endpoint_slice_for_all_namespaces)}
    created += load_parallel([c for c in slices if (
        c[1][1]["metadata"]["name"], c[1][0]) not in have])
    have = {(o["metadata"]["name"], o["metadata"]["namespace"])
            for o in raw_list(core.list_pod_for_all_namespaces)}
    pod = {"containers": [{"name": "c", "image": "pause"}]}
    created += load_parallel([
        (core.create_namespaced_pod, ("ns%d" % (i % nns), {
            "metadata": {"name": "pod%d" % i}, "spec": pod}), {})
        for i in range(npods)
        if ("pod%d" % i, "ns%d" % (i % nns)) not in have])
    print("populated: %d objects created in %.1f s" % (
        created, time.monotonic() - t0), flush=True)
    return {(o["metadata"]["name"], o["metadata"]["namespace"]):
            o["spec"].get("clusterIP")
            for o in raw_list(core.list_service_for_all_namespaces)}


class Prober(threading.Thread):
    """GETs /ready and /health every ``every`` s (1 s timeout each) and
    records (when, url, status, seconds)."""

    def __init__(self, urls, every):
        super().__init__(daemon=True)
        self.urls = urls
        self.every = every
        self.done = threading.Event()
        self.results = []

    def run(self):
        while not self.done.is_set():
            for url in self.urls:
                t = time.monotonic()
                try:
                    with urllib.request.urlopen(url, timeout=1) as r:
                        code = r.status
                except urllib.error.HTTPError as e:
                    code = e.code
                except OSError:
                    code = 0
                self.results.append((t, url, code, time.monotonic() - t))
            self.done.wait(self.every)

    def summary(self, since=0.0, until=float("inf")):
        got = [r for r in self.results if since <= r[0] <= until]
        late = [r for r in got if r[2] == 0 or r[3] > 1.0]
        worst = max((r[3] for r in got), default=0.0)
        return len(got), len(late), worst


def wait_answer(sock, port, name, want, timeout=30.0):
    """Ask until the A answer for ``name`` contains ``want``; returns the
    time it took (every query is sent right after the previous answer)."""
    t0 = time.monotonic()
    while want not in addrs(ask(sock, port, name)):
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("%s never answered %s" % (name, want))
    return time.monotonic() - t0


def change_slice(disc, i, nns, ip):
    """Point the first endpoint of headless service i's slice at ``ip``."""
    eps = [{"addresses": [a], "conditions": {"ready": True}}
           for a in [ip] + expected(i)[1:]]
    disc.patch_namespaced_endpoint_slice(
        "svc%d-abcde" % i, "ns%d" % (i % nns), {"endpoints": eps})


def programming(disc, sock, port, n, nns, changes, round_=0):
    """``changes`` slice updates; for each, the seconds from the API's
    answer to the write until our DNS answer shows it, and the seconds
    from before the write."""
    after, total = [], []
    heads = [i for i in range(0, n, 10)]
    for k in range(changes):
        i = heads[k % len(heads)]
        ip = "10.250.%d.%d" % (round_ % 250 + 1, k % 250 + 1)
        name = "svc%d.ns%d.svc.cluster.local." % (i, i % nns)
        t0 = time.monotonic()
        change_slice(disc, i, nns, ip)
        t1 = time.monotonic()
        wait_answer(sock, port, name, ip)
        t2 = time.monotonic()
        after.append(t2 - t1)
        total.append(t2 - t0)
    return after, total


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def ms(xs):
    return "p50 %.2f / p99 %.2f / max %.2f ms" % (
        pct(xs, 50) * 1000, pct(xs, 99) * 1000, max(xs) * 1000)


def real_main(a):
    """The ``--apiserver`` mode; see the module docstring."""
    n, nns = a.services, a.namespaces
    core, disc = kube(a.apiserver)
    svcs = populate(core, disc, n, nns, a.pods)
    dport, rport, mport, hport = (free_port(), free_port(), free_port(),
                                  free_port())
    tmp = tempfile.mkdtemp(prefix="k8s-bench-")
    corefile = os.path.join(tmp, "Corefile")
    with open(corefile, "w") as f:
        # No cache: the programming latency is about the plugin's data.
        f.write(KUBEADM % dict(port=dport, source="kubeconfig " + os.path.
                               abspath(a.apiserver), ready=rport, cache="",
                               metrics=mport, health=hport,
                               upstream=free_port()))
    log = open(os.path.join(tmp, "log"), "w+")
    t0 = time.monotonic()
    srv = subprocess.Popen(["taskset", "-c", a.server_cpu, TWISTD, "-n",
                            "--pidfile=", "coredns", "-c", corefile],
                           cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
    try:
        while http("http://127.0.0.1:%d/ready" % rport)[0] != 200:
            if srv.poll() is not None:
                sys.exit("server exited")
            time.sleep(0.02)
        t_ready = time.monotonic() - t0
        stall = max_lateness(mport)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(2)
        last = n - 2
        lname = "svc%d.ns%d.svc.cluster.local." % (last, last % nns)
        wait_answer(sock, dport, lname, svcs[("svc%d" % last,
                                              "ns%d" % (last % nns))])
        t_answer = time.monotonic() - t0
        stall = max(stall, max_lateness(mport))
        after, total = programming(disc, sock, dport, n, nns, a.changes,
                                   round_=int(time.time()))
        stall = max(stall, max_lateness(mport))
        peak = vmhwm(srv.pid)
        print("API server: %d services (%d headless), %d pods, %d "
              "namespaces" % (n, (n + 9) // 10, a.pods, nns))
        print("ready after: %.3f s" % t_ready)
        print("last service answered after: %.3f s" % t_answer)
        print("peak RSS (VmHWM): %.1f MiB" % peak)
        print("programming latency (%d slice updates), from the write's "
              "answer: %s" % (a.changes, ms(after)))
        print("  from before the write: %s" % ms(total))
        print("longest reactor stall (sync, answers, changes): %.1f ms"
              % (stall * 1000))
        if a.outage_cmd:
            outage(a, disc, sock, dport, rport, hport, mport, log)
    finally:
        srv.terminate()
        srv.wait()


def compiled():
    """Write the bytecode of the corednstw package, as an installed
    package has it (see the module docstring)."""
    compileall.compile_dir(os.path.join(ROOT, "corednstw"), quiet=1)


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_ready(cmd, corefile, rport, cpu):
    """(seconds, CPU seconds of the server) from starting ``cmd`` on
    ``corefile`` to /ready 200: the CPU time, on the server's one core,
    says what the process costs when other work delays it."""
    t0 = time.monotonic()
    srv = subprocess.Popen(["taskset", "-c", cpu] + cmd + [corefile],
                           cwd=os.path.dirname(corefile),
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        while http("http://127.0.0.1:%d/ready" % rport)[0] != 200:
            if srv.poll() is not None:
                sys.exit("server exited: %s" % cmd)
            time.sleep(0.01)
        return time.monotonic() - t0, cpu_seconds(srv.pid)
    finally:
        srv.terminate()
        srv.wait()


def ready_rounds(a):
    """``--ready-rounds``: start → /ready of ours and of CoreDNS on the
    same Corefile, alternating, ``a.ready_rounds`` times each."""
    tmp = tempfile.mkdtemp(prefix="k8s-bench-")
    corefile = os.path.join(tmp, "Corefile")
    rport = free_port()
    with open(corefile, "w") as f:
        f.write(KUBEADM % dict(port=free_port(), source="kubeconfig " +
                               os.path.abspath(a.apiserver), ready=rport,
                               cache="", metrics=free_port(),
                               health=free_port(), upstream=free_port()))
    ours = [TWISTD, "-n", "--pidfile=", "coredns", "-c"]
    theirs = [a.coredns, "-conf"]
    got = {"corednstw": [], "CoreDNS": []}
    print("load average: %s" % open("/proc/loadavg").read().strip())
    for _ in range(a.ready_rounds):
        got["corednstw"].append(start_ready(ours, corefile, rport,
                                            a.server_cpu))
        got["CoreDNS"].append(start_ready(theirs, corefile, rport,
                                          a.server_cpu))
    for name, runs in got.items():
        xs = sorted(t for t, _ in runs)
        cs = sorted(c for _, c in runs)
        print("%-9s start -> /ready: min %.3f  median %.3f  max %.3f s;"
              "  CPU median %.2f s" % (name, xs[0], xs[len(xs) // 2], xs[-1],
                                      cs[len(cs) // 2]))
    print("load average: %s" % open("/proc/loadavg").read().strip())


def outage(a, disc, sock, dport, rport, hport, mport, log):
    """Run ``--outage-cmd`` (it stops the API server, waits, starts it
    again and returns once it is ready): probes answered, log lines, the
    first change after it."""
    nns = a.namespaces
    prober = Prober(["http://127.0.0.1:%d/ready" % rport,
                     "http://127.0.0.1:%d/health" % hport], a.probe_every)
    log.seek(0, 2)
    start_pos = log.tell()
    prober.start()
    max_lateness(mport)
    t0 = time.monotonic()
    subprocess.run(a.outage_cmd, shell=True, check=True,
                   stdout=subprocess.DEVNULL)
    t1 = time.monotonic()
    # The slice's second address: the programming rounds before only ever
    # change the first one.
    back = wait_answer(sock, dport, "svc0.ns0.svc.cluster.local.",
                       expected(0)[1])
    after, total = programming(disc, sock, dport, a.services, nns, 1,
                               round_=int(time.time()) + 7)
    prober.done.set()
    prober.join()
    stall = max_lateness(mport)
    log.flush()
    log.seek(start_pos)
    lines = [x.rstrip() for x in log if "kubernetes" in x]
    got, late, worst = prober.summary(t0, t1)
    print("outage: %.1f s; probes during it: %d, unanswered within 1 s: %d "
          "(slowest %.0f ms)" % (t1 - t0, got, late, worst * 1000))
    print("  stale answer served right after: %s; first change after: "
          "%.1f ms (%.1f ms with the write)" % (
              back < 1, after[0] * 1000, total[0] * 1000))
    print("  longest reactor stall: %.1f ms" % (stall * 1000))
    print("  kubernetes log lines: %d" % len(lines))
    for x in lines[:6]:
        print("    " + x)


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
    ap.add_argument("--no-qps", action="store_true",
                    help="skip the dnsperf part")
    ap.add_argument("--apiserver", metavar="KUBECONFIG",
                    help="measure against this real API server")
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--outage-cmd",
                    help="(--apiserver) a shell command that stops the API "
                         "server, waits and starts it again")
    ap.add_argument("--probe-every", type=float, default=0.5)
    ap.add_argument("--ready-rounds", type=int, default=0,
                    help="(--apiserver) only time start -> /ready of ours "
                         "and of --coredns, alternating, this many times")
    ap.add_argument("--coredns", default="/tmp/coredns-ref/coredns",
                    help="the reference CoreDNS binary")
    a = ap.parse_args()
    compiled()
    if a.apiserver and a.ready_rounds:
        return ready_rounds(a)
    if a.apiserver:
        return real_main(a)
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
            f.write(KUBEADM % dict(port=dport, source="endpoint " + url,
                                   ready=rport, cache="cache 30",
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
        stall = max_lateness(mport)
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

        stall = max(stall, max_lateness(mport))
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
        stall = max(stall, max_lateness(mport))
        for i in range(0, n, 97):
            m = ask(sock, dport,
                    "svc%d.ns%d.svc.cluster.local." % (i, i % nns))
            if addrs(m) != expected(i):
                bad += 1
        peak = vmhwm(srv.pid)
        stall = max(stall, max_lateness(mport))

        qfile = os.path.join(tmp, "queries")
        with open(qfile, "w") as f:
            for i in range(n):
                if i % 10:
                    f.write("svc%d.ns%d.svc.cluster.local A\n" % (i, i % nns))
        out = "" if a.no_qps else subprocess.run(
            ["taskset", "-c", a.client_cpu, "dnsperf", "-s", "127.0.0.1",
             "-p", str(dport), "-d", qfile, "-c", "50", "-T", "1", "-q",
             "500", "-l", str(a.seconds)], capture_output=True, text=True
        ).stdout
        if not a.no_qps:
            qps = float(re.search(r"Queries per second:\s+([\d.]+)",
                                  out).group(1))
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
        print("longest reactor stall (sync, sweep, relist): %.1f ms"
              % (stall * 1000))
        if not a.no_qps:
            print("dnsperf QPS: %.0f (response codes: %s; lost: %s)" % (
                qps, codes, lost))
    finally:
        srv.terminate()
        api.terminate()
        srv.wait()
        api.wait()


if __name__ == "__main__":
    main()
