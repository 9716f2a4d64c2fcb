"""loop: a forwarding loop is detected at start-up (FATAL line, exit 1);
a healthy upstream gives no false positive and the probe stops."""

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import loop as loopmod
from tests.support import util
from tests.support.unbound import free_port
from tests.support.upstream import Upstream


class LoopTest(unittest.TestCase):

    def setUp(self):
        self.exits = []
        self.patch(loopmod, "default_exit", self.exits.append)
        self.log = util.capture_log(self)

    def plugin(self, app):
        return [p for p in app.config.plugins() if p.name == "loop"][0]

    @defer.inlineCallbacks
    def test_loop_detected(self):
        port = free_port()
        app = yield util.start(self, ".:%d {\n loop\n forward . 127.0.0.1:%d"
                                     "\n}\n" % (port, port))
        yield util.wait_for(lambda: self.exits)
        self.assertEqual(self.exits, [1])
        lp = self.plugin(app)
        fatal = [x for x in self.log.lines if x.startswith("[FATAL]")]
        self.assertEqual(len(fatal), 1)
        self.assertRegex(
            fatal[0],
            r'^\[FATAL\] plugin/loop: Loop \(127\.0\.0\.1:\d+ -> :%d\) '
            r'detected for zone "\.", see https://coredns\.io/plugins/loop'
            r'#troubleshooting\. Query: "HINFO \d+\.\d+\."$' % port)
        self.assertIn(lp.qname, fatal[0])

    @defer.inlineCallbacks
    def test_zone_in_probe_name(self):
        port = free_port()
        app = yield util.start(
            self, "example.org:%d {\n loop\n forward . 127.0.0.1:%d\n}\n"
            % (port, port))
        yield util.wait_for(lambda: self.exits)
        self.assertTrue(self.plugin(app).qname.endswith(".example.org."))
        self.assertIn('detected for zone "example.org."', self.log.text())

    @defer.inlineCallbacks
    def test_no_false_positive(self):
        up = Upstream().start()
        self.addCleanup(up.stop)
        app = yield util.start(self, ".:0 {\n loop\n forward . %s\n}\n"
                               % up.addr())
        lp = self.plugin(app)
        yield util.wait_for(lambda: lp.off)
        self.assertEqual(self.exits, [])
        self.assertEqual(up.count(qtype="HINFO"), 1)
        self.assertEqual(up.count(name=lp.qname), 1)
        # switched off: HINFO queries pass untouched
        m = yield util.query(app.port(), lp.qname, "HINFO")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(self.exits, [])

    def test_args(self):
        import os

        from corednstw.service.app import App
        d = util.write_files(self, {"Corefile": ". {\n loop foo\n}\n"})
        with self.assertRaises(CorefileError):
            App(os.path.join(d, "Corefile"), dns_port=0).load()


class ServeTest(unittest.TestCase):
    """loop_test.go: which queries the plugin counts and passes on."""

    def plugin(self, zone="."):
        from corednstw.core.request import Request, make_query
        lp = loopmod.Loop(zone)
        lp.next = util.Stub(lambda req: "next")

        def ask(name, qtype):
            req = Request(make_query(name, qtype))
            qd, an, ns, ar = req.parse_header()
            req.parse_question(an, ns, ar)
            return lp.serve(req)
        return lp, ask

    def test_non_hinfo_passes(self):
        lp, ask = self.plugin()
        self.assertEqual(ask("example.org.", 1), "next")
        self.assertEqual(lp.seen, 0)

    def test_disabled_passes(self):
        lp, ask = self.plugin()
        lp.off = True
        lp.qname = "1.2.example.org."
        self.assertEqual(ask("1.2.example.org.", 13), "next")
        self.assertEqual(lp.seen, 0)

    def test_zone_mismatch_passes(self):
        lp, ask = self.plugin("example.org.")
        lp.qname = "a.example.com."
        self.assertEqual(ask("a.example.com.", 13), "next")
        self.assertEqual(lp.seen, 0)

    def test_match_and_count(self):
        lp, ask = self.plugin()
        lp.qname = "1.2.example.org."
        self.assertEqual(ask("1.2.example.org.", 13), "next")
        self.assertEqual(lp.seen, 1)
        # other HINFO names in the zone are not counted
        self.assertEqual(ask("3.4.example.org.", 13), "next")
        self.assertEqual(lp.seen, 1)

    def test_probe_names(self):
        a, b = loopmod.probe_name("."), loopmod.probe_name("example.org.")
        self.assertRegex(a, r"^\d+\.\d+\.$")
        self.assertRegex(b, r"^\d+\.\d+\.example\.org\.$")
        self.assertNotEqual(a, loopmod.probe_name("."))
