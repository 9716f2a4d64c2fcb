"""kubernetes: the watches' own HTTP client (http.client, without the
kubernetes package) — kubeconfig tokens, token files, CA data, client
certificates, in-cluster service accounts, and the fallback to the
kubernetes client for credential plugins."""

import base64
import os
import socket
import ssl
import tempfile

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.engines.kubernetes import client as kc
from tests.support import cases, tlsutil, util
from tests.support import k8s_apiserver as k8s
from tests.support.cases import Case
from tests.support.k8s_cluster import cluster

SVC1 = Case("svc1.testns.svc.cluster.local.", aa=True, answer=[
    "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"])

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster:
    server: %(server)s
    %(ca)s
contexts:
- name: c
  context:
    cluster: c
    user: u
users:
- name: u
  user:
    %(user)s
"""


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


def tls_api(testcase):
    """An https test API server with the test cluster, stopped at
    cleanup: (directory of its certificates, CA file, server)."""
    d, ca, cert, key = tlsutil.certs(testcase)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    api = k8s.APIServer().start(tls=ctx)
    testcase.addCleanup(api.stop)
    cluster(api)
    return d, ca, api


class KubeconfigTest(unittest.TestCase):
    """Against an https test API server through a kubeconfig file."""

    def setUp(self):
        self.dir, self.ca, self.api = tls_api(self)

    @defer.inlineCallbacks
    def serve(self, ca, user):
        path = os.path.join(self.dir, "kubeconfig")
        with open(path, "w") as f:
            f.write(KUBECONFIG % dict(server=self.api.url, ca=ca,
                                      user=user))
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        kubeconfig %s\n"
            "    }\n}\n") % path)
        yield cases.run(self, app.port(), [SVC1])

    @defer.inlineCallbacks
    def test_token_and_ca_data(self):
        yield self.serve("certificate-authority-data: " + b64(self.ca),
                         "token: abc")
        self.assertTrue(self.api.authorizations)
        self.assertEqual(set(self.api.authorizations), {"Bearer abc"})
        self.assertTrue(all(a.startswith("corednstw/")
                            for a in self.api.user_agents))

    @defer.inlineCallbacks
    def test_token_file_and_relative_ca(self):
        with open(os.path.join(self.dir, "tok"), "w") as f:
            f.write("from-file\n")
        yield self.serve("certificate-authority: " +
                         os.path.basename(self.ca), "tokenFile: tok")
        self.assertEqual(set(self.api.authorizations), {"Bearer from-file"})

    @defer.inlineCallbacks
    def test_untrusted_server_is_not_synced(self):
        """A server whose certificate the CA does not sign is never
        trusted: the plugin keeps answering SERVFAIL (not synced)."""
        other = tlsutil.certs(self)[1]
        path = os.path.join(self.dir, "kubeconfig")
        with open(path, "w") as f:
            f.write(KUBECONFIG % dict(server=self.api.url, user="token: x",
                                      ca="certificate-authority: " + other))
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        kubeconfig %s\n"
            "    }\n}\n") % path)
        yield cases.run(self, app.port(), [
            Case("svc1.testns.svc.cluster.local.", rcode="SERVFAIL",
                 ns=["cluster.local. 5 IN SOA ns.dns.cluster.local. "
                     "hostmaster.cluster.local. 0 7200 1800 86400 "
                     "5"])])
        self.assertEqual(self.api.authorizations, [])


class BuildTest(unittest.TestCase):
    """Which configurations the client serves itself."""

    def kubeconfig(self, user, server="https://127.0.0.1:1", ca=""):
        d = tlsutil.certs(self)[0]
        path = os.path.join(d, "kubeconfig")
        with open(path, "w") as f:
            f.write(KUBECONFIG % dict(server=server, ca=ca, user=user))
        return path

    def test_credential_plugins_fall_back(self):
        for user in ("exec: {command: x}", "auth-provider: {name: gcp}",
                     "username: a"):
            path = self.kubeconfig(user)
            self.assertRaises(kc.Unsupported, kc.from_kubeconfig, path)

    def test_missing_context(self):
        path = self.kubeconfig("token: a")
        self.assertRaises(kc.Unsupported, kc.from_kubeconfig, path, "nope")

    def test_endpoint(self):
        c = kc.build({"endpoint": "http://127.0.0.1:8080/"})
        self.assertEqual(c.host, "http://127.0.0.1:8080")
        self.assertIsNone(c.token)

    def test_client_certificate_data_leaves_no_file(self):
        d, ca, cert, key = tlsutil.certs(self)
        before = set(os.listdir(tempfile.gettempdir()))
        path = self.kubeconfig(
            "client-certificate-data: %s\n    client-key-data: %s"
            % (b64(cert), b64(key)), ca="certificate-authority: " + ca)
        c = kc.from_kubeconfig(path)
        self.assertTrue(c.host.startswith("https://"))
        left = {n for n in set(os.listdir(tempfile.gettempdir())) - before
                if n.startswith("corednstw-k8s-")}
        self.assertEqual(left, set())

    def test_in_cluster(self):
        d, ca = tlsutil.certs(self)[:2]
        with open(os.path.join(d, "token"), "w") as f:
            f.write("t1\n")
        os.rename(ca, os.path.join(d, "ca.crt"))
        self.assertRaises(kc.Unsupported, kc.in_cluster, {}, d)
        c = kc.in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1",
                           "KUBERNETES_SERVICE_PORT": "443"}, d)
        self.assertEqual(c.host, "https://[fd00::1]:443")
        self.assertEqual(c.token.get(), "t1")

    def test_token_file_read_again(self):
        """A rotated service-account token is picked up after
        ``TOKEN_REREAD`` seconds, not on every request."""
        d = tlsutil.certs(self)[0]
        path = os.path.join(d, "token")
        now = [100.0]
        tok = kc.Token(path=path, clock=lambda: now[0])
        for text in ("one", "two"):
            with open(path, "w") as f:
                f.write(text)
            if text == "one":
                self.assertEqual(tok.get(), "one")
        self.assertEqual(tok.get(), "one")
        now[0] += kc.TOKEN_REREAD
        self.assertEqual(tok.get(), "two")


class ConnectionTest(unittest.TestCase):
    """The client's own HTTP: kept-alive connections, gzip bodies."""

    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        cluster(self.api)
        self.c = kc.build({"endpoint": self.api.url})
        self.addCleanup(self.close)

    def close(self):
        for conn in self.c.idle:
            conn.close()

    def get(self, path="/api/v1/namespaces"):
        return self.c.get(path, [("limit", "500")], (5, 5))

    def read(self):
        """One GET read to its end; the connection it leaves idle."""
        resp = self.get()
        self.assertEqual(resp.status, 200)
        self.assertIn(b'"NamespaceList"', resp.data)
        resp.release_conn()
        self.assertEqual(len(self.c.idle), 1)
        return self.c.idle[0]

    def test_read_to_the_end_is_kept(self):
        conns = {self.read() for _ in range(3)}
        self.assertEqual(len(conns), 1)
        self.assertEqual(self.api.connections, 1)

    def test_not_read_to_the_end_is_closed(self):
        resp = self.get()
        next(resp.stream(16))
        resp.release_conn()
        self.assertEqual(self.c.idle, [])
        self.read()
        self.assertEqual(self.api.connections, 2)

    def test_failed_request_is_not_reused(self):
        conn = self.read()
        self.api.list_drop = 1      # the server hangs up on the next
        self.assertRaises(OSError, self.get)
        self.assertIsNone(conn.sock)
        self.read()
        self.assertEqual(self.api.connections, 2)

    def test_idle_connection_gone_is_not_reused(self):
        conn = self.read()
        # What a connection the server closed while idle looks like:
        # readable, at its end.
        conn.sock.shutdown(socket.SHUT_RD)
        self.assertIsNot(self.read(), conn)
        self.assertIsNone(conn.sock)
        self.assertEqual(self.api.connections, 2)

    def test_gzip(self):
        self.api.gzip = True
        resp = self.get("/api/v1/services")
        chunks = list(resp.stream(64))
        self.assertIn(b'"ServiceList"', b"".join(chunks))
        self.assertIn(b'"svc1"', b"".join(chunks))
        resp.release_conn()
        self.assertEqual(len(self.c.idle), 1)

    def test_gzip_with_zlib_and_isal(self):
        """The same body inflated by zlib (no isal) and by ISA-L."""
        import zlib
        self.api.gzip = True
        got = []
        for mod in (zlib, None):
            self.patch(kc, "_ZLIB", [mod] if mod else [])
            resp = self.get("/api/v1/services")
            got.append(b"".join(resp.stream(64)))
            resp.release_conn()
            self.assertIs(kc._ZLIB[0], mod or kc._ZLIB[0])
        self.assertEqual(got[0], got[1])
        self.assertIn(b'"svc1"', got[0])
        try:
            from isal import isal_zlib
        except ImportError:
            return
        self.assertIs(kc._ZLIB[0], isal_zlib)

    @defer.inlineCallbacks
    def test_gzip_lists_served(self):
        self.api.gzip = True
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "    }\n}\n") % self.api.url)
        yield cases.run(self, app.port(), [SVC1])


class ServerNameTest(unittest.TestCase):
    """The name ssl checks the certificate against is handed over as
    ASCII bytes (no idna codec at start-up), and still checked."""

    def setUp(self):
        _, self.ca, self.api = tls_api(self)
        self.port = int(self.api.url.rsplit(":", 1)[1])

    def client(self, host):
        c = kc.build({"endpoint": "https://%s:%d" % (host, self.port),
                      "tls": (None, None, self.ca)})
        self.addCleanup(lambda: [conn.close() for conn in c.idle])
        return c

    def test_name_given_as_bytes(self):
        seen = []

        class Ctx:
            verify_mode = ssl.CERT_NONE
            check_hostname = False

            @staticmethod
            def wrap_socket(sock, server_hostname):
                seen.append(server_hostname)
                sock.close()
                raise ssl.SSLError("stop here")

        conn = kc._HTTPSConnection("localhost", self.port, context=Ctx())
        self.assertRaises(ssl.SSLError, conn.connect)
        self.assertEqual(seen, [b"localhost"])

    def test_certificate_still_checked_against_the_name(self):
        """The test certificate names 127.0.0.1 and not localhost: asked
        by the address it is served, asked as localhost (the same
        server) it is refused."""
        resp = self.client("127.0.0.1").get("/api/v1/namespaces", [],
                                             (5, 5))
        self.assertEqual(resp.status, 200)
        resp.release_conn()
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.client("localhost").get("/api/v1/namespaces", [], (5, 5))
