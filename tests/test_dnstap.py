"""dnstap: frames decoded by a test-side Frame Streams collector; the wire
bytes in them are compared with what the client sent and received."""

import os
import shutil
import socket
import tempfile

from twisted.internet import defer, reactor
from twisted.trial import unittest
from zope.interface import implementer

from corednstw.core.errors import CorefileError
from corednstw.core.interfaces import IForwarderTap, IMetadataProvider
from corednstw.core.plugin import Plugin
from corednstw.plugins import dnstap
from tests.support import framestream as fs
from tests.support import util

M = fs.Message


def _tmpdir(testcase):
    d = tempfile.mkdtemp(prefix="dnstap-")
    testcase.addCleanup(shutil.rmtree, d, True)
    return d


def _listen_unix(testcase, path):
    col = fs.Collector()
    port = reactor.listenUNIX(path, col)
    testcase.addCleanup(port.stopListening)
    return col


class EncodingTest(unittest.TestCase):
    """The hand encoder against the protobuf library's decoder."""

    def test_client_response_all_fields(self):
        msg = dnstap.encode_message(
            dnstap.CLIENT_RESPONSE, "tcp", ("10.240.0.1", 40212), None,
            1700000000123456789, 1700000001000000042, b"\x01\x02",
            b"\x03" * 300)
        d = fs.decode(dnstap.encode_dnstap(msg, b"host", b"CoreDNS-1.14.0",
                                           b"x"))
        self.assertEqual(d.type, fs.Dnstap.MESSAGE)
        self.assertEqual((d.identity, d.version, d.extra),
                         (b"host", b"CoreDNS-1.14.0", b"x"))
        m = d.message
        self.assertEqual(m.type, M.CLIENT_RESPONSE)
        self.assertEqual(m.socket_family, 1)
        self.assertEqual(m.socket_protocol, 2)
        self.assertEqual(m.query_address, bytes([10, 240, 0, 1]))
        self.assertEqual(m.query_port, 40212)
        self.assertFalse(m.HasField("response_address"))
        self.assertEqual((m.query_time_sec, m.query_time_nsec),
                         (1700000000, 123456789))
        self.assertEqual((m.response_time_sec, m.response_time_nsec),
                         (1700000001, 42))
        self.assertEqual(m.query_message, b"\x01\x02")
        self.assertEqual(m.response_message, b"\x03" * 300)

    def test_forwarder_ipv6_and_mapped(self):
        msg = dnstap.encode_message(
            dnstap.FORWARDER_QUERY, "udp", ("::ffff:192.0.2.1", 5353),
            ("2001:db8::53", 53), 5)
        m = fs.decode(dnstap.encode_dnstap(msg)).message
        self.assertEqual(m.type, M.FORWARDER_QUERY)
        self.assertEqual(m.socket_family, 2)    # the response end's, last
        self.assertEqual(m.socket_protocol, 1)
        self.assertEqual(m.query_address, bytes([192, 0, 2, 1]))
        self.assertEqual(m.response_address,
                         socket.inet_pton(socket.AF_INET6, "2001:db8::53"))
        self.assertEqual((m.query_port, m.response_port), (5353, 53))
        self.assertEqual((m.query_time_sec, m.query_time_nsec), (0, 5))

    def test_varint(self):
        for n in (0, 1, 127, 128, 300, 2 ** 32, 2 ** 63):
            got = fs.decode(dnstap.encode_dnstap(dnstap.encode_message(
                5, query=("127.0.0.1", 0), qtime=n * 10 ** 9)))
            self.assertEqual(got.message.query_time_sec, n)

    def test_control_frames(self):
        frame = dnstap.control_frame(dnstap.FS_READY, dnstap.CONTENT_TYPE)
        self.assertEqual(frame, fs.control(fs.READY, fs.CONTENT_TYPE))
        self.assertEqual(dnstap.parse_control(frame[8:]),
                         (fs.READY, [fs.CONTENT_TYPE]))


class TapTest(unittest.TestCase):
    """A running server tapping to a UNIX socket collector."""

    @defer.inlineCallbacks
    def start(self, line, collector=True):
        self.dir = _tmpdir(self)
        self.sock = os.path.join(self.dir, "tap.sock")
        self.col = _listen_unix(self, self.sock) if collector else None
        self.log = util.capture_log(self)
        self.app = yield util.start(self, """example.org:0 {
    whoami
    %s
}
""" % (line % {"sock": self.sock}))
        self.port = self.app.port()
        self.tap = self.app.config.blocks[0].plugin("dnstap")

    @defer.inlineCallbacks
    def test_full_client_messages_carry_wire_bytes(self):
        yield self.start("dnstap unix://%(sock)s full {\n"
                         "        identity tapper\n        version V1\n"
                         "    }")
        q = util.make_query("Www.Example.org.", "A").to_wire()
        reply = yield util.send_udp(self.port, q)
        replies = yield util.send_tcp(self.port, q)
        yield util.wait_for(lambda: len(self.col.frames) >= 4)
        frames = self.col.frames
        self.assertEqual([f.message.type for f in frames],
                         [M.CLIENT_QUERY, M.CLIENT_RESPONSE] * 2)
        for f in frames:
            self.assertEqual((f.identity, f.version), (b"tapper", b"V1"))
            self.assertFalse(f.HasField("extra"))
            m = f.message
            self.assertEqual(m.socket_family, 1)   # INET
            self.assertEqual(m.query_address, b"\x7f\x00\x00\x01")
            self.assertGreater(m.query_port, 0)
        uq, ur, tq, tr = (f.message for f in frames)
        self.assertEqual(uq.socket_protocol, 1)
        self.assertEqual(tq.socket_protocol, 2)
        self.assertEqual(uq.query_message, q)
        self.assertEqual(ur.response_message, reply)
        self.assertEqual(tq.query_message, q)
        self.assertEqual(tr.response_message, replies[0])
        self.assertFalse(uq.HasField("response_message"))
        self.assertFalse(ur.HasField("query_message"))
        # The response carries the query's time and its own, later one.
        self.assertEqual((ur.query_time_sec, ur.query_time_nsec),
                         (uq.query_time_sec, uq.query_time_nsec))
        self.assertGreaterEqual(
            (ur.response_time_sec, ur.response_time_nsec),
            (ur.query_time_sec, ur.query_time_nsec))
        self.assertEqual(self.col.events, [fs.READY, fs.START])

    @defer.inlineCallbacks
    def test_without_full_no_message_bytes(self):
        yield self.start("dnstap %(sock)s")
        yield util.query(self.port, "example.org.", "A")
        yield util.wait_for(lambda: len(self.col.frames) >= 2)
        for f in self.col.frames:
            self.assertFalse(f.message.HasField("query_message"))
            self.assertFalse(f.message.HasField("response_message"))
            self.assertEqual(f.identity, socket.gethostname().encode())
            self.assertEqual(f.version, b"CoreDNS-1.14.0")

    @defer.inlineCallbacks
    def test_extra_with_placeholders_and_metadata(self):
        yield self.start('metadata\n    dnstap %(sock)s {\n'
                         '        extra "x_{type}_{name}_{proto}_{rcode}_'
                         '{/test/label}_{/test/none}"\n    }')
        block = self.app.config.blocks[0]

        @implementer(IMetadataProvider)
        class Provider(Plugin):
            name = "provider"

            def metadata(self, req):
                req.meta()["test/label"] = lambda: "v-" + req.proto
        block.plugins.append(Provider())
        block.plugin("metadata")._providers = None
        yield util.query(self.port, "Example.org.", "MX")
        yield util.wait_for(lambda: len(self.col.frames) >= 2)
        # Response placeholders are "-" in dnstap's extra, as in CoreDNS.
        self.assertEqual([f.extra for f in self.col.frames],
                         [b"x_MX_example.org._udp_-_v-udp_-"] * 2)

    @defer.inlineCallbacks
    def test_constant_extra(self):
        yield self.start('dnstap %(sock)s {\n        extra "static"\n    }')
        yield util.query(self.port, "example.org.", "A")
        yield util.wait_for(lambda: len(self.col.frames) >= 2)
        self.assertEqual(self.col.frames[0].extra, b"static")

    @defer.inlineCallbacks
    def test_forwarder_interface(self):
        yield self.start("dnstap %(sock)s full")
        block = self.app.config.blocks[0]
        taps = block.find(IForwarderTap)
        self.assertEqual(taps, [self.tap])
        from corednstw.core.request import Request, make_query
        req = Request(make_query("example.org.", 1), "127.0.0.1", 5000)
        start = taps[0].tap_forwarder_query(
            req, ("192.0.2.53", 53), b"QUERY", "tcp", ("10.0.0.1", 40000))
        taps[0].tap_forwarder_response(
            req, ("192.0.2.53", 53), b"REPLY", "tcp", ("10.0.0.1", 40000),
            start)
        yield util.wait_for(lambda: len(self.col.frames) >= 2)
        fq, fr = (f.message for f in self.col.frames)
        self.assertEqual((fq.type, fr.type),
                         (M.FORWARDER_QUERY, M.FORWARDER_RESPONSE))
        for m in (fq, fr):
            self.assertEqual(m.socket_protocol, 2)
            self.assertEqual(m.query_address, bytes([10, 0, 0, 1]))
            self.assertEqual(m.query_port, 40000)
            self.assertEqual(m.response_address, bytes([192, 0, 2, 53]))
            self.assertEqual(m.response_port, 53)
        self.assertEqual(fq.query_message, b"QUERY")
        self.assertEqual(fr.response_message, b"REPLY")
        self.assertEqual(fr.query_time_sec * 10 ** 9 + fr.query_time_nsec,
                         start)

    @defer.inlineCallbacks
    def test_buffered_until_collector_appears(self):
        yield self.start("dnstap %(sock)s full", collector=False)
        q = util.make_query("example.org.", "A").to_wire()
        reply = yield util.send_udp(self.port, q)
        self.assertEqual(len(self.tap.output.queue), 2)
        yield util.wait_for(lambda: any(
            "No connection to dnstap endpoint" in ln for ln in
            self.log.lines))
        col = _listen_unix(self, self.sock)
        # Reconnection with backoff finds the collector.
        yield util.wait_for(lambda: len(col.frames) >= 2)
        self.assertEqual(col.frames[0].message.query_message, q)
        self.assertEqual(col.frames[1].message.response_message, reply)
        self.assertEqual(len(self.tap.output.queue), 0)

    @defer.inlineCallbacks
    def test_drops_beyond_the_bound_and_logs(self):
        yield self.start("dnstap %(sock)s", collector=False)
        self.tap.output.limit = 3
        for i in range(3):
            yield util.query(self.port, "q%d.example.org." % i, "A")
        self.assertEqual(len(self.tap.output.queue), 3)
        self.assertEqual(self.tap.output.dropped, 3)
        self.tap.output.report()
        self.assertIn("[WARNING] plugin/dnstap: Dropped dnstap messages: 3",
                      self.log.lines)
        self.assertEqual(self.tap.output.dropped, 0)

    @defer.inlineCallbacks
    def test_stop_sends_stop_and_waits_for_finish(self):
        yield self.start("dnstap %(sock)s")
        yield util.wait_for(lambda: self.tap.output.conn is not None)
        yield util.query(self.port, "example.org.", "A")
        yield self.tap.stop()
        yield util.wait_for(lambda: self.col.closed == 1)
        self.assertEqual(self.col.events, [fs.READY, fs.START, fs.STOP])
        self.assertEqual(len(self.col.frames), 2)

    @defer.inlineCallbacks
    def test_two_taps(self):
        self.dir = _tmpdir(self)
        a, b = (os.path.join(self.dir, n) for n in ("a.sock", "b.sock"))
        ca, cb = _listen_unix(self, a), _listen_unix(self, b)
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap %s full"
                                     "\n    dnstap %s\n}\n" % (a, b))
        yield util.query(app.port(), "example.org.", "A")
        yield util.wait_for(lambda: len(ca.frames) == 2 and
                            len(cb.frames) == 2)
        self.assertTrue(ca.frames[0].message.HasField("query_message"))
        self.assertFalse(cb.frames[0].message.HasField("query_message"))


class TCPTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_tcp_collector(self):
        col = fs.Collector()
        port = reactor.listenTCP(0, col, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap "
                                     "tcp://127.0.0.1:%d full 2 1\n}\n"
                               % port.getHost().port)
        tap = app.config.blocks[0].plugin("dnstap")
        self.assertEqual(tap.output.sndbuf, 2 * 1024 * 1024)
        q = util.make_query("example.org.", "AAAA").to_wire()
        reply = (yield util.send_tcp(app.port(), q))[0]
        yield util.wait_for(lambda: len(col.frames) >= 2)
        self.assertEqual(col.frames[0].message.query_message, q)
        self.assertEqual(col.frames[1].message.response_message, reply)


class ListenTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_collectors_connect_to_us(self):
        d = _tmpdir(self)
        path = os.path.join(d, "listen.sock")
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap listen "
                                     "unix://%s full\n}\n" % path)
        tap = app.config.blocks[0].plugin("dnstap")
        col = fs.ClientCollector()
        reactor.connectUNIX(path, col)
        yield util.wait_for(lambda: len(tap.output.clients) == 1)
        q = util.make_query("example.org.", "A").to_wire()
        reply = yield util.send_udp(app.port(), q)
        yield util.wait_for(lambda: len(col.frames) >= 2)
        self.assertEqual(col.frames[0].message.query_message, q)
        self.assertEqual(col.frames[1].message.response_message, reply)
        closed = col.wait_closed()
        yield tap.stop()
        yield closed
        self.assertEqual(col.events, [fs.READY, fs.START, fs.STOP])

    @defer.inlineCallbacks
    def test_slow_collector_is_dropped(self):
        d = _tmpdir(self)
        path = os.path.join(d, "listen.sock")
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap listen "
                                     "%s\n}\n" % path)
        tap = app.config.blocks[0].plugin("dnstap")
        col = fs.ClientCollector()
        reactor.connectUNIX(path, col)
        yield util.wait_for(lambda: len(tap.output.clients) == 1)
        tap.output.clients[0].pauseProducing()
        closed = col.wait_closed()
        yield util.query(app.port(), "example.org.", "A")
        yield closed
        self.assertEqual(tap.output.clients, [])
        self.assertEqual(tap.output.dropped, 1)


class SetupTest(unittest.TestCase):

    def plugin(self, line):
        s = util.Direct(self, ".:0 {\n    %s\n}\n" % line)
        return s.app.config.blocks[0].plugin("dnstap")

    def error(self, line):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    %s\n}\n" % line)
        return str(cm.exception)

    def test_endpoints(self):
        p = self.plugin("dnstap dnstap.sock full")
        self.assertEqual((p.output.kind, p.output.address, p.full),
                         ("unix", "dnstap.sock", True))
        p = self.plugin("dnstap unix://dnstap.sock")
        self.assertEqual((p.output.kind, p.output.address, p.full),
                         ("unix", "dnstap.sock", False))
        p = self.plugin("dnstap tcp://[::1]:6000")
        self.assertEqual((p.output.kind, p.output.address),
                         ("tcp", ("::1", 6000)))
        p = self.plugin("dnstap tcp://example.com:6000")
        self.assertEqual(p.output.address, ("example.com", 6000))
        p = self.plugin("dnstap tls://127.0.0.1:6000 {\n skipverify\n}")
        self.assertEqual(p.output.kind, "tls")
        self.assertIsNotNone(p.output.tls)
        p = self.plugin("dnstap listen tcp://127.0.0.1:6000 full")
        self.assertIsInstance(p.output, dnstap.Listener)
        self.assertEqual((p.output.kind, p.output.address, p.full),
                         ("tcp", ("127.0.0.1", 6000), True))
        p = self.plugin("dnstap listen unix:///tmp/x.sock")
        self.assertEqual(p.output.address, "/tmp/x.sock")

    def test_multiples(self):
        p = self.plugin("dnstap dnstap.sock full 1024 2048")
        self.assertEqual(p.output.limit, 2048 * 10000)
        self.assertEqual(p.output.sndbuf, 1024 * 1024 * 1024)
        self.assertIn("MultipleTcpWriteBuf must be between 1 and 1024 (MiB "
                      "units): 1025",
                      self.error("dnstap dnstap.sock full 1025 1"))
        self.assertIn("MultipleQueue must be between 1 and 4096 (x10k "
                      "messages): 4097",
                      self.error("dnstap dnstap.sock full 1 4097"))
        for line in ("dnstap s full 0 10", "dnstap s full 10 0",
                     "dnstap s full x 10", "dnstap s full 10 y"):
            self.assertIn("Corefile:2 - Error during parsing: plugin/dnstap:",
                          self.error(line))

    def test_identity_version_extra(self):
        p = self.plugin("dnstap s {\n identity NAME\n version VER\n"
                        " extra EXTRA\n}")
        self.assertEqual((p.identity, p.version, p.extra_format),
                         (b"NAME", b"VER", "EXTRA"))

    def test_errors(self):
        self.assertIn("Wrong argument count", self.error("dnstap"))
        self.assertIn("Wrong argument count",
                      self.error("dnstap s {\n identity\n}"))
        self.assertIn("Wrong argument count",
                      self.error("dnstap s {\n version\n}"))
        self.assertIn("unknown property 'identitiy'",
                      self.error("dnstap s {\n identitiy NAME\n}"))
        self.assertIn("dnstap listen requires an endpoint argument",
                      self.error("dnstap listen"))
        self.assertIn("tls directive only valid for listeners",
                      self.error("dnstap s {\n tls a b\n}"))
        self.assertIn("tls requires cert and key file paths",
                      self.error("dnstap listen tls://127.0.0.1:1 {\n"
                                 " tls a\n}"))

    def test_repeatable(self):
        s = util.Direct(self, ".:0 {\n    dnstap a\n    dnstap b\n"
                              "    whoami\n}\n")
        taps = s.app.config.blocks[0].find(IForwarderTap)
        self.assertEqual([t.output.address for t in taps], ["a", "b"])



class TLSTest(unittest.TestCase):
    """tls:// both ways, with the self-signed test certificate Twisted
    ships (cert and key in one PEM file)."""

    def setUp(self):
        import twisted.test
        self.pem = os.path.join(os.path.dirname(twisted.test.__file__),
                                "server.pem")

    @defer.inlineCallbacks
    def test_outgoing_tls_with_skipverify(self):
        from twisted.internet import ssl
        with open(self.pem, "rb") as f:
            opts = ssl.PrivateCertificate.loadPEM(f.read()).options()
        col = fs.Collector()
        port = reactor.listenSSL(0, col, opts, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap "
                                     "tls://127.0.0.1:%d full {\n"
                                     "        skipverify\n    }\n}\n"
                               % port.getHost().port)
        q = util.make_query("example.org.", "A").to_wire()
        reply = yield util.send_udp(app.port(), q)
        yield util.wait_for(lambda: len(col.frames) >= 2)
        self.assertEqual(col.frames[0].message.query_message, q)
        self.assertEqual(col.frames[1].message.response_message, reply)

    @defer.inlineCallbacks
    def test_listener_files_read_when_opening(self):
        """As CoreDNS, the listener's certificate is read when it opens:
        a file that is not there passes setup and leaves the listener
        closed, with CoreDNS's error; no files at all, a warning."""
        log = util.capture_log(self)
        for options, line in (
                ("        tls /nonexistent/a /nonexistent/b\n",
                 "[ERROR] plugin/dnstap: Failed to start dnstap listener: "),
                ("", "[WARNING] plugin/dnstap: TLS listener requires cert "
                     "and key files")):
            app = yield util.start(self, ".:0 {\n    whoami\n    dnstap "
                                         "listen tls://127.0.0.1:0 {\n%s"
                                         "    }\n}\n" % options)
            self.assertIsNone(app.config.blocks[0].plugin("dnstap")
                              .output.port)
            self.assertIn(line, log.text())

    @defer.inlineCallbacks
    def test_listen_tls(self):
        from twisted.internet import ssl
        app = yield util.start(self, ".:0 {\n    whoami\n    dnstap listen "
                                     "tls://127.0.0.1:0 full {\n"
                                     "        tls %s %s\n    }\n}\n"
                               % (self.pem, self.pem))
        tap = app.config.blocks[0].plugin("dnstap")
        col = fs.ClientCollector()
        reactor.connectSSL("127.0.0.1", tap.output.port.getHost().port, col,
                           ssl.CertificateOptions(verify=False))
        yield util.wait_for(lambda: len(tap.output.clients) == 1)
        q = util.make_query("example.org.", "A").to_wire()
        reply = yield util.send_udp(app.port(), q)
        yield util.wait_for(lambda: len(col.frames) >= 2)
        self.assertEqual(col.frames[1].message.response_message, reply)
        closed = col.wait_closed()
        yield tap.stop()
        yield closed
