"""hosts: parsing, Corefile options, answers over the wire (CoreDNS's
hosts_test cases), fallthrough, metrics, and a file edited while serving."""

import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.directive import Directive
from corednstw.core.errors import CorefileError
from corednstw.plugins import hosts
from tests.support import cases, util
from tests.support.cases import Case

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
        p2 = hosts.setup(Directive("hosts", ["/abs"], [], "C", 1),
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
            ("hosts\nhosts",
             "this plugin can only be used once per Server Block"),
        ]
        for text, msg in cases:
            e = self.assertRaises(CorefileError, self.load, text)
            self.assertIn("plugin/hosts: " + msg, str(e), text)


PTR6 = ("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
        "ip6.arpa.")


def row(qname, qtype, *answer, rcode="NOERROR", aa=True):
    """A hosts answer: AA with the records; no authority (hosts data
    have no SOA)."""
    return Case(qname, qtype, rcode=rcode, aa=aa, answer=answer)


def unknown(qname, qtype="A"):
    """A name the data do not know, outside fallthrough: SERVFAIL without
    AA (no SOA to make an NXDOMAIN with)."""
    return Case(qname, qtype, rcode="SERVFAIL", aa=False)


# CoreDNS's hosts_test table plus our own rows.
TABLE = [
    row("example.org.", "A", "example.org. 3600 IN A 10.0.0.1",
        "example.org. 3600 IN A 10.9.9.9"),
    row("example.com.", "A", "example.com. 3600 IN A 10.0.0.2"),
    row("localhost.", "AAAA", "localhost. 3600 IN AAAA ::1"),
    row("1.0.0.10.in-addr.arpa.", "PTR",
        "1.0.0.10.in-addr.arpa. 3600 IN PTR example.org."),
    row("2.0.0.10.in-addr.arpa.", "PTR",
        "2.0.0.10.in-addr.arpa. 3600 IN PTR example.com."),
    row("1.0.0.127.in-addr.arpa.", "PTR",
        "1.0.0.127.in-addr.arpa. 3600 IN PTR localhost.",
        "1.0.0.127.in-addr.arpa. 3600 IN PTR localhost.domain."),
    row("9.9.9.10.in-addr.arpa.", "PTR",
        "9.9.9.10.in-addr.arpa. 3600 IN PTR inline.example.net.",
        "9.9.9.10.in-addr.arpa. 3600 IN PTR example.org."),
    row(PTR6, "PTR", PTR6 + " 3600 IN PTR localhost.",
        PTR6 + " 3600 IN PTR localhost.domain."),
    # NODATA: AA, no SOA (hosts data have none).
    row("example.org.", "AAAA"),
    row("example.org.", "MX"),
    row("fallthrough-example.org.", "AAAA"),
    # Wildcards: one label below, not the apex, not deeper.
    unknown("apps.example.com."),
    row("x.apps.example.com.", "A", "x.apps.example.com. 3600 IN A 5.6.7.8"),
    row("x.apps.example.com.", "AAAA"),
    row("aa.example.com.", "A", "aa.example.com. 3600 IN A 1.2.3.4"),
    unknown("nothere.example.org."),
    unknown("y.x.apps.example.com."),
]


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

    def test_table(self):
        return cases.run(self, self.port, TABLE)

    def test_fallthrough_and_ptr_miss(self):
        return cases.run(self, self.port, [
            # fallthrough-example.org is a known name: NODATA, no
            # fallthrough.  Unknown names under the fallthrough zone go on
            # to whoami.
            Case("x.fallthrough-example.org", "A", aa=True,
                 extra=cases.whoami("x.fallthrough-example.org")),
            # A PTR the data do not know always goes on, fallthrough or
            # not.
            Case("5.5.5.10.in-addr.arpa", "PTR", aa=True,
                 extra=cases.whoami("5.5.5.10.in-addr.arpa")),
        ])

    def test_case_and_tcp(self):
        # The question keeps the client's case; the records have the
        # lower-cased owner of the data, as CoreDNS's hosts answers.
        return cases.run(self, self.port, [
            row("EXAMPLE.com", "A", "example.com. 3600 IN A 10.0.0.2"),
        ], proto="tcp")

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
    def serve(self, fall, unsupported, case):
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
        reply = yield cases.ask(app.port(), case)
        yield app.stopService()
        return reply

    @defer.inlineCallbacks
    def test_cases(self):
        util.capture_log(self)

        def passed_on(qname):
            return Case(qname, "TXT", aa=True, extra=cases.whoami(qname))
        nodata = Case("example.org", "TXT", aa=True)
        table = [
            # (fallthrough zones, fallthrough_unsupported, expected)
            ("", False, nodata),
            ("", True, passed_on("example.org")),
            ("example.net", True, nodata),
            ("", False, passed_on("missing.example.org")),
        ]
        for fall, unsupported, case in table:
            case.desc = "fallthrough %r%s" % (
                fall, " fallthrough_unsupported" if unsupported else "")
            reply = yield self.serve(fall, unsupported, case)
            cases.check_response(self, case, reply)


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
        yield cases.run(self, port, [
            row("a.example.org", "A", "a.example.org. 3600 IN A 10.0.0.1")])
        util.rewrite(path, "10.0.0.2 a.example.org\n10.0.0.3 b.example.org\n")
        plugin = app.config.blocks[0].plugin("hosts")
        yield util.wait_for(lambda: "b.example.org." in plugin.snap.a)
        edited = [
            row("b.example.org", "A", "b.example.org. 3600 IN A 10.0.0.3"),
            row("a.example.org", "A", "a.example.org. 3600 IN A 10.0.0.2"),
        ]
        yield cases.run(self, port, edited)
        self.assertEqual(hosts.ENTRIES.get((path,)), 4)
        # Removing the file keeps the last data (as CoreDNS does).
        os.remove(path)
        yield plugin.check()
        yield cases.run(self, port, edited)

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
        yield cases.run(self, app.port(), [
            row("a.example.org", "A", "a.example.org. 3600 IN A 10.0.0.1")])


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
        cases.run_direct(self, x, [
            row("a.example.org", "A", "a.example.org. 5 IN A 10.0.0.1")])
        self.assertEqual(plugin.snap.lookup("a.example.org.", w.A)[0].ttl, 5)
