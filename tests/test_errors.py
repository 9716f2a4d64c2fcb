"""errors: error lines as CoreDNS writes them, consolidation with a fake
clock, stacktrace, Corefile errors."""


import dns.message
from twisted.internet import defer, task
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import Response
from tests.support import cases, util
from tests.support.cases import Case


def failing(text, rcode=w.SERVFAIL):
    def serve(req):
        resp = Response(rcode)
        resp.error = text
        return resp
    return serve


class Base(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def direct(self, errors="errors", fn=None):
        self.clock = task.Clock()
        x = util.Direct(self, "example.org:0 {\n    %s\n    whoami\n}\n"
                        % errors, clock=self.clock)
        self.plugin = x.app.config.blocks[0].plugin("errors")
        if fn is not None:
            self.plugin.next = util.Stub(fn)
        return x

    def ask(self, x, name="example.org.", rdtype="A"):
        reply = x.ask(dns.message.make_query(name, rdtype).to_wire())
        return dns.message.from_wire(reply)

    def check(self, x, case):
        """Ask ``case`` and check the whole reply."""
        cases.run_direct(self, x, [case])


class ErrorLineTest(Base):

    def test_response_error(self):
        x = self.direct(fn=failing("plugin/forward: no healthy upstreams"))
        self.check(x, Case("Example.ORG", "AAAA", "SERVFAIL"))
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. AAAA: plugin/forward: no "
            "healthy upstreams"])

    def test_error_with_other_rcode(self):
        x = self.direct(fn=failing("refused by policy", w.REFUSED))
        self.check(x, Case("example.org.", "A", "REFUSED"))
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 5 example.org. A: refused by policy"])

    def test_no_error_no_line(self):
        x = self.direct(fn=lambda req: Response(w.SERVFAIL))
        self.check(x, Case("example.org.", "A", "SERVFAIL"))
        x = self.direct()
        self.check(x, Case("example.org.", "A", aa=True, extra=cases.whoami(
            "example.org.", port=40000)))
        self.assertEqual(self.log.lines, [])

    def test_failed_deferred(self):
        x = self.direct(fn=lambda req: defer.fail(ValueError("bad thing")))
        self.check(x, Case("example.org.", "A", "SERVFAIL"))
        # Logged as an error, not as a recovered panic.
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: bad thing"])

    def test_deferred_response_error(self):
        d = defer.Deferred()
        x = self.direct(fn=lambda req: d)
        out = x.ask_async(dns.message.make_query("example.org",
                                                 "A").to_wire())
        r = Response(w.SERVFAIL)
        r.error = "later"
        d.callback(r)
        self.assertTrue(out.called)
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: later"])

    @defer.inlineCallbacks
    def test_no_next_plugin_over_the_wire(self):
        app = yield util.start(self, """
example.org:0 {
    errors
    hosts /nonexistent other.org {
        10.0.0.1 a.other.org
    }
}
""")
        del self.log.lines[:]
        yield cases.run(self, app.port(), [Case("a.example.org", "A",
                                                "SERVFAIL")])
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 a.example.org. A: plugin/hosts: no "
            "next plugin found"])

    def test_alone(self):
        x = util.Direct(self, "example.org:0 {\n    errors\n}\n")
        x.query("example.org", "A")
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: plugin/errors: no next "
            "plugin found"])


class ConsolidateTest(Base):

    CONF = ('errors {\n'
            '        consolidate 30s "timeout$" warning\n'
            '        consolidate 5m "^Failed to .+" error show_first\n'
            '        consolidate 1s "time" info\n'
            '    }')

    def test_consolidate(self):
        texts = iter(["read udp: i/o timeout", "read udp: i/o timeout",
                      "something else", "read tcp: i/o timeout",
                      "dial: timeout"])
        x = self.direct(self.CONF, fn=lambda req: failing(next(texts))(req))
        for _ in range(4):
            self.ask(x)
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: something else"])
        self.clock.advance(29)
        self.assertEqual(len(self.log.lines), 1)
        self.clock.advance(1)
        self.assertEqual(self.log.lines[1:], [
            "[WARNING] plugin/errors: 3 errors like 'timeout$' occurred in "
            "last 30s"])
        # The count starts again.
        self.ask(x)
        self.clock.advance(30)
        self.assertEqual(self.log.lines[2:], [
            "[WARNING] plugin/errors: 1 errors like 'timeout$' occurred in "
            "last 30s"])

    def test_show_first(self):
        x = self.direct(self.CONF,
                        fn=failing("Failed to connect to upstream"))
        self.ask(x)
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: Failed to connect to "
            "upstream"])
        self.ask(x)
        self.ask(x)
        self.assertEqual(len(self.log.lines), 1)
        self.clock.advance(300)
        self.assertEqual(self.log.lines[1:], [
            "[ERROR] plugin/errors: 3 errors like '^Failed to .+' occurred "
            "in last 5m0s"])

    def test_show_first_single(self):
        x = self.direct('errors {\n        consolidate 30s "x" warning '
                        'show_first\n    }', fn=failing("x"))
        self.ask(x)
        self.clock.advance(30)
        self.assertEqual(self.log.lines, [
            "[WARNING] plugin/errors: 2 example.org. A: x"])

    def test_first_pattern_wins_and_default_level(self):
        x = self.direct('errors {\n        consolidate 1s "a"\n'
                        '        consolidate 1s "ab" warning\n    }',
                        fn=failing("abc"))
        self.ask(x)
        self.clock.advance(1)
        self.assertEqual(self.log.lines, [
            "[ERROR] plugin/errors: 1 errors like 'a' occurred in last 1s"])

    def test_stop_flushes(self):
        x = self.direct('errors {\n        consolidate 1m "x" info\n    }',
                        fn=failing("x"))
        self.ask(x)
        self.ask(x)
        self.plugin.stop()
        self.assertEqual(self.log.lines, [
            "[INFO] plugin/errors: 2 errors like 'x' occurred in last 1m0s"])
        self.assertEqual(self.clock.getDelayedCalls(), [])
        # After stop, errors are logged at once with the pattern's level.
        self.ask(x)
        self.assertEqual(self.log.lines[1:], [
            "[INFO] plugin/errors: 2 example.org. A: x"])


class StacktraceTest(Base):

    def test_stacktrace(self):
        util.keep_panics(self)
        def boom(req):
            raise KeyError("kaput")
        x = self.direct("errors {\n        stacktrace\n    }", fn=boom)
        self.assertTrue(x.app.config.blocks[0].settings["stacktrace"])
        self.check(x, Case("example.org.", "A", "SERVFAIL"))
        self.assertIn("Recovered from panic", self.log.lines[0])
        self.assertTrue(self.log.lines[1].startswith("Traceback"))
        self.assertIn("kaput", self.log.text())

    def test_no_stacktrace(self):
        util.keep_panics(self)
        def boom(req):
            raise KeyError("kaput")
        x = self.direct("errors", fn=boom)
        self.ask(x)
        self.assertEqual(len(self.log.lines), 1)
        self.assertNotIn("Traceback", self.log.text())


class SetupTest(Base):

    def test_stdout(self):
        self.direct("errors stdout")

    def test_errors(self):
        cases = [
            ("errors stderr", "invalid log file: stderr"),
            ("errors a b", "Wrong argument count"),
            ("errors {\n        foo\n    }",
             "Syntax error: Unexpected token 'foo', expecting 'Unknown "
             "field foo'"),
            ('errors {\n        consolidate 1s\n    }',
             "Wrong argument count"),
            ('errors {\n        consolidate 1s a error show_first x\n    }',
             "Wrong argument count"),
            ('errors {\n        consolidate 1x a\n    }',
             'time: invalid duration "1x"'),
            ('errors {\n        consolidate 1s "a(("\n    }',
             "error parsing regexp"),
            ('errors {\n        consolidate 1s %s\n    }' % ("a" * 10001),
             "regex pattern too long: 10001 > 10000"),
            ('errors {\n        consolidate 1s a error warning\n    }',
             "multiple log levels specified in consolidate"),
            ('errors {\n        consolidate 1s a show_first error\n    }',
             "log level must come before show_first in consolidate"),
            ('errors {\n        consolidate 1s a loud\n    }',
             "unknown option in consolidate: loud"),
            ("errors\n    errors", "this plugin can only be used once"),
        ]
        for text, msg in cases:
            e = self.assertRaises(CorefileError, self.direct, text)
            self.assertIn("plugin/errors: " + msg, str(e), text)
