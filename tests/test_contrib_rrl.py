"""The rrl add-on package (contrib/rrl, installed by scripts/test.sh): its
own tests, the upstream README's example through ``--check``, and rrl
over the wire: a burst from one client limited, slipped answers
truncated, TCP left alone, the metrics."""

import dns.flags
import dns.message
from twisted.internet import defer
from twisted.trial import unittest

from tests.support import util
from tests.support.contrib import README_CHECK, check_examples, installed

INSTALLED = installed("corednstw_rrl")
if INSTALLED:
    from corednstw_rrl import RESPONSES_EXCEEDED, RESPONSES_SLIPPED
    from corednstw_rrl.test.test_rrl import (  # noqa: F401
        CategoryTest,
        FloodTest,
        PrefixTest,
        ReportOnlyTest,
        RequestsTest,
        SetupTest,
        TableTest,
    )

EXAMPLES = {
    "example 1": "\n. {\n  rrl . {\n    responses-per-second 10\n  }\n}\n",
}

#: One answer per ten seconds: after the first, a burst is over the limit
#: however slow the machine.
COREFILE = """\
.:0 {
    prometheus 127.0.0.1:0
    rrl . {
        responses-per-second 0.1
        slip-ratio 2
        %s
    }
    hosts {
        192.0.2.53 www.example.org
    }
}
"""


class RRLServedTest(unittest.TestCase):

    if not INSTALLED:
        skip = README_CHECK % "rrl"

    def test_readme_example_check(self):
        check_examples(self, EXAMPLES)

    def burst(self, port, n, replies):
        """``n`` identical queries from one UDP socket; the first
        ``replies`` answers, parsed."""
        wires = [util.make_query("www.example.org.", "A").to_wire()
                 for _ in range(n)]
        d = util.send_udp(port, wires, count=replies)
        return d.addCallback(lambda got: [dns.message.from_wire(g)
                                          for g in got])

    def counted(self):
        """The metric lines for this client, as /metrics will show them
        after ``exceeded`` and ``slipped`` more (the counters are the
        process's)."""
        key = ("127.0.0.1",)
        base = (RESPONSES_EXCEEDED.get(key), RESPONSES_SLIPPED.get(key))
        return lambda exceeded, slipped: [
            'coredns_rrl_responses_exceeded_total{client_ip="127.0.0.1"} '
            '%.1f' % (base[0] + exceeded),
            'coredns_rrl_responses_slipped_total{client_ip="127.0.0.1"} '
            '%.1f' % (base[1] + slipped)]

    @defer.inlineCallbacks
    def test_burst_is_limited(self):
        """Five queries at once: the first answered, then (slip-ratio 2)
        truncated, dropped, truncated, dropped; TCP is not limited."""
        lines = self.counted()
        app = yield util.start(self, COREFILE % "")
        got = yield self.burst(app.port(), 5, 3)
        full = [m for m in got if not m.flags & dns.flags.TC]
        slipped = [m for m in got if m.flags & dns.flags.TC]
        self.assertEqual(len(full), 1)
        self.assertEqual(util.rrs(full[0]),
                         ["www.example.org. 3600 IN A 192.0.2.53"])
        self.assertEqual([(m.answer, m.authority, m.rcode())
                          for m in slipped], [([], [], 0)] * 2)
        for _ in range(3):
            m = yield util.query(app.port(), "www.example.org.",
                                 proto="tcp")
            self.assertEqual(len(m.answer), 1)
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/metrics")
        for line in lines(4, 2):
            self.assertIn(line, body)

    @defer.inlineCallbacks
    def test_report_only(self):
        """``report-only``: the same burst answered in full, counted."""
        lines = self.counted()
        app = yield util.start(self, COREFILE % "report-only")
        got = yield self.burst(app.port(), 5, 5)
        self.assertEqual([len(m.answer) for m in got], [1] * 5)
        self.assertFalse(any(m.flags & dns.flags.TC for m in got))
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/metrics")
        for line in lines(4, 2):
            self.assertIn(line, body)
