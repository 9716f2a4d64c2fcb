"""End to end: the shared example Corefiles, run the way users run them.

Each test starts the real service (tests.support.util.start) on a shared
example
Corefile changed only where a test must: DNS ports become 0 (or a free
port where two ports must differ), HTTP addresses become loopback
addresses on port 0, ``/etc/resolv.conf`` becomes a resolv.conf in a
temporary directory naming a test upstream, ``kubernetes`` gets an
``endpoint`` line for the test API server, relative zone file names point
into the temporary directory.  Every change is an exact text replacement
that must match, so a changed example Corefile breaks the test loudly.
"""

import functools
import os
import random
import re
import shutil
import struct
import subprocess
import sys

import dns.flags
import dns.message
import dns.rcode
from twisted.internet import defer, endpoints, error, protocol, reactor
from twisted.trial import unittest

from corednstw.core import dnswire, metrics
from corednstw.plugins import loop as loopmod
from tests.support import k8s_apiserver as k8s
from tests.support import upstream as upstreammod
from tests.support import util
from tests.support.e2e import Resolver, no_lameduck, probes_answered
from tests.support.unbound import free_port

SHARED = os.path.join(util.REPO, "tests", "corefiles", "shared")
TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")

#: CoreDNS's default log format (a `log` line without a format).
LOG_LINE = (r'^\[INFO\] 127\.0\.0\.1:%d - %d "%s IN %s %s %d %s %d" '
            r'%s %s %d \d+(\.\d+)?s$')


# -- the Corefiles and their adaptation ---------------------------------------

def shared(name):
    with open(os.path.join(SHARED, name)) as fh:
        return fh.read()


def adapt(text, *pairs):
    """Replace each (old, new) pair; every ``old`` must be there."""
    for old, new in pairs:
        if old not in text:
            raise AssertionError("%r is not in the Corefile" % old)
        text = text.replace(old, new)
    return text


def zone_files(directory, names):
    """Copy shared zone files into ``directory``/zones (as named there)."""
    os.makedirs(os.path.join(directory, "zones"), exist_ok=True)
    for dst, src in names.items():
        shutil.copy(os.path.join(SHARED, "zones", src),
                    os.path.join(directory, "zones", dst))


def temp_dir(testcase):
    return util.write_files(testcase, {})


def set_env(testcase, name, value):
    old = os.environ.get(name)
    os.environ[name] = value

    def restore():
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
    testcase.addCleanup(restore)


# -- small clients ------------------------------------------------------------

class _Once(protocol.DatagramProtocol):
    def __init__(self):
        self.d = defer.Deferred()

    def datagramReceived(self, data, addr):
        if not self.d.called:
            self.d.callback(data)


@defer.inlineCallbacks
def ask_from(port, msg, timeout=5):
    """Send ``msg`` over UDP; (parsed reply, the client's port, the
    reply's size)."""
    client = _Once()
    lp = reactor.listenUDP(0, client, interface="127.0.0.1")
    cport = lp.getHost().port
    timer = reactor.callLater(timeout, lambda: client.d.called or
                              client.d.errback(error.TimeoutError("UDP")))
    try:
        lp.write(msg.to_wire(), ("127.0.0.1", port))
        data = yield client.d
    finally:
        if timer.active():
            timer.cancel()
        yield lp.stopListening()
    defer.returnValue((dns.message.from_wire(data), cport, len(data)))


def metric_lines(body, family):
    return [x for x in body.splitlines()
            if x.startswith(family + "{") or x.startswith(family + " ")]


def sample(body, family, **labels):
    """The value of the one sample of ``family`` with these labels."""
    found = []
    for line in metric_lines(body, family):
        if all('%s="%s"' % kv in line for kv in labels.items()):
            found.append(float(line.rsplit(" ", 1)[1]))
    if len(found) != 1:
        raise AssertionError("%s %r: %d samples" % (family, labels,
                                                     len(found)))
    return found[0]


def serial_free(msg, section):
    return [re.sub(r"(SOA \S+ \S+ )\d+", r"\1SERIAL", x)
            for x in util.rrs(msg, section)]


@defer.inlineCallbacks
def wait_ttl_below(port, name, rdtype, ttl, timeout=10):
    """Ask until the answer's TTL is below ``ttl`` (a condition polled on
    the reactor, no fixed sleep); returns the last answer."""
    deadline = reactor.seconds() + timeout
    while True:
        m = yield util.query(port, name, rdtype)
        if m.answer and m.answer[0].ttl < ttl:
            defer.returnValue(m)
        if reactor.seconds() > deadline:
            raise AssertionError("TTL of %s stayed at %d" % (name, ttl))
        d = defer.Deferred()
        reactor.callLater(0.05, d.callback, None)
        yield d


# -- the cluster of the kubeadm examples --------------------------------------

KUBE_DNS = "kube-dns.kube-system.svc.cluster.local."
WEB = "web.default.svc.cluster.local."
DUAL = "dual.default.svc.cluster.local."
EXT = "ext.default.svc.cluster.local."
WEB_IPS = ["10.244.1.%d" % i for i in (1, 2, 3, 4)]


def kubeadm_cluster(api):
    api.add("namespaces", k8s.namespace("default"),
            k8s.namespace("kube-system"))
    api.add("services",
            k8s.service("kubernetes", "default", ("10.96.0.1",),
                        (("https", "TCP", 443),)),
            k8s.service("kube-dns", "kube-system", ("10.96.0.10",),
                        (("dns", "UDP", 53), ("dns-tcp", "TCP", 53),
                         ("metrics", "TCP", 9153))),
            k8s.service("web", "default", ("None",)),
            k8s.service("dual", "default", ("10.96.0.20", "fd00::20")),
            k8s.service("ext", "default", type="ExternalName",
                        external="www.example.com"))
    api.add("endpointslices",
            k8s.endpoint_slice("kube-dns-x1", "kube-system", "kube-dns", [
                k8s.endpoint(["10.244.0.2"], target="coredns-a"),
                k8s.endpoint(["10.244.0.3"], target="coredns-b")],
                (("dns", "UDP", 53), ("dns-tcp", "TCP", 53),
                 ("metrics", "TCP", 9153))),
            k8s.endpoint_slice("web-x1", "default", "web", [
                k8s.endpoint([ip], hostname="web-%d" % i)
                for i, ip in enumerate(WEB_IPS)]))


def kubeadm_corefile(api_url, resolver, ready="127.0.0.2:0"):
    return adapt(
        shared("kubernetes-default.Corefile"),
        (".:53 {", ".:0 {"),
        ("    health {", "    health 127.0.0.1:0 {"),
        ("    ready\n", "    ready %s\n" % ready),
        ("        pods insecure\n",
         "        endpoint %s\n        pods insecure\n" % api_url),
        ("prometheus :9153", "prometheus 127.0.0.3:0"),
        ("/etc/resolv.conf", resolver.target))


SOA30 = ("cluster.local. 30 IN SOA ns.dns.cluster.local. "
         "hostmaster.cluster.local. SERIAL 7200 1800 86400 30")


class KubeadmTest(unittest.TestCase):
    """kubernetes-default.Corefile: the cluster DNS kubeadm installs."""

    @defer.inlineCallbacks
    def setUp(self):
        self.exits = []
        self.patch(loopmod, "default_exit", self.exits.append)
        self.log = util.capture_log(self)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        kubeadm_cluster(self.api)
        self.dir = temp_dir(self)
        self.resolver = Resolver(self, self.dir)
        self.up = self.resolver.up
        self.app = yield util.start(
            self, kubeadm_corefile(self.api.url, self.resolver))
        no_lameduck(self, self.app)
        self.port = self.app.port()
        yield probes_answered(self.app)

    def ask(self, name, rdtype="A", **kw):
        return util.query(self.port, name, rdtype, **kw)

    @defer.inlineCallbacks
    def test_services(self):
        m = yield self.ask(KUBE_DNS)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m), [KUBE_DNS + " 30 IN A 10.96.0.10"])
        m = yield self.ask(DUAL, "AAAA")
        self.assertEqual(util.rrs(m), [DUAL + " 30 IN AAAA fd00::20"])
        m = yield self.ask(DUAL, "A", proto="tcp")
        self.assertEqual(util.rrs(m), [DUAL + " 30 IN A 10.96.0.20"])
        # A service without IPv6 has no AAAA: NODATA with the SOA.
        m = yield self.ask(KUBE_DNS, "AAAA")
        self.assertEqual((m.rcode(), m.answer), (dns.rcode.NOERROR, []))
        self.assertEqual(serial_free(m, "authority"), [SOA30])
        # Pods insecure: any dashed address in a namespace that exists.
        m = yield self.ask("10-244-1-5.default.pod.cluster.local.")
        self.assertEqual(util.rrs(m), [
            "10-244-1-5.default.pod.cluster.local. 30 IN A 10.244.1.5"])
        # The query's case comes back in a fresh answer; the cache then
        # sends the case it stored, as CoreDNS's cache does.
        mixed = "Kube-DNS.kube-system.SVC.cluster.local."
        m = yield self.ask(mixed, "SRV")
        self.assertEqual(str(m.answer[0].name), mixed)
        m = yield self.ask(KUBE_DNS, "SRV")
        self.assertEqual(str(m.answer[0].name), mixed)

    @defer.inlineCallbacks
    def test_srv(self):
        name = "_dns._udp." + KUBE_DNS
        m = yield self.ask(name, "SRV")
        self.assertEqual(util.rrs(m), [name + " 30 IN SRV 0 100 53 "
                                       + KUBE_DNS])
        self.assertEqual(util.rrs(m, "additional"),
                         [KUBE_DNS + " 30 IN A 10.96.0.10"])
        # A headless service: one SRV per endpoint, named by hostname.
        m = yield self.ask("_http._tcp." + WEB, "SRV")
        self.assertEqual(util.rrs(m), sorted(
            "_http._tcp.%s 30 IN SRV 0 25 80 web-%d.%s" % (WEB, i, WEB)
            for i in range(4)))
        self.assertEqual(util.rrs(m, "additional"), sorted(
            "web-%d.%s 30 IN A %s" % (i, WEB, ip)
            for i, ip in enumerate(WEB_IPS)))

    @defer.inlineCallbacks
    def test_ptr(self):
        m = yield self.ask("10.0.96.10.in-addr.arpa.", "PTR")
        self.assertEqual(util.rrs(m), [
            "10.0.96.10.in-addr.arpa. 30 IN PTR " + KUBE_DNS])
        self.assertTrue(m.flags & dns.flags.AA)
        m = yield self.ask("2.1.244.10.in-addr.arpa.", "PTR")
        self.assertEqual(util.rrs(m), [
            "2.1.244.10.in-addr.arpa. 30 IN PTR web-1." + WEB])
        self.assertEqual(self.up.count(qtype="PTR"), 0)

    @defer.inlineCallbacks
    def test_reverse_outside_cluster_falls_through(self):
        # No service or endpoint has 192.0.2.55: kubernetes' NXDOMAIN
        # falls through (in-addr.arpa) to forward, the node's resolver.
        name = "55.2.0.192.in-addr.arpa."
        m = yield self.ask(name, "PTR")
        self.assertEqual(self.up.count(name, "PTR"), 1)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertFalse(m.flags & dns.flags.AA)
        self.assertTrue(m.flags & dns.flags.RA)
        self.assertEqual(util.rrs(m, "authority"), [
            "example. 30 IN SOA ns.example. host.example. 1 7200 1800 "
            "86400 60"])
        # ip6.arpa too.
        name6 = ("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0."
                 "1.0.0.2.ip6.arpa.")
        yield self.ask(name6, "PTR")
        self.assertEqual(self.up.count(name6, "PTR"), 1)
        # A cluster.local name does not fall through: NXDOMAIN, SOA.
        m = yield self.ask("nosuch.default.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(serial_free(m, "authority"), [SOA30])
        self.assertEqual(self.up.count("nosuch.default.svc.cluster.local."),
                         0)

    @defer.inlineCallbacks
    def test_nxdomain(self):
        for name in ("nosuch.default.svc.cluster.local.",
                     "web.nons.svc.cluster.local.",
                     "a.b.c.d.e.cluster.local."):
            m = yield self.ask(name)
            self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN, name)
            self.assertEqual(m.answer, [], name)
            self.assertEqual(serial_free(m, "authority"), [SOA30], name)
        # The second one comes from the cache (TTL at most 30, same SOA).
        m = yield self.ask("nosuch.default.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertLessEqual(m.authority[0].ttl, 30)

    @defer.inlineCallbacks
    def test_forwarded_and_cached(self):
        name = "www.example.org."
        m = yield self.ask(name)
        self.assertEqual(self.up.count(name, "A"), 1)
        # The upstream's TTL of 300 is capped by `cache 30`.
        self.assertEqual(util.rrs(m), [name + " 30 IN A 192.0.2.1"])
        self.assertTrue(m.flags & dns.flags.RA)
        m2 = yield self.ask(name)
        self.assertEqual(self.up.count(name, "A"), 1)   # a cache hit
        self.assertEqual(m2.answer[0][0].address, "192.0.2.1")
        self.assertLessEqual(m2.answer[0].ttl, 30)
        m3 = yield wait_ttl_below(self.port, name, "A", 30)
        self.assertEqual(m3.answer[0][0].address, "192.0.2.1")
        self.assertEqual(self.up.count(name, "A"), 1)
        # The node's resolver is asked over UDP.
        self.assertEqual(self.up.count(name, "A", "udp"), 1)
        # NXDOMAIN from upstream is cached too.
        yield self.ask("nxhost.example.org.")
        m = yield self.ask("nxhost.example.org.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(self.up.count("nxhost.example.org."), 1)

    @defer.inlineCallbacks
    def test_external_name(self):
        m = yield self.ask(EXT)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        got = util.rrs(m)
        self.assertIn(EXT + " 30 IN CNAME www.example.com.", got)
        self.assertEqual([x.split()[-1] for x in got if " IN A " in x],
                         ["192.0.2.1"])
        self.assertEqual(self.up.count("www.example.com.", "A"), 1)
        # Asked again: cached, upstream not asked again.
        m = yield self.ask(EXT)
        self.assertEqual(len(m.answer), 2)
        self.assertEqual(self.up.count("www.example.com.", "A"), 1)

    @defer.inlineCallbacks
    def test_loadbalance(self):
        orders = set()
        for _ in range(40):
            m = yield self.ask(WEB)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
            ips = [rd.address for rrset in m.answer for rd in rrset]
            self.assertEqual(sorted(ips), WEB_IPS)
            orders.add(tuple(ips))
        # Shuffled on every answer, cache hits included: 40 answers in
        # one order of 24 would be a chance of 24**-39.
        self.assertGreater(len(orders), 1)

    @defer.inlineCallbacks
    def test_loop_does_not_fire(self):
        lp = self.app.config.blocks[0].plugin("loop")
        # The probe went through forward to the node's resolver and its
        # answer came back once: no loop.
        yield util.wait_for(lambda: self.up.count(lp.qname, "HINFO") >= 1)
        m = yield self.ask("www.example.net.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(lp.seen, 1)
        self.assertFalse(lp.fatal)
        self.assertEqual(self.exits, [])
        self.assertNotIn("[FATAL]", self.log.text())

    @defer.inlineCallbacks
    def test_health_and_metrics(self):
        status = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                     "/health")
        self.assertEqual(status, (200, "OK"))
        status = yield util.http_get(self.app.http_port("127.0.0.2:0"),
                                     "/ready", "127.0.0.2")
        self.assertEqual(status, (200, "OK"))
        # Each endpoint on its own address, as on its own port in CoreDNS.
        status = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                     "/ready")
        self.assertEqual(status[0], 404)
        yield self.ask(KUBE_DNS)
        yield self.ask(KUBE_DNS)
        yield self.ask("www.example.org.")
        code, body = yield util.http_get(self.app.http_port("127.0.0.3:0"),
                                         "/metrics", "127.0.0.3")
        self.assertEqual(code, 200)
        server = self.app.listeners[next(iter(self.app.listeners))].mux.label
        for family in (
                "coredns_build_info",
                "coredns_dns_requests_total",
                "coredns_dns_responses_total",
                "coredns_dns_request_duration_seconds_bucket",
                "coredns_plugin_enabled",
                "coredns_kubernetes_rest_client_requests_total",
                "coredns_kubernetes_rest_client_request_duration_seconds_"
                "bucket",
                "coredns_forward_healthcheck_broken_total",
                "coredns_forward_max_concurrent_rejects_total",
                "coredns_proxy_request_duration_seconds_bucket",
                "coredns_cache_entries",
                "coredns_cache_requests_total",
                "coredns_cache_hits_total",
                "coredns_cache_misses_total",
                "coredns_reload_failed_total"):
            self.assertTrue(metric_lines(body, family), family)
        for name in ("kubernetes", "forward", "cache", "loop", "loadbalance",
                     "errors"):
            self.assertEqual(sample(body, "coredns_plugin_enabled",
                                    server=server, zone=".", name=name), 1.0)
        self.assertGreaterEqual(sample(
            body, "coredns_cache_hits_total", server=server, type="success",
            zones="."), 1)
        self.assertGreaterEqual(sample(
            body, "coredns_dns_responses_total", server=server, zone=".",
            rcode="NOERROR", plugin="kubernetes"), 1)
        self.assertGreaterEqual(sample(
            body, "coredns_proxy_request_duration_seconds_count",
            proxy_name="forward", to=self.resolver.to, rcode="NOERROR"), 1)
        # A list and a watch for each of services, slices, namespaces.
        self.assertGreaterEqual(sample(
            body, "coredns_kubernetes_rest_client_requests_total",
            code="200", method="GET", host=self.api.url[7:]), 6)

    @defer.inlineCallbacks
    def test_lameduck(self):
        """SIGTERM's path: 5s of lameduck, answers and /health go on,
        /ready says 503; then the listeners close."""
        for p in self.app.config.plugins():
            if p.name == "health":
                self.assertEqual(p.lameduck, 5.0)
        health = self.app.http_port("127.0.0.1:0")
        ready = self.app.http_port("127.0.0.2:0")
        stopped = self.app.stopService()
        status = yield util.http_get(ready, "/ready", "127.0.0.2")
        self.assertEqual(status, (503, "Shutting down"))
        status = yield util.http_get(health, "/health")
        self.assertEqual(status, (200, "OK"))
        m = yield self.ask(KUBE_DNS)
        self.assertEqual(util.rrs(m), [KUBE_DNS + " 30 IN A 10.96.0.10"])
        self.assertFalse(stopped.called)
        self.assertIn("[INFO] plugin/health: Going into lameduck mode for 5s",
                      self.log.lines)
        yield stopped
        ep = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", self.port)
        yield self.assertFailure(
            ep.connect(protocol.Factory.forProtocol(protocol.Protocol)),
            error.ConnectionRefusedError)


def storm_packets(seed=1053):
    """Malformed queries: random bytes, a query cut at every length,
    lying section counts, the longest name, compression loops,
    bad label types, flipped bits of a good query, broken OPT records."""
    rng = random.Random(seed)
    q = util.make_query(KUBE_DNS, "A", use_edns=0)
    q.id = 4242
    good = q.to_wire()
    hdr = struct.Struct("!HHHHHH")
    out = [rng.randbytes(rng.randrange(0, 700)) for _ in range(300)]
    out += [good[:n] for n in range(len(good))]
    for counts in ((0, 0, 0, 0), (2, 0, 0, 0), (1, 5, 0, 0), (1, 0, 9, 0),
                   (1, 0, 0, 3), (65535, 65535, 65535, 65535)):
        out.append(hdr.pack(rng.randrange(65536), 0x0100, *counts)
                   + good[12:])

    def query(qname_wire, tail=b"\x00\x01\x00\x01", flags=0x0100):
        return hdr.pack(rng.randrange(65536), flags, 1, 0, 0, 0) \
            + qname_wire + tail
    out.append(query(b"\x01a" * 127 + b"\x00"))            # 255 bytes
    out.append(query(b"\x3fa" * 4 + b"\x00"))              # cut labels
    out.append(query(b"\x01a\x00" * 2000))                  # long tail
    out.append(query(b"\x3fa" + b"x" * 62 + b"\x00"))      # label 63
    out.append(query(b"\x40" + b"x" * 64 + b"\x00"))       # bad type
    out.append(query(b"\x80\x01a\x00"))                    # type 0x80
    out.append(query(b"\xc0\x0c"))                          # loop
    out.append(query(b"\x01a\xc0\x0c"))                    # loop
    out.append(query(b"\xc0\xff"))                          # beyond
    out.append(query(b"\x01a\x00", tail=b"\x00"))          # no class
    out.append(query(b"\x01a\x00", flags=0x8100))           # a response
    out.append(query(b"\x01a\x00", flags=0x2900))           # UPDATE
    out.append(query(b"\x01a\x00", flags=0x7900))           # opcode 15
    for _ in range(300):
        b = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    # OPT records: length beyond the end, garbage options, two OPTs.
    body = good[:len(good) - 11]
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00"
    out.append(body + opt + b"\x00\xff")
    out.append(body + opt + b"\x00\x08\x00\x0a\x00\x08abc")
    out.append(hdr.pack(7, 0x0100, 1, 0, 0, 2) + good[12:len(good) - 11]
               + (opt + b"\x00\x00") * 2)
    return out


class _Collect(protocol.DatagramProtocol):
    def __init__(self):
        self.replies = []
        self.waiting = {}

    def datagramReceived(self, data, addr):
        self.replies.append(data)
        if len(data) >= 2:
            d = self.waiting.pop(data[:2], None)
            if d is not None:
                d.callback(data)


def _empty_answer(msg, proto):
    r = dns.message.make_response(msg)
    r.flags |= dns.flags.RA
    return r


def _answer_or_formerr(answer, data, proto, send):
    try:
        dns.message.from_wire(data)
    except Exception:
        try:
            qend = dnswire.skip_name(data, 12) + 4
        except dnswire.FormatError:
            return
        send(data[:2] + struct.pack("!HHHHH", 0x8181, 1, 0, 0, 0)
             + data[12:qend])
        return
    answer(data, proto, send)


class StormTest(unittest.TestCase):
    """A storm of malformed packets against the kubeadm-style server:
    no crash, no panic, and good queries answered all along."""

    @defer.inlineCallbacks
    def setUp(self):
        self.patch(loopmod, "default_exit", lambda code: None)
        self.log = util.capture_log(self)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        kubeadm_cluster(self.api)
        self.resolver = Resolver(self, temp_dir(self))
        # Mangled queries reach the node's resolver too: it answers them
        # all, like a real resolver (FORMERR when it cannot parse one).
        up = self.resolver.up
        up.handler = _empty_answer
        up.answer = functools.partial(_answer_or_formerr, up.answer)
        self.app = yield util.start(
            self, kubeadm_corefile(self.api.url, self.resolver))
        no_lameduck(self, self.app)
        self.port = self.app.port()
        yield probes_answered(self.app)

    def panics(self):
        return sum(metrics.PANICS.values.values())

    @defer.inlineCallbacks
    def test_udp_storm(self):
        panics = self.panics()
        packets = storm_packets()
        client = _Collect()
        lp = reactor.listenUDP(0, client, interface="127.0.0.1")
        self.addCleanup(lp.stopListening)
        sent_ids = set()
        # In batches, each closed by a good query whose answer shows the
        # server got through the batch (and keeps receive buffers small).
        for i in range(0, len(packets), 50):
            for p in packets[i:i + 50]:
                if len(p) >= 2:
                    sent_ids.add(p[:2])
                lp.write(p, ("127.0.0.1", self.port))
            q = util.make_query(KUBE_DNS, "A")
            q.id = 40000 + i
            d = client.waiting[struct.pack("!H", q.id)] = defer.Deferred()
            timer = reactor.callLater(5, lambda d=d: d.called or d.errback(
                error.TimeoutError("no answer after batch %d" % i)))
            lp.write(q.to_wire(), ("127.0.0.1", self.port))
            data = yield d
            timer.cancel()
            m = dns.message.from_wire(data)
            self.assertEqual(util.rrs(m), [KUBE_DNS + " 30 IN A 10.96.0.10"])
        yield util.wait_for(lambda: all(m.inflight == 0
                                        for m in self.app.muxes))
        for data in client.replies:
            self.assertGreaterEqual(len(data), 12)
            ident, flags = struct.unpack("!HH", data[:4])
            self.assertTrue(flags & 0x8000)
            self.assertTrue(data[:2] in sent_ids or ident >= 40000)
        rcodes = [struct.unpack("!H", d[2:4])[0] & 15
                  for d in client.replies]
        self.assertIn(dns.rcode.FORMERR, rcodes)
        self.assertIn(dns.rcode.NOTIMP, rcodes)
        self.assertEqual(self.panics(), panics)
        self.assertNotIn("Traceback", self.log.text())
        self.assertNotIn("panic", self.log.text())

    @defer.inlineCallbacks
    def test_tcp_storm(self):
        panics = self.panics()
        packets = storm_packets(seed=5300)
        frames = [struct.pack("!H", len(p)) + p for p in packets
                  if len(p) < 65536]
        # One connection per frame group; some end in a cut frame or a
        # length with nothing behind it, one sends raw garbage.
        rng = random.Random(7)
        groups = [frames[i:i + 40] for i in range(0, len(frames), 40)]
        done = []
        for n, group in enumerate(groups):
            data = b"".join(group)
            if n % 3 == 1:
                data += b"\xff\xff" + b"x" * 100
            elif n % 3 == 2:
                data += struct.pack("!H", 0)
            done.append(_raw_tcp(self.port, data))
        done.append(_raw_tcp(self.port, rng.randbytes(5000)))
        yield defer.DeferredList(done)
        # Good queries over TCP still answer, several on one connection.
        qs = [util.make_query(KUBE_DNS, "A") for _ in range(3)]
        replies = yield util.send_tcp(self.port, [q.to_wire() for q in qs])
        self.assertEqual(len(replies), 3)
        for q, r in zip(qs, replies):
            m = dns.message.from_wire(r)
            self.assertEqual(m.id, q.id)
            self.assertEqual(util.rrs(m), [KUBE_DNS + " 30 IN A 10.96.0.10"])
        yield util.wait_for(lambda: all(m.inflight == 0
                                        for m in self.app.muxes))
        self.assertEqual(self.panics(), panics)
        self.assertNotIn("Traceback", self.log.text())


class _RawTCP(protocol.Protocol):
    def __init__(self, data, d):
        self.data = data
        self.d = d

    def connectionMade(self):
        self.transport.write(self.data)
        self.transport.loseConnection()

    def connectionLost(self, reason):
        if not self.d.called:
            self.d.callback(None)


def _raw_tcp(port, data):
    """Write ``data`` on a new connection and close it; fires when the
    connection is gone."""
    d = defer.Deferred()
    ep = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    ep.connect(protocol.Factory.forProtocol(lambda: _RawTCP(data, d)))
    return d


class KubeadmReadyTest(unittest.TestCase):
    """/ready says 503 (naming kubernetes) until the watches synced."""

    @defer.inlineCallbacks
    def test_ready_after_sync(self):
        self.patch(loopmod, "default_exit", lambda code: None)
        log = util.capture_log(self)
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        kubeadm_cluster(api)
        resolver = Resolver(self, temp_dir(self))
        ready = "127.0.0.2:%d" % free_port()
        # Hold the API server: its lists wait until released.
        api.cond.acquire()
        held = [True]

        def release():
            if held[0]:
                held[0] = False
                api.cond.release()
        self.addCleanup(release)
        started = util.start(self, kubeadm_corefile(api.url, resolver,
                                                    ready))
        status = yield util.http_get(int(ready.split(":")[1]), "/ready",
                                     "127.0.0.2")
        self.assertEqual(status, (503, "kubernetes"))
        self.assertIn("[INFO] plugin/ready: Plugins not ready: 'kubernetes'",
                      log.lines)
        self.assertFalse(started.called)
        release()
        app = yield started
        no_lameduck(self, app)
        status = yield util.http_get(app.http_port(ready), "/ready",
                                     "127.0.0.2")
        self.assertEqual(status, (200, "OK"))
        m = yield util.query(app.port(), KUBE_DNS)
        self.assertEqual(util.rrs(m), [KUBE_DNS + " 30 IN A 10.96.0.10"])


class CustomEntriesTest(unittest.TestCase):
    """custom-entries.Corefile: names the API server does not know fall
    through to the cluster.local zone file."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        kubeadm_cluster(self.api)
        self.api.add("services", k8s.service("db", "default", ("10.0.0.7",),
                                             (("pg", "TCP", 5432),)))
        self.dir = temp_dir(self)
        zone_files(self.dir, {"cluster.db": "cluster.db"})
        self.resolver = Resolver(self, self.dir)
        self.up = self.resolver.up
        self.app = yield util.start(self, adapt(
            shared("custom-entries.Corefile"),
            (".:53 {", ".:0 {"),
            ("    health\n", "    health 127.0.0.1:0\n"),
            ("        fallthrough\n",
             "        endpoint %s\n        fallthrough\n" % self.api.url),
            ("zones/cluster.db", os.path.join(self.dir, "zones/cluster.db")),
            ("/etc/resolv.conf", self.resolver.target)))
        self.port = self.app.port()

    def ask(self, name, rdtype="A", **kw):
        return util.query(self.port, name, rdtype, **kw)

    # Every TTL is capped at 30 by `cache 30`, first answers included.

    @defer.inlineCallbacks
    def test_zone_file_entry(self):
        m = yield self.ask("something.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m), [
            "something.cluster.local. 30 IN A 10.0.0.1"])
        self.assertEqual(self.up.count(), 0)

    @defer.inlineCallbacks
    def test_cname_out_of_the_zone(self):
        m = yield self.ask("otherthing.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        got = util.rrs(m)
        self.assertIn("otherthing.cluster.local. 30 IN CNAME google.com.",
                      got)
        self.assertEqual([x.split()[-1] for x in got if " IN A " in x],
                         ["192.0.2.1"])
        self.assertEqual(self.up.count("google.com.", "A"), 1)
        # The CNAME record itself needs no upstream.
        m = yield self.ask("otherthing.cluster.local.", "CNAME")
        self.assertEqual(util.rrs(m), [
            "otherthing.cluster.local. 30 IN CNAME google.com."])
        self.assertEqual(self.up.count("google.com."), 1)

    @defer.inlineCallbacks
    def test_kubernetes_first(self):
        m = yield self.ask("db.default.svc.cluster.local.")
        self.assertEqual(util.rrs(m), [
            "db.default.svc.cluster.local. 5 IN A 10.0.0.7"])
        m = yield self.ask("10.0.96.10.in-addr.arpa.", "PTR")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        # 10.0.0.7 is in 10.0.0.0/24, the plugin's reverse zone.
        m = yield self.ask("7.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(util.rrs(m), [
            "7.0.0.10.in-addr.arpa. 5 IN PTR db.default.svc.cluster.local."])

    @defer.inlineCallbacks
    def test_neither(self):
        # Unknown to both: the zone file's NXDOMAIN with its SOA.
        m = yield self.ask("nothing.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m, "authority"), [
            "cluster.local. 30 IN SOA ns.dns.cluster.local. "
            "hostmaster.cluster.local. 2015082541 7200 3600 1209600 3600"])
        # A reverse name of 10.0.0.0/24 nobody has: through kubernetes
        # and file (not its zone) to forward.
        m = yield self.ask("99.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(self.up.count("99.0.0.10.in-addr.arpa.", "PTR"), 1)
        self.assertFalse(m.flags & dns.flags.AA)

    @defer.inlineCallbacks
    def test_forward_cache_and_log(self):
        m, cport, size = yield ask_from(self.port, util.make_query(
            "www.example.org.", "A"))
        self.assertEqual(m.answer[0].ttl, 30)
        yield self.ask("www.example.org.")
        self.assertEqual(self.up.count("www.example.org."), 1)
        lines = [x for x in self.log.lines if "www.example.org." in x]
        self.assertEqual(len(lines), 2, self.log.text())
        self.assertRegex(lines[0], LOG_LINE % (
            cport, m.id, "A", r"www\.example\.org\.", "udp", 33, "false",
            512, "NOERROR", "qr,rd,ra", size))

    @defer.inlineCallbacks
    def test_health(self):
        status = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                     "/health")
        self.assertEqual(status, (200, "OK"))


class NodeLocalCacheTest(unittest.TestCase):
    """node-local-cache.Corefile: a caching forwarder in front of the
    cluster DNS (TCP only), bound to one address."""

    @defer.inlineCallbacks
    def setUp(self):
        self.exits = []
        self.patch(loopmod, "default_exit", self.exits.append)
        self.log = util.capture_log(self)
        self.cluster = upstreammod.Upstream(address="10.96.0.77").start()
        self.addCleanup(self.cluster.stop)
        set_env(self, "CLUSTER_DNS", self.cluster.addr())
        self.dir = temp_dir(self)
        self.resolver = Resolver(self, self.dir)
        self.up = self.resolver.up
        text = adapt(
            shared("node-local-cache.Corefile"),
            (":53 {", ":0 {"),
            ("bind 169.254.20.10", "bind 127.0.0.1"),
            ("prometheus :9253", "prometheus 127.0.0.3:0"),
            ("health 169.254.20.10:8080", "health 127.0.0.1:0"),
            ("/etc/resolv.conf", self.resolver.target))
        self.assertEqual(text.count("bind 127.0.0.1"), 3)
        self.app = yield util.start(self, text)
        self.port = self.app.port()
        yield probes_answered(self.app)

    def ask(self, name, rdtype="A", **kw):
        return util.query(self.port, name, rdtype, **kw)

    def cache(self, zone):
        for b in self.app.config.blocks:
            if b.zones == [zone]:
                return b.plugin("cache")

    def test_listener(self):
        self.assertEqual(list(self.app.listeners), [("dns", "127.0.0.1", "0")])
        self.assertEqual(self.app.listeners[("dns", "127.0.0.1", "0")].host,
                         "127.0.0.1")

    def test_capacities(self):
        c = self.cache("cluster.local.")
        self.assertEqual((c.pcap, c.pttl, c.ncap, c.nttl),
                         (9984, 30, 9984, 5))
        for zone in ("in-addr.arpa.", "."):
            c = self.cache(zone)
            self.assertEqual((c.pcap, c.pttl, c.ncap, c.nttl),
                             (10000, 30, 10000, 30))

    @defer.inlineCallbacks
    def test_cluster_names_over_tcp_cached(self):
        name = "web.default.svc.cluster.local."
        m = yield self.ask(name)
        self.assertEqual(util.rrs(m), [name + " 30 IN A 10.96.0.77"])
        self.assertEqual(self.cluster.count(name, "A", "tcp"), 1)
        m = yield self.ask(name, proto="tcp")
        self.assertEqual(m.answer[0][0].address, "10.96.0.77")
        self.assertLessEqual(m.answer[0].ttl, 30)
        self.assertEqual(self.cluster.count(name), 1)
        # force_tcp: the cluster DNS never sees UDP, not even the loop
        # probe; the node's resolver never sees cluster names.
        self.assertEqual(self.cluster.count(proto="udp"), 0)
        self.assertEqual(self.up.count(name), 0)

    @defer.inlineCallbacks
    def test_denial_capped_at_5(self):
        name = "nxsvc.default.svc.cluster.local."
        m = yield self.ask(name)
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(m.authority[0].ttl, 5)
        m = yield self.ask(name)
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertLessEqual(m.authority[0].ttl, 5)
        self.assertEqual(self.cluster.count(name), 1)
        # Outside cluster.local the denial TTL is capped at 30 only.
        m = yield self.ask("nxhost.example.org.")
        self.assertEqual(m.authority[0].ttl, 30)
        self.assertEqual(self.up.count("nxhost.example.org."), 1)

    @defer.inlineCallbacks
    def test_reverse_to_cluster_dns(self):
        name = "10.0.96.10.in-addr.arpa."
        m = yield self.ask(name, "PTR")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(self.cluster.count(name, "PTR", "tcp"), 1)
        self.assertEqual(self.up.count(name), 0)

    @defer.inlineCallbacks
    def test_other_names_to_node_resolver(self):
        m = yield self.ask("www.example.org.")
        self.assertEqual(util.rrs(m), ["www.example.org. 30 IN A 192.0.2.1"])
        self.assertEqual(self.up.count("www.example.org.", "A", "udp"), 1)
        self.assertEqual(self.cluster.count("www.example.org."), 0)

    @defer.inlineCallbacks
    def test_loops_do_not_fire(self):
        loops = [b.plugin("loop") for b in self.app.config.blocks]
        yield util.wait_for(lambda: all(lp.seen == 1 for lp in loops))
        self.assertEqual(self.cluster.count(loops[0].qname, "HINFO", "tcp"),
                         1)
        self.assertEqual(self.cluster.count(loops[1].qname, "HINFO", "tcp"),
                         1)
        self.assertEqual(self.up.count(loops[2].qname, "HINFO", "udp"), 1)
        self.assertEqual(self.exits, [])

    @defer.inlineCallbacks
    def test_one_metrics_endpoint_for_three_blocks(self):
        self.assertEqual(sorted(self.app.http), ["127.0.0.1:0",
                                                 "127.0.0.3:0"])
        server = self.app.listeners[("dns", "127.0.0.1", "0")].mux.label
        self.assertEqual(server, "dns://127.0.0.1:0")
        hits = dict(server=server, type="success", zones="cluster.local.")
        _, body = yield util.http_get(self.app.http_port("127.0.0.3:0"),
                                      "/metrics", "127.0.0.3")
        before = (sample(body, "coredns_cache_hits_total", **hits)
                  if metric_lines(body, "coredns_cache_hits_total") else 0)
        yield self.ask("web.default.svc.cluster.local.")
        yield self.ask("web.default.svc.cluster.local.")
        code, body = yield util.http_get(self.app.http_port("127.0.0.3:0"),
                                         "/metrics", "127.0.0.3")
        self.assertEqual(code, 200)
        for zone in ("cluster.local.", "in-addr.arpa.", "."):
            for name in ("cache", "forward", "loop", "errors"):
                self.assertEqual(sample(body, "coredns_plugin_enabled",
                                        server=server, zone=zone, name=name),
                                 1.0, (zone, name))
        self.assertEqual(sample(body, "coredns_cache_hits_total", **hits),
                         before + 1)
        self.assertGreaterEqual(sample(
            body, "coredns_proxy_request_duration_seconds_count",
            proxy_name="forward", to=self.cluster.addr(), rcode="NOERROR"),
            1)
        code, text = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                         "/health")
        self.assertEqual((code, text), (200, "OK"))
        code, _ = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                      "/metrics")
        self.assertEqual(code, 404)


def run_check(directory, name):
    """``twistd coredns --check`` on a Corefile, run from its directory
    (relative zone file names), as a user validates a Corefile."""
    return subprocess.run(
        [TWISTD, "-n", "--pidfile=", "coredns", "--check", "-c", name],
        capture_output=True, text=True, cwd=directory, timeout=60,
        env=dict(os.environ))


MULTI_ZONES = {
    "coredns.io.db": """$ORIGIN coredns.io.
@    3600 IN SOA ns1.coredns.io. admin.coredns.io. 1 7200 3600 1209600 3600
     3600 IN NS  ns1.coredns.io.
www   300 IN A   192.0.2.10
ns1   300 IN A   192.0.2.11
""",
    "example.io.db": """$ORIGIN example.io.
@    3600 IN SOA ns1.example.io. admin.example.io. 7 7200 3600 1209600 600
     3600 IN NS  ns1.example.io.
www   300 IN A   192.0.2.20
ns1   300 IN A   192.0.2.21
""",
    "example.net.db": """$ORIGIN example.net.
@    3600 IN SOA ns1.example.net. admin.example.net. 9 7200 3600 1209600 600
     3600 IN NS  ns1.example.net.
www   300 IN A   192.0.2.30
ns1   300 IN A   192.0.2.31
""",
}

REWRITE = "    rewrite name foo.example.com foo.default.svc.cluster.local\n"


def multi_block_dir(testcase):
    d = util.write_files(testcase, {"zones/" + k: v
                                    for k, v in MULTI_ZONES.items()})
    zone_files(d, {"example.db": "example.org.db"})
    return d


class MultiBlockCheckTest(unittest.TestCase):

    def test_check_passes(self):
        d = multi_block_dir(self)
        with open(os.path.join(d, "resolv.conf"), "w") as fh:
            fh.write("nameserver 127.0.0.1\n")
        with open(os.path.join(d, "multi-block.Corefile"), "w") as fh:
            fh.write(adapt(
                shared("multi-block.Corefile"),
                ("kubernetes cluster.local 10.0.0.0/24\n",
                 "kubernetes cluster.local 10.0.0.0/24 {\n"
                 "        endpoint http://127.0.0.1:1\n    }\n"),
                ("/etc/resolv.conf", "resolv.conf")))
        r = run_check(d, "multi-block.Corefile")
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)


class MultiBlockTest(unittest.TestCase):
    """multi-block.Corefile: four blocks on two ports, routed by the
    longest zone; the root block rewrites one name into the cluster."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.api.add("namespaces", k8s.namespace("default"))
        self.api.add("services", k8s.service("foo", "default", ("10.0.0.5",)))
        self.dir = multi_block_dir(self)
        self.resolver = Resolver(self, self.dir)
        self.up = self.resolver.up
        self.port_b = free_port()
        text = adapt(
            shared("multi-block.Corefile"),
            ("coredns.io:5300 {", "coredns.io:%d {" % self.port_b),
            (":53 {", ":0 {"),
            (" zones/", " %s/zones/" % self.dir),
            ("    health\n", "    health 127.0.0.1:0\n"),
            ("kubernetes cluster.local 10.0.0.0/24\n",
             "kubernetes cluster.local 10.0.0.0/24 {\n"
             "        endpoint %s\n    }\n" % self.api.url),
            ("/etc/resolv.conf", self.resolver.target))
        self.app = yield util.start(self, text)
        self.port_a = self.app.port(port="0")
        self.assertEqual(self.app.port(port=str(self.port_b)), self.port_b)

    def logged(self, name):
        return [x for x in self.log.lines
                if x.startswith("[INFO] 127.0.0.1:") and ' %s ' % name in x]

    @defer.inlineCallbacks
    def test_two_listeners(self):
        self.assertEqual(sorted(self.app.listeners), [
            ("dns", None, "0"), ("dns", None, str(self.port_b))])
        # example.io is not served on the coredns.io port.
        m = yield util.query(self.port_b, "www.example.io.")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        m = yield util.query(self.port_b, "www.example.org.")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertEqual(self.up.count("www.example.org."), 0)

    @defer.inlineCallbacks
    def test_coredns_io_by_port(self):
        m = yield util.query(self.port_b, "www.coredns.io.")
        self.assertEqual(util.rrs(m), ["www.coredns.io. 300 IN A 192.0.2.10"])
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m, "authority"),
                         ["coredns.io. 3600 IN NS ns1.coredns.io."])
        self.assertEqual(self.up.count("www.coredns.io."), 0)
        # On the other port coredns.io has no block of its own: the root
        # block forwards it.
        m = yield util.query(self.port_a, "www.coredns.io.")
        self.assertEqual(util.rrs(m), ["www.coredns.io. 30 IN A 192.0.2.1"])
        self.assertFalse(m.flags & dns.flags.AA)
        self.assertEqual(self.up.count("www.coredns.io."), 1)
        self.assertEqual(len(self.logged("www.coredns.io.")), 1)

    @defer.inlineCallbacks
    def test_most_specific_zone(self):
        m = yield util.query(self.port_a, "www.example.io.")
        self.assertEqual(util.rrs(m), ["www.example.io. 300 IN A 192.0.2.20"])
        m = yield util.query(self.port_a, "deep.www.example.net.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(util.rrs(m, "authority"), [
            "example.net. 3600 IN SOA ns1.example.net. admin.example.net. "
            "9 7200 3600 1209600 600"])
        m = yield util.query(self.port_a, "www.example.net.")
        self.assertEqual(util.rrs(m), ["www.example.net. 300 IN A 192.0.2.30"])
        # example.org is a file zone inside the root block (behind cache).
        m = yield util.query(self.port_a, "www.example.org.", "AAAA")
        self.assertEqual(util.rrs(m), ["www.example.org. 30 IN AAAA ::1"])
        self.assertTrue(m.flags & dns.flags.AA)
        m = yield util.query(self.port_a, "foo.default.svc.cluster.local.")
        self.assertEqual(util.rrs(m), [
            "foo.default.svc.cluster.local. 5 IN A 10.0.0.5"])
        m = yield util.query(self.port_a, "5.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(util.rrs(m), [
            "5.0.0.10.in-addr.arpa. 5 IN PTR foo.default.svc.cluster.local."])
        # kubernetes has no fallthrough here: its NXDOMAIN stands.
        m = yield util.query(self.port_a, "bar.default.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        m = yield util.query(self.port_a, "9.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(self.up.count(), 0)

    @defer.inlineCallbacks
    def test_rewrite_into_the_cluster(self):
        self.assertIn(REWRITE, shared("multi-block.Corefile"))
        for proto in ("udp", "tcp", "udp"):
            m = yield util.query(self.port_a, "Foo.Example.COM.", "A",
                                 proto=proto)
            self.assertEqual(str(m.question[0].name), "Foo.Example.COM.")
            self.assertEqual(util.rrs(m), ["Foo.Example.COM. 5 IN A 10.0.0.5"])
            self.assertTrue(m.flags & dns.flags.AA)
        # Other names of example.com are not rewritten: forwarded.
        yield util.query(self.port_a, "bar.example.com.", "A")
        self.assertEqual(self.up.count("bar.example.com."), 1)
        self.assertEqual(self.up.count("foo.example.com."), 0)

    @defer.inlineCallbacks
    def test_log_only_where_configured(self):
        for name in ("www.example.io.", "www.example.net.",
                     "www.example.org.", "ns1.example.net."):
            yield util.query(self.port_a, name)
        yield util.query(self.port_b, "www.coredns.io.")
        self.assertEqual(len(self.logged("www.example.io.")), 1)
        self.assertEqual(len(self.logged("www.example.org.")), 1)
        self.assertEqual(self.logged("www.example.net."), [])
        self.assertEqual(self.logged("ns1.example.net."), [])
        self.assertEqual(self.logged("www.coredns.io."), [])

    @defer.inlineCallbacks
    def test_health(self):
        status = yield util.http_get(self.app.http_port("127.0.0.1:0"),
                                     "/health")
        self.assertEqual(status, (200, "OK"))


SNIPPET_TLS_BLOCKS = """tls://example.net:853 {
    import common
    tls {$TLS_CERT} {$TLS_KEY}
    file zones/example.net.db
}

https://example.net:8443 {
    import common
    tls {$TLS_CERT} {$TLS_KEY}
    file zones/example.net.db
}

"""


class SnippetsCheckTest(unittest.TestCase):

    def test_encrypted_transports_set_up(self):
        from tests.support.unbound import make_certs
        d = util.write_files(self, {"zones/example.net.db":
                                    MULTI_ZONES["example.net.db"]})
        _, cert, key = make_certs(d)
        set_env(self, "TLS_CERT", cert)
        set_env(self, "TLS_KEY", key)
        shutil.copy(os.path.join(SHARED, "snippets-and-tls.Corefile"), d)
        r = run_check(d, "snippets-and-tls.Corefile")
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)


class SnippetsTest(unittest.TestCase):
    """snippets-and-tls.Corefile without its tls:// and https:// blocks:
    the imported snippet's log format, on a block with two ports."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.port_b = free_port()
        self.app = yield util.start(self, adapt(
            shared("snippets-and-tls.Corefile"),
            (SNIPPET_TLS_BLOCKS, ""),
            ("prometheus :9153", "prometheus 127.0.0.3:0"),
            ("example.com:1053", "example.com:%d" % self.port_b)))
        self.port_a = self.app.port(port="0")

    def lines(self, name):
        return [x for x in self.log.lines if ' %s ' % name in x]

    @defer.inlineCallbacks
    def test_log_line(self):
        q = util.make_query("whoami.example.org.", "A")
        m, cport, size = yield ask_from(self.port_a, q)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        (line,) = self.lines("whoami.example.org.")
        self.assertRegex(line, LOG_LINE % (
            cport, q.id, "A", r"whoami\.example\.org\.", "udp",
            len(q.to_wire()), "false", 512, "NOERROR", "qr,aa,rd", size))
        # DO and the EDNS buffer size; whoami answers every name of its
        # zones.
        q = util.make_query("x.example.com.", "AAAA", use_edns=0,
                            payload=1232, want_dnssec=True)
        q.flags &= ~dns.flags.RD
        m, cport, size = yield ask_from(self.port_b, q)
        (line,) = self.lines("x.example.com.")
        self.assertRegex(line, LOG_LINE % (
            cport, q.id, "AAAA", r"x\.example\.com\.", "udp",
            len(q.to_wire()), "true", 1232, "NOERROR", "qr,aa", size))

    @defer.inlineCallbacks
    def test_tcp_log_line(self):
        q = util.make_query("whoami.example.org.", "TXT")
        data = (yield util.send_tcp(self.port_a, q.to_wire()))[0]
        (line,) = self.lines("whoami.example.org.")
        # Over TCP the buffer size is 65535 (CoreDNS's edns.Size).
        self.assertRegex(line, (LOG_LINE % (
            0, q.id, "TXT", r"whoami\.example\.org\.", "tcp",
            len(q.to_wire()), "false", 65535, "NOERROR", "qr,aa,rd",
            len(data))).replace(":0 - ", r":\d+ - ", 1))

    @defer.inlineCallbacks
    def test_keys_on_their_ports(self):
        m = yield util.query(self.port_b, "example.org.")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        m = yield util.query(self.port_a, "example.com.")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        m = yield util.query(self.port_b, "example.com.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIn("example.com. 0 IN A 127.0.0.1",
                      util.rrs(m, "additional"))
        # What no block takes is refused before any chain: not logged.
        self.assertEqual(len(self.lines("example.com.")), 1)
        self.assertEqual(self.lines("example.org."), [])

    @defer.inlineCallbacks
    def test_metrics_for_both_ports(self):
        yield util.query(self.port_a, "a.example.org.")
        yield util.query(self.port_b, "a.example.com.")
        code, body = yield util.http_get(self.app.http_port("127.0.0.3:0"),
                                         "/metrics", "127.0.0.3")
        self.assertEqual(code, 200)
        for port, zone in (("0", "example.org."),
                           (str(self.port_b), "example.com.")):
            for name in ("whoami", "log", "errors"):
                self.assertEqual(sample(
                    body, "coredns_plugin_enabled",
                    server="dns://:%s" % port, zone=zone, name=name), 1.0)


class MalformedForwardTest(unittest.TestCase):
    """Odd queries in front of forward: never passed on as they came."""

    @defer.inlineCallbacks
    def test_overlong_name_formerr_not_forwarded(self):
        up = upstreammod.Upstream().start()
        self.addCleanup(up.stop)
        app = yield util.start(self, ".:0 {\n    forward . %s\n}\n"
                               % up.addr())
        hdr = struct.Struct("!HHHHHH")
        for labels in (128, 5000):
            wire = (hdr.pack(77, 0x0100, 1, 0, 0, 0) + b"\x01a" * labels
                    + b"\x00\x00\x01\x00\x01")
            data = yield util.send_udp(app.port(), wire)
            self.assertEqual(data, hdr.pack(77, 0x8101, 0, 0, 0, 0), labels)
        self.assertEqual(up.count(), 0)

    @defer.inlineCallbacks
    def test_trailing_bytes_not_forwarded(self):
        up = upstreammod.Upstream().start()
        self.addCleanup(up.stop)
        raw = []
        orig = up.answer

        def answer(data, proto, send):
            raw.append(data)
            return orig(data, proto, send)
        up.answer = answer
        app = yield util.start(self, ".:0 {\n    forward . %s\n}\n"
                               % up.addr())
        q = util.make_query("www.example.org.", "A")
        data = yield util.send_udp(app.port(), q.to_wire() + b"\x00" * 10)
        m = dns.message.from_wire(data)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(len(raw[0]), len(q.to_wire()))
