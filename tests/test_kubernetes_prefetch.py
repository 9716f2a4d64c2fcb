"""kubernetes: the first lists asked for before the server is built
(plugins/kubernetes/early.py, engines/kubernetes/watch.prefetch) are
taken by the watchers that ask for exactly them, others are asked for
as before, and what early.py reads of a Corefile is what the watchers
ask for."""

import os
import time

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from corednstw.core import corefile
from corednstw.engines.kubernetes import watch as wt
from corednstw.plugins.kubernetes import early
from corednstw.plugins.kubernetes import store as st
from corednstw.plugins.kubernetes.plugin import USER_AGENT
from corednstw.service import entry
from corednstw.service.app import App
from tests.support import k8s_apiserver as k8s
from tests.support import util

COREFILE = ("{\n    kubernetes cluster.local {\n        endpoint %s\n%s"
            "    }\n    ready 127.0.0.1:0\n}\n")
FIRST = [("limit", wt.PAGE), ("resourceVersion", "0")]


class PrefetchTest(unittest.TestCase):

    def setUp(self):
        self.patch(wt, "EARLY_KEEP", 0.3)
        self.patch(wt, "_EARLY", {})
        self.patch(wt, "_EARLY_CLIENTS", {})
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.api.add("namespaces", k8s.namespace("default"))
        self.api.add("services", k8s.service("a", "default",
                                             ("10.1.0.1",)))
        self.api.add("endpointslices", k8s.endpoint_slice(
            "a-1", "default", "a", [k8s.endpoint(["10.2.0.1"])]))

    def wait_for(self, check):
        deadline = time.monotonic() + 10
        while not check() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(check())

    def prefetch(self, query=FIRST):
        wt.prefetch({"endpoint": self.api.url},
                    [("/api/v1/services", query),
                     ("/apis/discovery.k8s.io/v1/endpointslices", query)],
                    USER_AGENT)

    @defer.inlineCallbacks
    def start(self, options=""):
        app = yield util.start(self, ".:0 " + COREFILE % (self.api.url,
                                                          options))
        k = app.config.blocks[0].plugin("kubernetes")
        deadline = time.monotonic() + 10
        while not k.synced and time.monotonic() < deadline:
            yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertTrue(k.synced)
        defer.returnValue(app)

    @defer.inlineCallbacks
    def test_taken(self):
        """The watchers take the pages asked for ahead: one list each."""
        self.prefetch()
        self.wait_for(lambda: self.api.count("services", "list") == 1)
        app = yield self.start()
        self.assertEqual(self.api.count("services", "list"), 1)
        self.assertEqual(self.api.count("endpointslices", "list"), 1)
        self.assertEqual(set(self.api.user_agents), {USER_AGENT})
        self.assertEqual(wt._EARLY, {})
        m = yield util.query(app.port(), "a.default.svc.cluster.local.",
                             "A")
        self.assertEqual([rd.to_text() for rrset in m.answer
                          for rd in rrset], ["10.1.0.1"])

    @defer.inlineCallbacks
    def test_not_taken(self):
        """A page the watchers do not ask for exactly is not taken (they
        ask themselves) and is dropped after EARLY_KEEP."""
        self.prefetch([("labelSelector", "x=y")] + FIRST)
        yield self.start()
        self.assertEqual(self.api.count("services", "list"), 2)
        self.wait_for(lambda: not wt._EARLY)
        # The client itself went on to the plugin's connection.
        self.assertEqual(wt._EARLY_CLIENTS, {})

    def test_client_nobody_takes(self):
        """The client of pages nobody takes is dropped with them, its
        connections closed."""
        wt.prefetch({"endpoint": self.api.url, "context": "other"},
                    [("/api/v1/services", FIRST)])
        client = next(iter(wt._EARLY_CLIENTS.values()))[1]
        self.wait_for(lambda: len(client.idle) == 1)
        conn = client.idle[0]
        self.wait_for(lambda: not wt._EARLY and not wt._EARLY_CLIENTS)
        self.assertEqual(client.idle, [])
        self.assertIsNone(conn.sock)

    @defer.inlineCallbacks
    def test_error_answer_is_the_watchers(self):
        """A 410 to a page asked for ahead: the watcher that takes it
        lists again, as after its own 410."""
        self.api.list_gone = 2
        self.prefetch()
        self.wait_for(lambda: self.api.count("endpointslices", "list") == 1)
        yield self.start()
        self.assertEqual(self.api.count("services", "list"), 2)
        self.assertEqual(self.api.count("endpointslices", "list"), 2)

    @defer.inlineCallbacks
    def test_unreachable(self):
        """No answer at all (nothing listens): the watcher's retry asks
        again, on its own."""
        self.api.stop()
        wt.prefetch({"endpoint": self.api.url},
                    [("/api/v1/services", FIRST)], USER_AGENT)
        self.wait_for(lambda: not wt._EARLY[next(iter(wt._EARLY))]
                      .q.empty())
        self.patch(wt, "BACKOFF_START", 0.01)
        api = k8s.APIServer().start(port=int(self.api.url.rsplit(":")[-1]))
        self.addCleanup(api.stop)
        api.add("services", k8s.service("a", "default", ("10.1.0.1",)))
        self.api = api
        yield self.start()
        self.assertEqual(api.count("services", "list"), 1)

    def test_not_in_a_forked_process(self):
        self.prefetch()
        key = next(iter(wt._EARLY))
        wt._EARLY[key].pid = -1
        self.assertIsNone(wt._take_early(dict([("endpoint",
                                                self.api.url)]),
                                         key[1], FIRST, None))

    def test_rate_limited_connection(self):
        wt.prefetch({"endpoint": self.api.url, "qps": 5.0},
                    [("/api/v1/services", FIRST)])
        self.assertEqual(wt._EARLY, {})

    def test_entry_reads_the_corefile(self):
        path = os.path.join(util.write_files(self, {
            "Corefile": ".:0 " + COREFILE % (self.api.url, "")}),
            "Corefile")
        entry._prefetch(path)
        self.assertEqual(sorted(k[1] for k in wt._EARLY),
                         ["/api/v1/services",
                          "/apis/discovery.k8s.io/v1/endpointslices"])
        self.wait_for(lambda: self.api.count("services", "list") == 1)

    def test_entry_without_kubernetes(self):
        path = os.path.join(util.write_files(self, {
            "Corefile": ".:0 {\n    whoami\n}\n"}), "Corefile")
        entry._prefetch(path)
        entry._prefetch(path + ".missing")
        entry._prefetch("stdin")
        entry._prefetch(None)
        self.assertEqual(wt._EARLY, {})


class RequestsTest(unittest.TestCase):
    """early.requests gives the connection options and first requests
    the plugin's watchers make, for the options it reads."""

    def test_as_the_watchers_ask(self):
        util.capture_log(self)
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write(k8s._KUBECONFIG % "https://127.0.0.1:6443")
        variants = [
            "        endpoint http://127.0.0.1:8001\n",
            "        endpoint 127.0.0.1:8001\n",
            "        endpoint 127.0.0.1:8001\n        tls a b c\n",
            "        endpoint https://h:1 https://h:2\n",
            "        kubeconfig %s\n" % path,
            "        kubeconfig %s test\n" % path,
            "        endpoint http://h:1\n        labels a=b, c in (d)\n"
            "        pods verified\n        ttl 5\n",
            "        endpoint http://h:1\n        noendpoints\n",
            "        endpoint http://h:1\n        namespace_labels a=b\n"
            "        fallthrough\n        zonal\n",
        ]
        for opts in variants:
            text = (".:0 {\n    kubernetes cluster.local {\n%s    }\n}\n"
                    % opts)
            blocks = corefile.parse(text, strict=False)
            d = [d for d in blocks[0].directives
                 if d.name == "kubernetes"][0]
            got = early.requests(d)
            app = App(None, reactor=reactor, dns_port=0, text=text)
            k = app.load().blocks[0].plugin("kubernetes")
            want = []
            for kind in k.make_store().kinds:
                if kind not in (st.SERVICES, st.SLICES):
                    continue
                args = k._watch_args(kind)
                w = wt.Watcher(_Conn(), None, kind, None, args["path"],
                               args["parse"], selector=args.get("selector"),
                               field_selector=args.get("field_selector"))
                want.append((w.path, w._query(limit=wt.PAGE,
                                              resourceVersion="0",
                                              **{"continue": None})))
            self.assertEqual(got, (k.conn_opts, want), opts)

    def test_rate_limits_not_read(self):
        text = (".:0 {\n    kubernetes cluster.local {\n"
                "        endpoint http://h:1\n        apiserver_qps 5\n"
                "    }\n}\n")
        d = corefile.parse(text, strict=False)[0].directives[0]
        self.assertIsNone(early.requests(d))


class _Conn:
    name = "kubernetes"
