"""The garbage collector is held off while a server starts (the commands'
make_service) and runs again once its plugins have started."""

import gc
import json
import os
import subprocess
import sys
from types import SimpleNamespace

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.service import stall
from corednstw.service.app import App
from tests.support import util


class _Slow:
    """A plugin whose start ends when ``started`` fires."""

    name = "slow"

    def __init__(self):
        self.started = defer.Deferred()

    def start(self):
        return self.started


class _Broken:
    name = "broken"

    def start(self):
        raise RuntimeError("no")


class CollectorTest(unittest.TestCase):

    def setUp(self):
        was = gc.isenabled()
        self.addCleanup(lambda: gc.enable() if was else gc.disable())
        self.addCleanup(setattr, stall, "_paused", False)
        gc.enable()

    def app(self, *plugins):
        app = App(None)
        app.local_plugins = lambda cfg: list(plugins)
        return app

    def test_on_again_once_the_plugins_started(self):
        slow = _Slow()
        stall.pause_collector()
        self.assertFalse(gc.isenabled())
        d = self.app(slow)._start_plugins(SimpleNamespace())
        self.assertFalse(gc.isenabled())
        slow.started.callback(None)
        self.assertTrue(gc.isenabled())
        self.assertEqual(self.successResultOf(d), [(True, None)])

    def test_on_again_when_nothing_waits(self):
        stall.pause_collector()
        self.assertIsNone(self.app()._start_plugins(SimpleNamespace()))
        self.assertTrue(gc.isenabled())

    def test_on_again_when_a_start_fails(self):
        stall.pause_collector()
        with self.assertRaises(RuntimeError):
            self.app(_Broken())._start_plugins(SimpleNamespace())
        self.assertTrue(gc.isenabled())

    def test_left_off_when_not_paused_here(self):
        gc.disable()
        self.assertIsNone(self.app()._start_plugins(SimpleNamespace()))
        self.assertFalse(gc.isenabled())


#: make_service as the commands call it, then the service's start.
SCRIPT = """
import gc, json, os, sys
from corednstw.service import entry
svc = entry.make_service(sys.argv[1], 0)
during = gc.isenabled()
svc.startService()
with open(sys.argv[2], "w") as f:
    f.write(json.dumps([during, gc.isenabled()]))
os._exit(0)
"""


class ServerTest(unittest.TestCase):

    def test_paused_while_starting(self):
        d = util.write_files(self, {
            "Corefile": ".:0 {\n    bind 127.0.0.1\n    whoami\n}\n"})
        result = os.path.join(d, "result.json")
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, os.path.join(d, "Corefile"),
             result],
            capture_output=True, text=True, timeout=60, cwd=d)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        # A file, not stdout: the server's log thread writes there too and
        # its lines can cut into ours.
        with open(result) as f:
            self.assertEqual(json.load(f), [False, True])
