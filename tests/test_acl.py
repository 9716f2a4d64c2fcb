"""acl: policies by source address and type, over the wire from several
loopback addresses and through the chain without sockets."""

import socket

import dns.edns
import dns.message
import dns.rcode
from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import acl
from tests.support import util

EDE = 15


def ede(m):
    """Info codes of the reply's Extended DNS Error options."""
    return [o.code for o in m.options if o.otype == EDE]


class _Client(protocol.DatagramProtocol):
    """Sends one query from a chosen source address; fires with the reply
    or None when the server keeps quiet (drop)."""

    def __init__(self, data, port, d):
        self.data, self.port, self.d = data, port, d

    def startProtocol(self):
        self.transport.write(self.data, ("127.0.0.1", self.port))
        self.timer = reactor.callLater(1.0, self.quiet)

    def datagramReceived(self, data, addr):
        if not self.d.called:
            self.timer.cancel()
            self.d.callback(data)

    def quiet(self):
        if not self.d.called:
            self.d.callback(None)


@defer.inlineCallbacks
def ask_from(source, port, name, rdtype="A", **kw):
    """The parsed reply to a query sent from ``source`` (None if none)."""
    d = defer.Deferred()
    wire = util.make_query(name, rdtype, **kw).to_wire()
    p = reactor.listenUDP(0, _Client(wire, port, d), interface=source)
    try:
        data = yield d
    finally:
        yield p.stopListening()
    return None if data is None else dns.message.from_wire(data)


def _loopback_alias_works():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False
    finally:
        s.close()


COREFILE = """.:0 {
    acl example.org {
        allow net 127.0.0.7
        block type A net 127.0.0.2 127.0.0.6/31
        filter type AAAA net 127.0.0.3
        drop net 127.0.0.4
    }
    acl example.net {
        block type MX
    }
    bind 127.0.0.1
    prometheus 127.0.0.1:0
    whoami
}
"""


class WireTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        if not _loopback_alias_works():
            raise unittest.SkipTest("127.0.0.0/8 not routed to lo")
        self.app = yield util.start(self, COREFILE)
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_block(self):
        m = yield ask_from("127.0.0.2", self.port, "a.example.org", "A",
                           use_edns=0, payload=1232)
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertEqual(ede(m), [15])
        self.assertEqual(m.answer, [])
        self.assertEqual(m.payload, 1232)
        self.assertTrue(m.ednsflags & 0x8000)      # DO, as CoreDNS sets
        self.assertEqual(str(m.question[0].name), "a.example.org.")

    @defer.inlineCallbacks
    def test_block_without_edns_gets_opt(self):
        m = yield ask_from("127.0.0.2", self.port, "a.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertEqual(m.edns, 0)
        self.assertEqual(m.payload, 4096)
        self.assertEqual(ede(m), [15])

    @defer.inlineCallbacks
    def test_other_type_and_source_allowed(self):
        m = yield ask_from("127.0.0.2", self.port, "a.example.org", "TXT")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIn("a.example.org. 0 IN A 127.0.0.2",
                      util.rrs(m, "additional"))
        m = yield ask_from("127.0.0.6", self.port, "a.example.org", "TXT")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_first_policy_wins(self):
        # 127.0.0.7 is in the blocked /31 but allowed first.
        m = yield ask_from("127.0.0.7", self.port, "a.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        m = yield ask_from("127.0.0.6", self.port, "a.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)

    @defer.inlineCallbacks
    def test_filter(self):
        m = yield ask_from("127.0.0.3", self.port, "a.example.org", "AAAA",
                           use_edns=0)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual((m.answer, m.additional), ([], []))
        self.assertEqual(ede(m), [17])
        m = yield ask_from("127.0.0.3", self.port, "a.example.org", "A")
        self.assertIn("a.example.org. 0 IN A 127.0.0.3",
                      util.rrs(m, "additional"))

    @defer.inlineCallbacks
    def test_drop(self):
        m = yield ask_from("127.0.0.4", self.port, "a.example.org", "A")
        self.assertIsNone(m)
        # Outside the rule's zone the same source is answered.
        m = yield ask_from("127.0.0.4", self.port, "a.example.com", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_second_rule(self):
        m = yield ask_from("127.0.0.1", self.port, "example.net", "MX")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        m = yield ask_from("127.0.0.1", self.port, "example.org", "MX")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_tcp(self):
        m = yield util.query(self.port, "example.net", "MX", proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertEqual(ede(m), [15])

    @defer.inlineCallbacks
    def test_metrics(self):
        server = "dns://127.0.0.1:0"
        key = (server, "example.org.", "")
        before = [c.get(key) for c in (acl.BLOCKED, acl.FILTERED,
                                       acl.DROPPED)]
        allowed = acl.ALLOWED.get((server, ""))
        yield ask_from("127.0.0.2", self.port, "x.example.org", "A")
        yield ask_from("127.0.0.3", self.port, "x.example.org", "AAAA")
        yield ask_from("127.0.0.4", self.port, "x.example.org", "A")
        yield ask_from("127.0.0.1", self.port, "x.example.org", "A")
        code, body = yield util.http_get(
            self.app.http_port("127.0.0.1:0"), "/metrics")
        self.assertEqual(code, 200)
        for name in ("blocked", "filtered", "dropped"):
            self.assertIn('coredns_acl_%s_requests_total{server="%s",'
                          'view="",zone="example.org."}' % (name, server),
                          body)
        self.assertIn('coredns_acl_allowed_requests_total{server="%s",'
                      'view=""}' % server, body)
        self.assertEqual([c.get(key) for c in (acl.BLOCKED, acl.FILTERED,
                                               acl.DROPPED)],
                         [n + 1 for n in before])
        self.assertEqual(acl.ALLOWED.get((server, "")), allowed + 1)


class DirectTest(unittest.TestCase):
    """Table of (source, name, type) -> outcome through the whole chain."""

    def outcome(self, d, client, name, rdtype="A"):
        wire = util.make_query(name, rdtype).to_wire()
        data = d.ask(wire, client=client)
        if data is None:
            return "drop"
        m = dns.message.from_wire(data)
        if m.rcode() == dns.rcode.REFUSED:
            return "block"
        if ede(m) == [17]:
            return "filter"
        return "allow"

    def test_table(self):
        d = util.Direct(self, """.:0 {
    acl {
        allow type AAAA
        block net 10.0.0.0/8 2001:db8::/32
        filter type MX TXT net 192.168.1.1
        drop net *
    }
    whoami
}
""")
        for client, name, rdtype, want in [
                ("10.1.2.3", "a.", "A", "block"),
                ("10.1.2.3", "a.", "AAAA", "allow"),
                ("::ffff:10.1.2.3", "a.", "A", "block"),
                ("2001:db8::1", "a.", "A", "block"),
                ("2001:db9::1", "a.", "A", "drop"),
                ("192.168.1.1", "a.", "MX", "filter"),
                ("192.168.1.1", "a.", "TXT", "filter"),
                ("192.168.1.1", "a.", "A", "drop"),
                ("fe80::1%eth0", "a.", "A", "drop"),
                ("192.168.1.2", "a.", "MX", "drop")]:
            self.assertEqual(self.outcome(d, client, name, rdtype), want,
                             (client, rdtype))

    def test_unparsable_source_blocked(self):
        d = util.Direct(self, ".:0 {\n    acl {\n        allow\n    }\n"
                        "    whoami\n}\n")
        cap = util.capture_log(self)
        self.assertEqual(self.outcome(d, "not-an-ip", "a."), "block")
        self.assertIn("[ERROR] plugin/acl: Blocking request. Unable to "
                      "parse source address: not-an-ip", cap.text())

    def test_no_policy_allows(self):
        d = util.Direct(self, ".:0 {\n    acl\n    whoami\n}\n")
        self.assertEqual(self.outcome(d, "10.0.0.1", "a."), "allow")

    def test_zones_and_type_star(self):
        d = util.Direct(self, """.:0 {
    acl a.example.org {
        block type * net 10.0.0.0/8
    }
    whoami
}
""")
        self.assertEqual(self.outcome(d, "10.0.0.1", "x.a.example.org",
                                      "SRV"), "block")
        self.assertEqual(self.outcome(d, "10.0.0.1", "b.example.org"),
                         "allow")

    def test_allow_stops_later_rules(self):
        d = util.Direct(self, """.:0 {
    acl {
        allow net 10.0.0.1
    }
    acl {
        block
    }
    whoami
}
""")
        plugins = [p for p in d.app.config.blocks[0].plugins
                   if isinstance(p, acl.ACL)]
        self.assertEqual(len(plugins), 1)
        self.assertEqual(self.outcome(d, "10.0.0.1", "a."), "allow")
        self.assertEqual(self.outcome(d, "10.0.0.2", "a."), "block")

    def test_block_reply_flags(self):
        d = util.Direct(self, ".:0 {\n    acl {\n        block\n    }\n}\n")
        q = util.make_query("a.example.org", "A", use_edns=0, payload=1400)
        q.flags |= 0x0010   # CD
        m = dns.message.from_wire(d.ask(q.to_wire()))
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertEqual(m.flags & 0x8510, 0x8110)   # QR RD CD, no AA
        self.assertEqual(m.payload, 1400)
        self.assertEqual([o.to_wire() for o in m.options], [b"\x00\x0f"])


SETUP_ERRORS = [
    ("bogus", 'unexpected token "bogus"; expect \'allow\', \'block\', '
     "'filter' or 'drop'"),
    ("block foo", 'unexpected token "foo"; expect \'type | net\''),
    ("block type", 'no token specified in "type" section'),
    ("block net", 'no token specified in "net" section'),
    ("block type FOO", 'unexpected token "FOO"; expect legal QTYPE'),
    ("block type a", 'unexpected token "a"; expect legal QTYPE'),
    ("block net 10.0.0.300", 'illegal CIDR notation "10.0.0.300/32"'),
    ("block net 10.0.0.0/33", 'illegal CIDR notation "10.0.0.0/33"'),
    ("block net ::1/129", 'illegal CIDR notation "::1/129"'),
    ("block net bogus", 'illegal CIDR notation "bogus/32"'),
]


class SetupTest(unittest.TestCase):

    def test_errors(self):
        for line, want in SETUP_ERRORS:
            with self.assertRaises(CorefileError, msg=line) as cm:
                util.Direct(self, ".:0 {\n    acl {\n        %s\n    }\n"
                            "}\n" % line)
            self.assertIn("Corefile:3 - Error during parsing: plugin/acl: "
                          + want, str(cm.exception), line)

    def test_valid(self):
        for line in ("block type A AAAA net 10.0.0.0/8 ::1",
                     "allow net * type *", "filter type TXT",
                     "drop net 192.168.0.1", "ALLOW NET 10.1.0.0/16",
                     "block net 10.0.0.1/8"):
            util.Direct(self, ".:0 {\n    acl example.org {\n        %s\n"
                        "    }\n}\n" % line)

    def test_address(self):
        self.assertEqual(acl.address("10.0.0.1"), (4, 0x0A000001))
        self.assertEqual(acl.address("::ffff:10.0.0.1"), (4, 0x0A000001))
        self.assertEqual(acl.address("::1%lo"), (6, 1))
        self.assertIsNone(acl.address("nope"))

    def test_edns_option_class(self):
        self.assertEqual(dns.edns.EDECode.BLOCKED, 15)
        self.assertEqual(dns.edns.EDECode.FILTERED, 17)
