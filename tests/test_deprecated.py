"""Old syntax CoreDNS removed is accepted with one notice naming today's
form (Directive.deprecated, logged when the configuration is built)."""

from twisted.trial import unittest

from corednstw.plugins import whoami
from tests.support import util

OLD_HEADER = "header {\n        set ra\n    }"


def warnings(log):
    return [x for x in log.lines if x.startswith("[WARNING]")]


class DeprecatedTest(unittest.TestCase):

    def test_directive_notice_names_plugin_and_line(self):
        setup = whoami.setup

        def old_setup(d, block):
            d.deprecated('"whoami" is old, use "whoami" instead')
            return setup(d, block)
        self.patch(whoami, "setup", old_setup)
        log = util.capture_log(self)
        util.Direct(self, ".:0 {\n    whoami\n}\n")
        [line] = warnings(log)
        self.assertTrue(line.startswith(
            '[WARNING] plugin/whoami: "whoami" is old, use "whoami" '
            'instead ('), line)
        self.assertTrue(line.endswith("/Corefile:2)"), line)

    def test_sub_directive_notice_names_its_plugin(self):
        log = util.capture_log(self)
        util.Direct(self, ".:0 {\n    %s\n    whoami\n}\n" % OLD_HEADER)
        [line] = warnings(log)
        self.assertTrue(line.startswith("[WARNING] plugin/header: "), line)
        self.assertTrue(line.endswith("/Corefile:3)"), line)

    def test_snippet_imported_twice_noticed_once(self):
        log = util.capture_log(self)
        util.Direct(self, "(old) {\n    %s\n}\n"
                          "a.example:0 {\n    import old\n    whoami\n}\n"
                          "b.example:0 {\n    import old\n    whoami\n}\n"
                          % OLD_HEADER)
        self.assertEqual(len(warnings(log)), 1, log.lines)

    def test_each_build_notices_again(self):
        # A reload sets the Corefile up again: the notice comes with it.
        log = util.capture_log(self)
        d = util.Direct(self, ".:0 {\n    %s\n    whoami\n}\n" % OLD_HEADER)
        d.app.load()
        self.assertEqual(len(warnings(log)), 2, log.lines)

    def test_no_notice_for_current_syntax(self):
        log = util.capture_log(self)
        util.Direct(self, ".:0 {\n    header {\n        response set ra\n"
                          "    }\n    whoami\n}\n")
        self.assertEqual(warnings(log), [])
