"""The Directive's typed readers and Go's parsers behind them: how a
refused value is worded (Go's text, a plugin's format, a fixed message),
Go's quoting of the value, and the option-block rules."""

import unittest

from corednstw.core import goparse
from corednstw.core.directive import ARG_COUNT, Directive
from corednstw.core.errors import CorefileError
from tests.support import util


def line(name="demo", args=(), children=()):
    return Directive(name, list(args), list(children), "Corefile", 3)


class QuoteTest(unittest.TestCase):
    """strconv.Quote, as Go's NumError and ``%q`` write a value."""

    def test_quote(self):
        cases = [
            ("x", '"x"'),
            ('a"b', '"a\\"b"'),
            ("a\\b", '"a\\\\b"'),
            ("a b", '"a b"'),
            ("tab\there", '"tab\\there"'),
            ("nl\n", '"nl\\n"'),
            ("\x01\x7f", '"\\x01\\x7f"'),
            ("\x85\xa0", '"\\u0085\\u00a0"'),
            ("é€", '"é€"'),
            ("\U0001F600", '"\U0001F600"'),
            ("\U000E0001", '"\\U000e0001"'),
            ("\udcff", '"\\xff"'),
        ]
        for text, quoted in cases:
            self.assertEqual(goparse.quote(text), quoted, repr(text))

    def test_num_errors_quote_the_value(self):
        with self.assertRaises(ValueError) as cm:
            goparse.atoi('a"b')
        self.assertEqual(str(cm.exception),
                         'strconv.Atoi: parsing "a\\"b": invalid syntax')
        with self.assertRaises(ValueError) as cm:
            goparse.parse_uint("70000", 16)
        self.assertEqual(str(cm.exception), 'strconv.ParseUint: parsing '
                         '"70000": value out of range')

    def test_range_error_quotes_too(self):
        with self.assertRaises(CorefileError) as cm:
            line().integer("+9", hi=5)
        self.assertIn('plugin/demo: strconv.Atoi: parsing "+9": value out '
                      "of range", str(cm.exception))


class WordingTest(unittest.TestCase):
    """``error=``/``range_error=``: a format given Go's text (``%s``), a
    wording with ``{text}``/``{reason}``, or a fixed message."""

    def check(self, call, expected):
        with self.assertRaises(CorefileError) as cm:
            call()
        self.assertIn("plugin/demo: " + expected, str(cm.exception))

    def test_go_text_alone(self):
        self.check(lambda: line().integer("x"),
                   'strconv.Atoi: parsing "x": invalid syntax')
        self.check(lambda: line().number("1,5"),
                   'strconv.ParseFloat: parsing "1,5": invalid syntax')
        self.check(lambda: line().duration("5"),
                   'time: missing unit in duration "5"')

    def test_percent_format_gets_go_text(self):
        self.check(lambda: line().integer("x", error="invalid TTL: %s"),
                   'invalid TTL: strconv.Atoi: parsing "x": invalid syntax')

    def test_text_and_reason(self):
        self.check(lambda: line().duration(
            "5q", error="bad '{text}': {reason}"),
            "bad '5q': time: invalid duration \"5q\"")
        self.check(lambda: line().number("x%", error="invalid {text!r}"),
                   "invalid 'x%'")

    def test_fixed_message(self):
        self.check(lambda: line().integer("x", error="needs a number"),
                   "needs a number")
        self.check(lambda: line().integer("0", lo=1,
                                          range_error="must be positive"),
                   "must be positive")

    def test_range_error_gets_the_value(self):
        self.check(lambda: line().integer("7", hi=5,
                                          range_error="too many: %d"),
                   "too many: 7")
        self.check(lambda: line().integer("7", hi=5,
                                          range_error="{text} > 5"),
                   "7 > 5")

    def test_arg_count_wording(self):
        self.check(lambda: line().integer("x", error=ARG_COUNT),
                   "Wrong argument count or unexpected line ending after "
                   "'x'")
        self.check(lambda: line(args=["a", "b"]).no_args(),
                   "Wrong argument count or unexpected line ending after "
                   "'b'")

    def test_number(self):
        self.assertEqual(line().number("0.25"), 0.25)
        self.assertEqual(line().number("1e3"), 1000.0)
        self.check(lambda: line().number("1e999"),
                   'strconv.ParseFloat: parsing "1e999": value out of range')


class OptionsTest(unittest.TestCase):

    def test_fold_case(self):
        seen = []
        d = line(children=[line("TTL", ["5"]), line("Ttl", ["6"])])
        d.read_options({"ttl": lambda c: seen.append(c.one())},
                       fold_case=True)
        self.assertEqual(seen, ["5", "6"])

    def test_fold_case_names_the_unknown_lowercased(self):
        child = Directive("Bogus", [], [], "Corefile", 4, "demo")
        d = line(children=[child])
        with self.assertRaises(CorefileError) as cm:
            d.read_options({"ttl": lambda c: None}, fold_case=True)
        self.assertIn("Corefile:4", str(cm.exception))
        self.assertIn("unknown property 'bogus'", str(cm.exception))

    def test_unknown_here(self):
        child = Directive("bogus", [], [], "Corefile", 4, "demo")
        for here, at in ((False, "Corefile:4"), (True, "Corefile:3")):
            d = line(children=[child])
            with self.assertRaises(CorefileError) as cm:
                d.read_options({}, unknown_here=here)
            self.assertIn(at, str(cm.exception))
            self.assertIn("plugin/demo: unknown property 'bogus'",
                          str(cm.exception))


class CorefileTest(unittest.TestCase):
    """A quoted Corefile value reaches Go's error text quoted as Go
    quotes it."""

    def test_quoted_value(self):
        text = '. {\n    multisocket "a\\"b"\n    whoami\n}\n'
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        self.assertIn('invalid num sockets: strconv.Atoi: parsing '
                      '"a\\"b": invalid syntax', str(cm.exception))
