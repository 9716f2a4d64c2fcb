"""Pebble, Let's Encrypt's small ACME test CA (Debian's ``pebble``), run
as a process for a test: its API on a free port behind a certificate of
a CA made for the test, challenges validated for real (DNS-01 against the
DNS server given), without the random waits of its validation authority
and without refusing nonces at random (both would make a test slow or
flaky)."""

import json
import os
import shutil
import ssl
import urllib.request

from twisted.internet import protocol, reactor, threads
from twisted.trial import unittest

from tests.support import util
from tests.support.unbound import make_certs

PEBBLE = shutil.which("pebble")


def require(testcase):
    if PEBBLE:
        return
    if os.environ.get("CI") == "true":
        testcase.fail("pebble is not installed")
    raise unittest.SkipTest("pebble (the ACME test CA) is not installed")


class _Output(protocol.ProcessProtocol):
    def __init__(self):
        self.text = ""
        self.ended = None

    def outReceived(self, data):
        self.text += data.decode("utf-8", "replace")

    errReceived = outReceived

    def processEnded(self, reason):
        self.ended = reason


class Pebble:
    """One pebble process; ``start(dns_port)`` returns a Deferred firing
    when its directory is served.  ``directory`` is the ACME directory
    URL, ``api_ca`` the CA file of its HTTPS certificate (what a client
    passes as ``ca_root``)."""

    def __init__(self, testcase):
        self.testcase = testcase
        self.dir = util.write_files(testcase, {})
        self.api_ca, cert, key = make_certs(self.dir, ("localhost",))
        self.port = util.free_port()
        self.management = util.free_port()
        self.directory = "https://127.0.0.1:%d/dir" % self.port
        self.config = os.path.join(self.dir, "pebble-config.json")
        with open(self.config, "w") as fh:
            json.dump({"pebble": {
                "listenAddress": "127.0.0.1:%d" % self.port,
                "managementListenAddress": "127.0.0.1:%d" % self.management,
                "certificate": cert, "privateKey": key,
                # HTTP-01 and TLS-ALPN-01 are not used (ports nobody has).
                "httpPort": util.free_port(), "tlsPort": util.free_port(),
                "ocspResponderURL": "",
                "externalAccountBindingRequired": False}}, fh)
        self.output = _Output()
        self.process = None

    def start(self, dns_port):
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1",
                   PEBBLE_WFE_NONCEREJECT="0")
        self.process = reactor.spawnProcess(
            self.output, PEBBLE,
            [PEBBLE, "-config", self.config,
             "-dnsserver", "127.0.0.1:%d" % dns_port],
            env=env, path=self.dir)
        self.testcase.addCleanup(self.stop)
        return util.wait_for(self._serving, timeout=30)

    def _serving(self):
        if self.output.ended is not None:
            raise RuntimeError("pebble ended: %s" % self.output.text)
        return "ACME directory available" in self.output.text

    def stop(self):
        if self.output.ended is not None:
            return None
        d = util.wait_for(lambda: self.output.ended is not None, timeout=10)
        self.process.signalProcess("TERM")
        return d

    def root(self):
        """Deferred firing with the PEM of the root its certificates
        chain to (made anew at each start), from the management API."""
        ctx = ssl.create_default_context(cafile=self.api_ca)
        url = "https://127.0.0.1:%d/roots/0" % self.management

        def get():
            with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
                return r.read().decode("ascii")
        return threads.deferToThread(get)
