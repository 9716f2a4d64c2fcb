"""The global ``order`` option: a Corefile moves a directive in the chain,
unless that breaks a plugin's assumption."""

from twisted.trial import unittest

from corednstw.core import corefile, dump
from corednstw.core.errors import CorefileError, PluginError
from corednstw.service.app import App
from tests.support import util
from tests.test_directives import entry, install


class OrderTest(unittest.TestCase):

    def names(self, text):
        cfg = util.Direct(self, text).app.config
        return [b.directive_names() for b in cfg.blocks]

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_parsed(self):
        blocks = corefile.parse("{\n    order chaos after whoami\n}\n"
                                ". {\n    whoami\n}\nexample.org {\n"
                                "    whoami\n}\n")
        self.assertEqual(len(blocks), 2)
        for b in blocks:
            self.assertEqual([(d.name, d.args, d.line) for d in b.options],
                             [("order", ["chaos", "after", "whoami"], 2)])
        self.assertEqual(corefile.parse(". {\n whoami\n}\n")[0].options,
                         [])

    def test_moves(self):
        text = ".:0 {\n    chaos\n    whoami\n}\n"
        self.assertEqual(self.names(text), [["chaos", "whoami"]])
        for rule in ("chaos after whoami", "chaos last", "whoami first",
                     "whoami before chaos"):
            self.assertEqual(self.names("{\n    order %s\n}\n" % rule
                                        + text), [["whoami", "chaos"]],
                             rule)

    def test_every_block(self):
        text = ("{\n    order chaos last\n}\n.:0 {\n    chaos\n    whoami\n"
                "}\nexample.org:0 {\n    chaos\n    whoami\n}\n")
        self.assertEqual(self.names(text), [["whoami", "chaos"]] * 2)

    def test_lines_apply_in_turn(self):
        text = ("{\n    order chaos last\n    order nsid after chaos\n}\n"
                ".:0 {\n    nsid\n    chaos\n    whoami\n}\n")
        self.assertEqual(self.names(text), [["whoami", "chaos", "nsid"]])

    def test_only_blocks_holding_both(self):
        # whoami above log harms a block with log, not one without.
        text = "{\n    order whoami first\n}\n.:0 {\n    whoami\n}\n"
        self.assertEqual(self.names(text), [["whoami"]])
        msg = self.error(text + "example.org:0 {\n    log\n    whoami\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/order: "
                      "'log' must stay before 'whoami'", msg)

    def test_cache_stays_above_forward(self):
        msg = self.error("{\n    order cache after forward\n}\n"
                         ".:0 {\n    cache\n    forward . 127.0.0.1\n}\n")
        self.assertTrue(msg.endswith(
            "/Corefile:2 - Error during parsing: plugin/order: 'cache' "
            "must stay before 'forward' (cache acts on what the plugins "
            "below it answer)"), msg)

    def test_error_at_the_line_that_broke(self):
        msg = self.error("{\n    order chaos first\n"
                         "    order whoami before log\n}\n"
                         ".:0 {\n    log\n    chaos\n    whoami\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/order: "
                      "'log' must stay before 'whoami'", msg)

    def test_bad_lines(self):
        for rule, text in [
                ("whoami", "Wrong argument count or unexpected line "
                 "ending after 'whoami'"),
                ("whoami before", "Wrong argument count"),
                ("whoami first log", "expected before or after, got "
                 "'first'"),
                ("whoami up", "expected first or last, got 'up'"),
                ("nosuch first", "unknown directive 'nosuch'"),
                ("whoami after nosuch", "unknown directive 'nosuch'"),
                ("whoami after whoami", "'whoami' cannot be placed next "
                 "to itself")]:
            msg = self.error("{\n    order %s\n}\n.:0 {\n    whoami\n}\n"
                             % rule)
            self.assertIn("Corefile:2 - Error during parsing: plugin/order:"
                          " " + text, msg)

    def test_unknown_option(self):
        msg = self.error("{\n    debug\n}\n.:0 {\n    whoami\n}\n")
        self.assertTrue(msg.endswith("/Corefile:2 - Error during parsing: "
                                     "unknown global option 'debug'"), msg)

    def test_package_directive(self):
        install(self, entry("alpha", after="forward"))
        text = ".:0 {\n    cache\n    alpha\n    whoami\n}\n"
        self.assertEqual(self.names(text), [["cache", "alpha", "whoami"]])
        self.assertEqual(self.names("{\n    order alpha after whoami\n}\n"
                                    + text), [["cache", "whoami", "alpha"]])

    def test_package_assumption(self):
        install(self, entry("alpha", after="forward",
                            follows=("prometheus",)))
        msg = self.error("{\n    order alpha first\n}\n.:0 {\n"
                         "    prometheus\n    alpha\n}\n")
        self.assertIn("plugin/order: 'prometheus' must stay before 'alpha' "
                      "(an assumption of corednstw-fake)", msg)

    def test_package_place_breaks_own_assumption(self):
        install(self, entry("alpha", before="root",
                            follows=("prometheus",)))
        with self.assertRaises(PluginError) as cm:
            util.Direct(self, ".:0 {\n    whoami\n}\n")
        self.assertIn("its place puts 'prometheus' after 'alpha'",
                      str(cm.exception))

    def test_check_lists_and_goes_on(self):
        d = util.write_files(self, {"Corefile": (
            "{\n    order cache after forward\n}\n.:0 {\n    cache\n"
            "    forward . 127.0.0.1\n    whoami x\n}\n")})
        errors = []
        app = App(d + "/Corefile", dns_port=0)
        self.assertRaises(CorefileError, app.load, errors)
        self.assertEqual([(e.line, e.directive) for e in errors],
                         [(2, "order"), (7, "whoami")])

    def test_dump(self):
        blocks = corefile.parse("{\n    order chaos last\n}\n.:53 {\n"
                                "    chaos\n    whoami\n}\n")
        lines = dump.dump(blocks).splitlines()
        self.assertEqual(lines[:2], ["options",
                                     "  order chaos last @ Corefile:2"])
        self.assertEqual(lines[-2:], ["    whoami @ Corefile:6",
                                      "    chaos @ Corefile:5"])

    def test_reload_sees_a_new_order(self):
        base = ".:53 {\n    chaos\n    whoami\n}\n"
        moved = "{\n    order chaos last\n}\n" + base
        self.assertNotEqual(dump.digest(corefile.parse(base)),
                            dump.digest(corefile.parse(moved)))
