#!/usr/bin/env python3
"""corednstw side by side with a reference CoreDNS binary, per server
CPU-second.

    .venv/bin/python bench/compare.py [--reference PATH] [--seconds 10]
        [--rounds 5] [--workloads whoami,file,...] [--server-cpu 0]
        [--client-cpu 1] [--sample-rate 200] [--rate QPS] [--json FILE]
        [--kubeconfig FILE [--services N]]

Every workload is a Corefile and a query list (see WORKLOADS: each UDP
one also without prometheus, the forward path, a Kubernetes cluster mix
with ``--kubeconfig``, DoT, DoH over HTTP/2 and HTTP/1.1, gRPC and DoQ).
Each round runs every workload against corednstw (``twistd -n
coredns``) and, with ``--reference``, against that CoreDNS binary given
the very same Corefile; the two alternate (the order flips every round)
so that the load of other work on the machine falls on both alike.  Each
server is pinned to one core with taskset; the load (dnsperf ``-c 50 -T
1 -q 500``, or ``-m dot|doh``, or bench/stream_client.py for the
transports dnsperf lacks) runs on the other, for the same number of
seconds.

Measured per run:

* queries per server CPU-second (completed queries over the server's
  user+system CPU time, from /proc): the headline, as corednstw's over
  CoreDNS's in the same round; the QPS and its ratio beside it;
* the server's CPU use, the load client's own CPU and how busy the
  client's core was (a run whose client core was full is flagged), the
  load average at the start and end;
* p50/p99 latency of the queries a sampler sends alongside at a fixed
  rate (``--sample-rate``; UDP workloads only);
* RSS of the server process after the run (VmRSS from /proc), and the
  cache's hit rate from the server's own counters where there is one;
* correctness: every answer the sampler gets is checked in full with
  dnspython (rcode, records; whoami: the client's address and port);
  over the transports, the answers are checked over the transport
  itself; queries lost are counted apart; with prometheus, the server's
  coredns_dns_requests_total must count at least what dnsperf completed.

The summary gives, per workload, the median and range over the rounds
of both ratios, with both servers' CPU, q/CPU-s and RSS.
"""

import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
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

HERE = os.path.dirname(os.path.abspath(__file__))

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
    #: Whether the Corefile has prometheus (its request counter is then
    #: checked against dnsperf's count).
    prometheus = True
    #: How the load is sent: "udp" (dnsperf), "dot" and "doh" (dnsperf
    #: -m dot|doh), "doh-h1", "grpc", "doq" (bench/stream_client.py).
    transport = "udp"

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

    def checks(self):
        """The questions checked in full over a transport before its run
        (one connection each)."""
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


class FileWide(File):
    """The ``file`` path where a question does not come back soon: a zone
    of 20,000 names asked in a fixed shuffled order, with 2,000 names it
    lacks.  dnsperf walks the list in order, so an answer ``file`` keeps
    made (at most 2,048) is dropped before its question comes again: each
    query is looked up and encoded, as the small zone's six questions are
    not."""

    name = "file-wide"
    NAMES = 20000
    MISSING = 2000

    def __init__(self):
        import random
        expect = {("h%d.example.org" % i, "A"): (NOERROR, [self.addr(i)])
                  for i in range(self.NAMES)}
        expect.update((("gone%d.example.org" % i, "A"), (NXDOMAIN, []))
                      for i in range(self.MISSING))
        order = list(expect)
        random.Random(2).shuffle(order)
        self.expect = {q: expect[q] for q in order}

    @staticmethod
    def addr(i):
        return "10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255)

    def prepare(self, work):
        names = "".join("h%d IN A %s\n" % (i, self.addr(i))
                        for i in range(self.NAMES))
        write(os.path.join(work, "wide.example.org.zone"), FILE_ZONE + names)

    def corefile(self, ports, work):
        return File.corefile(self, ports, work).replace(
            "example.org.zone", "wide.example.org.zone")

    def warm(self):
        return list(self.expect)[:200]

    def checks(self):
        return list(self.expect)[:200]


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


class Upstream:
    """unbound on the client core (the same for both servers), started
    once for every workload that forwards: ``n0`` ... ``nN.bench.test``
    A records in a static local zone."""

    names = 5000
    proc = None
    port = None

    @classmethod
    def start(cls, work, cpu):
        if cls.proc is None:
            cls.port = free_port()
            cls.proc = forward_bench.start_unbound(work, cls.port, cls.names,
                                                   cpu)
            dnsperf_run.wait_answer(cls.port, "n0.bench.test.", timeout=20)
        return cls.port

    @classmethod
    def stop(cls):
        if cls.proc is not None:
            stop(cls.proc)
            cls.proc = None


class Cache(Workload):
    """Cache hits: forward to a local unbound, every name warmed first."""

    name = "cache"
    probe = "n0.bench.test."
    names = 100
    cache = "    cache\n"

    def __init__(self):
        self.expect = {("n%d.bench.test" % i, "A"):
                       (NOERROR, [forward_bench.address(i)])
                       for i in range(self.names)}
        self.upstream_port = None

    def prepare(self, work):
        self.upstream_port = Upstream.start(work, self.client_cpu)

    def corefile(self, ports, work):
        return (".:%d {\n%s    forward . 127.0.0.1:%d\n"
                "    prometheus 127.0.0.1:%d\n}\n"
                % (ports["dns"], self.cache, self.upstream_port,
                   ports["metrics"]))


class Forward(Cache):
    """The forward path: no cache, every query goes to the local unbound
    (on the client core) and its answer comes back through forward."""

    name = "forward"
    cache = ""

    def warm(self):
        return list(self.expect)[:10]


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


PROMETHEUS_LINE = re.compile(r"^ *prometheus .*\n", re.M)


def without_prometheus(cls):
    """The workload ``cls`` with the prometheus line taken out of its
    Corefile: the cost of the metrics apart from the rest."""

    def corefile(self, ports, work):
        return PROMETHEUS_LINE.sub("", cls.corefile(self, ports, work))

    return type(cls.__name__ + "NoProm", (cls,), {
        "name": cls.name + "-noprom", "prometheus": False,
        "corefile": corefile, "__doc__": cls.__doc__})


class Transport(File):
    """The ``file`` workload's zone and questions over another transport:
    a ``dns://`` block for the readiness probe and a second block on the
    transport's own key (with ``tls`` where it needs one), both with the
    same plugins.  No UDP sampler runs beside the load (it would add UDP
    work to the transport's figures): the answers are checked over the
    transport itself."""

    scheme = ""
    tls = True
    cert = key = None

    def prepare(self, work):
        super().prepare(work)
        if Transport.cert is None:
            import transports_bench
            Transport.cert, Transport.key = transports_bench.certificate(
                work)

    def corefile(self, ports, work):
        inner = super().corefile(ports, work).split("{", 1)[1]
        tls = ("    tls %s %s\n" % (self.cert, self.key)) if self.tls else ""
        return (".:%d {%s%s://.:%d {\n%s%s"
                % (ports["dns"], inner, self.scheme, ports["tport"], tls,
                   inner.lstrip("\n")))


def transport(name, scheme, tls=True, base=None, kind=None):
    """A Transport workload; ``base``: its zone and questions when not
    the small ``file`` zone's; ``kind``: how the load is sent, when not
    ``name``."""
    bases = (Transport,) if base is None else (Transport, base)
    return type("Transport_" + name.replace("-", "_"), bases, {
        "name": name, "transport": kind or name, "scheme": scheme, "tls": tls,
        "__doc__": Transport.__doc__})


class ClusterMix(Kubernetes):
    """A pod's view of kubeadm's whole Corefile against a real API server
    (``--kubeconfig``): Service A records, the A records of a headless
    Service's endpoints (by their dashed-address names), SRV for the
    named port, PTR of Service addresses, AAAA NODATA, the three
    NXDOMAINs that ndots:5's search path asks before an external name,
    and external names answered through forward by the local unbound.
    The name set (about 30,000 with 10,000 Services) is larger than the
    cache's 9,984 entries, so ``cache 30`` evicts as it would in a busy
    cluster.  The questions are in a fixed shuffled order."""

    name = "cluster"
    probe = "svc1.ns1.svc.cluster.local."
    cache = ""
    #: The questions, built once for both variants.
    shared = None

    def prepare(self, work):
        self.upstream_port = Upstream.start(work, self.client_cpu)
        if ClusterMix.shared is not None:
            self.expect = ClusterMix.shared
            return
        import random

        import k8s_bench
        core, disc = k8s_bench.kube(self.kubeconfig)
        have = k8s_bench.populate(core, disc, self.services, 100, 0)
        endpoints = {}
        for sl in k8s_bench.raw_list(
                disc.list_endpoint_slice_for_all_namespaces):
            svc = (sl["metadata"].get("labels") or {}).get(
                "kubernetes.io/service-name")
            key = (svc, sl["metadata"]["namespace"])
            for ep in sl.get("endpoints") or ():
                if (ep.get("conditions") or {}).get("ready") is not False:
                    endpoints.setdefault(key, set()).update(ep["addresses"])
        expect = {}
        external = 0
        for i in range(self.services):
            name, ns = "svc%d" % i, "ns%d" % (i % 100)
            ip = have.get((name, ns))
            if ip is None:
                continue
            fqdn = "%s.%s.svc.cluster.local" % (name, ns)
            if ip == "None":
                addrs = sorted(endpoints.get((name, ns), ()))
                expect[(fqdn, "A")] = (NOERROR, addrs)
                for a in addrs:
                    expect[("%s.%s" % (a.replace(".", "-"), fqdn), "A")] = (
                        NOERROR, [a])
            else:
                expect[(fqdn, "A")] = (NOERROR, [ip])
            if i % 5 == 1:
                expect[("_http._tcp." + fqdn, "SRV")] = (NOERROR, None)
                expect[(fqdn, "AAAA")] = (NOERROR, [])
                if ip != "None":
                    rev = ".".join(reversed(ip.split("."))) + ".in-addr.arpa"
                    expect[(rev, "PTR")] = (NOERROR, [fqdn + "."])
            if i % 5 == 3 and external < Upstream.names:
                ext = "n%d.bench.test" % external
                for search in (ns + ".svc.cluster.local", "svc.cluster.local",
                               "cluster.local"):
                    expect[("%s.%s" % (ext, search), "A")] = (NXDOMAIN, [])
                expect[(ext, "A")] = (NOERROR,
                                      [forward_bench.address(external)])
                external += 1
        order = list(expect)
        random.Random(1).shuffle(order)
        self.expect = ClusterMix.shared = {q: expect[q] for q in order}

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
    forward . 127.0.0.1:{upstream} {{
        max_concurrent 1000
    }}
    {cache}
    loop
    reload
    loadbalance
}}
""".format(kubeconfig=os.path.abspath(self.kubeconfig), cache=self.cache,
           upstream=self.upstream_port, **ports)


class ClusterMixCache(ClusterMix):
    """The same with ``cache 30``, as kubeadm deploys it."""

    name = "cluster-cache"
    cache = "cache 30"


_BASE = (Whoami, File, FileWide, Kubeadm, Cache, Forward)
WORKLOADS = {w.name: w for w in (
    _BASE + tuple(without_prometheus(w) for w in _BASE)
    + (transport("dot", "tls"), transport("doh", "https"),
       transport("doh-h1", "https"), transport("grpc", "grpc", tls=False),
       transport("doq", "quic"),
       transport("dot-wide", "tls", base=FileWide, kind="dot"))
    + (Kubernetes, KubernetesCache, ClusterMix, ClusterMixCache))}
UDP_WORKLOADS = ",".join(w.name for w in _BASE) + "," + ",".join(
    w.name + "-noprom" for w in _BASE)
DEFAULT_WORKLOADS = UDP_WORKLOADS + ",dot,dot-wide,doh,doh-h1,grpc,doq"


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

def cache_counts(text):
    """(hits, misses) of the cache plugin in a metrics page: both
    servers name them alike."""
    hits = misses = 0.0
    for line in text.splitlines():
        if line.startswith("coredns_cache_hits_total{"):
            hits += float(line.rsplit(" ", 1)[1])
        elif line.startswith("coredns_cache_misses_total{"):
            misses += float(line.rsplit(" ", 1)[1])
    return hits, misses


def loadavg():
    """The 1-minute load average."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def core_busy(cpu):
    """(busy, total) jiffies of core ``cpu`` so far, from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%s " % cpu):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + v[4]
                return sum(v[:8]) - idle, sum(v[:8])
    return 0, 0


def measure(workload, server, work, args):
    """Start ``server`` with the workload, warm it, load it (dnsperf, or
    bench/stream_client.py for the transports dnsperf lacks) while the
    sampler asks alongside over UDP, and return the figures of the
    run."""
    ports = {k: free_port()
             for k in ("dns", "metrics", "health", "ready", "tport")}
    run_dir = tempfile.mkdtemp(dir=work)
    proc = start(server, workload.corefile(ports, work), run_dir,
                 args.server_cpu)
    udp = workload.transport == "udp"
    sampler = probe = None
    try:
        dnsperf_run.wait_answer(ports["dns"], workload.probe)
        if udp:
            for name, rtype in workload.warm():     # caches, code paths
                ask(ports["dns"], name, rtype)
            sampler = Sampler(ports["dns"], workload,
                              args.sample_rate / (10 if args.probe ==
                                                  "dnsperf" else 1),
                              args.seconds)
        else:
            wait_transport(workload, ports["tport"])
        checked = (check_dot(workload, ports["tport"])
                   if workload.transport == "dot" else True)
        murl = "http://127.0.0.1:%d/metrics" % ports["metrics"]
        first = scrape(murl) if workload.prometheus else ""
        before = requests_total(first)
        qpath = os.path.join(run_dir, "queries.txt")
        write(qpath, "".join("%s %s\n" % q for q in workload.queries()))
        if udp and args.probe == "dnsperf":
            probe = DnsperfProbe(ports["dns"], qpath, args)
            probe.start()
        if sampler is not None:
            sampler.start()
        load0, busy0 = loadavg(), core_busy(args.client_cpu)
        cpu = cpu_seconds(proc.pid)
        stats = load(workload, ports, qpath, args, checked)
        cpu = cpu_seconds(proc.pid) - cpu
        busy1 = core_busy(args.client_cpu)
        if sampler is not None:
            sampler.join()
        if probe is not None:
            probe.join()
        rss = rss_mb(proc.pid)
        after = scrape(murl) if workload.prometheus else ""
        counted = (requests_total(after) - before
                   if workload.prometheus else None)
    finally:
        stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)
    if sampler is not None:
        lat = sorted(sampler.latencies if probe is None
                     else probe.latencies)
        stats.update(good=sampler.good, asked=sampler.asked,
                     answered=len(sampler.latencies),
                     p50=percentile(lat, 0.50), p99=percentile(lat, 0.99))
    else:
        stats.update(asked=stats["answered"], p50=None, p99=None)
    ticks = busy1[1] - busy0[1]
    hits, misses = (a - b for a, b in zip(cache_counts(after),
                                          cache_counts(first)))
    stats.update(rss=rss, counted=counted, cpu=cpu,
                 hit_rate=(100.0 * hits / (hits + misses)
                           if hits + misses else None),
                 per_cpu=stats["completed"] / cpu if cpu else 0.0,
                 core=(100.0 * (busy1[0] - busy0[0]) / ticks
                       if ticks else 0.0),
                 load=(load0, loadavg()))
    return stats


def load(workload, ports, qpath, args, checked=True):
    """Send the load of ``workload`` for ``--seconds``; dnsperf's figures
    (``stats``) with ``good``/``answered`` for the transports (whose
    answers are checked here) and ``client_cpu``, the load client's own
    CPU seconds.  ``checked``: whether the answers checked before the
    run over the transport itself were right."""
    t = workload.transport
    if t in ("udp", "dot", "doh"):
        port = ports["dns"] if t == "udp" else ports["tport"]
        kw = ({} if t == "udp" else
              {"mode": t, "clients": 20, "outstanding": 200})
        stats, _ = dnsperf_run.run_dnsperf(
            port, qpath, args.seconds, core=args.client_cpu, rate=args.rate,
            **kw)
        if t != "udp":
            right = (checked and _nxdomain_share(workload, stats)
                     and stats["noerror"] + stats["nxdomain"]
                     == stats["completed"])
            stats.update(good=stats["completed"] if right else 0,
                         answered=stats["completed"])
        return stats
    cmd = ["taskset", "-c", args.client_cpu, sys.executable,
           os.path.join(HERE, "stream_client.py"), "--transport", t,
           "--port", str(ports["tport"]), "--queries", qpath,
           "--seconds", str(args.seconds)]
    cmd += (["--connections", "20"] if t == "doh-h1" else
            ["--connections", "2", "--inflight", "50"])
    out = subprocess.run(cmd, capture_output=True, text=True)
    try:
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as e:
        raise RuntimeError("stream_client failed: %s"
                           % out.stderr[-2000:]) from e
    queries = workload.queries()
    right = all(workload.right(dns.message.from_wire(bytes.fromhex(w)),
                               *queries[int(i)], 0)
                for i, w in r["first"].items())
    return {"sent": r["sent"], "completed": r["completed"],
            "lost": r["sent"] - r["completed"],
            "qps": r["completed"] / r["wall"], "client_cpu": r["cpu"],
            "good": r["completed"] - r["mismatches"] if right else 0,
            "answered": r["completed"]}


def _nxdomain_share(workload, stats):
    """Whether dnsperf's NXDOMAIN count is the share of the questions
    that must get one (dnsperf asks them in turn), within 1%."""
    want = sum(1 for rcode, _ in workload.expect.values()
               if rcode == NXDOMAIN) / len(workload.expect)
    done = stats["completed"]
    return done > 0 and abs(stats["nxdomain"] - want * done) <= 0.01 * done


def check_dot(workload, port):
    """Every question once over DNS over TLS with dnspython, each answer
    checked in full (dnsperf counts only rcodes)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for name, rtype in workload.checks():
        q = dns.message.make_query(name, rtype)
        try:
            r = dns.query.tls(q, "127.0.0.1", port=port, timeout=3,
                              ssl_context=ctx)
        except Exception:
            return False
        if not workload.right(r, name, rtype, 0):
            return False
    return True


def wait_transport(workload, port, timeout=30):
    """Wait until the transport's listener accepts a connection (TCP), or
    a moment for QUIC, whose first query the client retries."""
    deadline = time.monotonic() + timeout
    while workload.transport != "doq":
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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

HEADER = ("%-14s %-9s %3s %7s %5s %8s %5s %5s %7s %7s %6s %8s %5s %5s %6s "
          "%9s" % ("workload", "server", "rnd", "QPS", "CPU%", "q/CPU-s",
                   "cli%", "core%", "p50 ms", "p99 ms", "RSS MB", "correct",
                   "lost", "ratio", "r/CPU", "load"))


def _ms(v):
    return "-" if v is None else "%.2f" % v


def saturated(s):
    """Whether the client core was the limit of the run: the core the
    load client runs on was busy 95% of the time or more (the client,
    the sampler, a local upstream and the machine's other work)."""
    return s["core"] >= 95.0


def row(workload, server, rnd, s, ratio):
    share = 100.0 * s["good"] / s["answered"] if s["answered"] else 0.0
    lost = s["lost"] + s["asked"] - s["answered"]
    busy = 100.0 * s["cpu"] / s["seconds"] if s["seconds"] else 0.0
    cpu_ratio = s.get("cpu_ratio")
    return ("%-14s %-9s %3d %7.0f %5.0f %8.0f %5.0f %4.0f%s %7s %7s %6.1f "
            "%7.2f%% %5d %5s %6s %4.1f-%-4.1f"
            % (workload, server, rnd, s["qps"], busy, s["per_cpu"],
               100.0 * s["client_cpu"] / s["seconds"], s["core"],
               "*" if saturated(s) else " ", _ms(s["p50"]), _ms(s["p99"]),
               s["rss"], share, lost,
               "%.2f" % ratio if ratio else "-",
               "%.2f" % cpu_ratio if cpu_ratio else "-",
               s["load"][0], s["load"][1]))


def summarize(results, names):
    """Per workload: the headline, corednstw's queries per server CPU
    second over CoreDNS's (median and range over the rounds), the QPS
    ratio beside it, both servers' CPU use and q/CPU-s (medians), RSS
    (largest), the rounds whose client core was saturated, the share of
    right answers, the load average over the workload's runs, and the
    cache's hit rate where there is one."""
    lines = ["", "%-14s %16s %16s %5s %5s %8s %8s %6s %6s %4s %7s %9s %9s"
             % ("workload", "ratio/CPU med", "ratio QPS med", "CPU%",
                "ref%", "q/CPU-s", "ref", "RSS", "ref", "sat",
                "correct", "load", "hit%"),
             "%-14s %16s %16s %5s %5s %8s %8s %6s %6s %4s %7s %9s %9s"
             % ("", "[min-max]", "[min-max]", "ours", "", "ours", "", "MB",
                "MB", "", "%", "min-max", "ours/ref")]
    for wname in names:
        ours = [r for r in results
                if r["workload"] == wname and r["server"] == "corednstw"]
        ref = [r for r in results
               if r["workload"] == wname and r["server"] == "coredns"]
        if ours:
            lines.append(_summary_line(wname, ours, ref))
    return "\n".join(lines)


def _summary_line(wname, ours, ref):
    everything = ours + ref
    good = sum(r["good"] for r in everything)
    total = sum(r["answered"] for r in everything)
    loads = [v for r in everything for v in r["load"]]

    def busy(runs):
        return median([100.0 * r["cpu"] / r["seconds"] for r in runs])

    return ("%-14s %16s %16s %5.0f %5s %8.0f %8s %6.1f %6s %4d %7.2f "
            "%4.1f-%-4.1f %9s"
            % (wname, _span([r.get("cpu_ratio") for r in ours]),
               _span([r.get("ratio") for r in ours]), busy(ours),
               "%.0f" % busy(ref) if ref else "-",
               median([r["per_cpu"] for r in ours]),
               "%.0f" % median([r["per_cpu"] for r in ref]) if ref else "-",
               max(r["rss"] for r in ours),
               "%.1f" % max(r["rss"] for r in ref) if ref else "-",
               sum(1 for r in everything if saturated(r)),
               100.0 * good / total if total else 0.0,
               min(loads), max(loads), _hits(ours, ref)))


def _hits(ours, ref):
    """The cache's median hit rate of both servers (their own counters),
    for workloads with a cache."""
    rates = [[r["hit_rate"] for r in runs if r.get("hit_rate") is not None]
             for runs in (ours, ref)]
    if not any(rates):
        return "-"
    return "/".join("%.0f" % median(x) if x else "-" for x in rates)


def _span(values):
    values = [v for v in values if v]
    if not values:
        return "-"
    return "%.2f [%.2f-%.2f]" % (median(values), min(values), max(values))


def median(values):
    """The median (the mean of the middle two of an even count)."""
    values = sorted(values)
    n = len(values)
    if not n:
        return 0.0
    return (values[n // 2] if n % 2
            else (values[n // 2 - 1] + values[n // 2]) / 2)


# --- main --------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", help="path of a CoreDNS binary")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
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
    if any(w.startswith(("k8s", "cluster")) for w in args.workloads) \
            and not args.kubeconfig:
        ap.error("the k8s and cluster workloads need --kubeconfig")
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
            if s["counted"] is not None and \
                    s["counted"] < s["completed"]:
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
        start_load = loadavg()
        print("%s, load average %.2f; * = client core busy >= 95%%"
              % (time.strftime("%Y-%m-%d %H:%M"), start_load), flush=True)
        print(HEADER, flush=True)
        for rnd in range(1, args.rounds + 1):
            run_round(rnd, workloads, work, args, results)
    finally:
        for wl in workloads:
            wl.stop()
        Upstream.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(summarize(results, args.workloads))
    print("\nload average %.2f at the start, %.2f at the end; %d rounds of "
          "%d s" % (start_load, loadavg(), args.rounds, args.seconds))
    if args.json:
        write(args.json, json.dumps(results, indent=1) + "\n")
    bad = [r for r in results if r["good"] != r["answered"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
