"""grpc:// (DNS over gRPC) with a client generated at test time from a
.proto, and the grpc plugin forwarding to it."""

import os

import dns.message
import dns.rcode
import dns.rrset
import grpc
from twisted.internet import threads
from twisted.internet.defer import inlineCallbacks
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from corednstw.dnsserver import grpcdns as grpcwire
from tests.support import grpcclient, tlsutil, util

SERVER = """grpc://.:0 {
    bind 127.0.0.1
%(tls)s    whoami
}
"""


def wire(name="example.org.", rdtype="A"):
    return dns.message.make_query(name, rdtype).to_wire()


class WireTest(unittest.TestCase):
    """The hand-made protobuf and gRPC framing."""

    def test_packet_round_trip(self):
        for msg in (b"", b"x", b"a" * 127, b"b" * 128, b"c" * 65535):
            self.assertEqual(
                grpcwire.decode_packet(grpcwire.encode_packet(msg)), msg)

    def test_matches_protobuf(self):
        pb2, _ = grpcclient.modules()
        msg = b"\x12\x34" * 200
        self.assertEqual(grpcwire.encode_packet(msg),
                         pb2.DnsPacket(msg=msg).SerializeToString())
        self.assertEqual(grpcwire.decode_packet(
            pb2.DnsPacket(msg=msg).SerializeToString()), msg)

    def test_bad_protobuf(self):
        for data in (b"\x0a\x05ab", b"\x0f", b"\x0a\xff\xff\xff\xff\xff"
                     b"\xff\xff\xff\xff\xff\x01"):
            self.assertRaises(ValueError, grpcwire.decode_packet, data)

    def test_frames(self):
        self.assertEqual(grpcwire.unframe(grpcwire.frame(b"abc")), b"abc")
        self.assertRaises(ValueError, grpcwire.unframe, b"\x01\0\0\0\0")
        self.assertRaises(ValueError, grpcwire.unframe, b"\0\0\0\0\x05ab")


class ServerTest(unittest.TestCase):

    tls = False

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        self.ca = None
        text = ""
        if self.tls:
            _, self.ca, cert, key = tlsutil.certs(self)
            text = "    tls %s %s\n" % (cert, key)
        self.app = yield util.start(self, SERVER % {"tls": text})
        self.port = self.app.port(transport="grpc")

    def query(self, data):
        return threads.deferToThread(grpcclient.query, self.port, data,
                                     self.ca, tlsutil.HOSTNAME)

    @inlineCallbacks
    def test_whoami(self):
        m = dns.message.from_wire((yield self.query(wire())))
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIn("example.org. 0 IN A 127.0.0.1",
                      util.rrs(m, "additional"))
        # CoreDNS's gRPC writer gives the chain the TCP peer.
        self.assertEqual(_srv_owner(m), "_tcp.example.org.")

    @inlineCallbacks
    def test_not_dns(self):
        with self.assertRaises(grpc.RpcError) as cm:
            yield self.query(b"not a dns message")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNKNOWN)
        self.assertIn("dns", cm.exception.details())
        m = dns.message.from_wire((yield self.query(wire())))
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @inlineCallbacks
    def test_a_response_is_refused(self):
        resp = dns.message.make_response(dns.message.make_query("a.", "A"))
        with self.assertRaises(grpc.RpcError) as cm:
            yield self.query(resp.to_wire())
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNKNOWN)

    @inlineCallbacks
    def test_other_method(self):
        def call():
            target = "127.0.0.1:%d" % self.port
            if self.ca is None:
                ch = grpc.insecure_channel(target)
            else:
                with open(self.ca, "rb") as f:
                    creds = grpc.ssl_channel_credentials(f.read())
                ch = grpc.secure_channel(target, creds, [
                    ("grpc.ssl_target_name_override", tlsutil.HOSTNAME)])
            with ch:
                return ch.unary_unary("/coredns.dns.DnsService/Other")(
                    b"", timeout=5)
        with self.assertRaises(grpc.RpcError) as cm:
            yield threads.deferToThread(call)
        self.assertEqual(cm.exception.code(),
                         grpc.StatusCode.UNIMPLEMENTED)


class TLSServerTest(ServerTest):

    tls = True

    @inlineCallbacks
    def test_unknown_ca_refused(self):
        _, other, _, _ = tlsutil.certs(self)
        with self.assertRaises(grpc.RpcError):
            yield threads.deferToThread(grpcclient.query, self.port, wire(),
                                        other, tlsutil.HOSTNAME, 3)


class NoAnswerTest(unittest.TestCase):
    """A chain that writes nothing: CoreDNS's gRPC writer holds the query
    until the chain writes, so the client gets its own query back."""

    @inlineCallbacks
    def test_dropped_query_comes_back(self):
        util.capture_log(self)
        app = yield util.start(self, (
            "grpc://.:0 {\n    bind 127.0.0.1\n"
            "    erratic {\n        drop 1\n    }\n}\n"))
        query = wire()
        back = yield threads.deferToThread(
            grpcclient.query, app.port(transport="grpc"), query)
        self.assertEqual(back, query)


def _srv_owner(m):
    """The owner of whoami's SRV record (its label says the protocol)."""
    return [r.split()[0] for r in util.rrs(m, "additional")
            if " SRV " in r][0]


class PluginTest(unittest.TestCase):
    """The grpc plugin forwarding to our own grpc:// server."""

    @inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, self.ca, cert, key = tlsutil.certs(self)
        self.upstream = yield util.start(self, (
            "grpc://.:0 {\n    bind 127.0.0.1\n    tls %s %s\n"
            "    whoami\n}\n") % (cert, key))
        self.up_port = self.upstream.port(transport="grpc")

    @inlineCallbacks
    def front(self, options, to=None):
        app = yield util.start(self, (
            ".:0 {\n    bind 127.0.0.1\n    grpc . %s {\n"
            "        tls %s\n        tls_servername %s\n%s    }\n"
            "    whoami\n}\n") % (to or "127.0.0.1:%d" % self.up_port,
                                 self.ca, tlsutil.HOSTNAME, options))
        return app.port()

    @inlineCallbacks
    def test_forwarded(self):
        port = yield self.front("")
        label = "127.0.0.1:%d" % self.up_port
        before = metrics.families()["coredns_grpc_requests_total"].get(
            (label,)) or 0
        m = yield util.query(port, "Example.org.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(str(m.question[0].name), "Example.org.")
        # The upstream's whoami answered (its own TCP view of us).
        self.assertEqual(_srv_owner(m), "_tcp.Example.org.")
        self.assertEqual(metrics.families()[
            "coredns_grpc_requests_total"].get((label,)), before + 1)
        self.assertGreaterEqual(metrics.families()[
            "coredns_grpc_responses_total"].get(("NOERROR", label)), 1)

    @inlineCallbacks
    def test_except_goes_on(self):
        port = yield self.front("        except example.org\n")
        m = yield util.query(port, "example.org.")
        # Answered here by whoami: over UDP, not by the upstream.
        self.assertEqual(_srv_owner(m), "_udp.example.org.")

    @inlineCallbacks
    def test_dead_upstream_servfail(self):
        port = yield self.front("", to="127.0.0.1:%d" % util.free_port())
        m = yield util.query(port, "example.org.")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    @inlineCallbacks
    def test_next_upstream_after_a_failure(self):
        dead = "127.0.0.1:%d" % util.free_port()
        port = yield self.front(
            "        policy sequential\n",
            to="%s 127.0.0.1:%d" % (dead, self.up_port))
        m = yield util.query(port, "example.org.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


class OddUpstreamTest(unittest.TestCase):
    """The grpc plugin against a grpcio server that misbehaves."""

    def setUp(self):
        util.capture_log(self)

    @inlineCallbacks
    def front(self, answer, options=""):
        server, port = grpcclient.serve(answer)
        self.addCleanup(server.stop, None)
        self.label = "127.0.0.1:%d" % port
        app = yield util.start(self, (
            ".:0 {\n    bind 127.0.0.1\n    grpc . %s {\n%s    }\n"
            "    whoami\n}\n") % (self.label, options))
        return app.port()

    def count(self, family, labels):
        return metrics.families()[family].get(labels) or 0

    @inlineCallbacks
    def ask_counted(self, answer, upstream_rcode):
        """The client's answer to example.org A; the upstream's answer
        must be counted once under ``upstream_rcode``."""
        port = yield self.front(answer)
        key = (upstream_rcode, self.label)
        before = self.count("coredns_grpc_responses_total", key)
        m = yield util.query(port, "example.org.")
        self.assertEqual(self.count("coredns_grpc_responses_total", key),
                         before + 1)
        return m

    @inlineCallbacks
    def test_other_question_formerr(self):
        def answer(wire, context):
            other = dns.message.make_query("other.example.", "A")
            other.id = dns.message.from_wire(wire).id
            return dns.message.make_response(other).to_wire()
        m = yield self.ask_counted(answer, "NOERROR")
        self.assertEqual(m.rcode(), dns.rcode.FORMERR)

    @inlineCallbacks
    def test_not_found_is_nxdomain(self):
        def answer(wire, context):
            context.abort(grpc.StatusCode.NOT_FOUND, "no such name")
        m = yield self.ask_counted(answer, "NXDOMAIN")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(str(m.question[0].name), "example.org.")

    @inlineCallbacks
    def test_failed_calls_fall_through_uncounted(self):
        def answer(wire, context):
            context.abort(grpc.StatusCode.UNAVAILABLE, "down")
        port = yield self.front(answer, "        fallthrough\n")
        before = self.count("coredns_grpc_requests_total", (self.label,))
        m = yield util.query(port, "example.org.")
        # whoami, after the grpc plugin, answered over UDP.
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(_srv_owner(m), "_udp.example.org.")
        self.assertEqual(self.count("coredns_grpc_requests_total",
                                    (self.label,)), before)

    @inlineCallbacks
    def test_junk_answer_servfail(self):
        port = yield self.front(lambda wire, context: b"junk")
        m = yield util.query(port, "example.org.")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)


class UnixSocketTest(unittest.TestCase):

    @inlineCallbacks
    def test_upstream_on_a_unix_socket(self):
        """``grpc . unix:///PATH``, as CoreDNS accepts (grpcio's target);
        the metrics name the upstream by that target."""
        util.capture_log(self)
        path = os.path.join(util.write_files(self, {}), "dns.sock")

        def answer(wire, context):
            r = dns.message.make_response(dns.message.from_wire(wire))
            r.answer.append(dns.rrset.from_text(
                "example.org.", 30, "IN", "A", "192.0.2.8"))
            return r.to_wire()
        server, _ = grpcclient.serve(answer, "unix:" + path)
        self.addCleanup(server.stop, None)
        target = "unix://" + path
        app = yield util.start(self, ".:0 {\n    grpc . %s\n}\n" % target)
        m = yield util.query(app.port(), "example.org.")
        self.assertEqual(util.rrs(m), ["example.org. 30 IN A 192.0.2.8"])
        self.assertGreaterEqual(metrics.families()[
            "coredns_grpc_requests_total"].get((target,)), 1)


class SetupTest(unittest.TestCase):

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_errors(self):
        self.assertIn("Corefile:2", self.error(
            ".:0 {\n    grpc .\n}\n"))
        self.assertIn("unknown policy 'x'", self.error(
            ".:0 {\n    grpc . 127.0.0.1 {\n        policy x\n    }\n}\n"))
        self.assertIn("unknown property 'nope'", self.error(
            ".:0 {\n    grpc . 127.0.0.1 {\n        nope\n    }\n}\n"))
        self.assertIn('not an IP address or file: "dns.google"',
                      self.error(".:0 {\n    grpc . dns.google\n}\n"))
        self.assertIn('invalid address: "unix://"',
                      self.error(".:0 {\n    grpc . unix://\n}\n"))
        self.assertIn("more than 15 TOs configured: 16", self.error(
            ".:0 {\n    grpc . %s\n}\n" % " ".join(
                "10.0.0.%d" % i for i in range(16))))
        msg = self.error(".:0 {\n    grpc_server {\n"
                         "        max_streams -1\n    }\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: "
                      "plugin/grpc_server: max_streams must be a "
                      "non-negative integer: -1", msg)

    def test_grpc_server_limits(self):
        app = util.Direct(self, "grpc://.:0 {\n    grpc_server {\n"
                          "        max_streams 4\n"
                          "        max_connections 0\n    }\n"
                          "    whoami\n}\n")
        self.assertEqual(app.app.config.blocks[0].settings["grpc_server"],
                         {"max_streams": 4, "max_connections": 0})
