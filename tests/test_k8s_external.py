"""k8s_external: CoreDNS's external_test.go and apex_test.go cases over
the wire, with the kubernetes plugin fed by the test API server; setup,
fallthrough, the serial, and zone transfers."""

import re

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import k8s_apiserver as k8s
from tests.support import util
from tests.test_kubernetes_interfaces import axfr, transferred

Z = "example.com."
SOA = ("example.com. 5 IN SOA ns1.dns.example.com. "
       "hostmaster.dns.example.com. SERIAL 7200 1800 86400 5")


def cluster(srv):
    """The services of CoreDNS's k8s_external tests."""
    srv.add("namespaces", k8s.namespace("testns"))
    srv.add("services",
            k8s.service("svc1", "testns", ("10.0.0.1",),
                        external_ips=("1.2.3.4",)),
            k8s.service("svc6", "testns", ("10.0.0.3",),
                        external_ips=("1:2::5",)),
            k8s.service("svc11", "testns", ("10.0.0.3",),
                        type="LoadBalancer", ingress=("2.3.4.5",)),
            k8s.service("svc12", "testns", ("10.0.0.3",),
                        type="LoadBalancer", ingress=("dummy.hostname",)),
            k8s.service("svc-headless", "testns", ("None",)),
            k8s.service("internal", "testns", ("10.0.0.9",)))
    srv.add("endpointslices", k8s.endpoint_slice(
        "svc-headless-1", "testns", "svc-headless", [
            k8s.endpoint(["1.2.3.4"], "endpoint-svc-0"),
            k8s.endpoint(["1.2.3.5"], "endpoint-svc-1")]))


def lines(msg, section):
    return sorted(re.sub(r"(SRV 0 0 )\d+", r"\1PORT", re.sub(
        r"(SOA \S+ \S+ )\d+", r"\1SERIAL", x))
        for x in util.rrs(msg, section))


def A(name, ip):
    return "%s 5 IN A %s" % (name, ip)


def SRV(name, rdata):
    return "%s 5 IN SRV %s" % (name, rdata)


S1 = "svc1.testns." + Z
S6 = "svc6.testns." + Z
S11 = "svc11.testns." + Z
S12 = "svc12.testns." + Z
H = "svc-headless.testns." + Z
E0 = "endpoint-svc-0." + H
E1 = "endpoint-svc-1." + H

CASES = [
    ("4.3.2.1.in-addr.arpa.", "PTR", "NOERROR",
     ["4.3.2.1.in-addr.arpa. 5 IN PTR " + S1], [], []),
    (S1, "PTR", "NOERROR", [], [SOA], []),
    ("not-existing.testns." + Z, "PTR", "NXDOMAIN", [], [SOA], []),
    (S1, "A", "NOERROR", [A(S1, "1.2.3.4")], [], []),
    (S1, "SRV", "NOERROR", [SRV(S1, "0 100 80 " + S1)], [],
     [A(S1, "1.2.3.4")]),
    ("*._not-udp-or-tcp." + S1, "SRV", "NXDOMAIN", [], [SOA], []),
    ("_http._tcp." + S1, "SRV", "NOERROR",
     [SRV("_http._tcp." + S1, "0 100 80 " + S1)], [], [A(S1, "1.2.3.4")]),
    (S1, "AAAA", "NOERROR", [], [SOA], []),
    ("svc0.testns." + Z, "AAAA", "NXDOMAIN", [], [SOA], []),
    ("svc0.testns." + Z, "A", "NXDOMAIN", [], [SOA], []),
    ("svc0.svc-nons." + Z, "A", "NXDOMAIN", [], [SOA], []),
    (S6, "AAAA", "NOERROR", ["%s 5 IN AAAA 1:2::5" % S6], [], []),
    ("_http._tcp." + S6, "SRV", "NOERROR",
     [SRV("_http._tcp." + S6, "0 100 80 " + S6)], [],
     ["%s 5 IN AAAA 1:2::5" % S6]),
    (S6, "SRV", "NOERROR", [SRV(S6, "0 100 80 " + S6)], [],
     ["%s 5 IN AAAA 1:2::5" % S6]),
    ("testns." + Z, "A", "NOERROR", [], [SOA], []),
    ("testns." + Z, "SOA", "NOERROR", [], [SOA], []),
    (S11, "A", "NOERROR", [A(S11, "2.3.4.5")], [], []),
    ("_http._tcp." + S11, "SRV", "NOERROR",
     [SRV("_http._tcp." + S11, "0 100 80 " + S11)], [], [A(S11, "2.3.4.5")]),
    (S12, "A", "NOERROR", ["%s 5 IN CNAME dummy.hostname." % S12], [], []),
    ("_http._tcp." + S12, "SRV", "NOERROR",
     [SRV("_http._tcp." + S12, "0 100 80 dummy.hostname.")], [], []),
    (S12, "SRV", "NOERROR", [SRV(S12, "0 100 80 dummy.hostname.")], [], []),
    # A service without external addresses does not exist here.
    ("internal.testns." + Z, "A", "NXDOMAIN", [], [SOA], []),
    # Headless services (the ``headless`` option).
    (H, "A", "NOERROR", [A(H, "1.2.3.4"), A(H, "1.2.3.5")], [], []),
    (H, "SRV", "NOERROR", [SRV(H, "0 50 80 " + E0), SRV(H, "0 50 80 " + E1)],
     [], [A(E0, "1.2.3.4"), A(E1, "1.2.3.5")]),
    ("_http._tcp." + H, "SRV", "NOERROR",
     [SRV("_http._tcp." + H, "0 50 80 " + E0),
      SRV("_http._tcp." + H, "0 50 80 " + E1)],
     [], [A(E0, "1.2.3.4"), A(E1, "1.2.3.5")]),
    (E0, "SRV", "NOERROR", [SRV(E0, "0 100 80 " + E0)], [],
     [A(E0, "1.2.3.4")]),
    (E1, "A", "NOERROR", [A(E1, "1.2.3.5")], [], []),
    ("nope." + H, "A", "NXDOMAIN", [], [SOA], []),
    # The apex and the ``dns`` subdomain (apex_test.go).
    (Z, "SOA", "NOERROR", [SOA], [], []),
    (Z, "SRV", "NOERROR", [], [SOA], []),
    ("dns." + Z, "SRV", "NOERROR", [], [SOA], []),
    ("dns." + Z, "NS", "NOERROR", [], [SOA], []),
    ("ns1.dns." + Z, "SRV", "NOERROR", [], [SOA], []),
    ("ns1.dns." + Z, "NS", "NOERROR", [], [SOA], []),
    ("ns2.dns." + Z, "A", "NXDOMAIN", [], [SOA], []),
    ("a.ns1.dns." + Z, "A", "NXDOMAIN", [], [SOA], []),
]


class Base(unittest.TestCase):
    options = "headless"
    extra = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        cluster(self.api)
        self.app = yield util.start(self, (
            ".:0 {\n%s    k8s_external example.com in-addr.arpa {\n"
            "%s    }\n"
            "    kubernetes cluster.local {\n        endpoint %s\n"
            "        namespaces testns\n    }\n}\n") % (
                self.extra, "".join("        %s\n" % o
                                    for o in self.options.split(";")
                                    if o.strip()), self.api.url))
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")
        self.e = self.app.config.blocks[0].plugin("k8s_external")

    @defer.inlineCallbacks
    def check(self, cases):
        for qname, qtype, rcode, answer, ns, extra in cases:
            m = yield util.query(self.port, qname, qtype)
            what = "%s %s" % (qname, qtype)
            self.assertEqual(dns.rcode.to_text(m.rcode()), rcode, what)
            self.assertEqual(lines(m, "answer"), sorted(answer), what)
            self.assertEqual(lines(m, "authority"), sorted(ns), what)
            self.assertEqual(lines(m, "additional"), sorted(extra), what)
            self.assertTrue(m.flags & dns.flags.AA, what)


class ExternalTest(Base):

    def test_cases(self):
        return self.check(CASES)

    @defer.inlineCallbacks
    def test_own_addresses(self):
        """ns1.dns has the external addresses of the service in front of
        this server (found by the addresses it is bound to)."""
        self.api.add("services", k8s.service(
            "kube-dns", "testns", ("10.0.0.10",), (("dns", "UDP", 53),),
            external_ips=("203.0.113.53",)))
        self.api.add("endpointslices", k8s.endpoint_slice(
            "kube-dns-1", "testns", "kube-dns", [k8s.endpoint(["10.9.9.9"])],
            (("dns", "UDP", 53),)))
        yield util.wait_for(lambda: "10.9.9.9" in self.k.store.ep_by_ip
                            and ("kube-dns", "testns") in
                            self.k.store.services)
        self.k.local_ips = ["10.9.9.9"]
        yield self.check([
            (Z, "NS", "NOERROR", ["example.com. 5 IN NS ns1.dns." + Z], [],
             [A("ns1.dns." + Z, "203.0.113.53")]),
            ("ns1.dns." + Z, "A", "NOERROR", [A("ns1.dns." + Z,
                                                "203.0.113.53")], [], []),
            ("ns1.dns." + Z, "AAAA", "NOERROR", [], [SOA], []),
        ])

    @defer.inlineCallbacks
    def test_case_kept(self):
        m = yield util.query(self.port, "SVC1.TestNS.Example.COM.", "A")
        self.assertEqual(util.rrs(m), ["SVC1.TestNS.Example.COM. 5 IN A "
                                       "1.2.3.4"])

    @defer.inlineCallbacks
    def test_serial_follows_external_changes(self):
        """The SOA serial is the time external addresses last changed:
        not moved by other changes."""
        serial = self.k.external_serial(Z)
        self.assertGreater(serial, 0)
        m = yield util.query(self.port, Z, "SOA")
        self.assertEqual(m.answer[0][0].serial, serial)
        self.k.store.ext_modified = 1
        self.api.add("services", k8s.service("other", "testns",
                                             ("10.0.0.44",)))
        yield util.wait_for(lambda: ("other", "testns")
                            in self.k.store.services)
        self.assertEqual(self.k.external_serial(Z), 1)
        self.api.add("services", k8s.service("other", "testns",
                                             ("10.0.0.44",),
                                             external_ips=("1.1.1.1",)))
        yield util.wait_for(lambda: self.k.external_serial(Z) > 1)
        m = yield util.query(self.port, "other.testns." + Z, "A")
        self.assertEqual(util.rrs(m), [A("other.testns." + Z, "1.1.1.1")])

    @defer.inlineCallbacks
    def test_reverse_follows_changes(self):
        self.api.add("services", k8s.service("svc1", "testns",
                                             ("10.0.0.1",),
                                             external_ips=("1.2.3.9",)))
        yield util.wait_for(
            lambda: "1.2.3.4" not in self.k.store.svc_by_ext)
        yield self.check([
            ("4.3.2.1.in-addr.arpa.", "PTR", "NXDOMAIN", [], [
                "in-addr.arpa. 5 IN SOA ns1.dns.in-addr.arpa. "
                "hostmaster.dns.in-addr.arpa. SERIAL 7200 1800 86400 5"], []),
            ("9.3.2.1.in-addr.arpa.", "PTR", "NOERROR",
             ["9.3.2.1.in-addr.arpa. 5 IN PTR " + S1], [], [])])


class NotHeadlessTest(Base):
    options = "ttl 30"

    def test_cases(self):
        soa = SOA.replace(" 5 IN", " 30 IN").replace(" 86400 5",
                                                     " 86400 30")
        return self.check([
            # Without ``headless`` a headless service has no addresses
            # here: it does not exist.
            (H, "A", "NXDOMAIN", [], [soa], []),
            (E0, "A", "NXDOMAIN", [], [soa], []),
            (S1, "A", "NOERROR", ["%s 30 IN A 1.2.3.4" % S1], [], []),
            # SRV records keep the kubernetes TTL, as in CoreDNS.
            (S1, "SRV", "NOERROR", [SRV(S1, "0 100 80 " + S1)], [],
             ["%s 30 IN A 1.2.3.4" % S1]),
        ])


class ApexTest(Base):
    options = "apex ext"

    def test_cases(self):
        soa = ("example.com. 5 IN SOA ns1.ext.example.com. "
               "hostmaster.ext.example.com. SERIAL 7200 1800 86400 5")
        return self.check([
            (Z, "SOA", "NOERROR", [soa], [], []),
            ("ext." + Z, "A", "NOERROR", [], [soa], []),
            ("dns." + Z, "A", "NXDOMAIN", [], [soa], []),
        ])


class FallthroughTest(Base):
    options = "fallthrough"
    extra = "    whoami\n"

    def test_cases(self):
        return self.check([
            # whoami answers what falls through.
            ("svc0.testns." + Z, "A", "NOERROR", [], [],
             ["_udp.svc0.testns.example.com. 0 IN SRV 0 0 PORT .",
              "svc0.testns.example.com. 0 IN A 127.0.0.1"]),
            # NODATA does not fall through.
            (S1, "AAAA", "NOERROR", [], [SOA], []),
            (S1, "A", "NOERROR", [A(S1, "1.2.3.4")], [], []),
        ])


class TransferTest(Base):
    extra = "    transfer example.com {\n        to *\n    }\n"

    @defer.inlineCallbacks
    def test_axfr(self):
        got = transferred((yield util.send_tcp(self.port, axfr(Z))))
        soa = got[0]
        self.assertTrue(soa.startswith("example.com. 5 SOA ns1.dns."))
        self.assertEqual(got[-1], soa)
        self.assertEqual(got[1], "example.com. 5 NS ns1.dns.example.com.")
        body = got[1:-1]
        for x in ("%s 5 A 1.2.3.4" % S1, "%s 5 SRV 0 100 80 %s" % (S1, S1),
                  "_http._tcp.%s 5 SRV 0 100 80 %s" % (S1, S1),
                  "%s 5 AAAA 1:2::5" % S6, "%s 5 A 2.3.4.5" % S11,
                  "%s 5 CNAME dummy.hostname." % S12,
                  "%s 5 SRV 0 100 80 dummy.hostname." % S12,
                  "%s 5 A 1.2.3.4" % H, "%s 5 A 1.2.3.5" % H,
                  "%s 5 SRV 0 50 80 %s" % (H, E0),
                  "%s 5 A 1.2.3.4" % E0, "%s 5 SRV 0 100 80 %s" % (E0, E0),
                  "_http._tcp.%s 5 SRV 0 50 80 %s" % (H, E1)):
            self.assertIn(x, body)
        self.assertFalse([x for x in body if "internal." in x])

    @defer.inlineCallbacks
    def test_ixfr_current(self):
        serial = self.k.external_serial(Z)
        got = transferred((yield util.send_tcp(self.port, axfr(Z, serial))))
        self.assertEqual(len(got), 1)


class SetupTest(unittest.TestCase):

    def plugin(self, text):
        s = util.Direct(self, ".:0 {\n    %s\n}\n" % text)
        return s.app.config.blocks[0].plugin("k8s_external")

    def test_options(self):
        e = self.plugin("k8s_external")
        self.assertEqual((e.zones, e.apex, e.ttl, e.headless),
                         (["."], "dns", 5, False))
        e = self.plugin("k8s_external example.org {\n        apex "
                        "ext\n        ttl 30\n        headless\n"
                        "        fallthrough\n    }")
        self.assertEqual((e.zones, e.apex, e.ttl, e.headless),
                         (["example.org."], "ext", 30, True))
        self.assertTrue(e.fall.through("x.example.org."))

    def test_errors(self):
        for body, text in (
                ("ttl", "Wrong argument count or unexpected line ending "
                 "after 'ttl'"),
                ("ttl -1", "ttl must be in range [0, 3600]: -1"),
                ("ttl 3601", "ttl must be in range [0, 3600]: 3601"),
                ("apex", "Wrong argument count or unexpected line ending "
                 "after 'apex'"),
                ("bogus", "unknown property 'bogus'")):
            with self.assertRaises(CorefileError) as cm:
                self.plugin("k8s_external {\n        %s\n    }" % body)
            self.assertIn("plugin/k8s_external: " + text, str(cm.exception))

    def test_without_kubernetes(self):
        e = self.plugin("k8s_external example.org")
        with self.assertRaises(ValueError) as cm:
            e.start()
        self.assertEqual(str(cm.exception), "plugin/k8s_external: "
                         "kubernetes plugin not loaded")
