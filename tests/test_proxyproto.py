"""proxyproto: PROXY protocol v1/v2 headers in front of UDP, TCP, DoT and
DoH listeners; whoami tells which client the chain saw."""

import socket
import struct

import dns.message
import dns.rcode
from twisted.internet import defer, threads
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.dnsserver import proxyprotocol
from corednstw.service.app import App
from tests.support import tlsutil, util

V2 = proxyprotocol.V2_SIG


def v2(src, sport, dst=None, dport=53, dgram=False, local=False):
    """A version 2 header for an IPv4 or IPv6 flow."""
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    dst = dst or ("::1" if fam == socket.AF_INET6 else "127.0.0.1")
    addrs = (socket.inet_pton(fam, src) + socket.inet_pton(fam, dst)
             + struct.pack("!HH", sport, dport))
    af = 2 if fam == socket.AF_INET6 else 1
    cmd = 0x20 if local else 0x21
    return V2 + struct.pack("!BBH", cmd, (af << 4) | (2 if dgram else 1),
                            len(addrs)) + addrs


def v1(src, sport, dst=None, dport=53):
    fam = "TCP6" if ":" in src else "TCP4"
    dst = dst or ("::1" if fam == "TCP6" else "127.0.0.1")
    return ("PROXY %s %s %s %d %d\r\n" % (fam, src, dst, sport,
                                          dport)).encode()


def frame(q):
    w = q.to_wire()
    return struct.pack("!H", len(w)) + w


def read_frame(s):
    data = b""
    while len(data) < 2 or len(data) < 2 + struct.unpack(
            "!H", data[:2])[0]:
        chunk = s.recv(65535)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return dns.message.from_wire(data[2:])


def in_pieces(port, header):
    """Deferred: the reply to a query sent after ``header`` written one
    byte per segment (a thread with a blocking socket, Nagle off)."""
    q = dns.message.make_query("example.org.", "A")

    def run():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for b in header:
                s.sendall(bytes([b]))
            s.sendall(frame(q))
            return read_frame(s)
    return threads.deferToThread(run)


def whoami(m):
    """(address, port) whoami reported."""
    extra = util.rrs(m, "additional")
    srv = [x for x in extra if " SRV " in x][0]
    addr = [x for x in extra if " SRV " not in x][0]
    return addr.split()[-1], int(srv.split()[-2])


COREFILE = """.:0 {
    bind 127.0.0.1
    proxyproto%s
    whoami
    log
}
"""


class PlainTest(unittest.TestCase):

    options = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, COREFILE % self.options)
        self.port = self.app.port()

    def tcp(self, header, q=None):
        q = q or dns.message.make_query("example.org.", "A")

        def run():
            with socket.create_connection(("127.0.0.1", self.port),
                                          timeout=5) as s:
                s.sendall(header + frame(q))
                return read_frame(s)
        return threads.deferToThread(run)

    def udp(self, *datagrams):
        """Send the datagrams from one socket; the answer to the last."""
        def run():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(5)
                for d in datagrams:
                    s.sendto(d, ("127.0.0.1", self.port))
                return dns.message.from_wire(s.recv(65535))
        return threads.deferToThread(run)

    @defer.inlineCallbacks
    def test_tcp_v1(self):
        m = yield self.tcp(v1("192.0.2.10", 4242))
        self.assertEqual(whoami(m), ("192.0.2.10", 4242))

    @defer.inlineCallbacks
    def test_tcp_v2_ipv6(self):
        m = yield self.tcp(v2("2001:db8::7", 5353))
        self.assertEqual(whoami(m), ("2001:db8::7", 5353))
        yield util.wait_for(lambda: any(
            "[2001:db8::7]:5353" in x for x in self.log.lines))

    @defer.inlineCallbacks
    def test_tcp_without_header(self):
        m = yield self.tcp(b"")
        self.assertEqual(whoami(m)[0], "127.0.0.1")

    @defer.inlineCallbacks
    def test_tcp_local_command_keeps_the_peer(self):
        m = yield self.tcp(v2("192.0.2.10", 4242, local=True))
        self.assertEqual(whoami(m)[0], "127.0.0.1")

    @defer.inlineCallbacks
    def test_tcp_header_in_pieces(self):
        m = yield in_pieces(self.port, v2("192.0.2.11", 1111))
        self.assertEqual(whoami(m), ("192.0.2.11", 1111))

    @defer.inlineCallbacks
    def test_tcp_malformed_header_closes(self):
        yield self.assertFailure(
            self.tcp(b"PROXY TCP4 nonsense\r\n"), ConnectionError)

    @defer.inlineCallbacks
    def test_udp_v2(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield self.udp(v2("192.0.2.20", 2020, dgram=True) + q.to_wire())
        self.assertEqual(whoami(m), ("192.0.2.20", 2020))

    @defer.inlineCallbacks
    def test_udp_without_header(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield self.udp(q.to_wire())
        self.assertEqual(whoami(m)[0], "127.0.0.1")

    @defer.inlineCallbacks
    def test_udp_v1_dropped(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield self.udp(v1("192.0.2.20", 2020) + q.to_wire(),
                           q.to_wire())
        self.assertEqual(whoami(m)[0], "127.0.0.1")
        self.assertTrue(any("dropping invalid Proxy Protocol packet" in x
                            for x in self.log.lines))

    @defer.inlineCallbacks
    def test_udp_invalid_flood_logged_once(self):
        """A client sending bad headers as fast as it can writes one
        warning per 10 s, not one per datagram."""
        q = dns.message.make_query("example.org.", "A")
        bad = [v1("192.0.2.20", n) + q.to_wire() for n in range(200)]
        m = yield self.udp(*bad + [q.to_wire()])
        self.assertEqual(whoami(m)[0], "127.0.0.1")
        self.assertEqual(sum("dropping invalid Proxy Protocol packet" in x
                             for x in self.log.lines), 1)


class RestrictedTest(PlainTest):
    """Only 192.0.2.0/24 may send headers; other sources are refused when
    they send one, served when they do not."""

    options = " {\n        allow 192.0.2.0/24\n        default reject\n    }"

    def test_tcp_v1(self):
        return self.assertFailure(self.tcp(v1("192.0.2.10", 4242)),
                                  ConnectionError)

    def test_tcp_v2_ipv6(self):
        return self.assertFailure(self.tcp(v2("2001:db8::7", 5353)),
                                  ConnectionError)

    def test_tcp_header_in_pieces(self):
        """A header from a source outside ``allow`` is refused however
        it arrives: byte by byte, the connection is still closed."""
        # Closed while the header comes in (a reset or broken pipe) or
        # after it: ConnectionError either way.
        return self.assertFailure(in_pieces(self.port,
                                            v2("192.0.2.11", 1111)),
                                  ConnectionError)

    def test_tcp_local_command_keeps_the_peer(self):
        """Even a LOCAL header (no address claimed) is a header: from a
        source outside ``allow`` the connection is refused."""
        return self.assertFailure(
            self.tcp(v2("192.0.2.10", 4242, local=True)), ConnectionError)

    @defer.inlineCallbacks
    def test_udp_v2(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield self.udp(v2("192.0.2.20", 2020, dgram=True) + q.to_wire(),
                           q.to_wire())
        self.assertEqual(whoami(m)[0], "127.0.0.1")


class IgnoredTest(unittest.TestCase):
    """default ignore: the header is read and dropped."""

    @defer.inlineCallbacks
    def test_header_ignored(self):
        util.capture_log(self)
        app = yield util.start(self, COREFILE % (
            " {\n        allow 10.0.0.0/8\n    }"))
        case = PlainTest()
        case.port = app.port()
        m = yield case.tcp(v2("192.0.2.10", 4242))
        self.assertEqual(whoami(m)[0], "127.0.0.1")
        q = dns.message.make_query("example.org.", "A")
        m = yield case.udp(v2("192.0.2.20", 2020, dgram=True) + q.to_wire())
        self.assertEqual(whoami(m)[0], "127.0.0.1")


class SessionTrackingTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_header_only_datagram_names_the_session(self):
        util.capture_log(self)
        app = yield util.start(self, COREFILE % (
            " {\n        udp_session_tracking 28s 5\n    }"))
        case = PlainTest()
        case.port = app.port()
        q = dns.message.make_query("example.org.", "A")
        m = yield case.udp(v2("192.0.2.30", 3030, dgram=True), q.to_wire())
        self.assertEqual(whoami(m), ("192.0.2.30", 3030))


class EncryptedTest(unittest.TestCase):
    """The header comes before TLS, on DoT and DoH alike."""

    @defer.inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        _, self.ca, cert, key = tlsutil.certs(self)
        self.app = yield util.start(self, (
            "tls://.:0 https://.:0 {\n    bind 127.0.0.1\n"
            "    tls %s %s\n    proxyproto\n    whoami\n}\n") % (cert, key))

    def connect(self, transport):
        raw = socket.create_connection(
            ("127.0.0.1", self.app.port(transport=transport)), timeout=5)
        raw.sendall(v2("198.51.100.4", 853))
        ctx = tlsutil.client_context(self.ca)
        return ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME)

    @defer.inlineCallbacks
    def test_dot(self):
        q = dns.message.make_query("example.org.", "A")

        def run():
            with self.connect("tls") as s:
                s.sendall(frame(q))
                return read_frame(s)
        m = yield threads.deferToThread(run)
        self.assertEqual(whoami(m), ("198.51.100.4", 853))

    @defer.inlineCallbacks
    def test_doh(self):
        w = dns.message.make_query("example.org.", "A").to_wire()
        req = (b"POST /dns-query HTTP/1.1\r\nHost: x\r\nConnection: close"
               b"\r\ncontent-type: application/dns-message\r\n"
               b"content-length: %d\r\n\r\n" % len(w)) + w

        def run():
            with self.connect("https") as s:
                s.sendall(req)
                data = b""
                while True:
                    chunk = s.recv(65535)
                    if not chunk:
                        break
                    data += chunk
            return data
        data = yield threads.deferToThread(run)
        head, body = data.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        m = dns.message.from_wire(body)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(whoami(m), ("198.51.100.4", 853))


class SetupTest(unittest.TestCase):

    def error(self, body):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    proxyproto {\n%s\n    }\n"
                              "    whoami\n}\n" % body)
        return str(cm.exception)

    def test_errors(self):
        self.assertIn("Corefile:3 - Error during parsing: plugin/proxyproto: "
                      "192.0.2.1: invalid CIDR address: 192.0.2.1",
                      self.error("        allow 192.0.2.1"))
        self.assertIn("plugin/proxyproto: Wrong argument count",
                      self.error("        default sometimes"))
        self.assertIn("plugin/proxyproto: unknown option 'deny'",
                      self.error("        deny 10.0.0.0/8"))
        self.assertIn('udp_session_tracking: invalid duration "soon"',
                      self.error("        udp_session_tracking soon"))
        self.assertIn('invalid max sessions "0": must be a positive integer',
                      self.error("        udp_session_tracking 1s 0"))

    def test_policy(self):
        p = proxyprotocol.Policy()
        self.assertEqual(p.decide("192.0.2.1"), "use")
        p = proxyprotocol.Policy(default="reject", default_set=True)
        self.assertEqual(p.decide("192.0.2.1"), "reject")
        import ipaddress
        p = proxyprotocol.Policy([ipaddress.ip_network("192.0.2.0/24")])
        self.assertEqual(p.decide("192.0.2.1"), "use")
        self.assertEqual(p.decide("::ffff:192.0.2.1"), "use")
        self.assertEqual(p.decide("198.51.100.1"), "ignore")
        self.assertEqual(p.decide("2001:db8::1"), "ignore")

    def test_parse(self):
        self.assertEqual(proxyprotocol.parse(b"\x00\x1c")[1], 0)
        self.assertEqual(proxyprotocol.parse(b"PRO")[1], -1)
        self.assertEqual(proxyprotocol.parse(V2[:5])[1], -1)
        h, n = proxyprotocol.parse(v1("192.0.2.1", 7) + b"rest")
        self.assertEqual((h.source, h.version), (("192.0.2.1", 7), 1))
        h, n = proxyprotocol.parse(b"PROXY UNKNOWN\r\n")
        self.assertIsNone(h.source)
        with self.assertRaises(proxyprotocol.ProxyError):
            proxyprotocol.parse(b"PROXY TCP4 192.0.2.1 ::1 1 2\r\n")
        with self.assertRaises(proxyprotocol.ProxyError):
            proxyprotocol.parse(V2 + b"\x31\x11\x00\x00")


class TrustWarningTest(unittest.TestCase):
    """proxyproto without allow believes any client's header; in a block
    that decides by address that is worth a warning at start and in
    --check (the default itself is CoreDNS's and stays)."""

    WARNING = ("[WARNING] plugin/proxyproto: proxyproto has no allow: every "
               "client can claim any address with a PROXY header, and %s "
               "(%s:3)")

    def lines(self, body, check=False):
        """The proxyproto log lines of a Corefile with ``body`` loaded as
        the server does (or as --check does), and the Corefile's path."""
        log = util.capture_log(self)
        corefile = ".:0 {\n    bind 127.0.0.1\n    %s\n    whoami\n}\n" % body
        path = util.write_files(self, {"Corefile": corefile}) + "/Corefile"
        if check:
            from corednstw import tap
            self.assertEqual(tap.check(path, 0, False), 0)
        else:
            App(path, dns_port=0).load()
        return [x for x in log.lines if "plugin/proxyproto" in x], path

    def test_warned_at_start_and_in_check(self):
        for check in (False, True):
            got, path = self.lines(
                "proxyproto\n    acl {\n        allow net 10.0.0.0/8\n"
                "        block\n    }\n    transfer {\n        to 192.0.2.1\n"
                "    }", check)
            self.assertEqual(got, [self.WARNING % (
                "acl, transfer decide by that address", path)])

    def test_view_alone(self):
        got, d = self.lines("proxyproto\n    view v {\n        expr "
                            "incidr(client_ip(), '10.0.0.0/8')\n    }")
        self.assertEqual(got, [self.WARNING % ("view decides by that "
                                               "address", d)])

    def test_not_warned(self):
        for body in ("proxyproto {\n        allow 10.0.0.0/8\n    }\n"
                     "    acl {\n        block net 10.0.0.0/8\n    }",
                     "proxyproto {\n        default ignore\n    }\n"
                     "    acl {\n        block net 10.0.0.0/8\n    }",
                     "proxyproto\n    transfer {\n        to *\n    }",
                     "proxyproto"):
            self.assertEqual(self.lines(body)[0], [], body)
