#!/usr/bin/env python3
"""corednstw side by side with a reference CoreDNS binary, under dnsperf.

    .venv/bin/python bench/compare.py [--reference PATH] [--seconds 10]
        [--rounds 3] [--workloads whoami,file,kubeadm,cache]
        [--server-cpu 0] [--client-cpu 1] [--sample-rate 200]
        [--rate QPS] [--json FILE] [--kubeconfig FILE [--services N]]

Every workload is a Corefile and a query list.  Each round runs every
workload against corednstw (``twistd -n coredns``) and, with
``--reference``, against that CoreDNS binary given the very same Corefile;
the two alternate (the order flips every round) so that the load of other
work on the machine falls on both alike.  Each server is pinned to one
core with taskset, dnsperf (``-c 50 -T 1 -q 500``) to the other, for the
same number of seconds.

Measured per run:

* QPS as dnsperf reports it;
* p50/p99 latency of the queries a sampler sends alongside dnsperf at a
  fixed rate (``--sample-rate``, 200/s: a few thousand per run).  dnsperf
  2.10 has no latency histogram, and its per-answer output (``-v``)
  slows it enough to cap a fast server.  Both servers run saturated, so
  these are mostly time spent queued behind the 500 outstanding queries;
* RSS of the server process after the run (VmRSS from /proc);
* correctness: every answer the sampler gets is checked in full with
  dnspython (rcode, records; whoami: the client's address and port);
  queries lost (by dnsperf or the sampler) are counted apart; the
  server's own
  coredns_dns_requests_total must count at least what dnsperf completed;
* the ratio corednstw/CoreDNS of the QPS within the same round.

Absolute figures move a lot on a shared machine; the ratios within a
round are what the comparison is about, so the summary gives ranges.
"""

import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import dns.message
import dns.query
import dns.rcode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402
import forward_bench  # noqa: E402
from dnsperf_run import free_port, requests_total, scrape  # noqa: E402

NOERROR, NXDOMAIN = "NOERROR", "NXDOMAIN"


# --- workloads ---------------------------------------------------------

class Workload:
    """A Corefile, the queries dnsperf sends, and what they must get.

    ``expect`` maps (name, type) of each query to (rcode, answers): the
    rcode name and the sorted text of the answer rdata (None: not checked
    in full).  ``right`` may replace the generic check of an answer.
    """

    name = ""
    probe = "probe.example.org."
    #: The core a local upstream server runs on: dnsperf's.
    client_cpu = "1"

    def prepare(self, work):
        """Write the files the Corefile refers to (once per run)."""

    def stop(self):
        """Stop what ``prepare`` started."""

    def corefile(self, ports, work):
        raise NotImplementedError

    def queries(self):
        return list(self.expect)

    def warm(self):
        """The questions asked once before the run (caches, code paths)."""
        return list(self.expect)

    def right(self, r, name, rtype, sport):
        """Whether ``r`` (a dnspython reply or None) is the right answer
        to ``name``/``rtype`` asked from port ``sport``."""
        if r is None:
            return False
        rcode, answers = self.expect[(name, rtype)]
        if dns.rcode.to_text(r.rcode()) != rcode:
            return False
        got = sorted(rd.to_text() for rr in r.answer for rd in rr)
        return answers is None or got == answers


class Whoami(Workload):
    """The smallest chain: whoami answers everything."""

    name = "whoami"

    def __init__(self):
        self.expect = {("host%d.example.org" % i, "A"): (NOERROR, None)
                       for i in range(1000)}
        self.expect[("example.org", "AAAA")] = (NOERROR, None)
        self.expect[("srv.example.org", "SRV")] = (NOERROR, None)

    def corefile(self, ports, work):
        return (".:%d {\n    whoami\n    prometheus 127.0.0.1:%d\n}\n"
                % (ports["dns"], ports["metrics"]))

    def right(self, r, name, rtype, sport):
        """whoami's answer: the client's address and port, for the name
        as asked, in the additional section."""
        if r is None or r.rcode() != 0:
            return False
        add = {rrset.rdtype: rrset for rrset in r.additional}
        a, srv = add.get(1), add.get(33)
        return (a is not None and srv is not None
                and str(a.name) == name + "."
                and a[0].address == "127.0.0.1"
                and str(srv.name) == "_udp." + name + "."
                and srv[0].port == sport)


FILE_ZONE = """$ORIGIN example.org.
$TTL 3600
@ IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 300
@ IN NS ns
@ IN MX 10 mail
ns IN A 192.0.2.1
mail IN A 192.0.2.2
www IN CNAME web
web IN A 192.0.2.3
web IN A 192.0.2.4
"""


class File(Workload):
    """A small zone: hits, a CNAME chased in the zone, NODATA, NXDOMAIN."""

    name = "file"

    expect = {
        ("example.org", "MX"): (NOERROR, ["10 mail.example.org."]),
        ("ns.example.org", "A"): (NOERROR, ["192.0.2.1"]),
        ("mail.example.org", "A"): (NOERROR, ["192.0.2.2"]),
        ("www.example.org", "A"):
            (NOERROR, ["192.0.2.3", "192.0.2.4", "web.example.org."]),
        ("web.example.org", "AAAA"): (NOERROR, []),
        ("nothere.example.org", "A"): (NXDOMAIN, []),
    }

    def prepare(self, work):
        write(os.path.join(work, "example.org.zone"), FILE_ZONE)

    def corefile(self, ports, work):
        return (".:%d {\n    file %s example.org\n"
                "    prometheus 127.0.0.1:%d\n}\n"
                % (ports["dns"], os.path.join(work, "example.org.zone"),
                   ports["metrics"]))


CLUSTER_ZONE = """$ORIGIN cluster.local.
$TTL 30
@ IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30
@ IN NS ns.dns
ns.dns IN A 10.96.0.10
kubernetes.default.svc IN A 10.96.0.1
kube-dns.kube-system.svc IN A 10.96.0.10
web.default.svc IN A 10.96.1.1
db.default.svc IN A 10.96.1.2
api.default.svc IN A 10.96.1.3
api.default.svc IN A 10.96.1.4
api.default.svc IN A 10.96.1.5
_http._tcp.web.default.svc IN SRV 0 100 80 web.default.svc
"""


class Kubeadm(Workload):
    """kubeadm's chain with a zone file standing in for kubernetes:
    service lookups, the NXDOMAINs of search-path expansion, an SRV and
    a name with three addresses for loadbalance to shuffle."""

    name = "kubeadm"
    probe = "kubernetes.default.svc.cluster.local."

    expect = {
        ("kubernetes.default.svc.cluster.local", "A"):
            (NOERROR, ["10.96.0.1"]),
        ("kube-dns.kube-system.svc.cluster.local", "A"):
            (NOERROR, ["10.96.0.10"]),
        ("web.default.svc.cluster.local", "A"): (NOERROR, ["10.96.1.1"]),
        ("db.default.svc.cluster.local", "A"): (NOERROR, ["10.96.1.2"]),
        ("api.default.svc.cluster.local", "A"):
            (NOERROR, ["10.96.1.3", "10.96.1.4", "10.96.1.5"]),
        ("_http._tcp.web.default.svc.cluster.local", "SRV"):
            (NOERROR, ["0 100 80 web.default.svc.cluster.local."]),
        ("web.default.svc.cluster.local", "AAAA"): (NOERROR, []),
        ("example.com.default.svc.cluster.local", "A"): (NXDOMAIN, []),
        ("example.com.svc.cluster.local", "A"): (NXDOMAIN, []),
        ("example.com.cluster.local", "A"): (NXDOMAIN, []),
    }

    def prepare(self, work):
        write(os.path.join(work, "cluster.local.zone"), CLUSTER_ZONE)

    def corefile(self, ports, work):
        return """.:{dns} {{
    errors
    health 127.0.0.1:{health}
    ready 127.0.0.1:{ready}
    prometheus 127.0.0.1:{metrics}
    file {zone} cluster.local
    cache 30
    loop
    reload
    loadbalance
}}
""".format(zone=os.path.join(work, "cluster.local.zone"), **ports)


class Cache(Workload):
    """Cache hits: forward to a local unbound, every name warmed first."""

    name = "cache"
    probe = "n0.bench.test."
    names = 100

    def __init__(self):
        self.expect = {("n%d.bench.test" % i, "A"):
                       (NOERROR, [forward_bench.address(i)])
                       for i in range(self.names)}
        self.upstream = None
        self.upstream_port = None

    def prepare(self, work):
        """Start unbound once for the whole comparison."""
        if self.upstream is not None:
            return
        self.upstream_port = free_port()
        self.upstream = forward_bench.start_unbound(
            work, self.upstream_port, self.names, self.client_cpu)
        dnsperf_run.wait_answer(self.upstream_port, self.probe, timeout=20)

    def corefile(self, ports, work):
        return (".:%d {\n    cache\n    forward . 127.0.0.1:%d\n"
                "    prometheus 127.0.0.1:%d\n}\n"
                % (ports["dns"], self.upstream_port, ports["metrics"]))

    def stop(self):
        if self.upstream is not None:
            stop(self.upstream)
            self.upstream = None


class Kubernetes(Workload):
    """Service lookups answered by the kubernetes plugin from a real API
    server (``--kubeconfig``), loaded first with ``--services`` services
    in 100 namespaces, every tenth headless with a 3-endpoint slice (as
    bench/k8s_bench.py loads it); kubeadm's kubernetes block, no cache."""

    name = "k8s"
    probe = "svc1.ns1.svc.cluster.local."
    cache = ""
    kubeconfig = None
    services = 10000

    def prepare(self, work):
        if getattr(self, "expect", None) is not None:
            return
        import k8s_bench
        core, disc = k8s_bench.kube(self.kubeconfig)
        have = k8s_bench.populate(core, disc, self.services, 100, 0)
        endpoints = {}      # a headless service's ready addresses
        for sl in k8s_bench.raw_list(
                disc.list_endpoint_slice_for_all_namespaces):
            svc = (sl["metadata"].get("labels") or {}).get(
                "kubernetes.io/service-name")
            key = (svc, sl["metadata"]["namespace"])
            for ep in sl.get("endpoints") or ():
                if (ep.get("conditions") or {}).get("ready") is not False:
                    endpoints.setdefault(key, set()).update(ep["addresses"])
        self.expect = {}
        for i in range(self.services):
            name, ns = "svc%d" % i, "ns%d" % (i % 100)
            if (name, ns) not in have:
                continue
            want = (endpoints.get((name, ns), ())
                    if have[(name, ns)] == "None" else [have[(name, ns)]])
            self.expect[("%s.%s.svc.cluster.local" % (name, ns), "A")] = (
                NOERROR, sorted(want))

    def warm(self):
        return list(self.expect)[:200]

    def corefile(self, ports, work):
        return """.:{dns} {{
    errors
    health 127.0.0.1:{health}
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    prometheus 127.0.0.1:{metrics}
    {cache}
    loadbalance
}}
""".format(kubeconfig=os.path.abspath(self.kubeconfig), cache=self.cache,
           **ports)


class KubernetesCache(Kubernetes):
    """The same with ``cache 30`` in front."""

    name = "k8s-cache"
    cache = "cache 30"


WORKLOADS = {w.name: w for w in (Whoami, File, Kubeadm, Cache, Kubernetes,
                                 KubernetesCache)}
DEFAULT_WORKLOADS = "whoami,file,kubeadm,cache"


def ask(port, name, rtype):
    """One query with dnspython (None when no answer came)."""
    q = dns.message.make_query(name, rtype)
    try:
        return dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
    except Exception:
        return None


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


# --- servers -----------------------------------------------------------

def start(server, text, work, core):
    """Start ``server`` ("corednstw" or a CoreDNS binary's path) on the
    Corefile ``text``; both read the same syntax."""
    if server == "corednstw":
        return dnsperf_run.start_server(text, work, core=core)
    path = os.path.join(work, "Corefile")
    write(path, text)
    return subprocess.Popen(["taskset", "-c", core, server, "-conf", path],
                            cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(pid):
    """User and system CPU time of ``pid`` so far (all its threads).

    A server that is not kept fully busy (the client core can be the
    limit for a fast server) shows it here: completed queries per
    server CPU second is the speed per core even then."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    """Resident set size of ``pid`` in MiB, from /proc."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


# --- one measurement ---------------------------------------------------

def measure(workload, server, work, args):
    """Start ``server`` with the workload, warm it, load it with dnsperf
    while the sampler asks alongside, and return the figures of the
    run."""
    ports = {k: free_port() for k in ("dns", "metrics", "health", "ready")}
    run_dir = tempfile.mkdtemp(dir=work)
    proc = start(server, workload.corefile(ports, work), run_dir,
                 args.server_cpu)
    try:
        dnsperf_run.wait_answer(ports["dns"], workload.probe)
        for name, rtype in workload.warm():     # caches, code paths
            ask(ports["dns"], name, rtype)
        murl = "http://127.0.0.1:%d/metrics" % ports["metrics"]
        before = requests_total(scrape(murl))
        sampler = Sampler(ports["dns"], workload,
                          args.sample_rate / (10 if args.probe == "dnsperf"
                                              else 1), args.seconds)
        cpu = cpu_seconds(proc.pid)
        qpath = os.path.join(run_dir, "queries.txt")
        write(qpath, "".join("%s %s\n" % q for q in workload.queries()))
        probe = None
        if args.probe == "dnsperf":
            probe = DnsperfProbe(ports["dns"], qpath, args)
            probe.start()
        sampler.start()
        stats, _ = dnsperf_run.run_dnsperf(ports["dns"], qpath, args.seconds,
                                           core=args.client_cpu,
                                           rate=args.rate)
        sampler.join()
        if probe is not None:
            probe.join()
        cpu = cpu_seconds(proc.pid) - cpu
        rss = rss_mb(proc.pid)
        counted = requests_total(scrape(murl)) - before
    finally:
        stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)
    lat = sorted(sampler.latencies if probe is None else probe.latencies)
    stats.update(rss=rss, counted=counted, cpu=cpu,
                 per_cpu=stats["completed"] / cpu if cpu else 0.0,
                 good=sampler.good,
                 asked=sampler.asked, answered=len(sampler.latencies),
                 p50=percentile(lat, 0.50),
                 p99=percentile(lat, 0.99))
    return stats


class DnsperfProbe(threading.Thread):
    """``--probe dnsperf``: the latencies come from a second dnsperf at
    ``--sample-rate`` queries/s with ``-v`` (one line per answer with its
    latency), written in C, where the Python sampler shares the client
    core with the loading dnsperf and its own scheduling shows in the
    tail.  The Python sampler still checks the answers, at a tenth of
    the rate."""

    LINE = re.compile(r"^> \S+ \S+ \S+ ([\d.]+)$", re.M)

    def __init__(self, port, qpath, args):
        super().__init__(daemon=True)
        self.cmd = ["taskset", "-c", args.client_cpu, "dnsperf", "-s",
                    "127.0.0.1", "-p", str(port), "-d", qpath, "-l",
                    str(args.seconds), "-c", "1", "-q", "20", "-Q",
                    str(int(args.sample_rate)), "-v"]
        self.latencies = []

    def run(self):
        out = subprocess.run(self.cmd, capture_output=True, text=True).stdout
        self.latencies = [float(x) for x in self.LINE.findall(out)]


class Sampler(threading.Thread):
    """Asks the workload's questions at a fixed rate while dnsperf runs,
    from one socket, and keeps each answer's latency and whether it was
    right.

    dnsperf 2.10 prints no latency histogram, and its per-answer output
    (``-v``) slows it by a tenth, enough to cap a fast server; a few
    thousand queries at a fixed rate see the same queue as dnsperf's
    without loading the client core.  Both servers run saturated, so
    these latencies are mostly time spent queued behind dnsperf's 500
    outstanding queries.
    """

    def __init__(self, port, workload, rate, seconds):
        super().__init__(daemon=True)
        self.port = port
        self.workload = workload
        self.interval = 1.0 / rate
        self.seconds = seconds
        self.latencies = []
        self.good = 0
        self.asked = 0

    def run(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect(("127.0.0.1", self.port))
        sock.setblocking(False)
        try:
            self._loop(sock)
        finally:
            sock.close()

    def _loop(self, sock):
        queries = self.workload.queries()
        wires = [dns.message.make_query(n, t).to_wire() for n, t in queries]
        pending = {}
        now = time.monotonic()
        next_send, end = now, now + self.seconds
        while now < end + 2 and (now < end or pending):
            if now >= next_send and now < end:
                i = self.asked % len(queries)
                qid = self.asked & 0xFFFF
                pending[qid] = (now, queries[i])
                sock.send(struct.pack("!H", qid) + wires[i][2:])
                self.asked += 1
                next_send += self.interval
            wait = max(0.0, min(next_send, end + 2) - time.monotonic())
            if select.select([sock], [], [], wait)[0]:
                self._receive(sock, pending)
            now = time.monotonic()

    def _receive(self, sock, pending):
        sport = sock.getsockname()[1]
        while True:
            try:
                data = sock.recv(65535)
            except BlockingIOError:
                return
            t = time.monotonic()
            m = dns.message.from_wire(data)
            entry = pending.pop(m.id, None)
            if entry is None:
                continue
            sent, (name, rtype) = entry
            self.latencies.append(t - sent)
            if self.workload.right(m, name, rtype, sport):
                self.good += 1


def percentile(values, q):
    """The ``q`` quantile of sorted ``values`` (nearest rank), in ms."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


# --- report ------------------------------------------------------------

HEADER = ("%-8s %-9s %5s %8s %5s %8s %7s %7s %6s %8s %5s %6s %6s"
          % ("workload", "server", "round", "QPS", "CPU%", "q/CPU-s",
             "p50 ms", "p99 ms", "RSS MB", "correct", "lost", "ratio",
             "ratio/CPU"))


def row(workload, server, rnd, s, ratio):
    share = 100.0 * s["good"] / s["answered"] if s["answered"] else 0.0
    lost = s["lost"] + s["asked"] - s["answered"]
    busy = 100.0 * s["cpu"] / s["seconds"] if s["seconds"] else 0.0
    cpu_ratio = s.get("cpu_ratio")
    return ("%-8s %-9s %5d %8.0f %5.0f %8.0f %7.2f %7.2f %6.1f %7.2f%% %5d "
            "%6s %6s"
            % (workload, server, rnd, s["qps"], busy, s["per_cpu"], s["p50"],
               s["p99"], s["rss"], share, lost,
               "%.2f" % ratio if ratio else "-",
               "%.2f" % cpu_ratio if cpu_ratio else "-"))


def summarize(results, names):
    """Per workload and server: the range of QPS, median CPU use,
    latencies, RSS and correctness over the rounds; and the range of the
    ratios (of QPS, and of queries per server CPU second)."""
    lines = ["", "%-8s %-9s %17s %5s %7s %7s %6s %8s %11s %11s"
             % ("workload", "server", "QPS (min-max)", "CPU%", "p50 ms",
                "p99 ms", "RSS MB", "correct", "ratio", "ratio/CPU")]
    for wname in names:
        for server in ("corednstw", "coredns"):
            runs = [r for r in results
                    if r["workload"] == wname and r["server"] == server]
            if runs:
                lines.append(_summary_line(wname, server, runs))
    return "\n".join(lines)


def _summary_line(wname, server, runs):
    qps = [r["qps"] for r in runs]
    good = sum(r["good"] for r in runs)
    total = sum(r["answered"] for r in runs)
    return ("%-8s %-9s %8.0f-%-8.0f %5.0f %7.2f %7.2f %6.1f %7.2f%% %11s %11s"
            % (wname, server, min(qps), max(qps),
               median([100.0 * r["cpu"] / r["seconds"] for r in runs]),
               median([r["p50"] for r in runs]),
               median([r["p99"] for r in runs]),
               max(r["rss"] for r in runs),
               100.0 * good / total if total else 0.0,
               _span([r.get("ratio") for r in runs]),
               _span([r.get("cpu_ratio") for r in runs])))


def _span(values):
    values = [v for v in values if v]
    return "%.2f-%.2f" % (min(values), max(values)) if values else "-"


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else 0.0


# --- main --------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", help="path of a CoreDNS binary")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                    help="of %s (k8s ones need --kubeconfig)"
                    % ",".join(WORKLOADS))
    ap.add_argument("--kubeconfig",
                    help="a real API server for the k8s workloads")
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--sample-rate", type=float, default=200.0,
                    help="queries per second of the latency sampler")
    ap.add_argument("--rate", type=float,
                    help="dnsperf at this fixed rate (-Q) instead of "
                    "saturating: latency below saturation, and the "
                    "server's CPU per query (1e6 / q/CPU-s, in µs)")
    ap.add_argument("--probe", choices=("python", "dnsperf"),
                    default="python",
                    help="where the latencies come from: the Python "
                    "sampler, or a second dnsperf with -v (DnsperfProbe)")
    ap.add_argument("--json", help="also write every run's figures here")
    args = ap.parse_args(argv)
    args.workloads = args.workloads.split(",")
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        ap.error("unknown workloads: %s" % ", ".join(sorted(unknown)))
    if any(w.startswith("k8s") for w in args.workloads) and \
            not args.kubeconfig:
        ap.error("the k8s workloads need --kubeconfig")
    return args


def servers(args, rnd):
    """The servers of round ``rnd``: the order flips every round."""
    order = [("corednstw", "corednstw")]
    if args.reference:
        order.append(("coredns", os.path.abspath(args.reference)))
    return order if rnd % 2 else order[::-1]


def run_round(rnd, workloads, work, args, results):
    for wl in workloads:
        figures = {}
        for label, server in servers(args, rnd):
            s = measure(wl, server, work, args)
            s.update(workload=wl.name, server=label, round=rnd,
                     seconds=args.seconds)
            figures[label] = s
            results.append(s)
        tw, ref = figures["corednstw"], figures.get("coredns")
        if ref and ref["qps"]:
            tw["ratio"] = tw["qps"] / ref["qps"]
        if ref and ref["per_cpu"]:
            tw["cpu_ratio"] = tw["per_cpu"] / ref["per_cpu"]
        for label, s in sorted(figures.items(), reverse=True):
            print(row(wl.name, label, rnd, s, s.get("ratio")), flush=True)
            if s["counted"] < s["completed"]:
                print("  %s counted %d queries in its metrics, dnsperf "
                      "got %d answers" % (label, s["counted"],
                                          s["completed"]))

def main(argv=None):
    args = parse_args(argv)
    # The script's own work (the sampler) belongs on dnsperf's core.
    os.sched_setaffinity(0, {int(args.client_cpu)})
    work = tempfile.mkdtemp(prefix="corednstw-compare-")
    workloads = [WORKLOADS[n]() for n in args.workloads]
    results = []
    try:
        for wl in workloads:
            wl.client_cpu = args.client_cpu
            wl.kubeconfig, wl.services = args.kubeconfig, args.services
            wl.prepare(work)
        print(HEADER, flush=True)
        for rnd in range(1, args.rounds + 1):
            run_round(rnd, workloads, work, args, results)
    finally:
        for wl in workloads:
            wl.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(summarize(results, args.workloads))
    if args.json:
        write(args.json, json.dumps(results, indent=1) + "\n")
    bad = [r for r in results if r["good"] != r["answered"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
