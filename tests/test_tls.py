"""The tls directive and DNS over TLS (RFC 7858): real clients (dnspython,
kdig) against a certificate of a CA made for the test."""

import os
import socket
import ssl
import struct

import dns.message
import dns.rcode
from twisted.internet import defer, threads
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from tests.support import tlsutil, util

WHOAMI = """tls://.:0 {
    bind 127.0.0.1
    tls %(cert)s %(key)s %(ca)s%(opts)s
    whoami
    log
    prometheus 127.0.0.1:0
    timeouts {
        read 1s
        idle 1s
    }
}
"""


def corefile_text(cert, key, ca="", opts=""):
    return WHOAMI % {"cert": cert, "key": key, "ca": ca, "opts": opts}


class SetupTest(unittest.TestCase):
    """Errors of the tls directive name the Corefile line."""

    def setUp(self):
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_missing_certificate(self):
        msg = self.error("tls://.:0 {\n    whoami\n"
                         "    tls nothere.pem %s\n}\n" % self.key)
        self.assertIn("Corefile:3 - Error during parsing: plugin/tls: "
                      "could not load TLS cert: open nothere.pem: no such "
                      "file or directory", msg)

    def test_key_of_another_certificate(self):
        _, _, _, other = tlsutil.certs(self)
        msg = self.error("tls://.:0 {\n    tls %s %s\n}\n"
                         % (self.cert, other))
        self.assertIn("Corefile:2 - Error during parsing: plugin/tls: "
                      "could not load TLS cert: %s" % other, msg)

    def test_not_a_certificate(self):
        msg = self.error("tls://.:0 {\n    tls %s %s\n}\n"
                         % (self.key, self.key))
        self.assertIn("Corefile:2 - Error during parsing: plugin/tls: "
                      "could not load TLS cert: %s" % self.key, msg)

    def test_bad_ca(self):
        msg = self.error("tls://.:0 {\n    tls %s %s %s\n}\n"
                         % (self.cert, self.key, self.key))
        self.assertIn("plugin/tls: error reading %s" % self.key, msg)

    def test_argument_count(self):
        msg = self.error("tls://.:0 {\n    tls %s\n}\n" % self.cert)
        self.assertIn("Corefile:2 - Error during parsing: plugin/tls: Wrong "
                      "argument count", msg)
        msg = self.error("tls://.:0 {\n    tls a b c d\n}\n")
        self.assertIn("plugin/tls: Wrong argument count", msg)

    def test_unknown_client_auth(self):
        msg = self.error("tls://.:0 {\n    tls %s %s {\n"
                         "        client_auth sometimes\n    }\n}\n"
                         % (self.cert, self.key))
        self.assertIn("Corefile:3 - Error during parsing: plugin/tls: "
                      "unknown authentication type 'sometimes'", msg)

    def test_unknown_option(self):
        msg = self.error("tls://.:0 {\n    tls %s %s {\n"
                         "        ciphers all\n    }\n}\n"
                         % (self.cert, self.key))
        self.assertIn("plugin/tls: unknown option 'ciphers'", msg)

    def test_twice(self):
        msg = self.error("tls://.:0 {\n    tls %s %s\n    tls %s %s\n}\n"
                         % (self.cert, self.key, self.cert, self.key))
        self.assertIn("Corefile:3 - Error during parsing: plugin/tls: TLS "
                      "already configured for this server instance", msg)

    def test_files_relative_to_root(self):
        d = util.Direct(self, "tls://.:0 {\n    root %s\n"
                              "    tls cert.pem key.pem ca.pem\n"
                              "    whoami\n}\n" % self.dir)
        [block] = d.app.config.blocks
        self.assertEqual(block.settings["tls"].cert,
                         os.path.join(self.dir, "cert.pem"))


class DoTTest(unittest.TestCase):

    opts = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, corefile_text(
            self.cert, self.key, self.ca, self.opts))
        self.port = self.app.port(transport="tls")
        self.stream = self.app.listeners[("tls", "127.0.0.1", "0")].stream

    def ctx(self, **kw):
        return tlsutil.client_context(self.ca, **kw)

    @defer.inlineCallbacks
    def test_dnspython_query(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.dot(self.port, q, self.ctx())
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(
            util.rrs(m, "additional")[0].split()[:4],
            ["_tcp.example.org.", "0", "IN", "SRV"])
        self.assertIn("127.0.0.1", util.rrs(m, "additional")[1])

    @defer.inlineCallbacks
    def test_log_and_metrics_see_tcp(self):
        q = dns.message.make_query("example.org.", "A")
        yield tlsutil.dot(self.port, q, self.ctx())
        yield util.wait_for(lambda: any(
            '"A IN example.org. tcp ' in x for x in self.log.lines))
        label = "tls://127.0.0.1:0"
        self.assertGreaterEqual(metrics.REQUESTS.get(
            (label, ".", "", "tcp", "1", "A")), 1)

    @defer.inlineCallbacks
    def test_kdig(self):
        tlsutil.require_kdig(self)
        out, code = yield tlsutil.kdig(
            "@127.0.0.1", "-p", str(self.port), "+tls-ca=%s" % self.ca,
            "+tls-hostname=%s" % tlsutil.HOSTNAME, "example.org", "AAAA")
        self.assertEqual(code, 0, out)
        self.assertIn(";; TLS session (TLS1.3)", out)
        self.assertIn("status: NOERROR", out)
        self.assertIn("_tcp.example.org.", out)

    @defer.inlineCallbacks
    def test_tls12(self):
        version = yield threads.deferToThread(
            self._version, ssl.TLSVersion.TLSv1_2)
        self.assertEqual(version, "TLSv1.2")

    @defer.inlineCallbacks
    def test_tls11_refused(self):
        yield self.assertFailure(threads.deferToThread(
            self._version, ssl.TLSVersion.TLSv1_1), ssl.SSLError)

    def _version(self, highest):
        ctx = self.ctx()
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = highest
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        with self._connect(ctx) as s:
            return s.version()

    @defer.inlineCallbacks
    def test_wrong_name_fails_verification(self):
        q = dns.message.make_query("example.org.", "A")
        yield self.assertFailure(
            tlsutil.dot(self.port, q, self.ctx(), hostname="wrong.example"),
            ssl.SSLCertVerificationError)

    @defer.inlineCallbacks
    def test_unknown_ca_fails_verification(self):
        _, other_ca, _, _ = tlsutil.certs(self)
        q = dns.message.make_query("example.org.", "A")
        ctx = tlsutil.client_context(other_ca)
        yield self.assertFailure(tlsutil.dot(self.port, q, ctx),
                                 ssl.SSLCertVerificationError)

    @defer.inlineCallbacks
    def test_pipelined_queries(self):
        ids = [11, 12, 13]
        replies = yield threads.deferToThread(self._pipeline, ids)
        self.assertEqual(sorted(m.id for m in replies), ids)

    def _pipeline(self, ids):
        data = b""
        for i in ids:
            q = dns.message.make_query("n%d.example." % i, "A")
            q.id = i
            w = q.to_wire()
            data += struct.pack("!H", len(w)) + w
        with self._connect() as s:
            s.sendall(data)
            return [dns.message.from_wire(_read_frame(s)) for _ in ids]

    def _connect(self, ctx=None):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        ctx = ctx or self.ctx()
        return ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME)

    @defer.inlineCallbacks
    def test_silent_client_closed_at_timeout(self):
        # TLS is set up, then no query comes: the read timeout ends it and
        # the server keeps nothing of the connection.
        closed = yield threads.deferToThread(self._silent)
        self.assertEqual(closed, b"")
        yield util.wait_for(lambda: not self.stream.connections)

    def _silent(self):
        with self._connect() as s:
            s.settimeout(10)
            try:
                return s.recv(10)
            except (ssl.SSLError, ConnectionError):
                return b""

    @defer.inlineCallbacks
    def test_silent_tcp_client_closed(self):
        # Not even a TLS handshake.
        closed = yield threads.deferToThread(self._silent_tcp)
        self.assertEqual(closed, b"")
        yield util.wait_for(lambda: not self.stream.connections)

    def _silent_tcp(self):
        with socket.create_connection(("127.0.0.1", self.port),
                                      timeout=10) as s:
            try:
                return s.recv(10)
            except ConnectionError:
                return b""

    @defer.inlineCallbacks
    def test_session_resumption(self):
        reused = yield threads.deferToThread(self._resume)
        self.assertTrue(reused)

    def _resume(self):
        ctx = self.ctx()
        q = dns.message.make_query("example.org.", "A").to_wire()
        frame = struct.pack("!H", len(q)) + q
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        with ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME) as s:
            s.sendall(frame)
            _read_frame(s)      # TLS 1.3 tickets come after the handshake
            session = s.session
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        with ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME,
                             session=session) as s:
            s.sendall(frame)
            _read_frame(s)
            return s.session_reused

    @defer.inlineCallbacks
    def test_reload_reads_the_certificate_again(self):
        d, ca, cert, key = tlsutil.certs(self, names=("new.example.test",))
        util.rewrite(self.app.path, corefile_text(cert, key, ca))
        self.assertTrue(self.app.reload())
        self.assertEqual(self.app.port(transport="tls"), self.port)
        q = dns.message.make_query("example.org.", "A")
        ctx = tlsutil.client_context(ca)
        m = yield tlsutil.dot(self.port, q, ctx,
                              hostname="new.example.test")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        yield self.assertFailure(tlsutil.dot(self.port, q, self.ctx()),
                                 ssl.SSLCertVerificationError)

    @defer.inlineCallbacks
    def test_reload_with_a_missing_certificate_keeps_the_old(self):
        util.rewrite(self.app.path, corefile_text(
            "/nonexistent/cert.pem", self.key))
        self.assertFalse(self.app.reload())
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.dot(self.port, q, self.ctx())
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


class MaxQueriesTest(unittest.TestCase):
    """The timeouts plugin's maxtcpqueries applies to DoT connections."""

    ctx = DoTTest.ctx
    _connect = DoTTest._connect

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        text = corefile_text(self.cert, self.key, self.ca).replace(
            "idle 1s", "idle 1s\n        maxtcpqueries 2")
        self.app = yield util.start(self, text)
        self.port = self.app.port(transport="tls")
        self.stream = self.app.listeners[("tls", "127.0.0.1", "0")].stream

    @defer.inlineCallbacks
    def test_closed_after_the_limit(self):
        got = yield threads.deferToThread(self._three)
        self.assertEqual(got, (2, b""))

    def _three(self):
        frames = b""
        for i in range(3):
            q = dns.message.make_query("n%d.example." % i, "A").to_wire()
            frames += struct.pack("!H", len(q)) + q
        with self._connect() as s:
            s.sendall(frames)
            n = 0
            for _ in range(2):
                _read_frame(s)
                n += 1
            try:
                rest = s.recv(10)
            except (ssl.SSLError, ConnectionError):
                rest = b""
            return n, rest


class ClientAuthTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, corefile_text(
            self.cert, self.key, self.ca,
            " {\n        client_auth require_and_verify\n    }"))
        self.port = self.app.port(transport="tls")

    @defer.inlineCallbacks
    def test_with_a_certificate_of_the_ca(self):
        ctx = tlsutil.client_context(self.ca, cert=self.cert, key=self.key)
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.dot(self.port, q, ctx)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_without_a_certificate(self):
        ctx = tlsutil.client_context(self.ca)
        q = dns.message.make_query("example.org.", "A")
        yield self.assertFailure(tlsutil.dot(self.port, q, ctx), Exception)

    @defer.inlineCallbacks
    def test_with_a_certificate_of_another_ca(self):
        _, _, cert, key = tlsutil.certs(self)
        ctx = tlsutil.client_context(self.ca, cert=cert, key=key)
        q = dns.message.make_query("example.org.", "A")
        yield self.assertFailure(tlsutil.dot(self.port, q, ctx), Exception)


class KeyLogTest(unittest.TestCase):
    """``keylog FILE``: the server writes the secrets a real client
    writes in its own key log (Python's ssl, SSLKEYLOGFILE format)."""

    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)

    def secrets(self, path):
        """The secret lines of a key log (comments left out)."""
        with open(path) as fh:
            return {line.strip() for line in fh
                    if line.strip() and not line.startswith("#")}

    @defer.inlineCallbacks
    def check(self, version):
        path = os.path.join(self.dir, "server-keys.log")
        app = yield util.start(self, corefile_text(
            self.cert, self.key, self.ca,
            " {\n        keylog server-keys.log\n    }\n    root %s"
            % self.dir))
        self.assertIn('[WARNING] plugin/tls: Writing TLS Key Log to "%s"'
                      % path, self.log.text())
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        ctx = tlsutil.client_context(self.ca)
        ctx.maximum_version = version
        client_log = os.path.join(self.dir, "client-keys.log")
        ctx.keylog_filename = client_log
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.dot(app.port(transport="tls"), q, ctx)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        theirs = self.secrets(client_log)
        self.assertTrue(theirs)
        yield util.wait_for(lambda: self.secrets(path) >= theirs)
        return theirs

    @defer.inlineCallbacks
    def test_tls13_secrets(self):
        theirs = yield self.check(ssl.TLSVersion.TLSv1_3)
        self.assertEqual({line.split()[0] for line in theirs}, {
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0",
            "EXPORTER_SECRET"})

    @defer.inlineCallbacks
    def test_tls12_master_secret(self):
        theirs = yield self.check(ssl.TLSVersion.TLSv1_2)
        self.assertEqual({line.split()[0] for line in theirs},
                         {"CLIENT_RANDOM"})

    def test_appends_and_errors(self):
        path = os.path.join(self.dir, "keys.log")
        with open(path, "w") as fh:
            fh.write("kept\n")
        util.Direct(self, "tls://.:0 {\n    tls %s %s {\n        keylog "
                    "%s\n    }\n    whoami\n}\n"
                    % (self.cert, self.key, path))
        with open(path) as fh:
            self.assertEqual(fh.read(), "kept\n")
        for opts, msg in [
                ("keylog", "Corefile:3 - Error during parsing: plugin/tls: "
                 "Wrong argument count"),
                ("keylog a b", "plugin/tls: Wrong argument count"),
                ("keylog %s/none/keys.log" % self.dir,
                 'plugin/tls: unable to write TLS Key Log to "%s/none/'
                 'keys.log": No such file or directory' % self.dir)]:
            with self.assertRaises(CorefileError) as cm:
                util.Direct(self, "tls://.:0 {\n    tls %s %s {\n        "
                            "%s\n    }\n}\n" % (self.cert, self.key, opts))
            self.assertIn(msg, str(cm.exception))


def _read_frame(s):
    n = struct.unpack("!H", _read_exactly(s, 2))[0]
    return _read_exactly(s, n)


def _read_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data
