"""reload: the Corefile changes under a running server."""

import socket

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.dump import digest
from corednstw.plugins import reload as reloadmod
from tests.support import util

V1 = """.:0 {
    whoami
    prometheus 127.0.0.1:0
    reload 2s 0
}
"""
V2 = """.:0 {
    prometheus 127.0.0.1:0
    reload 2s 0
}
example.org:0 {
    whoami
}
"""
BROKEN = """.:0 {
    whoami bad
    reload 2s 0
}
"""


def rewrite(app, text):
    """Replace the Corefile the reload plugin polls, in one step."""
    util.rewrite(app.path, text)


class ReloadTest(unittest.TestCase):

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, V1)
        self.port = self.app.port()

    def test_setup_errors(self):
        from corednstw.core.errors import CorefileError
        for bad, msg in (("reload 1s", "interval value must be greater or "
                          "equal to 2s"),
                         ("reload 10s 500ms", "jitter value must be 0 or "
                          "greater or equal to 1s"),
                         ("reload 1 2 3", "Wrong argument count")):
            with self.assertRaises(CorefileError) as cm:
                util.Direct(self, ".:0 {\n    %s\n}\n" % bad)
            self.assertIn(msg, str(cm.exception))

    @defer.inlineCallbacks
    def test_reload_switches_and_keeps_port(self):
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 0)
        rewrite(self.app, V2)
        self.assertTrue(self.app.reload())
        self.assertEqual(self.app.port(), self.port)
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 2)      # "." has no answering plugin
        m = yield util.query(self.port, "a.example.org.", proto="tcp")
        self.assertEqual(m.rcode(), 0)
        self.assertIn("[INFO] Reloading complete", self.log.lines)

    @defer.inlineCallbacks
    def test_broken_corefile_keeps_old_config(self):
        before = metrics.RELOAD_FAILED.get()
        rewrite(self.app, BROKEN)
        self.assertFalse(self.app.reload())
        self.assertEqual(metrics.RELOAD_FAILED.get(), before + 1)
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(len(m.additional), 2)
        self.assertTrue(any("Corefile changed but reload failed" in line
                            for line in self.log.lines))

    @defer.inlineCallbacks
    def test_polling_detects_change(self):
        rewrite(self.app, V2)
        new = digest(self.app.parse())
        yield util.wait_for(lambda: self.app.config.blocks[-1].zones ==
                            ["example.org."], timeout=20)
        self.assertEqual(reloadmod.VERSION_INFO.values,
                         {("sha512", new): 1})

    @defer.inlineCallbacks
    def test_queries_across_reloads_lose_nothing(self):
        """Queries keep flowing while the config flips three times."""
        answered = []
        texts = [V2, V1, V2]
        for round_, text in enumerate(texts):
            ds = [util.query(self.port, "q%d.example.org." % i)
                  for i in range(300)]
            rewrite(self.app, text)
            self.assertTrue(self.app.reload())
            results = yield defer.gatherResults(ds)
            answered.extend(results)
        self.assertEqual(len(answered), 900)
        self.assertTrue(all(m.rcode() == 0 for m in answered))


class PollingFailureTest(unittest.TestCase):
    """What the reload plugin's own check does with a broken Corefile: one
    that reads but fails its setup is a change and a failed reload
    (counted); one that does not read is only logged, as in CoreDNS."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, V1)
        self.plugin = self.app.config.blocks[0].plugin("reload")

    def tick(self, text):
        """Write ``text`` and run one check now (no waiting for the
        interval); the number of failed reloads it added."""
        before = metrics.RELOAD_FAILED.get()
        rewrite(self.app, text)
        self.plugin.stop()
        self.plugin._tick()
        return metrics.RELOAD_FAILED.get() - before

    def failed_lines(self):
        return [x for x in self.log.lines if x.startswith(
            "[ERROR] Corefile changed but reload failed: ")]

    def assert_kept(self):
        self.assertIn("whoami", self.app.config.blocks[0].directive_names())

    def test_unknown_directive(self):
        self.assertEqual(self.tick(V1.replace("whoami", "whoam")), 1)
        [line] = self.failed_lines()
        self.assertIn("Unknown directive 'whoam'", line)
        self.assert_kept()

    def test_bad_argument(self):
        self.assertEqual(self.tick(BROKEN), 1)
        [line] = self.failed_lines()
        self.assertIn("plugin/whoami: Wrong argument count", line)
        self.assert_kept()

    def test_bad_key(self):
        self.assertEqual(self.tick(V1.replace(".:0", ".:0 a..b:0")), 1)
        self.assertEqual(len(self.failed_lines()), 1)
        self.assert_kept()

    def test_same_broken_file_tried_once(self):
        self.assertEqual(self.tick(BROKEN), 1)
        self.assertEqual(self.tick(BROKEN), 0)

    def test_unreadable_corefile_only_logged(self):
        self.assertEqual(self.tick(V1 + "{\n"), 0)
        self.assertEqual(self.failed_lines(), [])
        self.assertTrue(any(x.startswith(
            "[WARNING] plugin/reload: Corefile parse failed: ")
            for x in self.log.lines), self.log.lines)
        self.assert_kept()

    def test_fixed_file_reloads(self):
        self.tick(BROKEN)
        self.assertEqual(self.tick(V2), 0)
        self.assertEqual(self.app.config.blocks[-1].zones,
                         ["example.org."])


class ReloadEdgeTest(unittest.TestCase):
    """A reload whose new listener cannot be opened fails as a whole (the
    old configuration keeps serving, as CoreDNS rolls a failed restart
    back); a kept listener takes the new TCP limits."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, ".:0 {\n    whoami\n}\n")
        self.port = self.app.port()

    def rewrite(self, text):
        util.rewrite(self.app.path, text)

    @defer.inlineCallbacks
    def test_port_in_use_keeps_old_config(self):
        busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        before = self.app.config
        failed = metrics.RELOAD_FAILED.get(())
        self.rewrite(".:0 {\n    whoami\n}\nexample.org:%d {\n"
                      "    bind 127.0.0.1\n    whoami\n}\n" % taken)
        self.assertFalse(self.app.reload())
        self.assertIs(self.app.config, before)
        self.assertEqual(metrics.RELOAD_FAILED.get(()), failed + 1)
        self.assertIn("reload failed", self.log.text())
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 0)
        m = yield util.query(self.port, "b.example.com.", proto="tcp")
        self.assertEqual(m.rcode(), 0)

    def test_kept_listener_takes_new_timeouts(self):
        self.rewrite(".:0 {\n    whoami\n    timeouts {\n        idle 7s\n"
                      "    }\n}\n")
        self.assertTrue(self.app.reload())
        lst = next(iter(self.app.listeners.values()))
        self.assertEqual(lst.port, self.port)
        self.assertEqual(lst.tcp.factory.timeouts.idle, 7.0)
