"""The k8s_gateway add-on package (contrib/k8s_gateway, installed by
scripts/test.sh): its own tests, the upstream README's Corefiles through
``--check``, and the plugin served over the wire while the test API
server (tests/support/k8s_apiserver.py) creates, changes and deletes
each kind it watches: every answer follows its objects."""

import time

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.engines.kubernetes import watch as wt
from tests.support import k8s_apiserver as k8s
from tests.support import util
from tests.support.contrib import README_CHECK, check_examples, installed

INSTALLED = installed("corednstw_k8s_gateway")
if INSTALLED:
    from corednstw_k8s_gateway.test.test_k8s_gateway import (  # noqa: F401
        OptionsServeTest,
        RecordsTest,
        ServeTest,
        SetupTest,
    )

#: The Corefiles of the upstream README (its example, its minimal form)
#: and of its repository's test/Corefile, as written there (the
#: kubeconfig of that one is relative to where it runs).
EXAMPLES = {
    "example": ". {\n    k8s_gateway example.com {\n"
               "        resources Ingress\n        ttl 30\n"
               "        apex exdns-1-k8s-gateway.kube-system\n"
               "        secondary exdns-2-k8s-gateway.kube-system\n"
               "        kubeconfig /.kube/config\n    }\n}\n",
    "minimal": ". {\n    k8s_gateway example.com\n}\n",
    "every option": ". {\n    k8s_gateway example.com other.org {\n"
                    "        resources Ingress Service HTTPRoute TLSRoute "
                    "GRPCRoute DNSEndpoint\n"
                    "        ingressClasses nginx\n"
                    "        gatewayClasses cilium nginx\n"
                    '        serviceLabelSelectors "app in (a,b)" '
                    "tier=web\n"
                    "        ttl 30\n        apex dns1.kube-system\n"
                    "        secondary dns2.kube-system\n"
                    "        kubeconfig /.kube/config ctx\n"
                    "        fallthrough\n    }\n"
                    "    forward . 127.0.0.1\n}\n",
    "test/Corefile": ".:1053 {\n    debug\n    errors\n    ready\n    log\n"
                     "    prometheus :9153\n"
                     "    k8s_gateway skylab.fi {\n"
                     "        kubeconfig kubeconfig\n"
                     "        apex k8s-gateway.networking\n"
                     "        resources HTTPRoute DNSEndpoint\n    }\n"
                     "    cache 300\n    loop\n    reload\n    loadbalance\n"
                     "}\n",
}

ZONE = "example.com."
ALL = "Ingress Service HTTPRoute TLSRoute GRPCRoute DNSEndpoint"


class ExamplesTest(unittest.TestCase):

    if not INSTALLED:
        skip = README_CHECK % "k8s_gateway"

    def test_readme_examples_check(self):
        check_examples(self, EXAMPLES)


class Served(unittest.TestCase):
    """k8s_gateway over real sockets, watching the test API server."""

    if not INSTALLED:
        skip = README_CHECK % "k8s_gateway"

    resources = ALL
    options = ""

    def setUp(self):
        self.patch(wt, "BACKOFF_START", 0.01)
        self.patch(wt, "BACKOFF_MAX", 0.05)
        self.patch(wt, "ABSENT_RETRY", 0.05)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.prepare()
        return self.serve()

    def prepare(self):
        """Set the API server up before the plugin starts."""

    @defer.inlineCallbacks
    def serve(self):
        self.app = yield util.start(self, (
            ".:0 {\n    k8s_gateway %s {\n        resources %s\n"
            "        kubeconfig %s\n%s    }\n"
            "    ready 127.0.0.1:0\n}\n") % (
                ZONE, self.resources, self.api.kubeconfig(self),
                self.options))
        self.port = self.app.port()
        self.gw = self.app.config.blocks[0].plugin("k8s_gateway")
        yield util.wait_for(self.gw.ready)

    @defer.inlineCallbacks
    def follow(self, name, expected, qtype="A", rcode=0):
        """Ask until the answer is ``expected`` (sorted "TTL TYPE RDATA"
        lines) with ``rcode``; returns the seconds it took."""
        start = time.monotonic()
        got = []

        def check(m):
            got[:] = [m.rcode(), [line.split(" ", 1)[1] for line in
                                  util.rrs(m)]]
            return got == [rcode, sorted(expected)]
        d = defer.Deferred()

        def ask():
            util.query(self.port, name, qtype).addCallback(
                lambda m: d.callback(None) if check(m) else retry())
        deadline = start + 10

        def retry():
            if time.monotonic() > deadline:
                d.errback(AssertionError("%s %s: %r, expected %r" % (
                    name, qtype, got, [rcode, sorted(expected)])))
            else:
                from twisted.internet import reactor
                reactor.callLater(0.01, ask)
        ask()
        yield d
        return time.monotonic() - start

    def a(self, *ips):
        return ["60 IN A %s" % ip for ip in ips]


class KindsTest(Served):
    """Create, change and delete each kind: the answer follows."""

    @defer.inlineCallbacks
    def test_ingress(self):
        name = "myservicea.example.com."
        yield self.follow(name, [], rcode=3)
        self.api.add("ingresses", k8s.ingress(
            "a", "default", ["myservicea.example.com"], ["192.0.2.1"]))
        yield self.follow(name, self.a("192.0.2.1"))
        self.api.update("ingresses", k8s.ingress(
            "a", "default", ["myservicea.example.com"],
            ["192.0.2.2", "2001:db8::2"]))
        yield self.follow(name, self.a("192.0.2.2"))
        yield self.follow(name, ["60 IN AAAA 2001:db8::2"], "AAAA")
        self.api.delete("ingresses", "default", "a")
        yield self.follow(name, [], rcode=3)

    @defer.inlineCallbacks
    def test_service(self):
        name = "web.prod.example.com."
        self.api.add("services", k8s.service(
            "web", "prod", type="LoadBalancer", ingress=["192.0.2.3"]))
        yield self.follow(name, self.a("192.0.2.3"))
        # The hostname annotation replaces NAME.NAMESPACE.
        self.api.update("services", k8s.service(
            "web", "prod", type="LoadBalancer", ingress=["192.0.2.3"],
            annotations={"coredns.io/hostname": "shop.example.com"}))
        yield self.follow("shop.example.com.", self.a("192.0.2.3"))
        yield self.follow(name, [], rcode=3)
        self.api.delete("services", "prod", "web")
        yield self.follow("shop.example.com.", [], rcode=3)

    @defer.inlineCallbacks
    def test_service_endpoints(self):
        name = "db.default.example.com."
        self.api.add("services", k8s.service(
            "db", "default", ips=("None",), annotations={
                "k8s-gateway.dns/resolve-endpoints": "true"}))
        self.api.add("endpointslices", k8s.endpoint_slice(
            "db-1", "default", "db", [k8s.endpoint(["10.1.0.1"]),
                                      k8s.endpoint(["10.1.0.2"],
                                                   ready=False)]))
        yield self.follow(name, self.a("10.1.0.1"))
        self.api.update("endpointslices", k8s.endpoint_slice(
            "db-1", "default", "db", [k8s.endpoint(["10.1.0.1"]),
                                      k8s.endpoint(["10.1.0.2"])]))
        yield self.follow(name, self.a("10.1.0.1", "10.1.0.2"))
        self.api.delete("endpointslices", "default", "db-1")
        yield self.follow(name, [], rcode=3)

    @defer.inlineCallbacks
    def test_routes(self):
        """Each route kind answers with its parent Gateway's addresses,
        and follows the Gateway's changes."""
        self.api.add("gateways", k8s.gateway("gw", "infra", ["192.0.2.4"]))
        for kind in ("httproutes", "tlsroutes", "grpcroutes"):
            host = "%s.gw.example.com" % kind
            self.api.add(kind, k8s.route("r", "apps", [host],
                                         [("infra", "gw")]))
            yield self.follow(host + ".", self.a("192.0.2.4"))
        self.api.update("gateways", k8s.gateway("gw", "infra",
                                                ["192.0.2.40"]))
        for kind in ("httproutes", "tlsroutes", "grpcroutes"):
            yield self.follow("%s.gw.example.com." % kind,
                              self.a("192.0.2.40"))
        for kind in ("httproutes", "tlsroutes", "grpcroutes"):
            self.api.update(kind, k8s.route("r", "apps", [
                "moved.%s.example.com" % kind], [("infra", "gw")]))
            yield self.follow("moved.%s.example.com." % kind,
                              self.a("192.0.2.40"))
            yield self.follow("%s.gw.example.com." % kind, [], rcode=3)
            self.api.delete(kind, "apps", "r")
            yield self.follow("moved.%s.example.com." % kind, [], rcode=3)

    @defer.inlineCallbacks
    def test_dns_endpoint(self):
        self.api.add("dnsendpoints", k8s.dns_endpoint("e", "default", [
            ("test2.example.com", "A", ["192.168.30.1"]),
            ("test3.example.com", "AAAA", ["2001:db8::7334"]),
            ("test3.example.com", "TXT", ["hello"])]))
        yield self.follow("test2.example.com.", self.a("192.168.30.1"))
        yield self.follow("test3.example.com.", ["60 IN AAAA 2001:db8::7334"],
                          "AAAA")
        yield self.follow("test3.example.com.", ['60 IN TXT "hello"'], "TXT")
        self.api.update("dnsendpoints", k8s.dns_endpoint("e", "default", [
            ("test2.example.com", "A", ["192.168.30.2"])]))
        yield self.follow("test2.example.com.", self.a("192.168.30.2"))
        yield self.follow("test3.example.com.", [], "AAAA", rcode=3)
        self.api.delete("dnsendpoints", "default", "e")
        yield self.follow("test2.example.com.", [], rcode=3)

    @defer.inlineCallbacks
    def test_apex(self):
        """The apex's NS glue is the Service named by ``apex``."""
        yield self.follow(ZONE, ["60 IN NS dns1.kube-system.example.com."],
                          "NS")
        self.api.add("services", k8s.service(
            "dns1", "kube-system", type="LoadBalancer",
            ingress=["192.0.2.53"]))
        yield self.follow("dns1.kube-system.example.com.",
                          self.a("192.0.2.53"))
        m = yield util.query(self.port, ZONE, "NS")
        self.assertEqual(util.rrs(m, "additional"), [
            "dns1.kube-system.example.com. 60 IN A 192.0.2.53"])
        self.assertTrue(m.flags & 0x0400)

    @defer.inlineCallbacks
    def test_relist_after_gone(self):
        """A compacted history (410) relists every kind; what changed
        meanwhile without events is seen."""
        self.api.add("ingresses", k8s.ingress(
            "a", "default", ["a.example.com"], ["192.0.2.1"]))
        yield self.follow("a.example.com.", self.a("192.0.2.1"))
        self.api.replace_silently("ingresses", [k8s.ingress(
            "b", "default", ["b.example.com"], ["192.0.2.2"])])
        yield self.follow("b.example.com.", self.a("192.0.2.2"))
        yield self.follow("a.example.com.", [], rcode=3)

    @defer.inlineCallbacks
    def test_load_balancer_host_name(self):
        """A load balancer that is a host name is resolved when asked."""
        self.api.add("ingresses", k8s.ingress(
            "h", "default", ["h.example.com"], ["localhost"]))
        yield self.follow("h.example.com.", self.a("127.0.0.1"))


class AbsentTest(Served):
    """The Gateway API and external-dns CRDs are not installed: the
    plugin is ready and answers the rest; once they are, it watches
    them.  A TLSRoute CRD serving only v1alpha2 is watched there."""

    def prepare(self):
        self.api.hidden = {p for p, kind in k8s.PATHS.items() if kind in (
            "gateways", "httproutes", "grpcroutes", "dnsendpoints")}
        self.api.hidden.add(k8s._GW + "v1/tlsroutes")
        self.api.add("ingresses", k8s.ingress(
            "a", "default", ["a.example.com"], ["192.0.2.1"]))

    @defer.inlineCallbacks
    def test_absent_then_installed(self):
        self.assertTrue(self.gw.ready())
        yield self.follow("a.example.com.", self.a("192.0.2.1"))
        self.api.add("gateways", k8s.gateway("gw", "default",
                                             ["192.0.2.4"]))
        self.api.add("httproutes", k8s.route("r", "default",
                                             ["r.example.com"], ["gw"]))
        self.api.add("tlsroutes", k8s.route("t", "default",
                                            ["t.example.com"], ["gw"]))
        self.api.add("dnsendpoints", k8s.dns_endpoint("e", "default", [
            ("e.example.com", "A", ["192.0.2.9"])]))
        for name in ("r", "t", "e"):
            yield self.follow(name + ".example.com.", [], rcode=3)
        # The CRDs are installed (TLSRoute still without v1).
        self.api.hidden = {k8s._GW + "v1/tlsroutes"}
        yield self.follow("r.example.com.", self.a("192.0.2.4"))
        yield self.follow("t.example.com.", self.a("192.0.2.4"))
        yield self.follow("e.example.com.", self.a("192.0.2.9"))
        tls = [wr for wr in self.gw.watchers if wr.kind == "tlsroutes"]
        self.assertEqual(tls[0].path, k8s._GW + "v1alpha2/tlsroutes")


class ReadyTest(Served):
    """/ready waits for every kind's first list."""

    resources = "Ingress"

    def prepare(self):
        import threading
        self.api.list_gate = threading.Event()

    def serve(self):
        return util.start(self, (
            ".:0 {\n    k8s_gateway %s {\n        resources Ingress\n"
            "        kubeconfig %s\n    }\n"
            "    ready 127.0.0.1:0\n}\n") % (
                ZONE, self.api.kubeconfig(self))).addCallback(
                    self._started)

    def _started(self, app):
        self.app = app
        self.port = app.port()
        self.gw = app.config.blocks[0].plugin("k8s_gateway")

    @defer.inlineCallbacks
    def test_servfail_and_not_ready_until_listed(self):
        port = self.app.http_port("127.0.0.1:0")
        code, body = yield util.http_get(port, "/ready")
        self.assertEqual((code, body.strip()), (503, "k8s_gateway"))
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 2)
        self.api.list_gate.set()
        yield util.wait_for(self.gw.ready)
        code, _ = yield util.http_get(port, "/ready")
        self.assertEqual(code, 200)
        yield self.follow("a.example.com.", [], rcode=3)


class ReadmeExampleTest(Served):
    """Upstream's example served (its kubeconfig pointed at the test API
    server): Ingresses only, TTL 30, the apex naming both servers."""

    resources = "Ingress"
    options = ("        ttl 30\n"
               "        apex exdns-1-k8s-gateway.kube-system\n"
               "        secondary exdns-2-k8s-gateway.kube-system\n")

    @defer.inlineCallbacks
    def test_example(self):
        self.api.add("ingresses", k8s.ingress(
            "a", "default", ["myservicea.example.com"], ["198.51.100.0"]))
        self.api.add("services", k8s.service(
            "test", "default", type="LoadBalancer", ingress=["192.0.2.3"]))
        yield self.follow("myservicea.example.com.",
                          ["30 IN A 198.51.100.0"])
        # Services are not among the resources.
        yield self.follow("test.default.example.com.", [], rcode=3)
        for proto in ("udp", "tcp"):
            m = yield util.query(self.port, ZONE, "NS", proto=proto)
            self.assertEqual(util.rrs(m), [
                "example.com. 60 IN NS exdns-1-k8s-gateway.kube-system."
                "example.com.",
                "example.com. 60 IN NS exdns-2-k8s-gateway.kube-system."
                "example.com."])
            m = yield util.query(self.port, ZONE, "SOA", proto=proto)
            self.assertEqual(util.rrs(m), [
                "example.com. 60 IN SOA exdns-1-k8s-gateway.kube-system."
                "example.com. hostmaster.exdns-1-k8s-gateway.kube-system."
                "example.com. 12345 7200 1800 86400 60"])
