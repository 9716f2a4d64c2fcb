"""The reactor of a start (service/reactor.py): imported without
Twisted's TLS layer (pyOpenSSL) for a Corefile that speaks no TLS, and
TLS still working wherever it is used: ``listenSSL``, ``connectSSL`` and
a TCP connection's ``startTLS``.  Each case runs in a fresh interpreter
(this process imported the reactor with TLS long ago)."""

import json
import os
import subprocess
import sys

from twisted.trial import unittest

from tests.support import tlsutil, util

#: Starts ``twistd coredns``'s service for a Corefile and writes the TLS
#: modules loaded by then.
START = """
import json, os, sys
from corednstw.tap import Options, makeService
o = Options()
o.parseOptions(["-c", sys.argv[1]])
svc = makeService(o)
from twisted.internet import reactor
from twisted.internet.interfaces import IReactorSSL
svc.startService()
with open(sys.argv[2], "w") as f:
    json.dump({"loaded": sorted(m for m in sys.modules if m.split(".")[0]
                                in ("OpenSSL", "cryptography",
                                    "service_identity")
                                or m == "twisted.protocols.tls"),
               "ssl": IReactorSSL.providedBy(reactor)}, f)
os._exit(0)
"""

#: The reactor of service/reactor.py, then TLS through listenSSL,
#: connectSSL and startTLS: writes what each client received.
TLS = """
import json, sys
from corednstw.service import reactor as loader
reactor = loader.load()
assert "OpenSSL" not in sys.modules, "OpenSSL loaded with the reactor"
from twisted.internet import protocol, ssl
cert, key = sys.argv[1], sys.argv[2]
with open(cert) as f, open(key) as g:
    server_ctx = ssl.PrivateCertificate.loadPEM(
        f.read() + g.read()).options()
client_ctx = ssl.CertificateOptions(verify=False)
got = {}

class Echo(protocol.Protocol):
    def connectionMade(self):
        if self.factory.starttls:
            self.transport.startTLS(server_ctx)
    def dataReceived(self, data):
        self.transport.write(b"echo:" + data)

class Client(protocol.Protocol):
    def connectionMade(self):
        if self.factory.starttls:
            self.transport.startTLS(client_ctx)
        self.transport.write(self.factory.name.encode())
    def dataReceived(self, data):
        got[self.factory.name] = (data.decode(),
                                  self.transport.getPeerCertificate()
                                  is not None)
        self.transport.loseConnection()
        if len(got) == 2:
            reactor.stop()

def factory(cls, starttls, name=None):
    f = (protocol.ClientFactory if name else protocol.Factory).forProtocol(
        cls)
    f.starttls, f.name = starttls, name
    return f

tls_port = reactor.listenSSL(0, factory(Echo, False), server_ctx,
                             interface="127.0.0.1")
tcp_port = reactor.listenTCP(0, factory(Echo, True), interface="127.0.0.1")
reactor.connectSSL("127.0.0.1", tls_port.getHost().port,
                   factory(Client, False, "ssl"), client_ctx)
reactor.connectTCP("127.0.0.1", tcp_port.getHost().port,
                   factory(Client, True, "starttls"))
reactor.callLater(10, reactor.stop)
reactor.run()
with open(sys.argv[3], "w") as f:
    json.dump(got, f)
"""


class ReactorTest(unittest.TestCase):

    def run_script(self, script, *args, cwd=None):
        """Runs ``script`` with ``args`` and a file for its JSON result
        (standard output carries the start's log lines)."""
        result = os.path.abspath(self.mktemp())
        out = subprocess.run(
            [sys.executable, "-c", script] + list(args) + [result],
            capture_output=True, text=True, timeout=60, cwd=cwd)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        with open(result) as f:
            return json.load(f)

    def test_no_tls_loaded_without_tls(self):
        d = util.write_files(self, {"Corefile": (
            ".:0 {\n    bind 127.0.0.1\n    errors\n"
            "    health 127.0.0.1:0\n    ready 127.0.0.1:0\n"
            "    prometheus 127.0.0.1:0\n    whoami\n}\n")})
        got = self.run_script(START, os.path.join(d, "Corefile"), cwd=d)
        self.assertEqual(got, {"loaded": [], "ssl": True})

    def test_tls_corefile_loads_tls(self):
        _, _, cert, key = tlsutil.certs(self)
        d = util.write_files(self, {"Corefile": (
            "tls://.:0 {\n    bind 127.0.0.1\n    tls %s %s\n"
            "    whoami\n}\n" % (cert, key))})
        got = self.run_script(START, os.path.join(d, "Corefile"), cwd=d)
        self.assertIn("twisted.protocols.tls", got["loaded"])
        self.assertIn("OpenSSL.SSL", got["loaded"])

    def test_tls_after_a_reactor_without_it(self):
        _, _, cert, key = tlsutil.certs(self)
        got = self.run_script(TLS, cert, key)
        self.assertEqual(got, {"ssl": ["echo:ssl", True],
                               "starttls": ["echo:starttls", True]})
