"""prometheus, health and ready over real HTTP; exact metric values."""

from twisted.internet import defer, task
from twisted.trial import unittest
from zope.interface import implementer

from corednstw.core import metrics
from corednstw.core.interfaces import IReadiness
from tests.support import util

# Bound to an address of its own, so the server label (and with it every
# counter checked here) belongs to this test alone.
COREFILE = """
example.org:0 {
    bind 127.0.0.77
    whoami
    prometheus 127.0.0.1:0
    health 127.0.0.1:0
}
.:0 {
    bind 127.0.0.77
    prometheus 127.0.0.1:0
    ready 127.0.0.1:0
}
"""
HOST = "127.0.0.77"
SERVER = "dns://127.0.0.77:0"


def sample(text, metric, **labels):
    """The value of one sample in Prometheus text output (None if absent)."""
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(metric + "{") or line.startswith(metric + " "):
            head, _, value = line.rpartition(" ")
            if "{" in head:
                got = ",".join(sorted(head[head.index("{") + 1:-1]
                                      .split(",")))
            else:
                got = ""
            if got == want:
                return float(value)
    return None


class MetricsTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        for fam in metrics.families().values():
            if fam.name.startswith("coredns_dns_"):
                for key in [k for k in fam.values if SERVER in k]:
                    fam.remove(key)
        self.panics = metrics.PANICS.get()
        self.app = yield util.start(self, COREFILE)
        self.port = self.app.port()
        self.http = self.app.http_port("127.0.0.1:0")

    @defer.inlineCallbacks
    def test_exact_counts(self):
        for i in range(7):
            yield util.query(self.port, "q%d.example.org." % i, "A",
                             host=HOST)
        for i in range(3):
            yield util.query(self.port, "example.org.", "MX", proto="tcp",
                             host=HOST)
        yield util.query(self.port, "example.org.", "TYPE65000", host=HOST)
        # SERVFAIL: the "." block has no answering plugin.
        yield util.query(self.port, "other.net.", "A", host=HOST)
        status, body = yield util.http_get(self.http, "/metrics")
        self.assertEqual(status, 200)
        server = SERVER
        self.assertEqual(sample(body, "coredns_dns_requests_total",
                                server=server, zone="example.org.", view="",
                                proto="udp", family="1", type="A"), 7)
        self.assertEqual(sample(body, "coredns_dns_requests_total",
                                server=server, zone="example.org.", view="",
                                proto="tcp", family="1", type="MX"), 3)
        self.assertEqual(sample(body, "coredns_dns_requests_total",
                                server=server, zone="example.org.", view="",
                                proto="udp", family="1", type="other"), 1)
        self.assertEqual(sample(body, "coredns_dns_responses_total",
                                server=server, zone="example.org.", view="",
                                rcode="NOERROR", plugin="whoami"), 11)
        self.assertEqual(sample(body, "coredns_dns_responses_total",
                                server=server, zone=".", view="",
                                rcode="SERVFAIL", plugin=""), 1)
        self.assertEqual(sample(
            body, "coredns_dns_request_duration_seconds_count",
            server=server, zone="example.org.", view=""), 11)
        self.assertEqual(sample(
            body, "coredns_dns_response_size_bytes_count",
            server=server, zone="example.org.", view="", proto="tcp"), 3)
        self.assertEqual(sample(
            body, "coredns_dns_request_size_bytes_bucket",
            server=server, zone="example.org.", view="", proto="udp",
            le="0"), 0)
        self.assertEqual(sample(
            body, "coredns_dns_request_size_bytes_bucket",
            server=server, zone="example.org.", view="", proto="udp",
            le="100"), 8)
        self.assertEqual(sample(body, "coredns_plugin_enabled",
                                server=server, zone="example.org.", view="",
                                name="whoami"), 1)
        self.assertIsNotNone(sample(body, "coredns_build_info",
                                    version="1.14.0", revision="corednstw",
                                    goversion="python"))
        self.assertEqual(sample(body, "coredns_panics_total"), self.panics)
        self.assertIn("process_cpu_seconds_total", body)

    @defer.inlineCallbacks
    def test_do_requests(self):
        yield util.query(self.port, "example.org.", "A", use_edns=0,
                         want_dnssec=True, host=HOST)
        self.assertEqual(metrics.DO_REQUESTS.get(
            (SERVER, "example.org.", "")), 1)

    @defer.inlineCallbacks
    def test_health_and_ready(self):
        status, body = yield util.http_get(self.http, "/health")
        self.assertEqual((status, body), (200, "OK"))
        status, body = yield util.http_get(self.http, "/ready")
        self.assertEqual((status, body), (200, "OK"))
        status, _ = yield util.http_get(self.http, "/nothing")
        self.assertEqual(status, 404)


@implementer(IReadiness)
class _Slow:
    """A readiness reporter that becomes ready when told."""

    name = "kubernetes"

    def __init__(self):
        self.is_ready = False

    def ready(self):
        return self.is_ready

    def stop(self):
        pass


class ReadyTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_not_ready_names_plugins(self):
        app = yield util.start(self, ".:0 {\n    whoami\n    ready "
                                     "127.0.0.1:0\n}\n")
        slow = _Slow()
        app.config.blocks[0].plugins.append(slow)
        port = app.http_port()
        status, body = yield util.http_get(port, "/ready")
        self.assertEqual((status, body), (503, "kubernetes"))
        slow.is_ready = True
        status, body = yield util.http_get(port, "/ready")
        self.assertEqual((status, body), (200, "OK"))
        # Once ready, a plugin is not asked again (as CoreDNS).
        slow.is_ready = False
        status, body = yield util.http_get(port, "/ready")
        self.assertEqual(status, 200)


class ReadyMonitorTest(unittest.TestCase):

    def ready(self, options):
        d = util.Direct(self, ".:0 {\n    whoami\n    ready 127.0.0.1:0 "
                              "{\n%s\n    }\n}\n" % options)
        rd = d.app.config.blocks[0].plugin("ready")
        slow = _Slow()
        d.app.config.blocks[0].plugins.append(slow)
        d.app.running = 1
        return rd, slow

    def test_until_ready_asks_no_more(self):
        for options in ("", "        monitor until-ready"):
            rd, slow = self.ready(options)
            slow.is_ready = True
            self.assertEqual(rd.status(), (200, "OK"))
            slow.is_ready = False
            self.assertEqual(rd.status(), (200, "OK"))

    def test_continuously_asks_every_time(self):
        rd, slow = self.ready("        monitor continuously")
        slow.is_ready = True
        self.assertEqual(rd.status(), (200, "OK"))
        slow.is_ready = False
        self.assertEqual(rd.status(), (503, "kubernetes"))

    def test_monitor_errors(self):
        from corednstw.core.errors import CorefileError
        for options, msg in (
                ("monitor sometimes",
                 "monitor type 'sometimes' not supported"),
                ("monitor", "Wrong argument count"),
                ("watch continuously", "unknown property 'watch'")):
            with self.assertRaises(CorefileError) as cm:
                self.ready(options)
            self.assertIn("plugin/ready: " + msg, str(cm.exception))


class LameduckTest(unittest.TestCase):

    def test_lameduck_delays_shutdown(self):
        s = util.Direct(self, """.:0 {
    whoami
    health 127.0.0.1:0 {
        lameduck 5s
    }
    ready 127.0.0.1:0
}
""")
        log = util.capture_log(self)
        clock = task.Clock()
        app = s.app
        app.reactor = clock
        app.running = 1
        ready = app.config.blocks[0].plugin("ready")
        d = app.stopService()
        fired = []
        d.addCallback(fired.append)
        self.assertEqual(ready.status(), (503, "Shutting down"))
        self.assertIn("[INFO] plugin/health: Going into lameduck mode for 5s",
                      log.lines)
        # Still answering queries during lameduck.
        self.assertEqual(s.query("example.org.").rcode(), 0)
        clock.advance(4.9)
        self.assertEqual(fired, [])
        clock.advance(0.2)
        self.assertEqual(len(fired), 1)


class CorefileErrorTest(unittest.TestCase):
    """Bad directives are named with file and line; nothing starts."""

    def load_error(self, corefile):
        from corednstw.core.errors import CorefileError
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, corefile)
        return str(cm.exception)

    def test_whoami_takes_no_arguments(self):
        err = self.load_error(".:0 {\n    whoami foo\n}\n")
        self.assertTrue(err.endswith(
            "Corefile:2 - Error during parsing: plugin/whoami: Wrong "
            "argument count or unexpected line ending after 'foo'"), err)

    def test_twice_in_block(self):
        err = self.load_error(".:0 {\n    whoami\n    whoami\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/whoami: "
                      "this plugin can only be used once per Server Block",
                      err)

    def test_health_bad_lameduck(self):
        err = self.load_error(
            ".:0 {\n    health {\n        lameduck soon\n    }\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/health: "
                      "unable to parse lameduck duration value: 'soon'", err)

    def test_address_needs_a_port(self):
        """health, ready and prometheus split their ADDRESS as Go's
        net.SplitHostPort: no port is refused at setup."""
        for line, name in (("health bla", "health"), ("ready bla", "ready"),
                           ("prometheus /foo", "prometheus"),
                           ("prometheus {}", "prometheus")):
            err = self.load_error(".:0 {\n    %s\n}\n" % line)
            self.assertIn("Corefile:2 - Error during parsing: plugin/%s: "
                          "address %s: missing port in address"
                          % (name, line.split()[1]), err)

    def test_prometheus_options(self):
        """runtime_metrics (1.14) takes no argument; other names are
        refused with CoreDNS's words for prometheus."""
        util.Direct(self, ".:0 {\n    prometheus localhost:0 {\n"
                          "        runtime_metrics\n    }\n}\n")
        for option, msg in (("runtime_metrics extra_arg",
                             "Wrong argument count"),
                            ("histograms", "unknown option: histograms")):
            err = self.load_error(".:0 {\n    prometheus {\n        %s\n"
                                  "    }\n}\n" % option)
            self.assertIn("Corefile:3 - Error during parsing: "
                          "plugin/prometheus: " + msg, err)

    @defer.inlineCallbacks
    def test_unknown_port_refused_when_listening(self):
        """``health bla:a`` passes setup, as CoreDNS's; listening fails."""
        from twisted.internet.error import CannotListenError
        for line in ("health bla:a", "ready localhost:nosuchservice"):
            util.Direct(self, ".:0 {\n    %s\n}\n" % line)
            with self.assertRaises(CannotListenError) as cm:
                yield util.start(self, ".:0 {\n    whoami\n    %s\n}\n"
                                 % line)
            self.assertIn("unknown port", str(cm.exception))

    def test_unknown_directive(self):
        err = self.load_error(".:0 {\n    whoam\n}\n")
        self.assertIn("Corefile:2", err)
        self.assertIn("Unknown directive 'whoam'", err)

    def test_transport_without_certificate(self):
        err = self.load_error("quic://.:0 {\n    whoami\n}\n")
        self.assertIn("Corefile:1", err)
        self.assertIn("quic: tls.Config not set", err)

    def test_duplicate_zone(self):
        err = self.load_error(".:0 {\n    whoami\n}\n.:0 {\n    whoami\n}\n")
        self.assertIn("Corefile:4", err)
        self.assertIn("it is already defined", err)

    def test_bind_bad_address(self):
        err = self.load_error(".:0 {\n    bind nosuchif0\n    whoami\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/bind:", err)
