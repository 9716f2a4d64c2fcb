"""health: the once-a-second self-check and its metrics."""

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.plugins import health
from tests.support import util


def _count():
    return health.DURATION.count(())


class SelfCheckTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, """.:0 {
    whoami
    health 127.0.0.1:0
}
""")
        self.plugin = self.app.config.blocks[0].plugin("health")

    def test_url_is_the_bound_port(self):
        port = self.app.http_port("127.0.0.1:0")
        self.assertEqual(self.plugin.url(),
                         "http://127.0.0.1:%d/health" % port)

    @defer.inlineCallbacks
    def test_polls_itself(self):
        before = _count()
        failures = health.FAILURES.get()
        # The LoopingCall asks /health about once a second.
        yield util.wait_for(lambda: _count() > before, timeout=10)
        self.assertEqual(health.FAILURES.get(), failures)
        fam = health.DURATION.family()
        self.assertEqual(fam.name, "coredns_health_request_duration_seconds")
        buckets = [s.labels["le"] for s in fam.samples
                   if s.name.endswith("_bucket")]
        # CoreDNS's SlimTimeBuckets.
        self.assertEqual(buckets, ["0.00025", "0.0025", "0.025", "0.25",
                                   "2.5", "+Inf"])

    @defer.inlineCallbacks
    def test_failure_counted_and_logged(self):
        self.plugin._loop.stop()
        site = self.app.http.pop("127.0.0.1:0")
        yield site.stopListening()
        before = _count()
        failures = health.FAILURES.get()
        yield self.plugin.check()
        self.assertEqual(health.FAILURES.get(), failures + 1)
        self.assertEqual(_count(), before + 1)
        warn = [ln for ln in self.log.lines
                if ln.startswith("[WARNING] plugin/health: Local health "
                                 'request to "%s" failed: ' %
                                 self.plugin.url_text)]
        self.assertEqual(len(warn), 1, self.log.lines)

    @defer.inlineCallbacks
    def test_stop_ends_polling(self):
        yield self.plugin.stop()
        self.assertIsNone(self.plugin._loop)


class OnePollerTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_shared_endpoint_polled_once(self):
        app = yield util.start(self, """a.example:0 {
    whoami
    health 127.0.0.1:0
}
b.example:0 {
    whoami
    health 127.0.0.1:0
}
""")
        first = app.config.blocks[0].plugin("health")
        second = app.config.blocks[1].plugin("health")
        self.assertIsNotNone(first._loop)
        self.assertIsNone(second._loop)

    @defer.inlineCallbacks
    def test_metrics_exported(self):
        app = yield util.start(self, """.:0 {
    whoami
    prometheus 127.0.0.1:0
}
""")
        status, body = yield util.http_get(app.http_port(), "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("# TYPE coredns_health_request_failures_total counter",
                      body)
        self.assertIn("coredns_health_request_failures_total", body)
