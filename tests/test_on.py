"""on: commands run at startup, reload and shutdown."""

import os

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import util


class OnSetupTest(unittest.TestCase):

    def _error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n%s\n    whoami\n}\n" % text)
        return str(cm.exception)

    def _hooks(self, text):
        s = util.Direct(self, ".:0 {\n%s\n    whoami\n}\n" % text)
        return s.app.config.blocks[0].plugin("on").hooks

    def test_parse(self):
        # As in CoreDNS, the arguments are joined and split again.
        hooks = self._hooks('    on startup cmd arg1 "two words"\n'
                            "    on SHUTDOWN cmd arg1 arg2 &")
        self.assertEqual([(h.event, h.command, h.args, h.background)
                          for h in hooks],
                         [("startup", "cmd", ["arg1", "two", "words"], False),
                          ("shutdown", "cmd", ["arg1", "arg2"], True)])
        self.assertNotEqual(hooks[0].id, hooks[1].id)

    def test_errors(self):
        self.assertIn("Wrong argument count", self._error("    on"))
        self.assertIn("plugin/on: Wrong event name or event not supported: "
                      "'boot'", self._error("    on boot cmd"))
        self.assertIn("no command contained in ''",
                      self._error("    on startup"))
        self.assertIn("error parsing command",
                      self._error("    on startup echo 'open"))


class OnRunTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)
        self.dir = util.write_files(self, {
            "rec": "#!/bin/sh\necho \"$1\" >> \"$2\"\n",
            "fail": "#!/bin/sh\necho hello\necho oops >&2\nexit 3\n"})
        for name in ("rec", "fail"):
            os.chmod(os.path.join(self.dir, name), 0o755)

    def _script(self, out, text):
        """A command appending ``text`` to the file ``out``."""
        return "%s %s %s" % (os.path.join(self.dir, "rec"), text,
                             os.path.join(self.dir, out))

    def _read(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().split()

    @defer.inlineCallbacks
    def test_startup_reload_shutdown(self):
        app = yield util.start(self, (
            ".:0 {\n    on startup %s\n    on shutdown %s\n"
            "    on certrenew %s\n    whoami\n}\n"
            % (self._script("events", "up"), self._script("events", "down"),
               self._script("events", "cert"))))
        # Blocking startup commands have ended when the start has.
        self.assertEqual(self._read("events"), ["up"])
        self.assertIn('[INFO] Blocking Command "%s up %s" with ID '
                      % (os.path.join(self.dir, "rec"),
                         os.path.join(self.dir, "events")), self.log.text())
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)
        # A reload: startup again, and no shutdown.
        self.assertTrue(app.reload())
        yield util.wait_for(lambda: self._read("events") == ["up", "up"])
        yield app.stopService()
        self.assertEqual(self._read("events"), ["up", "up", "down"])

    @defer.inlineCallbacks
    def test_output_and_failures(self):
        yield util.start(self, (
            ".:0 {\n    on startup %s\n"
            "    on startup no-such-command-here\n    whoami\n}\n"
            % os.path.join(self.dir, "fail")))
        text = self.log.text()
        self.assertIn("hello", self.log.lines)
        self.assertIn("oops", self.log.lines)
        self.assertIn("exit status 3", text)
        self.assertIn('exec: "no-such-command-here": executable file not '
                      "found in $PATH", text)

    @defer.inlineCallbacks
    def test_background(self):
        yield util.start(self, (
            ".:0 {\n    on startup %s &\n    whoami\n}\n"
            % self._script("bg", "ran")))
        self.assertIn('[INFO] Nonblocking Command', self.log.text())
        yield util.wait_for(lambda: self._read("bg") == ["ran"])
