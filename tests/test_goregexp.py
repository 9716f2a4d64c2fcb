"""Corefile regular expressions run on RE2, as Go's do: a pattern that
backtracks exponentially in Python's ``re`` answers at once, whatever the
query; a pattern Go refuses is refused with Go's message."""

import dns.message
from twisted.internet import defer, task
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.engines.expressions import goregexp
from tests.support import util

#: Nested quantifiers: with backtracking, a name of n letters that almost
#: matches takes 2**n steps (25 letters: seconds; 40: hours).
EVIL = r"^(a+)+\.example\.net\.$"
LONG = "a" * 40
MISS = LONG + "b.example.net."
HIT = LONG + ".example.net."


#: A block whose first template answers 192.0.2.1 for the names its
#: ``match`` takes and passes the others on (%s: lines before it).
BLOCK = """example.net:0 {
  %s
  template IN A {
    match "%s"
    answer "{{ .Name }} 60 IN A 192.0.2.1"
    fallthrough
  }
  template IN A {
    answer "{{ .Name }} 60 IN A 192.0.2.2"
  }
}
"""
#: The block a query goes to when a view refuses it.
FALLBACK = """example.net:0 {
  template IN A {
    answer "{{ .Name }} 60 IN A 192.0.2.2"
  }
}
"""


def addresses(msg):
    return [rr.to_text() for rrset in msg.answer for rr in rrset]


class LinearMatchingTest(unittest.TestCase):
    """Each plugin that takes a Go regexp, over the wire, with the
    pattern above and 40-letter names that match and that do not."""

    @defer.inlineCallbacks
    def ask(self, corefile):
        """The addresses answered for MISS then HIT: 192.0.2.1 when the
        pattern matched, 192.0.2.2 from the template that follows."""
        app = yield util.start(self, corefile)
        out = []
        for name in (MISS, HIT):
            r = yield util.query(app.port(), name)
            out.append(addresses(r))
        self.assertEqual(out, [["192.0.2.2"], ["192.0.2.1"]])

    def test_template_match(self):
        return self.ask(BLOCK % ("", EVIL))

    def test_rewrite_name_regex(self):
        return self.ask(BLOCK % (
            "rewrite name regex %s hit.example.net answer auto" % EVIL,
            r"^hit\.example\.net\.$"))

    def test_view_expression(self):
        # expr's string literals take escapes: backslashes doubled.
        return self.ask(BLOCK % (
            "view evil {\n    expr name() matches '%s'\n  }"
            % EVIL.replace("\\", "\\\\"), ".*") + FALLBACK)

    def test_errors_consolidate(self):
        log = util.capture_log(self)
        clock = task.Clock()
        x = util.Direct(self, 'example.org:0 {\n    errors {\n'
                        '        consolidate 1m "^(a+)+$"\n    }\n'
                        '    whoami\n}\n', clock=clock)
        errors = x.app.config.blocks[0].plugin("errors")

        def failing(req):
            from corednstw.core.request import Response
            resp = Response(2)
            resp.error = LONG + "!"
            return resp
        errors.next = util.Stub(failing)
        reply = x.ask(dns.message.make_query("example.org.", "A").to_wire())
        self.assertEqual(dns.message.from_wire(reply).rcode(), 2)
        self.assertEqual(log.lines, [
            "[ERROR] plugin/errors: 2 example.org. A: %s!" % LONG])


class GoSemanticsTest(unittest.TestCase):

    def test_go_error_messages(self):
        for pattern, want in [
            ("(a", "error parsing regexp: missing closing ): `(a`"),
            ("a)", "error parsing regexp: unexpected ): `a)`"),
            ("[a", "error parsing regexp: missing closing ]: `[a`"),
            ("a**", "error parsing regexp: invalid nested repetition "
             "operator: `**`"),
            ("*", "error parsing regexp: missing argument to repetition "
             "operator: `*`"),
            ("x\\", "error parsing regexp: trailing backslash at end of "
             "expression: ``"),
            ("(?=a)", "error parsing regexp: invalid or unsupported Perl "
             "syntax: `(?=`"),
            ("a{1001}", "error parsing regexp: invalid repeat count: "
             "`{1001}`"),
            ("[z-a]", "error parsing regexp: invalid character class "
             "range: `z-a`"),
            ("\\8", "error parsing regexp: invalid escape sequence: `\\8`"),
            ("\\C", "error parsing regexp: invalid escape sequence: `\\C`"),
        ]:
            with self.assertRaises(goregexp.RegexpError) as cm:
                goregexp.compile(pattern)
            self.assertEqual(str(cm.exception), want)

    def test_quoted_backslash_c_is_literal(self):
        self.assertIsNotNone(goregexp.compile("\\\\C").search("\\C"))
        self.assertIsNotNone(goregexp.compile("\\Q\\C\\E").search("\\C"))

    def test_non_ascii_text_offsets(self):
        rx = goregexp.compile("(é+)(x)?(z)")
        m = rx.search("aéébz\udcffééz")
        self.assertEqual(m.span(), (6, 9))
        self.assertEqual(m.group(0, 1, 2, 3), ("ééz", "éé", None, "z"))
        self.assertEqual(goregexp.submatches(rx, "éz"), ["éz", "é", "", "z"])

    def test_anchored_forms(self):
        rx = goregexp.compile("b+")
        self.assertIsNone(rx.match("abb"))
        self.assertEqual(rx.match("bba").group(), "bb")
        self.assertIsNone(rx.fullmatch("bba"))
        self.assertEqual(rx.fullmatch("bb").span(), (0, 2))

    def test_named_groups(self):
        m = goregexp.compile("(?P<x>a)(?<y>b)?").search("a")
        self.assertEqual((m["x"], m["y"], m.groups("-")), ("a", None,
                                                          ("a", "-")))
        self.assertRaises(IndexError, m.group, 3)
        self.assertRaises(IndexError, m.group, "z")

    def test_corefile_error_at_its_line(self):
        for line, text, want in [
            (3, 'template IN A {\n    match "(a"\n  }',
             "could not parse regex: (a, error parsing regexp: missing "
             "closing ): `(a`"),
            (2, "rewrite name regex \\C x", "invalid regex matching pattern: "
             "\\C"),
            (3, "errors {\n    consolidate 1m a**\n  }",
             "error parsing regexp: invalid nested repetition operator: "
             "`**`"),
        ]:
            with self.assertRaises(CorefileError) as cm:
                util.build_plugins(self, "example.net:0 {\n  %s\n}\n" % text,
                                   "whoami")
            self.assertIn(want, str(cm.exception))
            self.assertIn("Corefile:%d - " % line, str(cm.exception))
