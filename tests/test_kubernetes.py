"""kubernetes: answers from a real list/watch against the test API server.

The cluster mirrors the fixtures of CoreDNS's plugin/kubernetes handler
tests; the tables are derived from handler_test.go, handler_case_test.go,
ns_test.go, reverse_test.go and the pod mode tests.
"""

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.request import Response
from tests.support import cases, util
from tests.support import k8s_apiserver as k8s
from tests.support.cases import Case
from tests.support.k8s_cluster import cluster

# The serial is the store's change counter: any serial matches ("*").
SOA = ("cluster.local. 5 IN SOA ns.dns.cluster.local. "
       "hostmaster.cluster.local. * 7200 1800 86400 5")


class Base(unittest.TestCase):
    options = "namespaces testns"
    zones = "cluster.local"
    extra = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.populate(self.api)
        self.app = yield util.start(self, self.corefile())
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")

    def populate(self, srv):
        cluster(srv)

    def corefile(self):
        return (".:0 {\n    kubernetes %s {\n        endpoint %s\n%s    }\n"
                "%s}\n") % (
            self.zones, self.api.url,
            "".join("        %s\n" % o for o in self.options.split(";")
                    if o.strip()), self.extra)

    def check(self, rows, proto="udp"):
        """Ask every (qname, qtype, rcode, answer, ns, extra) row as a
        ``Case``; answers that are not errors are authoritative."""
        return cases.run(self, self.port, [
            Case(qname, qtype, rcode, answer=answer, ns=ns, extra=extra,
                 aa=True if rcode in ("NOERROR", "NXDOMAIN") else None)
            for qname, qtype, rcode, answer, ns, extra in rows], proto)


def A(name, ip, ttl=5):
    return "%s %d IN A %s" % (name, ttl, ip)


def AAAA(name, ip, ttl=5):
    return "%s %d IN AAAA %s" % (name, ttl, ip)


def SRV(name, rdata, ttl=5):
    return "%s %d IN SRV %s" % (name, ttl, rdata)


C = "svc1.testns.svc.cluster.local."
H = "hdls1.testns.svc.cluster.local."
D = "svc-dual-stack.testns.svc.cluster.local."

COMMON = [
    (C, "A", "NOERROR", [A(C, "10.0.0.1")], [], []),
    ("svcempty.testns.svc.cluster.local.", "A", "NOERROR",
     [A("svcempty.testns.svc.cluster.local.", "10.0.0.1")], [], []),
    (C, "SRV", "NOERROR", [SRV(C, "0 100 80 " + C)], [], [A(C, "10.0.0.1")]),
    ("svc6.testns.svc.cluster.local.", "SRV", "NOERROR",
     [SRV("svc6.testns.svc.cluster.local.",
          "0 100 80 svc6.testns.svc.cluster.local.")], [],
     [AAAA("svc6.testns.svc.cluster.local.", "1234:abcd::1")]),
    ("_http._tcp." + C, "SRV", "NOERROR",
     [SRV("_http._tcp." + C, "0 100 80 " + C)], [], [A(C, "10.0.0.1")]),
    (H, "A", "NOERROR", [A(H, "172.0.0.%d" % i) for i in (2, 3, 4, 5)],
     [], []),
    ("hdlsprtls.testns.svc.cluster.local.", "A", "NOERROR",
     [A("hdlsprtls.testns.svc.cluster.local.", "172.0.0.20")], [], []),
    (C, "AAAA", "NOERROR", [], [SOA], []),
    ("svc0.testns.svc.cluster.local.", "AAAA", "NXDOMAIN", [], [SOA], []),
    ("svc0.testns.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
    ("svc0.svc-nons.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
    ("dns-version.cluster.local.", "TXT", "NOERROR",
     ['dns-version.cluster.local. 28800 IN TXT "1.1.0"'], [], []),
    (C, "TXT", "NOERROR", [], [SOA], []),
    ("svc0.svc-nons.svc.cluster.local.", "TXT", "NXDOMAIN", [], [SOA], []),
    ("bogusendpoint." + H, "A", "NXDOMAIN", [], [SOA], []),
    ("bogusendpoint.svc0.testns.svc.cluster.local.", "A", "NXDOMAIN", [],
     [SOA], []),
    ("svc6.testns.svc.cluster.local.", "AAAA", "NOERROR",
     [AAAA("svc6.testns.svc.cluster.local.", "1234:abcd::1")], [], []),
    (H, "AAAA", "NOERROR", [AAAA(H, "5678:abcd::1"), AAAA(H, "5678:abcd::2")],
     [], []),
    ("svc.cluster.local.", "A", "NOERROR", [], [SOA], []),
    ("pod.cluster.local.", "A", "NOERROR", [], [SOA], []),
    ("testns.svc.cluster.local.", "A", "NOERROR", [], [SOA], []),
    ("svc.cluster.local.", "NS", "NOERROR", [], [SOA], []),
    ("testns.svc.cluster.local.", "NS", "NOERROR", [], [SOA], []),
    ("foo.cluster.local.", "NS", "NXDOMAIN", [], [SOA], []),
    ("foo.svc.cluster.local.", "NS", "NXDOMAIN", [], [SOA], []),
    (D, "A", "NOERROR", [A(D, "10.0.0.3")], [], []),
    (D, "AAAA", "NOERROR", [AAAA(D, "10::3")], [], []),
    (D, "SRV", "NOERROR", [SRV(D, "0 50 80 " + D)], [],
     [A(D, "10.0.0.3"), AAAA(D, "10::3")]),
    (C, "SOA", "NOERROR", [], [SOA], []),
    ("endpoint.external.testns.svc.cluster.local.", "CNAME", "NXDOMAIN",
     [], [SOA], []),
    ("subdomain.subdomain.external.testns.svc.cluster.local.", "CNAME",
     "NXDOMAIN", [], [SOA], []),
]

HEADLESS = [
    ("_http._tcp." + H, "SRV", "NOERROR",
     [SRV("_http._tcp." + H, "0 16 80 %s.%s" % (n, H)) for n in (
         "172-0-0-2", "172-0-0-3", "5678-abcd--1", "5678-abcd--2",
         "dup-name")], [],
     [A("172-0-0-2." + H, "172.0.0.2"), A("172-0-0-3." + H, "172.0.0.3"),
      AAAA("5678-abcd--1." + H, "5678:abcd::1"),
      AAAA("5678-abcd--2." + H, "5678:abcd::2"),
      A("dup-name." + H, "172.0.0.4"), A("dup-name." + H, "172.0.0.5")]),
    ("5678-abcd--2." + H, "AAAA", "NOERROR",
     [AAAA("5678-abcd--2." + H, "5678:abcd::2")], [], []),
    ("172-0-0-20.hdlsprtls.testns.svc.cluster.local.", "A", "NOERROR",
     [A("172-0-0-20.hdlsprtls.testns.svc.cluster.local.", "172.0.0.20")],
     [], []),
    ("172-0-0-2." + H, "A", "NOERROR", [A("172-0-0-2." + H, "172.0.0.2")],
     [], []),
    ("dup-name." + H, "A", "NOERROR",
     [A("dup-name." + H, "172.0.0.4"), A("dup-name." + H, "172.0.0.5")],
     [], []),
    ("external.testns.svc.cluster.local.", "CNAME", "NOERROR",
     ["external.testns.svc.cluster.local. 5 IN CNAME ext.interwebs.test."],
     [], []),
    ("external-to-service.testns.svc.cluster.local", "A", "NOERROR",
     ["external-to-service.testns.svc.cluster.local. 5 IN CNAME " + C,
      A(C, "10.0.0.1")], [], []),
    ("ep1a." + C, "A", "NOERROR", [A("ep1a." + C, "172.0.0.1")], [], []),
    ("svc1.unexposedns.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
    ("cluster.local.", "A", "NOERROR", [], [SOA], []),
    ("cluster.local.", "TXT", "NXDOMAIN", [], [SOA], []),
    ("cluster.local.", "SOA", "NOERROR", [SOA], [], []),
    ("svc1.testns.svc.cluster.local.", "MX", "NOERROR", [], [SOA], []),
    ("svc1.testns.svc.cluster.local.", "HINFO", "NOERROR", [], [SOA], []),
    ("nope.testns.svc.cluster.local.", "HINFO", "NXDOMAIN", [], [SOA], []),
    ("1-2-3-4.podns.pod.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
    ("a.b.c.d.e.testns.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
    ("*.testns.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA], []),
]


class HandlerTest(Base):

    def test_common(self):
        return self.check(COMMON)

    def test_headless_and_more(self):
        # TCP: the SRV answer with all its glue is larger than 512 bytes.
        return self.check(HEADLESS, proto="tcp")

    def test_tcp(self):
        return self.check(COMMON[:6], proto="tcp")

    def test_case_preserved(self):
        Q = "SvC1.TeStNs.SvC.cLuStEr.LoCaL."
        S = "_HtTp._TcP.sVc1.TeStNs.SvC.cLuStEr.LoCaL."
        N = "not-a-service.testns.svc.ClUsTeR.lOcAl."
        return cases.run(self, self.port, [
            Case(Q, "A", aa=True, answer=[A(Q, "10.0.0.1")]),
            # The target and its glue keep the zone in the question's case.
            Case(S, "SRV", aa=True, answer=[
                SRV(S, "0 100 80 svc1.testns.svc.cLuStEr.LoCaL.")],
                extra=[A("svc1.testns.svc.cLuStEr.LoCaL.", "10.0.0.1")]),
            Case(N, "A", "NXDOMAIN", aa=True, ns=[
                "ClUsTeR.lOcAl. 5 IN SOA ns.dns.ClUsTeR.lOcAl. "
                "hostmaster.ClUsTeR.lOcAl. * 7200 1800 86400 5"]),
            Case("Cluster.local.", "SOA", aa=True, answer=[
                "Cluster.local. 5 IN SOA ns.dns.Cluster.local. "
                "hostmaster.Cluster.local. * 7200 1800 86400 5"]),
        ])

    @defer.inlineCallbacks
    def test_external_upstream(self):
        """ExternalName targets outside the zone resolve through the whole
        server; the CNAME comes first, TC carries over."""
        asked = []

        def lookup(name, qtype, qclass=1, parent=None, do=False):
            asked.append((name, qtype, parent.depth))
            r = Response(0, [w.RR("ext.interwebs.test.", w.A, 5,
                                  w.a_rdata("1.2.3.4"))], tc=True)
            return defer.succeed(r)
        self.patch(self.app, "lookup", lookup)
        m = yield util.query(self.port, "external.testns.svc.cluster.local.",
                             "A", proto="tcp")
        self.assertEqual(asked, [("ext.interwebs.test.", w.A, 0)])
        self.assertEqual([str(r.name) for r in m.answer],
                         ["external.testns.svc.cluster.local.",
                          "ext.interwebs.test."])
        self.assertTrue(m.flags & dns.flags.TC)

    @defer.inlineCallbacks
    def test_axfr_refused(self):
        m = yield util.query(self.port, "cluster.local.", "AXFR",
                             proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)

    @defer.inlineCallbacks
    def test_not_ours(self):
        m = yield util.query(self.port, "example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    def test_ready(self):
        self.assertTrue(self.k.ready())


class MulticlusterTest(Base):
    zones = "cluster.local clusterset.local"
    options = "namespaces testns; multicluster clusterset.local"

    def populate(self, srv):
        cluster(srv)
        srv.add("serviceimports",
                k8s.service_import("svc1", "testns", ("10.0.0.1",)),
                k8s.service_import("hdls1", "testns", type="Headless"),
                k8s.service_import("noports", "testns", ("10.0.0.9",), ()))
        srv.add("endpointslices", k8s.endpoint_slice(
            "hdls1-mc", "testns", "hdls1", [
                k8s.endpoint(["172.0.0.2"]),
                k8s.endpoint(["172.0.0.4"], "dup-name")], cluster="cluster1"))

    def test_multicluster(self):
        Z = "hdls1.testns.svc.clusterset.local."
        soa = SOA.replace("cluster.local", "clusterset.local")
        return self.check([
            ("svc1.testns.svc.clusterset.local.", "A", "NOERROR",
             [A("svc1.testns.svc.clusterset.local.", "10.0.0.1")], [], []),
            (Z, "A", "NOERROR", [A(Z, "172.0.0.2"), A(Z, "172.0.0.4")], [],
             []),
            ("_http._tcp." + Z, "SRV", "NOERROR",
             [SRV("_http._tcp." + Z, "0 50 80 172-0-0-2.cluster1." + Z),
              SRV("_http._tcp." + Z, "0 50 80 dup-name.cluster1." + Z)], [],
             [A("172-0-0-2.cluster1." + Z, "172.0.0.2"),
              A("dup-name.cluster1." + Z, "172.0.0.4")]),
            ("dup-name.cluster1." + Z, "A", "NOERROR",
             [A("dup-name.cluster1." + Z, "172.0.0.4")], [], []),
            ("dup-name." + Z, "A", "NXDOMAIN", [], [soa], []),
            ("noports.testns.svc.clusterset.local.", "A", "NXDOMAIN", [],
             [soa], []),
            (C, "A", "NOERROR", [A(C, "10.0.0.1")], [], []),
        ])


class ReverseTest(Base):
    zones = "cluster.local 0.10.in-addr.arpa 172.in-addr.arpa"
    options = "fallthrough 0.10.in-addr.arpa"
    extra = "    whoami\n"

    def test_ptr(self):
        return self.check([
            ("1.0.0.10.in-addr.arpa.", "PTR", "NOERROR", [
                "1.0.0.10.in-addr.arpa. 5 IN PTR svc1.testns.svc.cluster."
                "local."], [], []),
            ("2.0.0.172.in-addr.arpa.", "PTR", "NOERROR", [
                "2.0.0.172.in-addr.arpa. 5 IN PTR 172-0-0-2.hdls1.testns."
                "svc.cluster.local."], [], []),
            ("1.0.0.172.in-addr.arpa.", "PTR", "NOERROR", [
                "1.0.0.172.in-addr.arpa. 5 IN PTR ep1a.svc1.testns.svc."
                "cluster.local."], [], []),
            ("9.9.9.172.in-addr.arpa.", "PTR", "NXDOMAIN", [], [
                "172.in-addr.arpa. 5 IN SOA ns.dns.172.in-addr.arpa. "
                "hostmaster.172.in-addr.arpa. * 7200 1800 86400 5"], []),
        ])

    @defer.inlineCallbacks
    def test_fallthrough(self):
        # NXDOMAIN in a fallthrough zone goes on to whoami.
        m = yield util.query(self.port, "54.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(len(m.additional), 2)
        # A name that exists is answered, not passed on.
        m = yield util.query(self.port, "1.0.0.10.in-addr.arpa.", "PTR")
        self.assertEqual(len(m.answer), 1)


class PodsInsecureTest(Base):
    options = "pods insecure"

    def test_pods(self):
        P = "podns.pod.cluster.local."
        return self.check([
            ("10-240-0-1." + P, "A", "NOERROR", [A("10-240-0-1." + P,
                                                   "10.240.0.1")], [], []),
            ("172-0-0-2." + P, "A", "NOERROR", [A("172-0-0-2." + P,
                                                  "172.0.0.2")], [], []),
            ("1234-5678-abcd--1." + P, "AAAA", "NOERROR", [
                AAAA("1234-5678-abcd--1." + P, "1234:5678:abcd::1")], [], []),
            ("10-240-0-1." + P, "AAAA", "NOERROR", [], [SOA], []),
            ("bad-name." + P, "A", "NXDOMAIN", [], [SOA], []),
            ("10-240-0-1.nons.pod.cluster.local.", "A", "NXDOMAIN", [],
             [SOA], []),
            (P, "A", "NOERROR", [], [SOA], []),
        ])


class PodsVerifiedTest(Base):
    options = "pods verified"

    def populate(self, srv):
        cluster(srv)
        srv.add("pods", k8s.pod("foo", "podns", "10.240.0.1"),
                k8s.pod("done", "podns", "10.240.0.2", phase="Succeeded"))

    @defer.inlineCallbacks
    def test_pods(self):
        P = "podns.pod.cluster.local."
        yield self.check([
            ("10-240-0-1." + P, "A", "NOERROR", [A("10-240-0-1." + P,
                                                   "10.240.0.1")], [], []),
            ("10-240-0-1.testns.pod.cluster.local.", "A", "NXDOMAIN", [],
             [SOA], []),
            ("10-240-0-2." + P, "A", "NXDOMAIN", [], [SOA], []),
            ("172-0-0-2." + P, "A", "NXDOMAIN", [], [SOA], []),
        ])
        q = [x[2] for x in self.api.requests if x[0] == "pods"]
        self.assertIn("status.phase!=Succeeded", q[0]["fieldSelector"])
        self.api.add("pods", k8s.pod("bar", "podns", "10.240.0.7"))
        yield util.wait_for(lambda: ("10.240.0.7" in
                                     self.k.store.pods_by_ip))
        yield self.check([
            ("10-240-0-7." + P, "A", "NOERROR",
             [A("10-240-0-7." + P, "10.240.0.7")], [], []),
        ])


class PodsDisabledTest(Base):
    options = ""

    def test_pods(self):
        return self.check([("10-240-0-1.podns.pod.cluster.local.", "A",
                            "NXDOMAIN", [], [SOA], [])])


class IgnoreEmptyTest(Base):
    options = "ignore empty_service; ttl 30"

    def test_ignore(self):
        soa = SOA.replace(" 5 IN", " 30 IN").replace(" 5", " 30")
        return self.check([
            ("svcempty.testns.svc.cluster.local.", "A", "NXDOMAIN", [],
             [soa], []),
            (C, "A", "NOERROR", [A(C, "10.0.0.1", 30)], [], []),
            ("svc1.unexposedns.svc.cluster.local.", "A", "NXDOMAIN", [],
             [soa], []),
            ("kubedns.kube-system.svc.cluster.local.", "A", "NOERROR",
             [A("kubedns.kube-system.svc.cluster.local.", "10.0.0.10", 30)],
             [], []),
        ])


class NoEndpointsTest(Base):
    options = "noendpoints"

    def test_noendpoints(self):
        return self.check([
            (H, "A", "NXDOMAIN", [], [SOA], []),
            ("ep1a." + C, "A", "NXDOMAIN", [], [SOA], []),
            (C, "A", "NOERROR", [A(C, "10.0.0.1")], [], []),
        ])

    def test_no_slice_watch(self):
        self.assertEqual(self.api.count("endpointslices", "list"), 0)


class PodNamesTest(Base):
    options = "endpoint_pod_names"

    def populate(self, srv):
        cluster(srv)
        srv.add("services", k8s.service("web", "testns", ("None",)))
        srv.add("endpointslices", k8s.endpoint_slice(
                "web-1", "testns", "web", [
            k8s.endpoint(["10.1.0.1"], target="web-0"),
            k8s.endpoint(["10.1.0.2"], hostname="given", target="web-1"),
            k8s.endpoint(["10.1.0.3"], target="x" * 64),
            k8s.endpoint(["10.1.0.4"], ready=False, target="web-3"),
            k8s.endpoint(["10.1.0.5"], ready=None, target="web-4")]))

    def test_names(self):
        W = "web.testns.svc.cluster.local."
        return self.check([
            ("web-0." + W, "A", "NOERROR", [A("web-0." + W, "10.1.0.1")],
             [], []),
            ("given." + W, "A", "NOERROR", [A("given." + W, "10.1.0.2")],
             [], []),
            ("10-1-0-3." + W, "A", "NOERROR", [A("10-1-0-3." + W,
                                                 "10.1.0.3")], [], []),
            ("web-3." + W, "A", "NXDOMAIN", [], [SOA], []),
            (W, "A", "NOERROR", [A(W, "10.1.0.%d" % i) for i in
                                 (1, 2, 3, 5)], [], []),
        ])


class NamespaceApexTest(Base):
    options = ""

    @defer.inlineCallbacks
    def test_ns_records(self):
        # kubedns's endpoint 172.0.0.100 is "us": NS names its service.
        self.k.local_ips = ["172.0.0.100"]
        Z = "cluster.local."
        K = "kubedns.kube-system.svc.cluster.local."
        yield self.check([
            (Z, "NS", "NOERROR", ["%s 5 IN NS %s" % (Z, K)], [],
             [A(K, "10.0.0.10")]),
        ])
        self.k.local_ips = ["192.0.2.53"]
        yield self.check([
            (Z, "NS", "NOERROR", ["%s 5 IN NS ns.dns.%s" % (Z, Z)], [],
             [A("ns.dns." + Z, "192.0.2.53")]),
            ("ns.dns." + Z, "A", "NOERROR", [A("ns.dns." + Z, "192.0.2.53")],
             [], []),
            ("ns.dns." + Z, "AAAA", "NOERROR", [], [SOA], []),
        ])


class ZonalTest(Base):
    options = "zonal"

    def populate(self, srv):
        cluster(srv)
        srv.add("services", k8s.service("db", "prod", ("None",)))
        srv.add("namespaces", k8s.namespace("prod"))
        srv.add("endpointslices", k8s.endpoint_slice("db-1", "prod", "db", [
            k8s.endpoint(["10.2.0.1"], zone="us-west-2a"),
            k8s.endpoint(["10.2.0.2"], zone="US-West-2b"),
            k8s.endpoint(["10.2.0.3"])]))

    def test_zonal(self):
        D = "db.prod.svc.cluster.local."
        return self.check([
            ("us-west-2a.pin._zone." + D, "A", "NOERROR",
             [A("us-west-2a.pin._zone." + D, "10.2.0.1")], [], []),
            ("us-west-2b.pin._zone." + D, "A", "NOERROR",
             [A("us-west-2b.pin._zone." + D, "10.2.0.2")], [], []),
            ("eu-1.pin._zone." + D, "A", "NOERROR", [], [SOA], []),
            ("eu-1.pin._zone." + D, "TXT", "NOERROR", [], [SOA], []),
            ("eu-1.prefer._zone." + D, "A", "NOERROR",
             [A("eu-1.prefer._zone." + D, "10.2.0.%d" % i)
              for i in (1, 2, 3)], [], []),
            ("eu-1.other._zone." + D, "A", "NXDOMAIN", [], [SOA], []),
            ("us-west-2a.pin._zone." + C, "A", "NXDOMAIN", [], [SOA], []),
            ("_http._tcp." + D, "SRV", "NOERROR",
             [SRV("_http._tcp." + D, "0 33 80 10-2-0-%d.%s" % (i, D))
              for i in (1, 2, 3)], [],
             [A("10-2-0-%d.%s" % (i, D), "10.2.0.%d" % i) for i in (1, 2, 3)]),
        ])


class KeptAnswersTest(Base):
    """The general path's outcomes are kept per store version: asked
    again they give the same answer with new records, and a change of
    the store drops them."""

    @defer.inlineCallbacks
    def test_kept_until_the_store_changes(self):
        from corednstw.core.request import Request
        E = "172-0-0-2." + H
        rows = [
            (C, "SRV", "NOERROR", [SRV(C, "0 100 80 " + C)], [],
             [A(C, "10.0.0.1")]),
            (E, "A", "NOERROR", [A(E, "172.0.0.2")], [], []),
            (C, "AAAA", "NOERROR", [], [SOA], []),
            ("nope.testns.svc.cluster.local.", "A", "NXDOMAIN", [], [SOA],
             []),
        ]
        yield self.check(rows)
        self.assertGreaterEqual(len(self.k._answers), 4)
        # Asked twice: equal answers, never the same record objects (an
        # outer plugin may change what it is given).
        wire = util.make_query(C, "SRV").to_wire()
        got = []
        for _ in range(2):
            req = Request(wire, "127.0.0.1", 4000)
            qd, an, ns, ar = req.parse_header()
            req.parse_question(an, ns, ar)
            got.append(self.k.serve(req))
        self.assertEqual(got[0].answer, got[1].answer)
        self.assertEqual(got[0].additional, got[1].additional)
        self.assertIsNot(got[0].answer[0], got[1].answer[0])
        got[0].answer[0].ttl = 999
        self.assertEqual(got[1].answer[0].ttl, 5)
        yield self.check(rows)
        # A change of the store is seen at once.
        self.api.delete("services", "testns", "svc1")
        yield util.wait_for(lambda: ("svc1", "testns")
                            not in self.k.store.services)
        yield self.check([
            (C, "SRV", "NXDOMAIN", [], [SOA], []),
            (C, "AAAA", "NXDOMAIN", [], [SOA], []),
        ])

    @defer.inlineCallbacks
    def test_case_kept_apart(self):
        # The records carry the name as asked: each spelling is its own.
        U = "SVC1.testns.svc.Cluster.Local."
        for _ in range(2):
            yield self.check([
                (C, "SRV", "NOERROR", [SRV(C, "0 100 80 " + C)], [],
                 [A(C, "10.0.0.1")]),
            ])
            m = yield util.query(self.port, U, "SRV")
            self.assertEqual(str(m.answer[0].name), U)


class CacheInFront(Base):
    """A cache right in front of kubernetes (kept_answer counted)."""

    extra = "    cache 30\n"

    def ask_missing(self, wire):
        """The answer to ``wire`` from an empty cache (a miss)."""
        self.app.config.blocks[0].plugin("cache").build()
        return util.send_udp(self.port, wire)

    def counted(self):
        """The kept_answer results, recorded (None or request.Pieces)."""
        got = []
        kept = self.k.kept_answer

        def counting(req):
            out = kept(req)
            got.append(out)
            return out
        self.patch(self.k, "kept_answer", counting)
        return got


class KeptForCacheTest(CacheInFront):
    """A cache right in front of kubernetes takes the answers kubernetes
    keeps already cut (kept_answer): a miss then gives the very bytes the
    general path (the copy with AD, the records, the cut) gave, for every
    shape; what the cut does not take, what falls through and what the
    store no longer holds go the general way."""

    @defer.inlineCallbacks
    def test_same_bytes_as_the_general_path(self):
        Pieces = tuple     # request.Pieces
        got = self.counted()
        for qname, qtype, *_ in COMMON + HEADLESS:
            for do in (False, True):
                q = util.make_query(qname, qtype, want_dnssec=do)
                q.id = 777
                wire = q.to_wire()
                del got[:]
                first = yield self.ask_missing(wire)
                second = yield self.ask_missing(wire)
                third = yield self.ask_missing(wire)
                self.assertEqual(second, first, (qname, qtype, do))
                self.assertEqual(third, first, (qname, qtype, do))
                m = dns.message.from_wire(first)
                kept = [isinstance(p, Pieces) for p in got]
                if "external" in qname or qname == "cluster.local." or \
                        qtype in ("TXT", "SOA", "CNAME", "NS"):
                    # Not every answer is kept or cut (CNAME chains, the
                    # apex): what is not goes the general way each time.
                    continue
                self.assertTrue(m.flags & dns.flags.AA)
                self.assertEqual(kept[1:], [True, True],
                                 (qname, qtype, do, got))

    @defer.inlineCallbacks
    def test_first_miss_of_a_plain_name(self):
        # A plain service name's addresses asked for the first time are
        # cut by kept_answer itself (no records built, no copy with AD),
        # and other names' are worked out and cut there: the same bytes
        # as the general path gives, in any case spelling and with or
        # without DO; another class goes the general way.
        Pieces = tuple     # request.Pieces
        got = self.counted()
        names = [(qname, qtype) for qname, qtype, *_ in COMMON + HEADLESS
                 if qtype in ("A", "AAAA")]
        names += [("SVC1.TestNS.svc.Cluster.LOCAL.", "A"),
                  (D.upper(), "AAAA"), (H.upper(), "A")]
        fresh = 0
        cache = self.app.config.blocks[0].plugin("cache")
        for qname, qtype in names:
            for do in (False, True):
                q = util.make_query(qname, qtype, want_dnssec=do)
                q.id = 4242
                wire = q.to_wire()
                # The general path: the cache asks the chain (it is not
                # told the next plugin keeps answers).
                cache._kept_of, cache._kept = self.k, None
                del got[:]
                general = yield self.ask_missing(wire)
                self.assertEqual(got, [], (qname, qtype))
                cache._kept_of = None
                # Then a first miss with the version's tables empty.
                self.k._fast = ({}, {})
                self.k._answers = {}
                self.k._pieces = {}
                del got[:]
                first = yield self.ask_missing(wire)
                self.assertEqual(first, general, (qname, qtype, do))
                if isinstance(got[0], Pieces):
                    fresh += 1
                    key = (qname, getattr(w, qtype), w.CLASS_IN)
                    self.assertTrue(
                        qname.lower() in self.k._fast[qtype == "AAAA"]
                        or key in self.k._answers
                        or qname == "cluster.local.", (qname, qtype))
        self.assertGreaterEqual(fresh, 2 * len(names) - 4)
        # Another class: the general path (its records are of class IN).
        q = util.make_query(C, "A", rdclass="CH")
        del got[:]
        self.k._fast = ({}, {})
        self.k._pieces = {}
        yield self.ask_missing(q.to_wire())
        self.assertFalse([p for p in got if p is not None])

    @defer.inlineCallbacks
    def test_kept_after_the_first_miss(self):
        # The first miss has kubernetes work the answer out and cut it
        # (kept_answer), and the cut is kept, so the next miss takes
        # it.  An endpoint's address (not a plain service name) whose
        # cuts were dropped (the table emptied at its limit) is cut
        # again from the general path's kept outcome.
        Pieces = tuple     # request.Pieces
        got = self.counted()
        for qname, qtype, drop in (("_http._tcp." + C, "SRV", False),
                                   ("172-0-0-2." + H, "A", True)):
            wire = util.make_query(qname, qtype).to_wire()
            del got[:]
            first = yield self.ask_missing(wire)
            self.assertEqual(len(got), 1)
            kept = self.k._pieces.get(_request(wire).data[12:])
            self.assertIsInstance(kept, Pieces)
            self.assertIs(got[0], kept)
            if drop:
                self.k._pieces = {}
            second = yield self.ask_missing(wire)
            self.assertIsInstance(got[-1], Pieces)
            if not drop:
                self.assertIs(got[-1], kept)
            self.assertEqual(second, first)

    @defer.inlineCallbacks
    def test_answer_that_comes_later(self):
        # An ExternalName whose target lies outside: kept_answer hands
        # the cache serve's Deferred answer itself, so the target is
        # looked up once per miss, and the cache stores what comes.
        got = self.counted()
        asked = []

        def lookup(name, qtype, qclass=1, parent=None, do=False):
            asked.append(name)
            return defer.succeed(Response(0, [w.RR(
                "ext.interwebs.test.", w.A, 5, w.a_rdata("1.2.3.4"))]))
        self.patch(self.app, "lookup", lookup)
        wire = util.make_query("external.testns.svc.cluster.local.",
                               "A").to_wire()
        data = yield self.ask_missing(wire)
        self.assertEqual(asked, ["ext.interwebs.test."])
        self.assertTrue(isinstance(got[0], defer.Deferred), got)
        m = dns.message.from_wire(data)
        self.assertEqual([str(r.name) for r in m.answer],
                         ["external.testns.svc.cluster.local.",
                          "ext.interwebs.test."])
        hit = yield util.send_udp(self.port, wire)
        self.assertEqual(asked, ["ext.interwebs.test."])
        self.assertEqual(dns.message.from_wire(hit).answer, m.answer)

    @defer.inlineCallbacks
    def test_a_hit_after_a_kept_miss(self):
        wire = util.make_query("_http._tcp." + H, "SRV").to_wire()
        yield self.ask_missing(wire)
        miss = yield self.ask_missing(wire)
        hit = yield util.send_udp(self.port, wire)
        self.assertEqual(dns.message.from_wire(hit),
                         dns.message.from_wire(miss))
        cache = self.app.config.blocks[0].plugin("cache")
        self.assertEqual(len(cache.pcache), 1)

    @defer.inlineCallbacks
    def test_store_change_seen(self):
        got = self.counted()
        wire = util.make_query(C, "SRV").to_wire()
        yield self.ask_missing(wire)
        yield self.ask_missing(wire)
        self.assertIsNotNone(got[-1])
        self.api.delete("services", "testns", "svc1")
        yield util.wait_for(lambda: ("svc1", "testns")
                            not in self.k.store.services)
        data = yield self.ask_missing(wire)
        # The new version's tables: the denial worked out afresh.
        self.assertEqual(got[-1][2], w.NXDOMAIN)     # its rcode
        self.assertEqual(dns.message.from_wire(data).rcode(),
                         dns.rcode.NXDOMAIN)


class KeptFallthroughTest(CacheInFront):
    """With fallthrough, a name kubernetes does not hold is the next
    plugin's to answer: kept_answer gives nothing for it, and the next
    plugin is asked every time (with the copy of the query with AD)."""

    options = "namespaces testns;fallthrough"
    extra = "    cache 30\n    whoami\n"

    @defer.inlineCallbacks
    def test_next_plugin_asked(self):
        got = self.counted()
        wire = util.make_query("nope.testns.svc.cluster.local.",
                               "A").to_wire()
        for _ in range(3):
            data = yield self.ask_missing(wire)
            m = dns.message.from_wire(data)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
            self.assertEqual(got[-1], None)
        self.assertEqual(self.k.kept_answer(_request(wire)), None)
        # The kept NXDOMAIN outcome is there, but not for the cache, and
        # the next plugin's answer is not handed back.
        self.assertIn(("nope.testns.svc.cluster.local.", w.A, 1),
                      self.k._answers)
        self.assertNotIn(_request(wire).data[12:], self.k._pieces)
        # A name it holds is still handed over.
        wire = util.make_query(C, "A").to_wire()
        yield self.ask_missing(wire)
        yield self.ask_missing(wire)
        self.assertIsNotNone(got[-1])


def _request(wire):
    from corednstw.core.request import Request
    req = Request(wire, "127.0.0.1", 4000)
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req
