"""Corefiles of every CoreDNS era, run unchanged.

``tests/corefiles/eras`` is a copy of the shared ``corefiles/eras`` (its
README.md says what each Corefile must answer).  Each test case fills the
placeholders ({{PORT}}, {{UPSTREAM}}, {{K8S}}, ...) with test servers,
starts the real service in the directory holding the zone files (relative
``file`` paths are read from there, as a user runs CoreDNS), and asks what
the README lists.  Cases whose Corefile needs a piece still to come say
which in ``skip``.
"""

import json
import os
import shutil

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.plugins import loop as loopmod
from tests.support import k8s_apiserver as k8s
from tests.support import util
from tests.support.e2e import Resolver, no_lameduck, probes_answered
from tests.support.util import free_port

ERAS = os.path.join(util.REPO, "tests", "corefiles", "eras")
SHARED = os.path.join(util.REPO, "..", "shared", "corefiles", "eras")

#: What the test resolver answers (it stands for 8.8.8.8, 223.5.5.5 and
#: the node's resolv.conf nameserver); NXDOMAIN for every other name.
UPSTREAM_A = {
    "www.baidu.com.": "115.239.210.27",
    "www.a.shifen.com.": "115.239.211.112",
    "legacy.cluster.local.": "192.0.2.53",
}
KINDS = {kind: plural for plural, (_, kind) in k8s.KIND_NAMES.items()}


def upstream_answer(q, proto):
    """The test resolver's rules (UPSTREAM_A)."""
    r = dns.message.make_response(q)
    r.flags |= dns.flags.RA
    qn = q.question[0]
    address = UPSTREAM_A.get(str(qn.name).lower())
    if address is None:
        r.set_rcode(dns.rcode.NXDOMAIN)
        r.authority.append(dns.rrset.from_text(
            ".", 86400, "IN", "SOA", "a.root-servers.net. "
            "nstld.verisign-grs.com. 1 1800 900 604800 86400"))
    elif qn.rdtype == dns.rdatatype.A:
        r.answer.append(dns.rrset.from_text(qn.name, 300, "IN", "A",
                                            address))
    return r


def records(msg, section="answer"):
    """Sorted "name type rdata" lines: TTLs left out, for answers that
    passed through a cache or an upstream."""
    out = []
    for line in util.rrs(msg, section):
        name, _, _, rtype, rdata = line.split(" ", 4)
        out.append("%s %s %s" % (name, rtype, rdata))
    return sorted(out)


def cluster_objects():
    """k8s-objects.json by kind, as the test API server stores them."""
    with open(os.path.join(ERAS, "k8s-objects.json")) as fh:
        objects = json.load(fh)
    out = {}
    for obj in objects:
        out.setdefault(KINDS[obj["kind"]], []).append(obj)
    return out


class CopyTest(unittest.TestCase):

    def test_copy_matches_shared(self):
        if not os.path.isdir(SHARED):
            raise unittest.SkipTest("no shared Corefiles next to the "
                                    "repository")
        self.assertEqual(sorted(os.listdir(SHARED)), sorted(os.listdir(ERAS)))
        for name in os.listdir(SHARED):
            with open(os.path.join(SHARED, name)) as a, \
                    open(os.path.join(ERAS, name)) as b:
                self.assertEqual(a.read(), b.read(), name)


class Era(unittest.TestCase):
    """Starts ``corefile`` with its placeholders filled."""

    corefile = None
    kubernetes = False

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.exits = []
        self.patch(loopmod, "default_exit", self.exits.append)
        self.dir = util.write_files(self, {})
        for name in os.listdir(ERAS):
            if name.endswith(".db") or name.startswith("db."):
                shutil.copy(os.path.join(ERAS, name), self.dir)
        self.resolver = Resolver(self, self.dir)
        self.up = self.resolver.up
        self.up.handler = upstream_answer
        self.ports = {name: free_port() for name in ("PORT", "PORT2")}
        # HTTP endpoints on port 0: nothing can take the port between
        # choosing and binding it (all three share one site at ":0").
        self.ports.update(HEALTH=0, READY=0, METRICS=0)
        self.dot_port = free_port()
        if self.kubernetes:
            self.api = k8s.APIServer().start()
            self.addCleanup(self.api.stop)
            for kind, objs in cluster_objects().items():
                self.api.load(kind, objs)
        self.chdir(self.dir)
        self.app = yield util.start(self, self.text())
        no_lameduck(self, self.app)
        kube = [p for p in self.app.config.plugins()
                if p.name == "kubernetes"]
        yield util.wait_for(lambda: all(p.synced for p in kube))
        yield probes_answered(self.app)

    def chdir(self, directory):
        """Run in ``directory`` (relative zone file names), as CoreDNS is
        run where its files are; back at cleanup."""
        here = os.getcwd()
        os.chdir(directory)
        self.addCleanup(os.chdir, here)

    def text(self):
        with open(os.path.join(ERAS, self.corefile)) as fh:
            text = fh.read()
        pairs = [("{{%s}}" % k, str(v)) for k, v in self.ports.items()]
        pairs += [
            # The DoT upstream (S2) is never asked: its block's file
            # answers every name of the zone.
            ("{{UPSTREAM}}:853", "127.0.0.1:%d" % self.dot_port),
            ("{{UPSTREAM}}:53", self.resolver.to),
            ("{{UPSTREAM}}", self.resolver.to),
            ("{{RESOLV}}", self.resolver.target),
            ("{{DIR}}", self.dir),
        ]
        if self.kubernetes:
            pairs.append(("{{K8S}}", self.api.url[len("http://"):]))
        for old, new in pairs:
            text = text.replace(old, new)
        self.assertNotIn("{{", text)
        return text

    def ask(self, name, rdtype="A", port="PORT", proto="udp"):
        return util.query(self.ports[port], name, rdtype, proto=proto)

    @defer.inlineCallbacks
    def assert_answer(self, name, rdtype, want, aa=None, port="PORT",
                      proto="udp"):
        """NOERROR with exactly ``want`` (util.rrs lines, or records()
        lines when they carry no TTL) in the answer; returns the reply."""
        m = yield self.ask(name, rdtype, port, proto)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR, (name, m))
        got = util.rrs(m) if want and _has_ttl(want[0]) else records(m)
        self.assertEqual(got, sorted(want), name)
        if aa is not None:
            self.assertEqual(bool(m.flags & dns.flags.AA), aa, name)
        return m

    @defer.inlineCallbacks
    def assert_rcode(self, name, rdtype, rcode, port="PORT", proto="udp"):
        m = yield self.ask(name, rdtype, port, proto)
        self.assertEqual(m.rcode(), rcode, (name, m))
        return m

    @defer.inlineCallbacks
    def assert_http(self, port, path, status=200):
        code, body = yield util.http_get(self.app.http_port(":0"), path)
        self.assertEqual(code, status, (path, body))
        return body


def _has_ttl(line):
    return line.split(" ")[1].isdigit()


# -- S1: a block with no plugins ---------------------------------------------

class S1Test(Era):
    corefile = "S1.Corefile"

    @defer.inlineCallbacks
    def test_refused_for_everything(self):
        for name, rdtype in (("www.example.org.", "A"), (".", "NS"),
                             ("example.com.", "SOA"),
                             ("1.0.0.127.in-addr.arpa.", "PTR")):
            for proto in ("udp", "tcp"):
                yield self.assert_rcode(name, rdtype, dns.rcode.REFUSED,
                                        proto=proto)


# -- S2: tls:// without a certificate ----------------------------------------

class S2Test(Era):
    corefile = "S2.Corefile"

    @defer.inlineCallbacks
    def test_file_over_tcp(self):
        yield self.assert_answer("www.example.net.", "A",
                                 ["www.example.net. 3600 IN A 192.0.2.50"],
                                 aa=True, proto="tcp")
        m = yield self.assert_rcode("nope.example.net.", "A",
                                    dns.rcode.NXDOMAIN, proto="tcp")
        self.assertTrue(m.flags & dns.flags.AA)

    @defer.inlineCallbacks
    def test_outside_refused(self):
        for name in ("www.example.org.", "www.baidu.com."):
            yield self.assert_rcode(name, "A", dns.rcode.REFUSED,
                                    proto="tcp")
        self.assertEqual(self.up.count(), 0)

    def test_nothing_on_udp(self):
        [lst] = self.app.listeners.values()
        self.assertIsNone(lst.udp)
        self.assertEqual(self.app.port(transport="tls"), self.ports["PORT"])

    def test_warns_no_certificate(self):
        self.assertIn(
            "[WARNING] plugin/tls: tls://example.net.:%d has no certificate "
            "(no tls directive): serving plain DNS over TCP only"
            % self.ports["PORT"], self.log.lines)

    def test_forward_over_tls(self):
        [fwd] = [p for p in self.app.config.plugins() if p.name == "forward"]
        [proxy] = fwd.upstreams
        self.assertIsNotNone(proxy.tls)
        self.assertEqual(proxy.servername, "dns.alidns.com")


# -- S3: kubeadm's Corefile for another cluster domain -----------------------

class S3Test(Era):
    corefile = "S3.Corefile"
    kubernetes = True
    domain = "skynemo.cn."

    def svc(self, name):
        return "%s.svc.%s" % (name, self.domain)

    @defer.inlineCallbacks
    def test_services(self):
        yield self.assert_answer(
            self.svc("kube-dns.kube-system"), "A",
            [self.svc("kube-dns.kube-system") + " 30 IN A 10.3.0.10"],
            aa=True)
        yield self.assert_answer(self.svc("foo.default"), "A",
                                 [self.svc("foo.default") +
                                  " 30 IN A 10.0.0.10"], aa=True)

    @defer.inlineCallbacks
    def test_pods_insecure(self):
        name = "10-244-1-5.default.pod." + self.domain
        yield self.assert_answer(name, "A", [name + " 30 IN A 10.244.1.5"])

    @defer.inlineCallbacks
    def test_ptr(self):
        yield self.assert_answer(
            "10.0.0.10.in-addr.arpa.", "PTR",
            ["10.0.0.10.in-addr.arpa. 30 IN PTR " + self.svc("foo.default")],
            aa=True)

    @defer.inlineCallbacks
    def test_external_name(self):
        name = self.svc("baidu.default")
        yield self.assert_answer(name, "A", [
            name + " CNAME www.baidu.com.",
            "www.baidu.com. A 115.239.210.27"])
        self.assertEqual(self.up.count("www.baidu.com.", "A"), 1)

    @defer.inlineCallbacks
    def test_unknown_ptr_falls_through(self):
        name = "99.2.0.192.in-addr.arpa."
        yield self.assert_rcode(name, "PTR", dns.rcode.NXDOMAIN)
        self.assertEqual(self.up.count(name, "PTR"), 1)

    @defer.inlineCallbacks
    def test_outside_forwarded(self):
        yield self.assert_answer("www.baidu.com.", "A",
                                 ["www.baidu.com. A 115.239.210.27"])

    @defer.inlineCallbacks
    def test_probes(self):
        yield self.assert_http("HEALTH", "/health")
        yield self.assert_http("READY", "/ready")
        body = yield self.assert_http("METRICS", "/metrics")
        self.assertIn("coredns_build_info", body)


# -- S4, S5: four blocks on two ports ----------------------------------------

class S4Test(Era):
    corefile = "S4.Corefile"
    kubernetes = True

    @defer.inlineCallbacks
    def test_routing_by_zone_and_port(self):
        yield self.assert_answer("www.coredns.io.", "A",
                                 ["www.coredns.io. 3600 IN A 192.0.2.10"],
                                 aa=True, port="PORT2")
        yield self.assert_answer("www.example.io.", "A",
                                 ["www.example.io. 3600 IN A 192.0.2.20"],
                                 aa=True)
        yield self.assert_answer("www.example.net.", "A",
                                 ["www.example.net. 3600 IN A 192.0.2.30"],
                                 aa=True)
        yield self.assert_rcode("www.example.org.", "A", dns.rcode.REFUSED,
                                port="PORT2")
        # coredns.io is not served on the first port: "." forwards it.
        yield self.assert_rcode("www.coredns.io.", "A", dns.rcode.NXDOMAIN)
        self.assertEqual(self.up.count("www.coredns.io.", "A"), 1)

    @defer.inlineCallbacks
    def test_rewrite_to_a_service(self):
        yield self.assert_answer("foo.example.com.", "A",
                                 ["foo.example.com. 5 IN A 10.0.0.10"])

    @defer.inlineCallbacks
    def test_ptr_and_srv(self):
        svc = "foo.default.svc.cluster.local."
        yield self.assert_answer(
            "10.0.0.10.in-addr.arpa.", "PTR",
            ["10.0.0.10.in-addr.arpa. 5 IN PTR " + svc])
        yield self.assert_answer(
            "_http._tcp." + svc, "SRV",
            ["_http._tcp.%s 5 IN SRV 0 100 80 %s" % (svc, svc)])

    @defer.inlineCallbacks
    def test_cache_caps_file_ttls(self):
        for _ in range(2):
            yield self.assert_answer("www.example.org.", "A",
                                     ["www.example.org. 30 IN A 192.0.2.40"])

    @defer.inlineCallbacks
    def test_other_names_forwarded(self):
        yield self.assert_answer("www.baidu.com.", "A",
                                 ["www.baidu.com. A 115.239.210.27"])

    @defer.inlineCallbacks
    def test_health(self):
        yield self.assert_http("HEALTH", "/health")


class S5Test(S4Test):
    corefile = "S5.Corefile"


# -- S6, S7, S8: file zones ---------------------------------------------------

ORG_SOA = ("example.org. 3600 IN SOA sns.dns.icann.org. noc.dns.icann.org. "
           "2017042745 7200 3600 1209600 3600")
ORG_NS = ["example.org. 3600 IN NS a.iana-servers.net.",
          "example.org. 3600 IN NS b.iana-servers.net."]


class S6Test(Era):
    corefile = "S6.Corefile"

    @defer.inlineCallbacks
    def test_records(self):
        yield self.assert_answer("www.example.org.", "A",
                                 ["www.example.org. 3600 IN A 127.0.0.1"],
                                 aa=True)
        yield self.assert_answer("www.example.org.", "AAAA",
                                 ["www.example.org. 3600 IN AAAA ::1"],
                                 aa=True, proto="tcp")
        yield self.assert_answer("example.org.", "SOA", [ORG_SOA], aa=True)
        yield self.assert_answer("example.org.", "NS", ORG_NS, aa=True)

    @defer.inlineCallbacks
    def test_nxdomain_with_soa(self):
        m = yield self.assert_rcode("nope.example.org.", "A",
                                    dns.rcode.NXDOMAIN)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m, "authority"), [ORG_SOA])

    @defer.inlineCallbacks
    def test_outside_refused(self):
        yield self.assert_rcode("www.example.com.", "A", dns.rcode.REFUSED)


class S7Test(Era):
    corefile = "S7.Corefile"

    @defer.inlineCallbacks
    def test_delegation(self):
        # The file takes the block's zone "."; the example.org NS records
        # are a delegation below it.
        m = yield self.ask("www.example.org.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertFalse(m.flags & dns.flags.AA)
        self.assertEqual(m.answer, [])
        self.assertEqual(util.rrs(m, "authority"), ORG_NS)

    @defer.inlineCallbacks
    def test_other_names_nxdomain(self):
        for name in ("www.baidu.com.", "example.com."):
            m = yield self.assert_rcode(name, "A", dns.rcode.NXDOMAIN)
            self.assertTrue(m.flags & dns.flags.AA)
            self.assertEqual(util.rrs(m, "authority"), [ORG_SOA])
        self.assertEqual(self.up.count(), 0)


class S8Test(Era):
    corefile = "S8.Corefile"

    @defer.inlineCallbacks
    def test_file(self):
        yield self.assert_answer("www.example.org.", "A",
                                 ["www.example.org. 3600 IN A 127.0.0.1"],
                                 aa=True)

    @defer.inlineCallbacks
    def test_proxy(self):
        yield self.assert_answer("www.baidu.com.", "A",
                                 ["www.baidu.com. 300 IN A 115.239.210.27"])
        self.assertEqual(self.up.count("www.baidu.com.", "A"), 1)


# -- S9, S10, S11: kubernetes of the 1.x days ---------------------------------

def deprecations(log):
    """(plugin, first word, line) of each deprecation notice logged with
    its place in the Corefile: ``[WARNING] plugin/P: WORD ... (F:LINE)``."""
    out = []
    for text in log.lines:
        head, _, rest = text.partition(" plugin/")
        place = rest.rpartition(":")[2]
        if head != "[WARNING]" or not place.endswith(")"):
            continue
        plugin, _, message = rest.partition(": ")
        if place[:-1].isdigit():
            out.append((plugin, message.split(" ")[0], int(place[:-1])))
    return out


class S9Test(S3Test):
    corefile = "S9.Corefile"
    domain = "cluster.local."

    @defer.inlineCallbacks
    def test_services(self):
        # No ttl option: kubernetes' default of 5 seconds.
        yield self.assert_answer(
            self.svc("kube-dns.kube-system"), "A",
            [self.svc("kube-dns.kube-system") + " 5 IN A 10.3.0.10"],
            aa=True)

    @defer.inlineCallbacks
    def test_pods_insecure(self):
        name = "10-244-1-5.default.pod." + self.domain
        yield self.assert_answer(name, "A", [name + " 5 IN A 10.244.1.5"])

    @defer.inlineCallbacks
    def test_ptr(self):
        yield self.assert_answer(
            "10.0.0.10.in-addr.arpa.", "PTR",
            ["10.0.0.10.in-addr.arpa. 5 IN PTR " + self.svc("foo.default")],
            aa=True)

    def test_probes(self):
        self.assertEqual(self.exits, [])

    def test_deprecations(self):
        self.assertEqual(deprecations(self.log), [
            ("kubernetes", "upstream", 7)])

    @defer.inlineCallbacks
    def test_health_and_metrics(self):
        yield self.assert_http("HEALTH", "/health")
        body = yield self.assert_http("METRICS", "/metrics")
        self.assertIn("coredns_build_info", body)


class S10Test(Era):
    corefile = "S10.Corefile"
    kubernetes = True

    @defer.inlineCallbacks
    def test_endpoint_pod_names(self):
        name = "web-7c9d-abcde.web.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [name + " 5 IN A 10.244.1.7"])

    @defer.inlineCallbacks
    def test_external_name_through_upstream(self):
        name = "baidu.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [
            name + " CNAME www.baidu.com.",
            "www.baidu.com. A 115.239.210.27"])

    @defer.inlineCallbacks
    def test_unknown_names_fall_through(self):
        yield self.assert_answer("legacy.cluster.local.", "A",
                                 ["legacy.cluster.local. A 192.0.2.53"])

    def test_deprecations(self):
        self.assertEqual(deprecations(self.log), [
            ("kubernetes", "upstream", 6)])


class S11Test(Era):
    corefile = "S11.Corefile"
    kubernetes = True

    @defer.inlineCallbacks
    def test_service_and_ptr(self):
        name = "kube-dns.kube-system.svc.cluster.local."
        yield self.assert_answer(name, "A", [name + " 5 IN A 10.3.0.10"],
                                 aa=True)
        yield self.assert_answer(
            "10.0.3.10.in-addr.arpa.", "PTR",
            ["10.0.3.10.in-addr.arpa. 5 IN PTR " + name], aa=True)

    @defer.inlineCallbacks
    def test_other_names_proxied(self):
        yield self.assert_answer("www.baidu.com.", "A",
                                 ["www.baidu.com. A 115.239.210.27"])

    @defer.inlineCallbacks
    def test_health(self):
        yield self.assert_http("HEALTH", "/health")


# -- S12a, S12b: every kubernetes option of the 1.x docs ----------------------

class S12aTest(Era):
    corefile = "S12a.Corefile"
    kubernetes = True

    @defer.inlineCallbacks
    def test_ttl_10(self):
        name = "foo.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [name + " 10 IN A 10.0.0.10"],
                                 aa=True)

    @defer.inlineCallbacks
    def test_namespace_filter(self):
        # kube-system is not exposed: NXDOMAIN, through to forward.
        name = "kube-dns.kube-system.svc.cluster.local."
        yield self.assert_rcode(name, "A", dns.rcode.NXDOMAIN)
        self.assertEqual(self.up.count(name, "A"), 1)

    @defer.inlineCallbacks
    def test_label_filter(self):
        yield self.assert_rcode("hidden.default.svc.cluster.local.", "A",
                                dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_pods_verified(self):
        name = "10-244-1-5.default.pod.cluster.local."
        yield self.assert_answer(name, "A", [name + " 10 IN A 10.244.1.5"])
        yield self.assert_rcode("10-244-9-9.default.pod.cluster.local.",
                                "A", dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_endpoint_pod_names(self):
        name = "web-7c9d-abcde.web.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [name + " 10 IN A 10.244.1.7"])

    @defer.inlineCallbacks
    def test_empty_service(self):
        # ignore empty_service: a service without endpoints is NXDOMAIN.
        yield self.assert_rcode("empty.default.svc.cluster.local.", "A",
                                dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_external_name_through_upstream(self):
        name = "baidu.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [
            name + " CNAME www.baidu.com.",
            "www.baidu.com. A 115.239.210.27"])

    @defer.inlineCallbacks
    def test_axfr_to_localhost(self):
        q = util.make_query("cluster.local.", "AXFR")
        [data] = yield util.send_tcp(self.ports["PORT"], q.to_wire(),
                                     count=1)
        m = dns.message.from_wire(data)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        types = [dns.rdatatype.to_text(r.rdtype) for r in m.answer]
        self.assertEqual(types[0], "SOA")
        self.assertIn("foo.default.svc.cluster.local. A 10.0.0.10",
                      records(m))

    def test_deprecations(self):
        """One notice per removed option, at its line."""
        self.assertEqual(deprecations(self.log), [
            ("kubernetes", "resyncperiod", 3),
            ("kubernetes", "upstream", 10),
            ("kubernetes", "transfer", 12)])


class S12bTest(S12aTest):
    corefile = "S12b.Corefile"

    @defer.inlineCallbacks
    def test_empty_service(self):
        # noendpoints: services answer their ClusterIP without endpoints.
        name = "empty.default.svc.cluster.local."
        yield self.assert_answer(name, "A", [name + " 10 IN A 10.0.0.20"])

    def test_deprecations(self):
        self.assertEqual(deprecations(self.log), [
            ("kubernetes", "resyncperiod", 3),
            ("kubernetes", "upstream", 9),
            ("kubernetes", "transfer", 11)])

    @defer.inlineCallbacks
    def test_endpoint_pod_names(self):
        # noendpoints: no endpoint names at all.
        yield self.assert_rcode(
            "web-7c9d-abcde.web.default.svc.cluster.local.", "A",
            dns.rcode.NXDOMAIN)
