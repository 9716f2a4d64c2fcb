"""hosts: parsing, Corefile options, answers over the wire (CoreDNS's
hosts_test cases), fallthrough, metrics, and a file edited while serving."""

import os

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import corefile
from corednstw.core import dnswire as w
from corednstw.plugins import hosts
from tests.support import util

# CoreDNS's hostsExample, including its two lines that are not entries.
EXAMPLE = """
127.0.0.1 localhost localhost.domain
::1 localhost localhost.domain
10.0.0.1 example.org
::FFFF:10.0.0.2 example.com
10.0.0.3 fallthrough-example.org
1.2.3.4 aa.example.com
5.6.7.8 *.apps.example.com
reload 5s
timeout 3600
"""


class ParseTest(unittest.TestCase):

    def test_example(self):
        m = hosts.parse(EXAMPLE.splitlines(), ["."])
        self.assertEqual(sorted(m.name4), [
            "aa.example.com.", "example.com.", "example.org.",
            "fallthrough-example.org.", "localhost.", "localhost.domain."])
        self.assertEqual(m.name4["example.com."], [bytes([10, 0, 0, 2])])
        self.assertEqual(sorted(m.name6), ["localhost.", "localhost.domain."])
        self.assertEqual(m.wild4, {"*.apps.example.com.": [bytes([5, 6, 7,
                                                                 8])]})
        self.assertEqual(m.addr["127.0.0.1"], ["localhost.",
                                               "localhost.domain."])
        self.assertEqual(m.addr["10.0.0.2"], ["example.com."])
        self.assertNotIn("5.6.7.8", m.addr)   # wildcards make no PTR
        self.assertEqual([n for n, _ in m.skipped], [9, 10])
        # CoreDNS's Len: 8 forward + 1 wildcard + 8 reverse names.
        self.assertEqual(len(m), 17)

    def test_lines(self):
        cases = [
            # (line, origins, name4, name6, skipped)
            ("10.0.0.1 a # comment b", ["."], ["a."], [], 0),
            ("# 10.0.0.1 a", ["."], [], [], 0),
            ("10.0.0.1", ["."], [], [], 1),
            ("10.0.0.300 a", ["."], [], [], 1),
            ("010.0.0.1 a", ["."], [], [], 1),
            ("fe80::1%eth0 a", ["."], [], ["a."], 0),
            ("10.0.0.1\tA.Example.ORG\tb", ["example.org."],
             ["a.example.org."], [], 0),
            ("10.0.0.1 " + "x" * 64 + ".org", ["."], [], [], 1),
        ]
        for line, origins, n4, n6, skipped in cases:
            m = hosts.parse([line], origins)
            self.assertEqual(sorted(m.name4), n4, line)
            self.assertEqual(sorted(m.name6), n6, line)
            self.assertEqual(len(m.skipped), skipped, line)

    def test_no_reverse(self):
        m = hosts.parse(["10.0.0.1 a"], ["."], reverse=False)
        self.assertEqual(m.addr, {})
        self.assertEqual(len(m), 1)

    def test_wildcard_of(self):
        self.assertEqual(hosts.wildcard_of("a.b.c."), "*.b.c.")
        self.assertEqual(hosts.wildcard_of("com."), "")


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def load(self, text, files=None):
        return util.Direct(self, "example.org:0 {\n%s\n}\n" % text, files)

    def plugin(self, text):
        return self.load(text).app.config.blocks[0].plugin("hosts")

    def test_options(self):
        cap = self.log
        p = self.plugin("hosts /nonexistent miek.nl 10.0.0.9/8 {\n"
                        "  ttl 60\n  no_reverse\n  reload 0\n"
                        "  fallthrough\n}")
        self.assertEqual(p.path, "/nonexistent")
        self.assertEqual(p.zones, ["miek.nl.", "10.in-addr.arpa."])
        self.assertEqual((p.ttl, p.reverse, p.reload), (60, False, 0.0))
        self.assertTrue(p.fall.through("x.miek.nl."))
        self.assertIn("[WARNING] plugin/hosts: File does not exist: "
                      "/nonexistent", cap.lines)

    def test_defaults(self):
        p = self.plugin("hosts")
        self.assertEqual(p.path, "/etc/hosts")
        self.assertEqual(p.zones, ["example.org."])
        self.assertEqual((p.ttl, p.reverse, p.reload), (3600, True, 5.0))
        self.assertFalse(p.fall)

    def test_inline_until_fallthrough(self):
        p = self.plugin("hosts /nonexistent {\n  10.0.0.1 a.example.org\n"
                        "  ::1 a.example.org b.example.org\n"
                        "  fallthrough\n}")
        self.assertEqual(sorted(p.inline.name6), ["a.example.org.",
                                                  "b.example.org."])

    def test_root(self):
        d = util.write_files(self, {"hosts": "10.0.0.1 a.example.org\n"})
        cfg = self.load("hosts hosts").app.config
        block = cfg.blocks[0]
        block.settings["root"] = d
        p = hosts.setup(block.source.directives[0], block)
        self.assertEqual(p.path, os.path.join(d, "hosts"))
        p2 = hosts.setup(corefile.Directive("hosts", ["/abs"], [], "C", 1),
                         block)
        self.assertEqual(p2.path, "/abs")

    def test_errors(self):
        cases = [
            ("hosts {\n  ttl\n}", "ttl needs a time in second"),
            ("hosts {\n  ttl x\n}", "ttl needs a number of second"),
            ("hosts {\n  ttl 0\n}", "ttl provided is invalid"),
            ("hosts {\n  ttl 65536\n}", "ttl provided is invalid"),
            ("hosts {\n  reload\n}",
             "reload needs a duration (zero seconds to disable)"),
            ("hosts {\n  reload 5\n}", "invalid duration for reload '5'"),
            ("hosts {\n  reload -1s\n}",
             "invalid negative duration for reload '-1s'"),
            ("hosts {\n  fallthrough\n  10.0.0.1 a.example.org\n}",
             "unknown property '10.0.0.1'"),
            ("hosts {\n  fallthrough_unsupported\n}",
             "fallthrough_unsupported requires fallthrough"),
            ("hosts {\n  fallthrough\n  fallthrough_unsupported x\n}",
             "Wrong argument count"),
            ("hosts\nhosts", "this plugin can only be used once per Server Block"),
        ]
        for text, msg in cases:
            e = self.assertRaises(corefile.CorefileError, self.load, text)
            self.assertIn("plugin/hosts: " + msg, str(e), text)


def _ans(msg):
    return util.rrs(msg, "answer")


class ServeTest(unittest.TestCase):
    """CoreDNS's hosts_test table, over UDP, plus our own cases."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.dir = util.write_files(self, {"hosts": EXAMPLE})
        self.app = yield util.start(self, """
.:0 {
    hosts %s/hosts {
        10.9.9.9 inline.example.net example.org
        fallthrough fallthrough-example.org
    }
    whoami
}
""" % self.dir)
        self.port = self.app.port()

    @defer.inlineCallbacks
    def check(self, cases):
        for name, qtype, rcode, aa, answer in cases:
            m = yield util.query(self.port, name, qtype)
            label = "%s %s" % (name, qtype)
            self.assertEqual(dns.rcode.to_text(m.rcode()), rcode, label)
            self.assertEqual(bool(m.flags & dns.flags.AA), aa, label)
            self.assertEqual(_ans(m), sorted(answer), label)
            self.assertEqual(m.authority, [], label)

    def test_table(self):
        return self.check([
            ("example.org.", "A", "NOERROR", True,
             ["example.org. 3600 IN A 10.0.0.1",
              "example.org. 3600 IN A 10.9.9.9"]),
            ("example.com.", "A", "NOERROR", True,
             ["example.com. 3600 IN A 10.0.0.2"]),
            ("localhost.", "AAAA", "NOERROR", True,
             ["localhost. 3600 IN AAAA ::1"]),
            ("1.0.0.10.in-addr.arpa.", "PTR", "NOERROR", True,
             ["1.0.0.10.in-addr.arpa. 3600 IN PTR example.org."]),
            ("2.0.0.10.in-addr.arpa.", "PTR", "NOERROR", True,
             ["2.0.0.10.in-addr.arpa. 3600 IN PTR example.com."]),
            ("1.0.0.127.in-addr.arpa.", "PTR", "NOERROR", True,
             ["1.0.0.127.in-addr.arpa. 3600 IN PTR localhost.",
              "1.0.0.127.in-addr.arpa. 3600 IN PTR localhost.domain."]),
            ("9.9.9.10.in-addr.arpa.", "PTR", "NOERROR", True,
             ["9.9.9.10.in-addr.arpa. 3600 IN PTR inline.example.net.",
              "9.9.9.10.in-addr.arpa. 3600 IN PTR example.org."]),
            ("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
             "0.0.ip6.arpa.", "PTR", "NOERROR", True,
             ["1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
              "0.0.ip6.arpa. 3600 IN PTR localhost.",
              "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
              "0.0.ip6.arpa. 3600 IN PTR localhost.domain."]),
            # NODATA: AA, no SOA (hosts data have none).
            ("example.org.", "AAAA", "NOERROR", True, []),
            ("example.org.", "MX", "NOERROR", True, []),
            ("fallthrough-example.org.", "AAAA", "NOERROR", True, []),
            # Wildcards: one label below, not the apex, not deeper.
            ("apps.example.com.", "A", "SERVFAIL", False, []),
            ("x.apps.example.com.", "A", "NOERROR", True,
             ["x.apps.example.com. 3600 IN A 5.6.7.8"]),
            ("x.apps.example.com.", "AAAA", "NOERROR", True, []),
            ("aa.example.com.", "A", "NOERROR", True,
             ["aa.example.com. 3600 IN A 1.2.3.4"]),
            # Unknown names: SERVFAIL without AA (no SOA for an NXDOMAIN).
            ("nothere.example.org.", "A", "SERVFAIL", False, []),
            ("y.x.apps.example.com.", "A", "SERVFAIL", False, []),
        ])

    @defer.inlineCallbacks
    def test_fallthrough_and_ptr_miss(self):
        # fallthrough-example.org is a known name: NODATA, no fallthrough.
        # Unknown names under the fallthrough zone go on to whoami.
        m = yield util.query(self.port, "x.fallthrough-example.org", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(m.answer, [])
        self.assertEqual(len(m.additional), 2)   # whoami's records
        # A PTR the data do not know always goes on, fallthrough or not.
        m = yield util.query(self.port, "5.5.5.10.in-addr.arpa", "PTR")
        self.assertEqual(len(m.additional), 2)

    @defer.inlineCallbacks
    def test_case_and_tcp(self):
        m = yield util.query(self.port, "EXAMPLE.com", "A", proto="tcp")
        self.assertEqual(str(m.question[0].name), "EXAMPLE.com.")
        self.assertEqual([str(rd) for rd in m.answer[0]], ["10.0.0.2"])

    @defer.inlineCallbacks
    def test_metrics_and_warning(self):
        path = "%s/hosts" % self.dir
        self.assertEqual(hosts.ENTRIES.get((path,)), 17 + 4)
        mtime = os.stat(path).st_mtime
        self.assertEqual(hosts.RELOAD_TIMESTAMP.get(()), mtime)
        self.assertIn("[WARNING] plugin/hosts: %s: skipped 2 malformed "
                      "line(s), first at line 9: 'reload 5s'" % path,
                      self.log.lines)
        yield None


class UnsupportedTypeTest(unittest.TestCase):
    """CoreDNS's TestFallthroughUnsupportedType: TXT for a known name."""

    @defer.inlineCallbacks
    def serve(self, fall, unsupported, qname):
        opts = "fallthrough %s\n" % fall
        if unsupported:
            opts += "fallthrough_unsupported\n"
        app = yield util.start(self, """
.:0 {
    hosts /nonexistent {
        10.0.0.1 example.org
        %s
    }
    whoami
}
""" % opts)
        m = yield util.query(app.port(), qname, "TXT")
        yield app.stopService()
        return m

    @defer.inlineCallbacks
    def test_cases(self):
        util.capture_log(self)
        cases = [
            # (fallthrough zones, fallthrough_unsupported, qname, passed on)
            ("", False, "example.org", False),
            ("", True, "example.org", True),
            ("example.net", True, "example.org", False),
            ("", False, "missing.example.org", True),
        ]
        for fall, unsupported, qname, through in cases:
            m = yield self.serve(fall, unsupported, qname)
            self.assertEqual(len(m.additional) == 2, through, qname)
            if not through:
                self.assertTrue(m.flags & dns.flags.AA)
                self.assertEqual((m.rcode(), m.answer), (0, []))


class ReloadTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_edit_while_serving(self):
        util.capture_log(self)
        d = util.write_files(self, {"hosts": "10.0.0.1 a.example.org\n"})
        path = os.path.join(d, "hosts")
        app = yield util.start(self, """
example.org:0 {
    hosts %s {
        reload 20ms
    }
}
""" % path)
        port = app.port()
        m = yield util.query(port, "a.example.org", "A")
        self.assertEqual(_ans(m), ["a.example.org. 3600 IN A 10.0.0.1"])
        with open(path, "w") as f:
            f.write("10.0.0.2 a.example.org\n10.0.0.3 b.example.org\n")
        plugin = app.config.blocks[0].plugin("hosts")
        yield util.wait_for(lambda: "b.example.org." in plugin.snap.a)
        m = yield util.query(port, "b.example.org", "A")
        self.assertEqual(_ans(m), ["b.example.org. 3600 IN A 10.0.0.3"])
        m = yield util.query(port, "a.example.org", "A")
        self.assertEqual(_ans(m), ["a.example.org. 3600 IN A 10.0.0.2"])
        self.assertEqual(hosts.ENTRIES.get((path,)), 4)
        # Removing the file keeps the last data (as CoreDNS does).
        os.remove(path)
        yield plugin.check()
        m = yield util.query(port, "a.example.org", "A")
        self.assertEqual(_ans(m), ["a.example.org. 3600 IN A 10.0.0.2"])

    @defer.inlineCallbacks
    def test_reload_disabled(self):
        d = util.write_files(self, {"hosts": "10.0.0.1 a.example.org\n"})
        app = yield util.start(self, """
example.org:0 {
    hosts %s/hosts {
        reload 0
    }
}
""" % d)
        plugin = app.config.blocks[0].plugin("hosts")
        self.assertIsNone(plugin._loop)
        m = yield util.query(app.port(), "a.example.org", "A")
        self.assertEqual(_ans(m), ["a.example.org. 3600 IN A 10.0.0.1"])


class DirectTest(unittest.TestCase):
    """The chain without sockets: a query in, the sections out."""

    def test_sans_io(self):
        x = util.Direct(self, """
example.org:0 {
    hosts /nonexistent {
        10.0.0.1 a.example.org
        ttl 5
    }
}
""")
        plugin = x.app.config.blocks[0].plugin("hosts")
        m = x.query("a.example.org", "A")
        self.assertEqual(_ans(m), ["a.example.org. 5 IN A 10.0.0.1"])
        self.assertEqual(plugin.snap.lookup("a.example.org.", w.A)[0].ttl, 5)
