"""pprof: profiles of the running server over HTTP."""

import marshal
import tracemalloc

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from tests.support import util

ADDR = "127.0.0.1:0"


def _get_bytes(port, path):
    """GET keeping the body as bytes (a pstats file is binary)."""
    from twisted.internet import reactor
    from twisted.web.client import Agent, readBody
    url = ("http://127.0.0.1:%d%s" % (port, path)).encode()
    d = Agent(reactor).request(b"GET", url)
    return d.addCallback(lambda r: readBody(r).addCallback(
        lambda body: (r.code, body)))


def _corefile(opts=""):
    return ".:0 {\n    pprof %s%s\n    whoami\n}\n" % (ADDR, opts)


class PprofSetupTest(unittest.TestCase):

    def _error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n%s\n    whoami\n}\n" % text)
        return str(cm.exception)

    def test_default(self):
        s = util.Direct(self, ".:0 {\n    pprof\n    whoami\n}\n")
        p = s.app.config.blocks[0].plugin("pprof")
        self.assertEqual((p.address, p.rate), ("localhost:6053", 0))

    def test_block(self):
        s = util.Direct(self, ".:0 {\n    pprof :6060 {\n        block\n"
                        "    }\n}\n")
        self.assertEqual(s.app.config.blocks[0].plugin("pprof").rate, 1)
        s = util.Direct(self, ".:0 {\n    pprof :6060 {\n        block 5\n"
                        "    }\n}\n")
        self.assertEqual(s.app.config.blocks[0].plugin("pprof").rate, 5)

    def test_errors(self):
        self.assertIn("Wrong argument count",
                      self._error("    pprof a:1 b:2"))
        self.assertIn("address 10.0.0.1: missing port in address",
                      self._error("    pprof 10.0.0.1"))
        self.assertIn("unknown property 'foo'",
                      self._error("    pprof {\n        foo\n    }"))
        self.assertIn("property 'block' invalid integer value 'x'",
                      self._error("    pprof {\n        block x\n    }"))
        self.assertIn("this plugin can only be used once",
                      self._error("    pprof :1\n    pprof :2"))


class PprofHTTPTest(unittest.TestCase):

    @defer.inlineCallbacks
    def _start(self, opts=""):
        app = yield util.start(self, _corefile(opts))
        return app, app.http_port(ADDR)

    @defer.inlineCallbacks
    def test_index_and_stacks(self):
        app, port = yield self._start()
        status, body = yield util.http_get(port, "/debug/pprof/")
        self.assertEqual(status, 200)
        self.assertIn("goroutine", body)
        status, body = yield util.http_get(port, "/debug/pprof/goroutine")
        self.assertEqual(status, 200)
        self.assertIn("'MainThread'", body)
        self.assertIn("render_GET", body)
        status, body = yield util.http_get(port, "/debug/pprof/cmdline")
        self.assertEqual(status, 200)
        status, _ = yield util.http_get(port, "/debug/pprof/nothing")
        self.assertEqual(status, 404)

    @defer.inlineCallbacks
    def test_cpu_profile(self):
        """The profile covers the queries answered while it runs; the
        reactor keeps answering meanwhile."""
        app, port = yield self._start()
        d = _get_bytes(port, "/debug/pprof/profile?seconds=1")
        pprof = app.config.blocks[0].plugin("pprof")
        yield util.wait_for(lambda: pprof.profiling)
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), 0)
        busy, _ = yield util.http_get(port, "/debug/pprof/profile?seconds=1")
        self.assertEqual(busy, 500)
        status, body = yield d
        self.assertEqual(status, 200)
        stats = marshal.loads(body)
        funcs = {f[2] for f in stats}
        self.assertIn("serve", funcs)       # whoami's, inside the profile

    @defer.inlineCallbacks
    def test_text_and_collapsed(self):
        app, port = yield self._start()
        d = util.http_get(port, "/debug/pprof/profile?seconds=1&format=text")
        yield util.query(app.port(), "example.org", "A")
        status, body = yield d
        self.assertEqual(status, 200)
        self.assertIn("function calls", body)
        status, body = yield util.http_get(
            port, "/debug/pprof/profile?seconds=1&format=collapsed")
        self.assertEqual(status, 200)
        line = body.splitlines()[0]
        stack, count = line.rsplit(" ", 1)
        self.assertGreater(int(count), 0)
        self.assertIn("MainThread;", body)
        status, _ = yield util.http_get(
            port, "/debug/pprof/profile?seconds=x")
        self.assertEqual(status, 400)

    @defer.inlineCallbacks
    def test_heap(self):
        app, port = yield self._start()
        status, body = yield util.http_get(port, "/debug/pprof/heap")
        self.assertEqual(status, 200)
        if not tracemalloc.is_tracing():
            self.assertIn("objects tracked by the gc", body)
            self.assertIn("dict", body)
        d = util.http_get(port, "/debug/pprof/heap?seconds=1")
        yield util.query(app.port(), "example.org", "A")
        status, body = yield d
        self.assertEqual(status, 200)
        self.assertIn("allocation sites (tracemalloc)", body)

    @defer.inlineCallbacks
    def test_block_traces_from_start(self):
        if tracemalloc.is_tracing():
            raise unittest.SkipTest("tracemalloc already on")
        app, port = yield self._start(" {\n        block\n    }")
        self.assertTrue(tracemalloc.is_tracing())
        status, body = yield util.http_get(port, "/debug/pprof/allocs")
        self.assertIn("allocation sites (tracemalloc)", body)
        yield app.stopService()
        self.assertFalse(tracemalloc.is_tracing())
