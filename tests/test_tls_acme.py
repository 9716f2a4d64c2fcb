"""tls { acme ... }: a certificate from a real ACME CA (pebble), the
DNS-01 challenge answered by the server itself, then DNS over TLS with
that certificate, verified by a client trusting the CA's root."""

import os
import ssl

import dns.message
import dns.rcode
from cryptography import x509
from twisted.internet import defer, task
from twisted.trial import unittest

from corednstw.dnsserver import acme
from tests.support import pebble, tlsutil, util
from tests.support.unbound import make_certs

COREFILE = """.:0 tls://.:0 {
    bind 127.0.0.1
    tls {
        acme dns.example
        email admin@example.org
        ca %(ca)s
        ca_root %(ca_root)s
        storage %(storage)s
    }
    whoami
}
"""


def tls_plugin(app):
    return next(p for p in app.config.plugins() if p.name == "tls")


class ACMETest(unittest.TestCase):
    timeout = 120

    def setUp(self):
        pebble.require(self)
        # A failed order is tried again soon, not in a minute.
        self.patch(acme.Manager, "RETRY_FIRST", 0.2)
        self.patch(acme.Manager, "RETRY_MAX", 1.0)
        self.log = util.capture_log(self)
        self.ca = pebble.Pebble(self)
        self.storage = os.path.join(util.write_files(self, {}), "acme")

    def start(self):
        return util.start(self, COREFILE % {
            "ca": self.ca.directory, "ca_root": self.ca.api_ca,
            "storage": self.storage})

    @defer.inlineCallbacks
    def test_certificate_from_the_ca_serves_dns_over_tls(self):
        # The server starts before the CA: the first order fails, is
        # logged and tried again; the server keeps answering meanwhile.
        app = yield self.start()
        settings = tls_plugin(app).settings
        yield util.wait_for(lambda: "obtaining the ACME certificate for "
                            "dns.example" in self.log.text(), timeout=30)
        self.assertIsNone(settings.current)
        plain = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(plain.rcode(), dns.rcode.NOERROR)
        # No certificate yet: the handshake fails, the server goes on.
        q = dns.message.make_query("example.org", "A")
        with self.assertRaises(OSError):
            yield tlsutil.dot(app.port(transport="tls"), q,
                              ssl.create_default_context(),
                              hostname="dns.example")

        yield self.ca.start(app.port())
        yield util.wait_for(lambda: settings.current is not None,
                            timeout=60)
        self.assertIn("ACME certificate for dns.example obtained from %s"
                      % self.ca.directory, self.log.text())

        root = yield self.ca.root()
        ctx = ssl.create_default_context(cadata=root)
        m = yield tlsutil.dot(app.port(transport="tls"), q, ctx,
                              hostname="dns.example")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(sorted(r.split()[3] for r in util.rrs(
            m, "additional")), ["A", "SRV"])     # whoami's, over TCP

        # The challenge record is gone once the order is done.
        txt = yield util.query(app.port(), "_acme-challenge.dns.example",
                               "TXT")
        self.assertEqual(util.rrs(txt), [])

    @defer.inlineCallbacks
    def test_stored_certificate_is_used_at_the_next_start(self):
        app = yield self.start()
        yield self.ca.start(app.port())
        settings = tls_plugin(app).settings
        yield util.wait_for(lambda: settings.current is not None,
                            timeout=60)
        root = yield self.ca.root()
        yield app.stopService()
        yield self.ca.stop()

        # The CA is gone: the stored certificate serves at once.
        again = yield self.start()
        self.assertIsNotNone(tls_plugin(again).settings.current)
        self.assertIn("ACME certificate for dns.example loaded from",
                      self.log.text())
        q = dns.message.make_query("example.org", "A")
        m = yield tlsutil.dot(again.port(transport="tls"), q,
                              ssl.create_default_context(cadata=root),
                              hostname="dns.example")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


class ScheduleTest(unittest.TestCase):
    """When renewal and a new try after a failure are due (a Clock)."""

    def setUp(self):
        self.log = util.capture_log(self)
        self.clock = task.Clock()
        options = acme.Options(["dns.example"],
                               storage=util.write_files(self, {}))
        options.validate()
        self.manager = acme.Manager(options, acme.Solver(), self.clock)

    def test_renewal_when_a_third_of_the_lifetime_is_left(self):
        d = util.write_files(self, {})
        with open(make_certs(d, ("dns.example",))[1], "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
        start = cert.not_valid_before_utc.timestamp()
        end = cert.not_valid_after_utc.timestamp()
        self.clock.advance(start)
        self.assertAlmostEqual(self.manager._due(cert),
                               (end - start) * 2 / 3, places=3)
        self.clock.advance(end - start)
        self.assertEqual(self.manager._due(cert), 0.0)

    def test_failures_are_retried_later_and_later(self):
        delays = []
        self.patch(self.manager, "obtain", lambda: delays.append(
            self.clock.seconds()))
        for _ in range(3):
            self.manager._failed_text("connection refused")
            self.clock.advance(self.manager.RETRY_MAX)
        self.assertEqual(self.manager.retry, self.manager.RETRY_FIRST * 8)
        self.assertEqual(len(delays), 3)
        self.assertIn("obtaining the ACME certificate for dns.example from "
                      "%s: connection refused (next try in 60s)"
                      % acme.DEFAULT_CA, self.log.text())
        self.manager.stop()
        self.manager._failed_text("connection refused")
        self.assertEqual(self.clock.getDelayedCalls(), [])
