"""Start a real unbound (Debian's package) on loopback for integration tests.

``Unbound(testcase).start()`` writes a configuration in a temporary
directory: a local zone ``example.test.`` with a few records, plain DNS on
a free port of 127.0.0.1 and DNS-over-TLS on another, with a certificate
(for 127.0.0.1 and ``dns.example.test``) signed by a CA made for the test
(``cryptography``).  It returns a Deferred that fires once unbound answers.
Without unbound the tests are skipped, except under CI (CI=true), where
they fail.
"""

import base64
import datetime
import ipaddress
import os
import shutil
import subprocess
import tempfile

from twisted.internet import defer, reactor
from twisted.trial import unittest

from corednstw.core.request import make_query
from corednstw.engines.upstream import exchange
from tests.support.util import free_port  # noqa: F401 (knot, e2e and others import it here)

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"

ZONE = """\
    local-zone: "example.test." static
    local-data: "example.test. 3600 IN SOA ns.example.test. host.example.test. 1 3600 900 86400 300"
    local-data: "www.example.test. 120 IN A 192.0.2.80"
    local-data: "www.example.test. 120 IN AAAA 2001:db8::80"
    local-data: "v4only.example.test. 120 IN A 198.51.100.7"
    local-data: "mail.example.test. 300 IN MX 10 mx.example.test."
"""  # noqa: E501 (unbound's local-data takes one record per line)


def require(testcase):
    """Skip (or fail under CI) when unbound is not installed."""
    if os.path.exists(UNBOUND):
        return
    if os.environ.get("CI") == "true":
        testcase.fail("unbound is not installed")
    raise unittest.SkipTest("unbound is not installed")


def make_certs(directory, names=("dns.example.test",), ips=("127.0.0.1",)):
    """A CA and a server certificate signed by it; returns the paths
    (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def key():
        return ec.generate_private_key(ec.SECP256R1())

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            "corednstw test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name)
          .issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    srv_key = key()
    sans = [x509.DNSName(n) for n in names] + [
        x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    srv = (x509.CertificateBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                       names[0])]))
           .issuer_name(ca_name).public_key(srv_key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(days=1))
           .not_valid_after(now + datetime.timedelta(days=2))
           .add_extension(x509.SubjectAlternativeName(sans), critical=False)
           .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = {}
    for name, data in (
            ("ca.pem", ca.public_bytes(pem)),
            ("cert.pem", srv.public_bytes(pem)),
            ("key.pem", srv_key.private_bytes(
                pem, serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption()))):
        p = os.path.join(directory, name)
        with open(p, "wb") as fh:
            fh.write(data)
        paths[name] = p
    return paths["ca.pem"], paths["cert.pem"], paths["key.pem"]


class Unbound:
    """One unbound process; stopped at the test's cleanup."""

    def __init__(self, testcase, zone=ZONE):
        self.testcase = testcase
        self.zone = zone
        self.dir = tempfile.mkdtemp(prefix="corednstw-unbound-")
        testcase.addCleanup(shutil.rmtree, self.dir, True)
        self.port = self.tls_port = 0
        self.proc = None
        self.ca = self.cert = self.key = None

    def start(self):
        require(self.testcase)
        self.port = free_port()
        self.tls_port = free_port()
        self.ca, self.cert, self.key = make_certs(self.dir)
        conf = os.path.join(self.dir, "unbound.conf")
        with open(conf, "w") as fh:
            fh.write(self._config())
        log = open(os.path.join(self.dir, "unbound.log"), "w")
        self.proc = subprocess.Popen([UNBOUND, "-d", "-p", "-c", conf],
                                     stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()
        self.testcase.addCleanup(self.stop)
        return self._wait().addCallback(lambda _: self)

    def _config(self):
        return """server:
    interface: 127.0.0.1@{port}
    interface: 127.0.0.1@{tls}
    tls-port: {tls}
    tls-service-key: "{key}"
    tls-service-pem: "{cert}"
    port: {port}
    do-ip6: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{dir}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    num-threads: 1
    so-reuseport: no
    harden-dnssec-stripped: no
    module-config: "iterator"
    incoming-num-tcp: 64
{zone}""".format(port=self.port, tls=self.tls_port, key=self.key,
                 cert=self.cert, dir=self.dir, zone=self.zone)

    @defer.inlineCallbacks
    def _wait(self):
        """Poll until unbound answers (or fail with its log)."""
        deadline = reactor.seconds() + 20
        wire = make_query("www.example.test.", 1, msgid=4242)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("unbound exited: %s" % self.log())
            try:
                yield exchange(reactor, "127.0.0.1", self.port, wire, "udp",
                               0.5)
                return
            except Exception as e:
                if reactor.seconds() > deadline:
                    raise RuntimeError("unbound does not answer: %s"
                                       % self.log()) from e
                d = defer.Deferred()
                reactor.callLater(0.05, d.callback, None)
                yield d

    def log(self):
        try:
            with open(os.path.join(self.dir, "unbound.log")) as fh:
                return fh.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def anchor(key, zone="example.org."):
    """The DNSKEY of ``key`` as presentation text, owned by ``zone``."""
    return "%s DNSKEY %d 3 %d %s" % (
        zone, key.flags, key.algorithm,
        base64.b64encode(key.public).decode())


class ValidatingUnbound(Unbound):
    """unbound with its validator on, our key as the zone's trust anchor
    and the zone sent to our server."""

    def __init__(self, testcase, key, port, zone="example.org."):
        extra = """\
    val-log-level: 2
    qname-minimisation: no
    trust-anchor: "{anchor}"
stub-zone:
    name: "{zone}"
    stub-addr: 127.0.0.1@{port}
""".format(anchor=anchor(key, zone), zone=zone, port=port)
        Unbound.__init__(self, testcase, ZONE + extra)

    def _config(self):
        text = Unbound._config(self)
        text = text.replace('module-config: "iterator"',
                            'module-config: "validator iterator"')
        return text.replace("harden-dnssec-stripped: no",
                            "harden-dnssec-stripped: yes")
