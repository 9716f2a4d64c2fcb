"""whoami over the wire, CoreDNS's answer row by row: the client's address
(A over IPv4, AAAA over IPv6) for the name as asked, the SRV of its source
port under _udp. or _tcp., TTL 0, AA, for every query type."""

import socket

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import cases, util
from tests.support.cases import Case


def has_ipv6_loopback():
    """Whether ::1 can be bound here (some containers have no IPv6)."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        s.bind(("::1", 0))
        return True
    except OSError:
        return False
    finally:
        s.close()


def table(client, proto, sport):
    """The rows asked from ``client``:``sport`` over ``proto``."""
    def row(qname, qtype):
        return Case(qname, qtype, aa=True, tc=False, extra=cases.whoami(
            qname, proto, client, sport))
    return [
        row("WhoAmI.Example.ORG", "A"),     # the client's case is kept
        row("example.org.", "AAAA"),        # the type asked changes nothing
        row("example.org.", "TXT"),
        row(".", "NS"),                     # the root: SRV owner _udp.
    ]


class WhoamiTest(unittest.TestCase):

    @defer.inlineCallbacks
    def serve(self, host):
        """Start whoami bound to ``host``; its port."""
        app = yield util.start(self, ".:0 {\n    bind %s\n    whoami\n}\n"
                               % host)
        return app.port()

    @defer.inlineCallbacks
    def check(self, host, proto):
        """Each row from a source port chosen here, so the SRV record can
        be checked for it."""
        port = yield self.serve(host)
        for case in table(host, proto, 0):
            sport = util.free_port(host)
            case.extra = cases.whoami(case.qname, proto, host, sport)
            reply = yield cases.ask(port, case, proto, host, sport=sport)
            cases.check_response(self, case, reply)

    def test_ipv4_udp(self):
        return self.check("127.0.0.1", "udp")

    def test_ipv4_tcp(self):
        return self.check("127.0.0.1", "tcp")

    def test_ipv6_udp(self):
        return self.check("::1", "udp")

    def test_ipv6_tcp(self):
        return self.check("::1", "tcp")

    if not has_ipv6_loopback():
        test_ipv6_udp.skip = test_ipv6_tcp.skip = "no IPv6 loopback (::1)"

    @defer.inlineCallbacks
    def test_any_source_port(self):
        """Without choosing the source port: every field but the port."""
        port = yield self.serve("127.0.0.1")
        yield cases.run(self, port, table("127.0.0.1", "udp", cases.ANY))
        yield cases.run(self, port, table("127.0.0.1", "tcp", cases.ANY),
                        proto="tcp")


class DirectTest(unittest.TestCase):
    """The chain without sockets: the client's address and port are the
    ones handed to the server."""

    def test_rows(self):
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        cases.run_direct(self, d, table("127.0.0.1", "udp", 40000))
        cases.run_direct(self, d, table("127.0.0.1", "tcp", 40000),
                         proto="tcp")

    def test_ipv6_client(self):
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        for case in table("2001:db8::1", "udp", 5353):
            wire = case.msg().to_wire()
            got = []
            d.mux.handle(wire, "2001:db8::1", 5353, "udp", None, got.append)
            cases.check_response(self, case, cases.parse_reply(got[0]))

    def test_arguments_rejected(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    whoami extra\n}\n")
        self.assertIn("plugin/whoami: Wrong argument count",
                      str(cm.exception))
