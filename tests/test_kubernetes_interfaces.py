"""kubernetes: what other parts of the server get from the plugin — watches
kept across a reload, zone transfers through *transfer*, metadata for
*metadata* and *log*."""

import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.request import parse_response
from tests.support import cases, util
from tests.support import k8s_apiserver as k8s
from tests.support.cases import Case
from tests.support.k8s_cluster import cluster
from tests.support.xfr import axfr, transferred


def corefile(url, options="", extra=""):
    return (".:0 {\n    kubernetes cluster.local 10.0.0.0/24 {\n"
            "        endpoint %s\n%s    }\n%s}\n" % (
                url, "".join("        %s\n" % o for o in options.split(";")
                             if o.strip()), extra))


def svc1(ttl):
    """svc1's A record, with the TTL the plugin is set to."""
    return Case("svc1.testns.svc.cluster.local.", aa=True, answer=[
        "svc1.testns.svc.cluster.local. %d IN A 10.0.0.1" % ttl])


class Base(unittest.TestCase):
    options = "namespaces testns kube-system"
    extra = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        cluster(self.api)
        self.populate(self.api)
        self.log = util.capture_log(self)
        self.app = yield util.start(self, corefile(self.api.url, self.options,
                                                   self.extra))
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")

    def populate(self, srv):
        pass


class ReloadTest(Base):

    def lists(self):
        return sum(1 for _, what, _ in list(self.api.requests)
                   if what == "list")

    def rewrite(self, text):
        util.rewrite(self.app.path, text)

    @defer.inlineCallbacks
    def test_unchanged_directive_keeps_watches(self):
        before = self.lists()
        old = self.k
        self.rewrite(corefile(self.api.url, self.options, "    whoami\n"))
        self.assertTrue(self.app.reload())
        new = self.app.config.blocks[0].plugin("kubernetes")
        self.assertIsNot(new, old)
        self.assertIs(new.store, old.store)
        self.assertTrue(new.ready())
        yield cases.run(self, self.port, [svc1(5)])
        # The watches now feed the new plugin.
        self.api.add("services", k8s.service("late", "testns", ("10.0.0.77",)))
        yield util.wait_for(lambda: ("late", "testns") in new.store.services)
        yield cases.run(self, self.port, [
            Case("late.testns.svc.cluster.local.", aa=True, answer=[
                "late.testns.svc.cluster.local. 5 IN A 10.0.0.77"])])
        self.assertEqual(self.lists(), before)
        self.assertFalse(any(wr.stopped.is_set() for wr in new.watchers))

    @defer.inlineCallbacks
    def test_changed_directive_relists(self):
        before = self.lists()
        old = self.k
        old_watchers = list(old.watchers)
        self.rewrite(corefile(self.api.url, self.options + "; ttl 7"))
        self.assertTrue(self.app.reload())
        new = self.app.config.blocks[0].plugin("kubernetes")
        self.assertIsNot(new.store, old.store)
        yield util.wait_for(lambda: all(wr.stopped.is_set()
                                        for wr in old_watchers))
        yield util.wait_for(new.ready)
        self.assertGreater(self.lists(), before)
        yield cases.run(self, self.port, [svc1(7)])


class TransferTest(Base):
    extra = "    transfer {\n        to *\n    }\n"

    def populate(self, srv):
        srv.add("services", k8s.service("named", "testns", ("10.0.0.8",), (
            ("", "TCP", 8080), ("dns", "UDP", 53))))
        srv.add("endpointslices", k8s.endpoint_slice(
            "hdls1-slice2", "testns", "hdls1",
            [k8s.endpoint(["172.0.0.9"], ready=False)]))

    @defer.inlineCallbacks
    def test_axfr(self):
        self.k.local_ips = ["172.0.0.100"]     # we are kube-dns
        replies = yield util.send_tcp(self.port, axfr("cluster.local."))
        got = transferred(replies)
        serial = self.k.serial("cluster.local.")
        soa = ("cluster.local. 5 SOA ns.dns.cluster.local. "
               "hostmaster.cluster.local. %d 7200 1800 86400 5" % serial)
        Z = ".testns.svc.cluster.local."
        H = "hdls1" + Z
        K = "kubedns.kube-system.svc.cluster.local."
        self.assertEqual(got, [
            soa,
            "cluster.local. 5 NS " + K,
            K + " 5 A 10.0.0.10",
            # Services by name: external, external-to-service, hdls1,
            # hdlsprtls, kubedns, named, svc-dual-stack, svc1, svc6,
            # svcempty (svc1 of unexposedns is not exposed).
            "external%s 5 CNAME ext.interwebs.test." % Z,
            "external-to-service%s 5 CNAME svc1%s" % (Z, Z),
        ] + [x for ip, host in (
            ("A 172.0.0.2", "172-0-0-2"), ("A 172.0.0.3", "172-0-0-3"),
            ("A 172.0.0.4", "dup-name"), ("A 172.0.0.5", "dup-name"),
            ("AAAA 5678:abcd::1", "5678-abcd--1"),
            ("AAAA 5678:abcd::2", "5678-abcd--2"))
            for x in ("%s 5 %s" % (H, ip), "%s.%s 5 %s" % (host, H, ip),
                      # 6 endpoints: weight 100/6
                      "_http._tcp.%s 5 SRV 0 16 80 %s.%s" % (H, host, H))
        ] + [
            "hdlsprtls%s 5 A 172.0.0.20" % Z,
            "172-0-0-20.hdlsprtls%s 5 A 172.0.0.20" % Z,
            K + " 5 A 10.0.0.10",
            K + " 5 SRV 0 100 53 " + K,
            "_dns._udp.%s 5 SRV 0 100 53 %s" % (K, K),
            "named%s 5 A 10.0.0.8" % Z,
            "named%s 5 SRV 0 100 8080 named%s" % (Z, Z),
            "named%s 5 SRV 0 100 53 named%s" % (Z, Z),
            "_dns._udp.named%s 5 SRV 0 100 53 named%s" % (Z, Z),
            "svc-dual-stack%s 5 A 10.0.0.3" % Z,
            "svc-dual-stack%s 5 AAAA 10::3" % Z,
            "svc-dual-stack%s 5 SRV 0 100 80 svc-dual-stack%s" % (Z, Z),
            "_http._tcp.svc-dual-stack%s 5 SRV 0 100 80 svc-dual-stack%s"
            % (Z, Z),
            "svc1%s 5 A 10.0.0.1" % Z,
            "svc1%s 5 SRV 0 100 80 svc1%s" % (Z, Z),
            "_http._tcp.svc1%s 5 SRV 0 100 80 svc1%s" % (Z, Z),
            "svc6%s 5 AAAA 1234:abcd::1" % Z,
            "svc6%s 5 SRV 0 100 80 svc6%s" % (Z, Z),
            "_http._tcp.svc6%s 5 SRV 0 100 80 svc6%s" % (Z, Z),
            "svcempty%s 5 A 10.0.0.1" % Z,
            "svcempty%s 5 SRV 0 100 80 svcempty%s" % (Z, Z),
            "_http._tcp.svcempty%s 5 SRV 0 100 80 svcempty%s" % (Z, Z),
            soa])
        self.assertIn('Outgoing transfer of %d records of zone '
                      '"cluster.local." to 127.0.0.1' % len(got),
                      self.log.text())

    @defer.inlineCallbacks
    def test_named_endpoint_ports(self):
        self.api.add("services", k8s.service("web", "testns", ("None",)))
        self.api.add("endpointslices", k8s.endpoint_slice(
            "web-1", "testns", "web", [k8s.endpoint(["10.1.0.1"], "a"),
                                       k8s.endpoint(["10.1.0.2"], "b")]))
        yield util.wait_for(lambda: self.k.store.slices_of("web", "testns"))
        got = transferred((yield util.send_tcp(self.port,
                                               axfr("cluster.local."))))
        W = "web.testns.svc.cluster.local."
        self.assertEqual([x for x in got if "web." in x.split()[0]], [
            W + " 5 A 10.1.0.1", "a.%s 5 A 10.1.0.1" % W,
            "_http._tcp.%s 5 SRV 0 50 80 a.%s" % (W, W),
            W + " 5 A 10.1.0.2", "b.%s 5 A 10.1.0.2" % W,
            "_http._tcp.%s 5 SRV 0 50 80 b.%s" % (W, W)])

    @defer.inlineCallbacks
    def test_ixfr_current_serial(self):
        serial = self.k.serial("cluster.local.")
        replies = yield util.send_tcp(self.port, axfr("cluster.local.",
                                                      serial))
        got = transferred(replies)
        self.assertEqual(len(got), 1)
        self.assertIn(" SOA ", got[0])
        # An older serial: the whole zone (AXFR fallback).
        replies = yield util.send_tcp(self.port, axfr("cluster.local.",
                                                      serial - 1))
        self.assertGreater(len(transferred(replies)), 10)

    @defer.inlineCallbacks
    def test_udp_refused(self):
        data = yield util.send_udp(self.port, axfr("cluster.local."))
        self.assertEqual(parse_response(data).rcode, 5)


class MetadataTest(Base):
    options = "pods verified"
    extra = ('    metadata\n    log . "{/kubernetes/kind} '
             '{/kubernetes/namespace}'
             ' {/kubernetes/service} {/kubernetes/endpoint} '
             '{/kubernetes/port-name} {/kubernetes/protocol} '
             '{/kubernetes/client-namespace} {/kubernetes/client-pod-name} '
             '{/kubernetes/client-label/app} {/kubernetes/parse-error}"\n')

    def populate(self, srv):
        srv.add("pods", k8s.pod("client-0", "podns", "127.0.0.1",
                                labels={"app": "dig"}))

    @defer.inlineCallbacks
    def logged(self, name, qtype="A"):
        n = len(self.log.lines)
        yield util.query(self.port, name, qtype)
        yield util.wait_for(lambda: len(self.log.lines) > n)
        defer.returnValue(self.log.lines[n])

    @defer.inlineCallbacks
    def test_values(self):
        yield util.wait_for(lambda: "127.0.0.1" in self.k.store.pods_by_ip)
        line = yield self.logged("_http._tcp.svc1.testns.svc.cluster.local.",
                                 "SRV")
        self.assertEqual(line, "[INFO] svc testns svc1  http tcp podns "
                         "client-0 dig -")
        line = yield self.logged("ep1a.svc1.testns.svc.cluster.local.")
        self.assertEqual(line, "[INFO] svc testns svc1 ep1a   podns "
                         "client-0 dig -")
        line = yield self.logged("x.y.nope.cluster.local.")
        self.assertEqual(line, "[INFO] - - - - - - podns client-0 dig "
                         "invalid query name")

    @defer.inlineCallbacks
    def test_outside_the_zone(self):
        line = yield self.logged("example.org.")
        self.assertEqual(line, "[INFO] - - - - - - podns client-0 dig -")


class KubeconfigTest(unittest.TestCase):
    """A kubeconfig file gives the API server, credentials and context."""

    @defer.inlineCallbacks
    def test_context_selects_server(self):
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        cluster(api)
        d = util.write_files(self, {"kubeconfig": KUBECONFIG % api.url})
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        kubeconfig %s "
            "good\n    }\n}\n") % os.path.join(d, "kubeconfig"))
        yield cases.run(self, app.port(), [svc1(5)])


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: bad
clusters:
- name: c
  cluster:
    server: %s
- name: nowhere
  cluster:
    server: http://127.0.0.1:1
contexts:
- name: good
  context:
    cluster: c
    user: u
- name: bad
  context:
    cluster: nowhere
    user: u
users:
- name: u
  user:
    token: abc
"""
