"""Server block transports: a ``tls://`` block without a ``tls`` directive
has no certificate, and CoreDNS then serves it as plain DNS on TCP alone
(server_tls.go wraps the listener in TLS only when a certificate is set,
and opens no packet listener)."""

import socket

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from tests.support import util
from tests.support.util import free_port

ZONE = """$ORIGIN example.net.
@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 3600
  3600 IN NS ns1
ns1 3600 IN A 192.0.2.5
www 3600 IN A 192.0.2.50
"""


def udp_port_free(port):
    """True when nothing listens on UDP 127.0.0.1:port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class PlainTLSTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.port = free_port()
        zones = util.write_files(self, {"db.example.net": ZONE})
        self.app = yield util.start(
            self, "tls://example.net:%d {\n    bind 127.0.0.1\n"
                  "    file %s/db.example.net\n"
                  "    prometheus 127.0.0.1:0\n    log\n}\n"
                  % (self.port, zones))

    @defer.inlineCallbacks
    def test_tcp_answers_plain_dns(self):
        m = yield util.query(self.port, "www.example.net.", "A",
                             proto="tcp")
        self.assertEqual(util.rrs(m),
                         ["www.example.net. 3600 IN A 192.0.2.50"])
        self.assertTrue(m.flags & dns.flags.AA)
        m = yield util.query(self.port, "www.example.org.", "A",
                             proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)

    def test_nothing_on_udp(self):
        self.assertEqual(self.app.port(transport="tls"), self.port)
        [lst] = self.app.listeners.values()
        self.assertIsNone(lst.udp)
        self.assertTrue(udp_port_free(self.port))

    def test_warns_no_certificate(self):
        self.assertIn(
            "[WARNING] plugin/tls: tls://example.net.:%d has no certificate "
            "(no tls directive): serving plain DNS over TCP only"
            % self.port, self.log.lines)

    def test_banner_names_the_transport(self):
        self.assertIn("tls://example.net.:%d" % self.port, self.log.lines)

    @defer.inlineCallbacks
    def test_server_label_and_proto(self):
        # As CoreDNS: the server label is the listener's address with its
        # scheme, the protocol of a DNS-over-TLS query is tcp.
        label = "tls://127.0.0.1:%d" % self.port
        key = (label, "example.net.", "", "tcp", "1", "A")
        before = metrics.REQUESTS.get(key)
        yield util.query(self.port, "www.example.net.", "A", proto="tcp")
        self.assertEqual(metrics.REQUESTS.get(key), before + 1)
        [line] = [x for x in self.log.lines if "www.example.net." in x]
        self.assertIn('"A IN www.example.net. tcp ', line)

    @defer.inlineCallbacks
    def test_reload_keeps_tcp_only(self):
        with open(self.app.path) as f:
            text = f.read()
        with open(self.app.path, "w") as f:
            f.write(text.replace("    log\n", "    log\n    whoami\n"))
        self.assertTrue(self.app.reload())
        [lst] = self.app.listeners.values()
        self.assertIsNone(lst.udp)
        m = yield util.query(self.port, "www.example.net.", "A",
                             proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


class TLSSetupTest(unittest.TestCase):

    def test_quic_transports_need_a_certificate(self):
        for scheme, text in (
                ("quic", "quic: tls.Config not set"),
                ("https3", "DoH3 requires TLS, no TLS config found")):
            with self.assertRaises(CorefileError) as cm:
                util.Direct(self, "%s://example.net:0 {\n    whoami\n}\n"
                            % scheme)
            self.assertIn("Corefile:1", str(cm.exception))
            self.assertIn("%s://example.net:0: %s" % (scheme, text),
                          str(cm.exception))

    def test_warned_once_per_key(self):
        log = util.capture_log(self)
        util.Direct(self, "tls://a.example:0 tls://b.example:0 {\n"
                          "    whoami\n}\n")
        warnings = [x for x in log.lines if x.startswith("[WARNING]")]
        self.assertEqual(warnings, [
            "[WARNING] plugin/tls: tls://%s.:0 has no certificate (no tls "
            "directive): serving plain DNS over TCP only" % z
            for z in ("a.example", "b.example")])
