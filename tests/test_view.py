"""view: CoreDNS's README examples over the wire (clients on different
127.x source addresses), block order, metrics, metadata and setup."""

import os

import dns.message
import dns.rcode
from twisted.internet import defer, reactor
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from tests.support import util

EXAMPLES = os.path.join(util.REPO, "tests", "corefiles", "view")


def example(name):
    """A README example on port 0; ``forward`` replaced by a template that
    says where the query would have gone."""
    with open(os.path.join(EXAMPLES, name + ".Corefile")) as f:
        return f.read()


def answers(msg):
    return [" ".join(line.split()) for line in util.rrs(msg)]


def query_from(source, port, name, rdtype="A"):
    """Ask over UDP from the local address ``source`` (127.x.y.z)."""
    q = dns.message.make_query(name, rdtype)
    client = util._UDPClient(q.to_wire(), ("127.0.0.1", port), 5, 1)
    listening = reactor.listenUDP(0, client, interface=source)

    def done(r):
        listening.stopListening()
        return dns.message.from_wire(r) if isinstance(r, bytes) else r
    return client.d.addBoth(done)


class ReadmeExamplesTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_cidr_split(self):
        app = yield util.start(self, example("cidr"))
        port = app.port()
        r = yield query_from("127.0.0.1", port, "test.")
        self.assertEqual(answers(r), ["test. 3600 IN A 1.1.1.1"])
        r = yield query_from("127.0.0.200", port, "test.")
        self.assertEqual(answers(r), ["test. 3600 IN A 1.1.1.1"])
        r = yield query_from("127.0.1.1", port, "test.")
        self.assertEqual(answers(r), ["test. 3600 IN A 3.3.3.3"])
        r = yield query_from("127.1.2.3", port, "test.")
        self.assertEqual(answers(r), ["test. 3600 IN A 3.3.3.3"])

    def test_cidr_split_other_networks(self):
        """Clients this machine cannot send from, sans-I/O."""
        s = util.Direct(self, example("cidr"))
        for client, qtype, want in [
                ("192.168.4.5", "A", "test. 3600 IN A 2.2.2.2"),
                ("2001:db8::53", "AAAA", "test. 3600 IN AAAA 2001:db8::1"),
                ("10.0.0.1", "A", "test. 3600 IN A 3.3.3.3"),
                ("::1", "A", "test. 3600 IN A 3.3.3.3")]:
            wire = dns.message.make_query("test.", qtype).to_wire()
            r = dns.message.from_wire(s.ask(wire, client=client))
            self.assertEqual(answers(r), [want], client)

    @defer.inlineCallbacks
    def test_by_type(self):
        app = yield util.start(self, example("type"))
        for qtype, to in [("A", "10.0.0.6"), ("AAAA", "10.0.0.6"),
                          ("MX", "10.0.0.1"), ("TXT", "10.0.0.1")]:
            r = yield util.query(app.port(), "example.org.", qtype)
            self.assertEqual(answers(r), [
                'example.org. 60 IN TXT "to %s"' % to], qtype)

    @defer.inlineCallbacks
    def test_by_name(self):
        app = yield util.start(self, example("name"))
        for name, to in [("abc.x.example.com.", "10.0.0.2"),
                         ("abc.x.y.example.com.", "10.0.0.2"),
                         ("abc.example.com.", "10.0.0.1"),
                         ("xabc.x.example.com.", "10.0.0.1")]:
            r = yield util.query(app.port(), name, "A")
            self.assertEqual(answers(r), [
                '%s 60 IN TXT "to %s"' % (name, to)], name)


class RoutingTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_metadata_and_view_name(self):
        app = yield util.start(self, example("metadata"))
        r = yield query_from("127.0.0.2", app.port(), "example.org.", "TXT")
        self.assertEqual(answers(r),
                         ['example.org. 60 IN TXT "internal"'])
        r = yield query_from("127.0.0.3", app.port(), "example.org.", "TXT")
        self.assertEqual(answers(r), ['example.org. 60 IN TXT "default"'])

    def test_view_metric_label(self):
        text = example("type").replace("  template", "  prometheus "
                                       "127.0.0.1:0\n  template")
        s = util.Direct(self, text)
        key = (s.mux.label, ".", "example", "udp", "1", "A")
        other = (s.mux.label, ".", "", "udp", "1", "MX")
        before = metrics.REQUESTS.get(key), metrics.REQUESTS.get(other)
        s.query("a.example.", "A")
        s.query("a.example.", "MX")
        self.assertEqual(metrics.REQUESTS.get(key), before[0] + 1)
        self.assertEqual(metrics.REQUESTS.get(other), before[1] + 1)

    def test_unfiltered_block_first_shadows(self):
        s = util.Direct(self, """.:0 {
  template ANY ANY {
    answer "{{ .Name }} 60 IN TXT \\"catch-all\\""
  }
}
.:0 {
  view all {
    expr true
  }
  template ANY ANY {
    answer "{{ .Name }} 60 IN TXT \\"view\\""
  }
}
""")
        self.assertEqual(answers(s.query("a.", "A")),
                         ['a. 60 IN TXT "catch-all"'])

    def test_no_block_accepts_refused(self):
        s = util.Direct(self, """.:0 {
  view never {
    expr false
  }
  whoami
}
""")
        self.assertEqual(s.query("a.", "A").rcode(), dns.rcode.REFUSED)

    def test_runtime_error_refuses(self):
        """Two true expressions and one that fails while running: the
        block is not chosen."""
        s = util.Direct(self, """.:0 {
  view both {
    expr type() == 'A'
    expr name() endsWith 'example.'
    expr incidr('notanip', '10.0.0.0/8') || true
  }
  whoami
}
.:0 {
  template ANY ANY {
    rcode NXDOMAIN
  }
}
""")
        self.assertEqual(s.query("a.example.", "A").rcode(),
                         dns.rcode.NXDOMAIN)
        self.assertEqual(s.query("a.example.", "MX").rcode(),
                         dns.rcode.NXDOMAIN)
        self.assertEqual(s.query("a.other.", "A").rcode(),
                         dns.rcode.NXDOMAIN)

    def test_true_view_served(self):
        s = util.Direct(self, """.:0 {
  view both {
    expr type() == 'A' && name() endsWith 'example.'
  }
  whoami
}
.:0 {
  template ANY ANY {
    rcode NXDOMAIN
  }
}
""")
        r = s.query("a.example.", "A")
        self.assertEqual(r.rcode(), dns.rcode.NOERROR)
        self.assertEqual(len(r.additional), 2)          # whoami


class SetupTest(unittest.TestCase):

    def error(self, body):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n%s\n}\n.:0 {\n whoami\n}\n" % body)
        return str(cm.exception)

    def test_errors(self):
        for body, fragment in [
            ("view", "Wrong argument count"),
            ("view a b", "Wrong argument count"),
            ("view a {\n  foo\n}", "unknown property 'foo'"),
            ("view a {\n  expr nosuch()\n}", "unknown name nosuch"),
            ("view a {\n  expr name() ==\n}", "unexpected end"),
            ("view a {\n  expr\n}", "unexpected end"),
            ("view a {\n  expr 1 + 'x'\n}", "mismatched types"),
            ("view a\nview b", "only be used once"),
        ]:
            text = self.error(body)
            self.assertIn(fragment, text, body)
            self.assertIn("Corefile:", text)

    def test_error_line(self):
        text = self.error("whoami\nview a {\n  expr nosuch()\n}")
        self.assertIn("Corefile:4", text)

    def test_same_zone_without_view_refused(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n whoami\n}\n.:0 {\n whoami\n}\n")
        self.assertIn("already defined", str(cm.exception))
