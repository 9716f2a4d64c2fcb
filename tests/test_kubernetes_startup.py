"""kubernetes at start-up: before its first lists are in, a server with
``fallthrough`` and a forwarder behind never answers NXDOMAIN for names
of the kubernetes (or k8s_external) zones; and how the client introduces
itself to the API server."""

import os
import threading

import dns.rcode
from twisted.internet import defer, reactor
from twisted.trial import unittest

import corednstw
from corednstw.service.app import App
from corednstw.tap import Options, load_app
from tests.support import k8s_apiserver as k8s
from tests.support import k8s_cluster, util
from tests.support.upstream import Upstream


class BeforeSyncTest(unittest.TestCase):
    """The API server holds its list answers until the test lets them go;
    the upstream answers NXDOMAIN to everything."""

    @defer.inlineCallbacks
    def setUp(self):
        self.api = k8s.APIServer()
        self.api.list_gate = threading.Event()
        self.api.start()
        self.addCleanup(self.api.stop)
        k8s_cluster.cluster(self.api)
        self.up = Upstream()
        self.up.rcode = dns.rcode.NXDOMAIN
        self.up.start()
        self.addCleanup(self.up.stop)
        self.app = yield util.start(self, (
            ".:0 {\n    k8s_external example.com {\n        fallthrough\n"
            "    }\n    kubernetes cluster.local 10.0.0.0/24 {\n"
            "        endpoint %s\n        fallthrough\n"
            "        startup_timeout 100ms\n    }\n"
            "    forward . 127.0.0.1:%d\n}\n") % (self.api.url, self.up.port))
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")

    def asked_upstream(self, name):
        return [q for q in self.up.queries if q[1] == name]

    @defer.inlineCallbacks
    def test_servfail_then_answers(self):
        self.assertFalse(self.k.ready())
        for name in ("svc1.testns.svc.cluster.local.",
                     "nothere.testns.svc.cluster.local.",
                     "1.0.0.10.in-addr.arpa.", "svc1.testns.example.com."):
            for qtype in ("A", "PTR", "SRV"):
                m = yield util.query(self.port, name, qtype)
                self.assertEqual(m.rcode(), dns.rcode.SERVFAIL,
                                 "%s %s" % (name, qtype))
                self.assertEqual(self.asked_upstream(name), [])
        # Names outside the zones are forwarded meanwhile.
        m = yield util.query(self.port, "example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.api.list_gate.set()
        yield util.wait_for(self.k.ready)
        m = yield util.query(self.port, "svc1.testns.svc.cluster.local.")
        self.assertEqual(util.rrs(m), [
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"])
        # Now what does not exist falls through, as configured.
        m = yield util.query(self.port, "nothere.testns.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(
            len(self.asked_upstream("nothere.testns.svc.cluster.local.")), 1)
        m = yield util.query(self.port, "svc1.testns.example.com.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(len(self.asked_upstream("svc1.testns.example.com.")),
                         1)


class UserAgentTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_user_agent(self):
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        k8s_cluster.cluster(api)
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "    }\n}\n") % api.url)
        k = app.config.blocks[0].plugin("kubernetes")
        yield util.wait_for(k.ready)
        self.assertTrue(api.user_agents)
        self.assertEqual(set(api.user_agents),
                         {"corednstw/" + corednstw.__version__})


class PrestartTest(unittest.TestCase):
    """At the server's first start the lists begin as soon as the
    configuration is built, before the listeners open; a configuration
    that is only built (``--check``, a reload) starts no watch."""

    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        k8s_cluster.cluster(self.api)
        d = util.write_files(self, {"Corefile": (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "    }\n}\n") % self.api.url})
        self.path = os.path.join(d, "Corefile")
        util.capture_log(self)

    def listed(self):
        return {k for k, what, _ in list(self.api.requests) if what == "list"}

    def test_built_only_starts_nothing(self):
        app = App(self.path, reactor=reactor, dns_port=0)
        k = app.load().blocks[0].plugin("kubernetes")
        self.assertIsNone(k.store)
        self.assertEqual(k.watchers, [])

    @defer.inlineCallbacks
    def test_lists_before_listeners(self):
        o = Options()
        o.parseOptions(["-c", self.path])
        app = load_app(o, reactor)
        k = app.config.blocks[0].plugin("kubernetes")
        watchers = k.watchers
        self.assertEqual(len(watchers), 3)
        # Each kind is listed while nothing listens yet.
        yield util.wait_for(lambda: self.listed() == {
            "services", "endpointslices", "namespaces"})
        self.assertEqual(app.listeners, {})
        app.prestart()                  # once only
        started = app.startService()
        self.addCleanup(app.stopService)
        yield started
        self.assertIs(k.watchers, watchers)
        self.assertTrue(k.ready())
        m = yield util.query(app.port(), "svc1.testns.svc.cluster.local.")
        self.assertEqual(util.rrs(m), [
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"])
        # One list per kind: start() went on with the lists prestart
        # began.
        self.assertEqual(self.api.count("services", "list"), 1)
