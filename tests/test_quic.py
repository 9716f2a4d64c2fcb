"""DNS over QUIC (quic://): real clients (dnspython, kdig +quic, a raw
aioquic client) against the server on a UDP port 0."""

import struct

import dns.edns
import dns.message
import dns.query
import dns.rcode
from twisted.internet import threads
from twisted.internet.defer import inlineCallbacks
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from tests.support import doq, tlsutil, util
from tests.support.upstream import Upstream

COREFILE = """quic://.:0 {
    bind 127.0.0.1
    tls %(cert)s %(key)s
    prometheus 127.0.0.1:0
%(extra)s    whoami
}
"""


def query(name="example.org.", rdtype="A", **kw):
    q = dns.message.make_query(name, rdtype, **kw)
    q.id = 0
    return q


class DoQTest(unittest.TestCase):

    extra = "    quic {\n        max_streams 16\n    }\n"
    max_streams = 16

    @inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        _, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, COREFILE % {
            "cert": self.cert, "key": self.key, "extra": self.extra})
        self.port = self.app.port(transport="quic")

    def count(self, status):
        return metrics.families()["coredns_dns_quic_responses_total"].get(
            ("quic://127.0.0.1:0", status)) or 0

    def ask(self, q, **kw):
        return threads.deferToThread(
            dns.query.quic, q, "127.0.0.1", port=self.port, timeout=5,
            verify=self.ca, server_hostname=tlsutil.HOSTNAME, **kw)

    @inlineCallbacks
    def test_dnspython(self):
        before = self.count("0x0")
        m = yield self.ask(query())
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.id, 0)
        extra = sorted(util.rrs(m, "additional"))
        self.assertEqual(extra[1], "example.org. 0 IN A 127.0.0.1")
        # The chain sees a UDP query, as CoreDNS's DoQ writer gives it.
        self.assertEqual(extra[0].split()[:4],
                         ["_udp.example.org.", "0", "IN", "SRV"])
        self.assertEqual(self.count("0x0"), before + 1)

    @inlineCallbacks
    def test_kdig(self):
        tlsutil.require_kdig(self)
        out, code = yield tlsutil.kdig(
            # +quic last: a +tls option after it would mean DoT.
            "@127.0.0.1", "-p", str(self.port),
            "+tls-ca=%s" % self.ca, "+tls-hostname=%s" % tlsutil.HOSTNAME,
            "+quic", "example.org", "A")
        self.assertEqual(code, 0, out)
        self.assertIn("QUIC session", out)
        self.assertIn("status: NOERROR", out)
        self.assertIn("_udp.example.org.", out)

    @inlineCallbacks
    def test_streams_of_one_connection(self):
        wires = [doq.prefixed(query("n%d.example.org." % i).to_wire())
                 for i in range(5)]
        res = yield threads.deferToThread(doq.exchange, self.port, wires)
        self.assertIsNone(res.closed_with)
        self.assertEqual(len(res.answers), 5)
        for sid, wire in res.answers.items():
            m = dns.message.from_wire(wire)
            self.assertEqual(str(m.question[0].name),
                             "n%d.example.org." % (sid // 4))

    @inlineCallbacks
    def test_max_streams_advertised(self):
        res = yield threads.deferToThread(doq.exchange, self.port, [])
        self.assertEqual(res.max_streams, 16)

    @inlineCallbacks
    def check_protocol_error(self, payload):
        before = self.count("0x2")
        res = yield threads.deferToThread(doq.exchange, self.port, [payload])
        self.assertEqual(res.closed_with, 2)
        self.assertEqual(res.answers, {})
        self.assertEqual(self.count("0x2"), before + 1)

    def test_nonzero_id(self):
        q = query()
        q.id = 4321
        return self.check_protocol_error(doq.prefixed(q.to_wire()))

    def test_keepalive_option(self):
        q = query(use_edns=0, options=[
            dns.edns.GenericOption(11, b"\x00\x10")])
        return self.check_protocol_error(doq.prefixed(q.to_wire()))

    def test_length_zero(self):
        return self.check_protocol_error(b"\x00\x00")

    def test_length_past_the_stream(self):
        wire = query().to_wire()
        return self.check_protocol_error(
            struct.pack("!H", len(wire) + 5) + wire)

    def test_not_dns(self):
        return self.check_protocol_error(doq.prefixed(b"\x00\x00garbage"))

    @inlineCallbacks
    def test_wrong_certificate_refused(self):
        _, other_ca, _, _ = tlsutil.certs(self)
        with self.assertRaises(Exception):
            yield threads.deferToThread(
                dns.query.quic, query(), "127.0.0.1", port=self.port,
                timeout=3, verify=other_ca,
                server_hostname=tlsutil.HOSTNAME)
        m = yield self.ask(query())     # the listener is unharmed
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


    @inlineCallbacks
    def test_wrong_server_name_refused(self):
        with self.assertRaises(Exception):
            yield threads.deferToThread(
                dns.query.quic, query(), "127.0.0.1", port=self.port,
                timeout=3, verify=self.ca, server_hostname="other.example")
        m = yield self.ask(query())
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @inlineCallbacks
    def test_more_queries_than_max_streams(self):
        """More queries on one connection than its streams of credit:
        the client waits for credit, which comes back as streams end."""
        count = self.max_streams * 2 + 8
        wires = [doq.prefixed(query("n%d.example.org." % i).to_wire())
                 for i in range(count)]
        res = yield threads.deferToThread(doq.exchange, self.port, wires)
        self.assertIsNone(res.closed_with)
        self.assertEqual(len(res.answers), count)

    @inlineCallbacks
    def test_max_streams_enforced(self):
        """A client sending on a stream past its credit is closed with
        STREAM_LIMIT_ERROR, unanswered."""
        res = yield threads.deferToThread(
            doq.exchange, self.port, [doq.prefixed(query().to_wire())],
            overrun=True)
        self.assertEqual(res.max_streams, self.max_streams)
        self.assertEqual(res.closed_with, 0x4)
        self.assertEqual(res.answers, {})

    @inlineCallbacks
    def test_answered_before_fin(self):
        """As CoreDNS, the query is answered once its length's worth of
        bytes is in, FIN or not."""
        res = yield threads.deferToThread(
            doq.exchange, self.port, [doq.prefixed(query().to_wire())],
            fin=False)
        self.assertIsNone(res.closed_with)
        self.assertEqual(len(res.answers), 1)

    @inlineCallbacks
    def test_metrics_scraped(self):
        yield self.ask(query())
        status, text = yield util.http_get(
            self.app.http_port("127.0.0.1:0"), "/metrics")
        self.assertEqual(status, 200)
        self.assertIn('coredns_dns_quic_responses_total{server="quic://'
                      '127.0.0.1:0",status="0x0"}', text)
        self.assertRegex(text, r'coredns_dns_requests_total\{[^}]*'
                         r'proto="udp"[^}]*server="quic://127.0.0.1:0"')


class DefaultsTest(DoQTest):
    """Without a quic directive: CoreDNS's 256 streams."""

    extra = ""
    max_streams = 256

    @inlineCallbacks
    def test_max_streams_advertised(self):
        res = yield threads.deferToThread(doq.exchange, self.port, [])
        self.assertEqual(res.max_streams, 256)


class KeyLogTest(unittest.TestCase):

    @inlineCallbacks
    def test_quic_handshake_secrets_logged(self):
        """tls keylog covers DoQ too: the QUIC handshake's secrets, with
        the client random of the connection, NSS key log lines."""
        util.capture_log(self)
        d, ca, cert, key = tlsutil.certs(self)
        path = "%s/keys.log" % d
        app = yield util.start(self, "quic://.:0 {\n    bind 127.0.0.1\n"
                               "    tls %s %s {\n        keylog %s\n    }\n"
                               "    whoami\n}\n" % (cert, key, path))
        m = yield threads.deferToThread(
            dns.query.quic, query(), "127.0.0.1",
            port=app.port(transport="quic"), timeout=5, verify=ca,
            server_hostname=tlsutil.HOSTNAME)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

        def lines():
            with open(path) as fh:
                return [line.split() for line in fh]
        yield util.wait_for(lambda: len(lines()) >= 4)
        self.assertEqual({x[0] for x in lines()}, {
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"})
        self.assertEqual(len({x[1] for x in lines()}), 1)   # one client


class ConnectionsTest(unittest.TestCase):
    """Connections: idle ones closed, stalled streams, the limit."""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, COREFILE % {
            "cert": self.cert, "key": self.key,
            "extra": "    timeouts {\n        read 1s\n        idle 1s\n"
                     "    }\n"})
        self.port = self.app.port(transport="quic")
        self.server = next(lst.stream for lst in self.app.listeners.values()
                           if lst.kind == "quic")

    def count(self, status):
        return metrics.families()["coredns_dns_quic_responses_total"].get(
            ("quic://127.0.0.1:0", status)) or 0

    @inlineCallbacks
    def test_idle_connection_closed(self):
        """A client that goes quiet without closing is forgotten after
        the idle timeout, its timer with it."""
        res = yield threads.deferToThread(doq.exchange, self.port, [])
        self.assertTrue(res.handshake)
        yield util.wait_for(lambda: self.server.admitted == 1)
        yield util.wait_for(lambda: not self.server.conns)
        self.assertEqual(self.server.admitted, 0)

    @inlineCallbacks
    def test_stalled_stream(self):
        """Part of a query and no more: a protocol error once the read
        timeout has passed (CoreDNS's read deadline on the stream)."""
        before = self.count("0x2")
        wire = doq.prefixed(query().to_wire())
        res = yield threads.deferToThread(doq.exchange, self.port,
                                          [wire[:7]], fin=False)
        self.assertEqual(res.closed_with, 2)
        self.assertEqual(self.count("0x2"), before + 1)

    @inlineCallbacks
    def test_connection_limit(self):
        """Past the listener's connections (CoreDNS's 200, no directive
        sets it) a new one is closed with code 0 once up."""
        self.server.settings.max_connections = 1
        res = yield threads.deferToThread(doq.exchange, self.port, [])
        self.assertTrue(res.handshake)
        yield util.wait_for(lambda: self.server.admitted == 1)
        res = yield threads.deferToThread(
            doq.exchange, self.port, [doq.prefixed(query().to_wire())])
        self.assertEqual(res.closed_with, 0)
        self.assertEqual(res.answers, {})


class WorkerPoolTest(unittest.TestCase):
    """worker_pool_size: streams answered at once over the listener."""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.up = Upstream().start()
        self.addCleanup(self.up.stop)
        self.up.held = True
        self.app = yield util.start(self, (
            "quic://.:0 {\n    bind 127.0.0.1\n    tls %s %s\n"
            "    quic {\n        worker_pool_size 2\n    }\n"
            "    forward . %s\n}\n") % (self.cert, self.key,
                                       self.up.addr()))
        self.port = self.app.port(transport="quic")
        self.server = next(lst.stream for lst in self.app.listeners.values()
                           if lst.kind == "quic")

    @inlineCallbacks
    def test_streams_wait_for_a_worker(self):
        wires = [doq.prefixed(query("n%d.example.org." % i).to_wire())
                 for i in range(5)]
        d = threads.deferToThread(doq.exchange, self.port, wires, 10.0)
        # Two queries reach the chain (and the upstream), three wait.
        yield util.wait_for(lambda: len(self.server.waiting) == 3)
        self.assertEqual(self.server.busy, 2)
        yield util.wait_for(lambda: self.up.count() == 2)
        self.up.held = False
        self.up.release()
        res = yield d
        self.assertIsNone(res.closed_with)
        self.assertEqual(len(res.answers), 5)
        self.assertEqual(self.up.count(), 5)
        self.assertEqual(self.server.busy, 0)


class SetupTest(unittest.TestCase):

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_needs_a_certificate(self):
        msg = self.error("quic://.:0 {\n    whoami\n}\n")
        self.assertIn("Corefile:1", msg)
        self.assertIn("quic://.:0: quic: tls.Config not set", msg)

    def test_option_errors(self):
        msg = self.error(".:0 {\n    quic {\n"
                         "        max_streams 0\n    }\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/quic: "
                      "max_streams must be a positive integer: 0", msg)
        msg = self.error(".:0 {\n    quic {\n"
                         "        worker_pool_size x\n    }\n}\n")
        self.assertIn("invalid worker_pool_size value 'x'", msg)
        msg = self.error(".:0 {\n    quic {\n"
                         "        max_streams 1\n"
                         "        max_streams 2\n    }\n}\n")
        self.assertIn("Corefile:4 - Error during parsing: plugin/quic: "
                      "max_streams already defined for this server block",
                      msg)
        msg = self.error(".:0 {\n    quic {\n"
                         "        streams 1\n    }\n}\n")
        self.assertIn("plugin/quic: unknown property 'streams'", msg)
        msg = self.error(".:0 {\n    quic 1\n}\n")
        self.assertIn("plugin/quic", msg)


H3_COREFILE = """https3://.:0 {
    bind 127.0.0.1
    tls %(cert)s %(key)s
%(extra)s    whoami
}
"""


class DoH3Base:

    extra = ""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, H3_COREFILE % {
            "cert": self.cert, "key": self.key, "extra": self.extra})
        self.port = self.app.port(transport="https3")

    def count(self, status):
        return metrics.families()["coredns_dns_https3_responses_total"].get(
            ("https3://127.0.0.1:0", str(status))) or 0

    def ask(self, post, hostname=tlsutil.HOSTNAME, ca=None):
        return threads.deferToThread(
            dns.query.https, dns.message.make_query("example.org.", "A"),
            "https://%s:%d/dns-query" % (hostname, self.port),
            bootstrap_address="127.0.0.1", verify=ca or self.ca, timeout=5,
            post=post, http_version=dns.query.HTTPVersion.H3)

    def raw(self, method, path, body=b"", hold=None):
        return threads.deferToThread(doq.h3_request, self.port, method, path,
                                     body, 5.0, hold)


class DoH3Test(DoH3Base, unittest.TestCase):
    """https3://: DNS over HTTPS over HTTP/3."""

    @inlineCallbacks
    def test_dnspython_post_and_get(self):
        before = self.count(200)
        for post in (True, False):
            m = yield self.ask(post)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
            extra = sorted(util.rrs(m, "additional"))
            self.assertEqual(extra[1], "example.org. 0 IN A 127.0.0.1")
            self.assertEqual(extra[0].split()[0], "_udp.example.org.")
        self.assertEqual(self.count(200), before + 2)

    @inlineCallbacks
    def test_bad_certificate_and_server_name_refused(self):
        _, other_ca, _, _ = tlsutil.certs(self)
        before = self.count(200)
        for kw in ({"hostname": "other.example"}, {"ca": other_ca}):
            with self.assertRaises(Exception):
                yield self.ask(True, **kw)
        self.assertEqual(self.count(200), before)
        m = yield self.ask(True)        # the listener is unharmed
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @inlineCallbacks
    def test_statuses(self):
        before = self.count(404)
        wire = query().to_wire()
        status, body, _ = yield self.raw(b"POST", b"/resolve", wire)
        self.assertEqual((status, body), (404, b"\n"))
        status, body, _ = yield self.raw(b"POST", b"/dns-query", b"xx")
        self.assertEqual((status, body), (400, b"invalid request\n"))
        status, body, _ = yield self.raw(b"GET", b"/dns-query")
        self.assertEqual(status, 400)
        status, body, _ = yield self.raw(b"POST", b"/dns-query",
                                         wire + b"\0" * 70000)
        self.assertEqual(status, 400)
        self.assertEqual(self.count(404), before + 1)


class DoH3LimitTest(DoH3Base, unittest.TestCase):

    extra = "    https3 {\n        max_connections 1\n    }\n"

    @inlineCallbacks
    def test_max_connections(self):
        import threading
        hold = threading.Event()
        before = self.count(200)
        first = self.raw(b"POST", b"/dns-query", query().to_wire(), hold)
        yield util.wait_for(lambda: self.count(200) > before)
        status, _, closed = yield self.raw(b"POST", b"/dns-query",
                                           query().to_wire())
        self.assertIsNone(status)
        self.assertEqual(closed, 0x107)     # H3_EXCESSIVE_LOAD
        hold.set()
        status, _, _ = yield first
        self.assertEqual(status, 200)


class H3SetupTest(unittest.TestCase):

    def test_errors(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, "https3://.:0 {\n    whoami\n}\n")
        self.assertIn("Corefile:1", str(cm.exception))
        self.assertIn("https3://.:0: DoH3 requires TLS, no TLS config found",
                      str(cm.exception))
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    https3 {\n"
                        "        max_connections -1\n    }\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/https3: "
                      "max_connections must be a non-negative integer: -1",
                      str(cm.exception))
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    https3 {\n"
                        "        max_streams 1\n        max_streams 2\n"
                        "    }\n}\n")
        self.assertIn("max_streams already defined", str(cm.exception))

    def test_zero_accepted(self):
        util.Direct(self, ".:0 {\n    https3 {\n        max_streams 0\n"
                    "        max_connections 0\n    }\n    whoami\n}\n")
