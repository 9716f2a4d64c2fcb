"""Go-style durations, as CoreDNS's options and messages write them."""

from twisted.trial import unittest

from corednstw.core.durations import format_duration, parse_duration


class DurationTest(unittest.TestCase):

    def test_parse(self):
        for text, secs in (("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25),
                           ("1h", 3600.0), ("30", 30.0), ("1.5s", 1.5),
                           ("-2s", -2.0)):
            self.assertEqual(parse_duration(text), secs, text)
        for bad in ("", "5x", "s", "1m30"):
            self.assertRaises(ValueError, parse_duration, bad)

    def test_format(self):
        for secs, text in ((0, "0s"), (5, "5s"), (90, "1m30s"),
                           (0.25, "250ms"), (0.0015, "1.5ms"),
                           (3600, "1h0m0s"), (-1, "-1s"),
                           (-0.25, "-250ms"), (25 * 3600 + 1.5,
                                               "25h0m1.5s")):
            self.assertEqual(format_duration(secs), text, secs)
