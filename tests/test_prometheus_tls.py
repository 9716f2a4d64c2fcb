"""prometheus { tls FILE }: /metrics over TLS from the exporter toolkit's
web configuration file, fetched by a real TLS client (Python's ssl and
http.client), with client certificates, allowed SANs, basic auth,
headers, a rate limit and a reload that switches the port to TLS."""

import base64
import http.client
import os
import ssl

from twisted.internet import defer, threads
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import tlsutil, util

COREFILE = """.:0 {
    bind 127.0.0.1
    whoami
    prometheus 127.0.0.1:0 {
        tls %s
    }
}
"""


def fetch(port, ctx=None, auth=None, path="/metrics"):
    """GET ``path`` over HTTPS (``ctx``) or plain HTTP: (status, headers,
    body); run in a thread (the server answers from the test's reactor)."""
    def get():
        if ctx is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        else:
            # The test certificate names 127.0.0.1 as well.
            conn = http.client.HTTPSConnection("127.0.0.1", port,
                                               timeout=5, context=ctx)
        headers = {}
        if auth is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(
                ("%s:%s" % auth).encode()).decode()
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read().decode()
        finally:
            conn.close()
    return threads.deferToThread(get)


class TLSMetricsTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)

    def web(self, text, name="web.yml"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as fh:
            fh.write(text)
        return path

    @defer.inlineCallbacks
    def start(self, text, name="web.yml"):
        app = yield util.start(self, COREFILE % self.web(text, name))
        return app, app.http_port()

    def ctx(self, cert=None, key=None):
        return tlsutil.client_context(self.ca, cert=cert, key=key)

    @defer.inlineCallbacks
    def test_tls_without_client_certificate(self):
        # Relative names are read from the file's directory.
        app, port = yield self.start(
            "tls_server_config:\n  cert_file: cert.pem\n"
            "  key_file: key.pem\n"
            "  client_auth_type: VerifyClientCertIfGiven\n"
            "  client_ca_file: ca.pem\n")
        status, headers, body = yield fetch(port, self.ctx())
        self.assertEqual(status, 200)
        self.assertIn("coredns_plugin_enabled", body)
        # The small server of service/httpd.py, over TLS.
        self.assertIsNone(next(iter(app.http.values())).factory.site)
        self.assertNotIn("Server", headers)
        # A client that does not speak TLS gets no metrics.
        yield self.assertFailure(fetch(port), Exception)
        # One that does not trust the CA fails the handshake.
        other_ca = tlsutil.certs(self)[1]
        yield self.assertFailure(
            fetch(port, tlsutil.client_context(other_ca)), ssl.SSLError)

    @defer.inlineCallbacks
    def start_sans(self, san):
        _, port = yield self.start(
            "tls_server_config:\n  cert_file: cert.pem\n"
            "  key_file: key.pem\n"
            "  client_auth_type: RequireAndVerifyClientCert\n"
            "  client_ca_file: ca.pem\n"
            "  client_allowed_sans: [%s]\n" % san, name=san + ".yml")
        return port

    @defer.inlineCallbacks
    def test_require_and_verify_with_allowed_sans(self):
        port = yield self.start_sans(tlsutil.HOSTNAME)
        status, _, _ = yield fetch(port, self.ctx(self.cert, self.key))
        self.assertEqual(status, 200)
        # Without a certificate, or with one of another CA: refused.
        yield self.assertFailure(fetch(port, self.ctx()), Exception)
        _, _, cert, key = tlsutil.certs(self)
        yield self.assertFailure(fetch(port, self.ctx(cert, key)),
                                 Exception)
        # The same good certificate where its names are not allowed.
        port = yield self.start_sans("other.example.test")
        yield self.assertFailure(fetch(port, self.ctx(self.cert, self.key)),
                                 Exception)
        # An IP address SAN matches as Go prints it.
        port = yield self.start_sans("127.0.0.1")
        status, _, _ = yield fetch(port, self.ctx(self.cert, self.key))
        self.assertEqual(status, 200)

    @defer.inlineCallbacks
    def test_inline_pem(self):
        def indented(path):
            with open(path) as fh:
                return "".join("    " + line for line in fh)
        _, port = yield self.start(
            "tls_server_config:\n  cert: |\n%s  key: |\n%s"
            "  max_version: TLS12\n"
            % (indented(self.cert), indented(self.key)))
        ctx = self.ctx()
        status, _, _ = yield fetch(port, ctx)
        self.assertEqual(status, 200)
        ctx = self.ctx()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        yield self.assertFailure(fetch(port, ctx), ssl.SSLError)

    @defer.inlineCallbacks
    def test_empty_file_is_plain_http(self):
        _, port = yield self.start("")
        status, _, body = yield fetch(port)
        self.assertEqual(status, 200)
        self.assertIn("coredns_plugin_enabled", body)

    @defer.inlineCallbacks
    def test_basic_auth_headers_and_rate_limit(self):
        try:
            import bcrypt
        except ImportError:
            if os.environ.get("CI") == "true":
                raise
            raise unittest.SkipTest("bcrypt is not installed") from None
        hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
        _, port = yield self.start(
            "tls_server_config:\n  cert_file: cert.pem\n"
            "  key_file: key.pem\n"
            "http_server_config:\n  headers:\n"
            "    X-Frame-Options: deny\n"
            "basic_auth_users:\n  alice: %s\n"
            "rate_limit:\n  interval: 1h\n  burst: 3\n" % hashed)
        status, headers, _ = yield fetch(port, self.ctx())
        self.assertEqual(status, 401)
        # The guard is a twisted.web resource: twisted.web serves it.
        self.assertIn("TwistedWeb", headers["Server"])
        self.assertEqual(headers["WWW-Authenticate"], "Basic")
        self.assertEqual(headers["X-Frame-Options"], "deny")
        status, _, _ = yield fetch(port, self.ctx(), auth=("alice", "no"))
        self.assertEqual(status, 401)
        status, _, body = yield fetch(port, self.ctx(),
                                      auth=("alice", "s3cret"))
        self.assertEqual(status, 200)
        self.assertIn("coredns_", body)
        # Three requests made the burst: the next waits an hour.
        status, _, _ = yield fetch(port, self.ctx(),
                                   auth=("alice", "s3cret"))
        self.assertEqual(status, 429)

    @defer.inlineCallbacks
    def test_reload_switches_the_port_to_tls(self):
        app = yield util.start(self, COREFILE.replace(
            "    prometheus 127.0.0.1:0 {\n        tls %s\n    }\n",
            "    prometheus 127.0.0.1:0\n"))
        port = app.http_port()
        status, _, _ = yield fetch(port)
        self.assertEqual(status, 200)
        util.rewrite(app.path, COREFILE % self.web(
            "tls_server_config:\n  cert_file: cert.pem\n"
            "  key_file: key.pem\n"))
        self.assertTrue(app.reload())
        self.assertEqual(app.http_port(), port)
        status, _, _ = yield fetch(port, self.ctx())
        self.assertEqual(status, 200)
        yield self.assertFailure(fetch(port), Exception)


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)

    def error(self, web=None, opts=None):
        if opts is None:
            path = os.path.join(self.dir, "web.yml")
            with open(path, "w") as fh:
                fh.write(web)
            opts = "tls %s" % path
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    prometheus 127.0.0.1:0 {\n"
                        "        %s\n    }\n}\n" % opts)
        return str(cm.exception)

    def test_errors(self):
        cert = "tls_server_config:\n  cert_file: cert.pem\n"
        for web, msg in [
                ("junk", "cannot unmarshal str into web.Config"),
                ("tls_server_config:\n  certfile: x\n",
                 "field certfile not found in type web.TLSConfig"),
                ("tls_server_config:\n  key_file: key.pem\n",
                 "missing one of cert or cert_file"),
                (cert, "missing one of key or key_file"),
                (cert + "  key_file: nothere.pem\n",
                 "failed to read key_file (%s/nothere.pem)" % self.dir),
                (cert + "  key_file: ca.pem\n",
                 "failed to load X509KeyPair"),
                (cert + "  key_file: key.pem\n  client_ca_file: ca.pem\n",
                 "client CA's have been configured without a Client Auth "
                 "Policy"),
                (cert + "  key_file: key.pem\n  client_auth_type: Some\n",
                 "invalid ClientAuth: Some"),
                (cert + "  key_file: key.pem\n  client_allowed_sans: [a]\n",
                 "client_allowed_sans requires client_auth_type"),
                (cert + "  key_file: key.pem\n  min_version: TLS14\n",
                 "unknown TLS version: TLS14"),
                ("http_server_config:\n  headers:\n    Server: me\n",
                 'HTTP header "Server" can not be configured'),
                ("basic_auth_users:\n  alice: plain\n",
                 "the password of alice is not a bcrypt hash")]:
            msg_got = self.error(web)
            self.assertIn("Corefile:3 - Error during parsing: "
                          "plugin/prometheus: ", msg_got)
            self.assertIn(msg, msg_got)

    def test_option_errors(self):
        self.assertIn("open %s/none.yml: no such file or directory"
                      % self.dir, self.error(opts="tls %s/none.yml"
                                             % self.dir))
        self.assertIn("Wrong argument count", self.error(opts="tls"))
        path = os.path.join(self.dir, "empty.yml")
        open(path, "w").close()
        self.assertIn("tls block already specified", self.error(
            opts="tls %s\n        tls %s" % (path, path)))

    def test_two_files_for_one_address(self):
        paths = []
        for name in ("a.yml", "b.yml"):
            paths.append(os.path.join(self.dir, name))
            with open(paths[-1], "w") as fh:
                fh.write("tls_server_config:\n  cert_file: cert.pem\n"
                         "  key_file: key.pem\n")
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, "".join(
                "%s:0 {\n    prometheus 127.0.0.1:9 {\n        tls %s\n"
                "    }\n}\n" % (zone, p)
                for zone, p in (("a.", paths[0]), ("b.", paths[1]))))
        self.assertIn("127.0.0.1:9 already served with the TLS of %s"
                      % paths[0], str(cm.exception))
