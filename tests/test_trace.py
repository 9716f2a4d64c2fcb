"""trace: spans per query posted to a Zipkin collector."""

import timeit

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins.trace.plugin import Trace
from tests.support import util, zipkin


def _corefile(port, extra="", every=""):
    return (".:0 {\n    trace http://127.0.0.1:%d/api/v2/spans {\n%s"
            "        zipkin_max_batch_interval 10ms\n    }\n"
            "    log\n%s    whoami\n}\n" % (port, every, extra))


class TraceSetupTest(unittest.TestCase):

    def _error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n%s\n    whoami\n}\n" % text)
        return str(cm.exception)

    def _trace(self, text):
        s = util.Direct(self, ".:0 {\n%s\n    whoami\n}\n" % text)
        return s.app.config.blocks[0].plugin("trace")

    def test_endpoints(self):
        t = self._trace("    trace")
        self.assertEqual(t.url, "http://localhost:9411/api/v2/spans")
        t = self._trace("    trace tracinghost:9253")
        self.assertEqual(t.url, "http://tracinghost:9253/api/v2/spans")
        t = self._trace("    trace zipkin http://h:9411/zipkin/api/v2/spans")
        self.assertEqual(t.url, "http://h:9411/zipkin/api/v2/spans")
        self.assertEqual((t.every, t.service), (1, "coredns"))

    def test_options(self):
        t = self._trace("    trace {\n        every 100\n        service dns"
                        "\n        client_server\n"
                        "        zipkin_max_backlog_size 10\n"
                        "        zipkin_max_batch_size 5\n"
                        "        zipkin_max_batch_interval 2s\n    }")
        self.assertEqual((t.every, t.service, t.client_server, t.max_backlog,
                          t.max_batch, t.batch_interval),
                         (100, "dns", True, 10, 5, 2.0))

    def test_errors(self):
        self.assertIn("plugin/trace: tracing endpoint type 'jaeger' is not "
                      "supported", self._error("    trace jaeger h:1"))
        self.assertIn("Wrong argument count",
                      self._error("    trace a b c"))
        self.assertIn("unknown property 'foo'",
                      self._error("    trace {\n        foo\n    }"))
        self.assertIn('parsing "x": invalid syntax',
                      self._error("    trace {\n        every x\n    }"))
        self.assertIn("datadog analytics rate must be between 0 and 1",
                      self._error("    trace datadog h:1 {\n"
                                  "        datadog_analytics_rate 2\n    }"))
        self.assertIn("tracing endpoint type 'datadog' is not supported",
                      self._error("    trace datadog localhost:8126"))

    def test_unsampled_cost(self):
        """Not an assertion on time: prints what an unsampled query costs
        (the figure in docs/plugins/trace.md)."""
        s = util.Direct(self, ".:0 {\n    trace {\n        every 1000000000"
                        "\n    }\n    whoami\n}\n")
        t = s.app.config.blocks[0].plugin("trace")
        self.assertIsInstance(t, Trace)
        t.reporter = object()       # as started, without a connection
        req = object()

        class Next:
            def serve(self, req):
                return None
        t.next = Next()
        n = 200000
        base = min(timeit.repeat(lambda: t.next.serve(req), number=n,
                                 repeat=5))
        traced = min(timeit.repeat(lambda: t.serve(req), number=n,
                                   repeat=5))
        print("trace: unsampled query costs %.3f us extra"
              % ((traced - base) / n * 1e6))


class TraceExportTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_spans(self):
        collector, port = zipkin.start(self)
        app = yield util.start(self, _corefile(port))
        m = yield util.query(app.port(), "Example.ORG", "A")
        self.assertEqual(m.rcode(), 0)
        yield util.wait_for(lambda: len(collector.spans) >= 3)
        self.assertEqual(collector.paths[0], "/api/v2/spans")
        by_name = {s["name"]: s for s in collector.spans}
        root = by_name["servedns"]
        self.assertEqual(root["kind"], "SERVER")
        self.assertNotIn("parentId", root)
        self.assertEqual(root["localEndpoint"], {"serviceName": "coredns"})
        self.assertEqual(root["tags"], {
            "coredns.io/name": "Example.ORG.", "coredns.io/type": "A",
            "coredns.io/proto": "udp", "coredns.io/remote": "127.0.0.1",
            "coredns.io/rcode": "NOERROR"})
        log, whoami = by_name["log"], by_name["whoami"]
        self.assertEqual(log["parentId"], root["id"])
        self.assertEqual(whoami["parentId"], log["id"])
        for s in (log, whoami):
            self.assertEqual(s["traceId"], root["traceId"])
        self.assertEqual(len(root["traceId"]), 32)
        self.assertEqual(len({s["id"] for s in collector.spans}), 3)
        self.assertLessEqual(root["timestamp"], log["timestamp"])
        self.assertGreaterEqual(root["duration"], whoami["duration"])

    @defer.inlineCallbacks
    def test_every(self):
        collector, port = zipkin.start(self)
        app = yield util.start(self, _corefile(
            port, every="        every 3\n        service dnsproxy\n"))
        for _ in range(7):
            m = yield util.query(app.port(), "example.org", "AAAA",
                                 proto="tcp")
            self.assertEqual(m.rcode(), 0)
        yield util.wait_for(lambda: len(collector.spans) >= 6)
        roots = [s for s in collector.spans if s["name"] == "servedns"]
        self.assertEqual(len(roots), 2)
        self.assertEqual(roots[0]["tags"]["coredns.io/proto"], "tcp")
        self.assertEqual(roots[0]["localEndpoint"]["serviceName"],
                         "dnsproxy")

    @defer.inlineCallbacks
    def test_rcode_and_batches(self):
        collector, port = zipkin.start(self)
        app = yield util.start(self, (
            ".:0 {\n    trace 127.0.0.1:%d {\n"
            "        zipkin_max_batch_size 2\n"
            "        zipkin_max_batch_interval 1h\n    }\n"
            "    template IN A example.org {\n        rcode NXDOMAIN\n"
            "    }\n}\n" % port))
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 3)
        # Two spans fill a batch: posted without waiting for the interval.
        yield util.wait_for(lambda: len(collector.spans) == 2)
        root = [s for s in collector.spans if s["name"] == "servedns"][0]
        self.assertEqual(root["tags"]["coredns.io/rcode"], "NXDOMAIN")
        self.assertEqual(collector.batches, 1)

    @defer.inlineCallbacks
    def test_collector_down(self):
        log = util.capture_log(self)
        port = util.free_port()
        app = yield util.start(self, _corefile(port))
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)
        yield util.wait_for(lambda: "failed to send the request" in
                            log.text())
        self.assertIn("[WARNING] plugin/trace: failed to send the request",
                      log.text())
