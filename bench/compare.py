#!/usr/bin/env python3
"""corednstw side by side with a reference CoreDNS binary, under dnsperf.

    .venv/bin/python bench/compare.py [--reference PATH] [--seconds 10]
        [--rounds 3] [--workloads whoami,file,kubeadm,cache]
        [--server-cpu 0] [--client-cpu 1] [--json FILE]

Every workload is a Corefile and a query list.  Each round runs every
workload against corednstw (``twistd -n coredns``) and, with
``--reference``, against that CoreDNS binary given the very same Corefile;
the two alternate (the order flips every round) so that the load of other
work on the machine falls on both alike.  Each server is pinned to one
core with taskset, dnsperf (``-c 50 -T 1 -q 500``) to the other, for the
same number of seconds.

Measured per run:

* QPS as dnsperf reports it;
* p50/p99 latency over every answered query: dnsperf 2.10 has no latency
  histogram, so it runs with ``-v`` and prints each answer's latency,
  which the script sorts (these are latencies under saturation, mostly
  time spent queued behind the 500 outstanding queries);
* RSS of the server process after the run (VmRSS from /proc);
* correctness: the rcode of every answer dnsperf saw is compared with the
  one expected for its question, and a sample of answers is checked in
  full with dnspython (records, flags), as bench/dnsperf_run.py does;
* the ratio corednstw/CoreDNS of the QPS within the same round.

Absolute figures move a lot on a shared machine; the ratios within a
round are what the comparison is about, so the summary gives ranges.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import dns.message
import dns.query
import dns.rcode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402
import forward_bench  # noqa: E402
from dnsperf_run import free_port, requests_total, scrape  # noqa: E402

NOERROR, NXDOMAIN = "NOERROR", "NXDOMAIN"
SAMPLE = 200


# --- workloads ---------------------------------------------------------

class Workload:
    """A Corefile, the queries dnsperf sends, and what they must get.

    ``expect`` maps (name, type) of each query to (rcode, answers): the
    rcode name and the sorted text of the answer rdata (None: not checked
    in full).  ``check`` may replace the generic full-answer check.
    """

    name = ""
    probe = "probe.example.org."

    def prepare(self, work):
        """Write the files the Corefile refers to (once per run)."""

    def corefile(self, ports, work):
        raise NotImplementedError

    def queries(self):
        return list(self.expect)

    def check(self, port, expect):
        """How many of a sample of answers are right, out of how many."""
        return check_expected(port, expect)


def check_expected(port, expect):
    good = total = 0
    items = sorted(expect.items())
    for i in range(SAMPLE):
        (name, rtype), (rcode, answers) = items[i % len(items)]
        r = ask(port, name, rtype)
        total += 1
        if r is None or dns.rcode.to_text(r.rcode()) != rcode:
            continue
        got = sorted(rd.to_text() for rr in r.answer for rd in rr)
        if answers is None or got == answers:
            good += 1
    return good, total


def ask(port, name, rtype):
    q = dns.message.make_query(name, rtype)
    try:
        return dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
    except Exception:
        return None


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

    def check(self, port, expect):
        """whoami's answer: the client's address and port, for the name
        as asked, in the additional section."""
        good = 0
        for i in range(SAMPLE):
            name = "Check%d.Example.org." % i
            r = ask(port, name, "A")
            add = {rrset.rdtype: rrset for rrset in r.additional} if r else {}
            a, srv = add.get(1), add.get(33)
            if (r is not None and r.rcode() == 0 and a is not None
                    and srv is not None and str(a.name) == name
                    and a[0].address == "127.0.0.1"
                    and str(srv.name) == "_udp." + name
                    and srv[0].port != 0):
                good += 1
        return good, SAMPLE


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


WORKLOADS = {w.name: w for w in (Whoami, File, Kubeadm, Cache)}


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


def rss_mb(pid):
    """Resident set size of ``pid`` in MiB, from /proc."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


# --- one measurement ---------------------------------------------------

def measure(workload, server, work, args):
    """Start ``server`` with the workload, warm it, load it with dnsperf,
    and return the figures of the run."""
    ports = {k: free_port() for k in ("dns", "metrics", "health", "ready")}
    run_dir = tempfile.mkdtemp(dir=work)
    proc = start(server, workload.corefile(ports, work), run_dir,
                 args.server_cpu)
    try:
        dnsperf_run.wait_answer(ports["dns"], workload.probe)
        expect = workload.expect
        for name, rtype in expect:        # warm caches and code paths
            ask(ports["dns"], name, rtype)
        murl = "http://127.0.0.1:%d/metrics" % ports["metrics"]
        before = requests_total(scrape(murl))
        stats = dnsperf(ports["dns"], workload, run_dir, args)
        rss = rss_mb(proc.pid)
        counted = requests_total(scrape(murl)) - before
        good, total = workload.check(ports["dns"], expect)
    finally:
        stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)
    stats.update(rss=rss, counted=counted, sample_good=good,
                 sample_total=total)
    return stats


def dnsperf(port, workload, work, args):
    """Run dnsperf with ``-v`` into a file; QPS, lost queries, latency
    percentiles and the share of answers with the expected rcode."""
    qpath = os.path.join(work, "queries.txt")
    write(qpath, "".join("%s %s\n" % q for q in workload.queries()))
    out_path = os.path.join(work, "dnsperf.out")
    cmd = ["taskset", "-c", args.client_cpu, "dnsperf", "-s", "127.0.0.1",
           "-p", str(port), "-d", qpath, "-c", "50", "-T", "1", "-q", "500",
           "-l", str(args.seconds), "-v"]
    with open(out_path, "w") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=True)
    with open(out_path) as f:
        text = f.read()
    return parse_dnsperf(text, workload.expect)


def parse_dnsperf(text, expect):
    latencies = []
    rcode_good = 0
    summary = []
    for line in text.splitlines():
        if not line.startswith("> "):
            summary.append(line)
            continue
        parts = line.split()
        if len(parts) != 5:
            continue
        rcode, name, rtype, latency = parts[1:]
        latencies.append(float(latency))
        want = expect.get((name, rtype))
        if want is not None and want[0] == rcode:
            rcode_good += 1
    summary = "\n".join(summary)
    latencies.sort()
    n = len(latencies)
    return {
        "qps": dnsperf_run._num(r"Queries per second:\s+([\d.]+)", summary),
        "sent": dnsperf_run._num(r"Queries sent:\s+(\d+)", summary),
        "lost": dnsperf_run._num(r"Queries lost:\s+(\d+)", summary),
        "answers": n,
        "rcode_good": rcode_good,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
    }


def percentile(values, q):
    """The ``q`` quantile of sorted ``values`` (nearest rank), in ms."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


# --- report ------------------------------------------------------------

HEADER = ("%-8s %-9s %5s %8s %7s %7s %6s %7s %7s %6s"
          % ("workload", "server", "round", "QPS", "p50 ms", "p99 ms",
             "RSS MB", "rcode", "sample", "ratio"))


def row(workload, server, rnd, s, ratio):
    share = 100.0 * s["rcode_good"] / s["answers"] if s["answers"] else 0.0
    sample = (100.0 * s["sample_good"] / s["sample_total"]
              if s["sample_total"] else 0.0)
    return ("%-8s %-9s %5d %8.0f %7.2f %7.2f %6.1f %6.2f%% %6.1f%% %6s"
            % (workload, server, rnd, s["qps"], s["p50"], s["p99"], s["rss"],
               share, sample, "%.2f" % ratio if ratio else "-"))


def summarize(results, names):
    """Per workload and server: the range of QPS, median latencies, RSS
    and correctness over the rounds; and the range of the ratios."""
    lines = ["", "%-8s %-9s %17s %7s %7s %6s %7s %11s"
             % ("workload", "server", "QPS (min-max)", "p50 ms", "p99 ms",
                "RSS MB", "correct", "ratio")]
    for wname in names:
        for server in ("corednstw", "coredns"):
            runs = [r for r in results
                    if r["workload"] == wname and r["server"] == server]
            if not runs:
                continue
            qps = [r["qps"] for r in runs]
            ratios = [r["ratio"] for r in runs if r.get("ratio")]
            good = sum(r["rcode_good"] + r["sample_good"] for r in runs)
            total = sum(r["answers"] + r["sample_total"] for r in runs)
            lines.append(
                "%-8s %-9s %8.0f-%-8.0f %7.2f %7.2f %6.1f %6.2f%% %11s"
                % (wname, server, min(qps), max(qps),
                   median([r["p50"] for r in runs]),
                   median([r["p99"] for r in runs]),
                   max(r["rss"] for r in runs),
                   100.0 * good / total if total else 0.0,
                   "%.2f-%.2f" % (min(ratios), max(ratios))
                   if ratios else "-"))
    return "\n".join(lines)


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else 0.0


# --- main --------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", help="path of a CoreDNS binary")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--json", help="also write every run's figures here")
    args = ap.parse_args(argv)
    args.workloads = args.workloads.split(",")
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        ap.error("unknown workloads: %s" % ", ".join(sorted(unknown)))
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
            s.update(workload=wl.name, server=label, round=rnd)
            figures[label] = s
            results.append(s)
        tw, ref = figures["corednstw"], figures.get("coredns")
        if ref and ref["qps"]:
            tw["ratio"] = tw["qps"] / ref["qps"]
        for label, s in sorted(figures.items(), reverse=True):
            print(row(wl.name, label, rnd, s, s.get("ratio")), flush=True)
            if s["counted"] < s["answers"]:
                print("  %s counted %d queries in its metrics, dnsperf "
                      "got %d answers" % (label, s["counted"], s["answers"]))

def main(argv=None):
    args = parse_args(argv)
    work = tempfile.mkdtemp(prefix="corednstw-compare-")
    workloads = [WORKLOADS[n]() for n in args.workloads]
    results = []
    try:
        for wl in workloads:
            wl.client_cpu = args.client_cpu
            wl.prepare(work)
        print(HEADER, flush=True)
        for rnd in range(1, args.rounds + 1):
            run_round(rnd, workloads, work, args, results)
    finally:
        for wl in workloads:
            if isinstance(wl, Cache):
                wl.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(summarize(results, args.workloads))
    if args.json:
        write(args.json, json.dumps(results, indent=1) + "\n")
    bad = [r for r in results
           if r["lost"] or r["sample_good"] != r["sample_total"]
           or r["rcode_good"] != r["answers"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
