"""erratic and cancel: fixed answers, drops, delays and truncation counted
by query number (no assertions on timing), and a chain cancelled after its
timeout."""

import dns.flags
import dns.message
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.core.plugin import Plugin
from corednstw.plugins import cancel as cancelmod
from tests.support import cases, util
from tests.support.cases import Case


def erratic_of(d):
    return d.mux.zones[next(iter(d.mux.zones))][0][1].plugin("erratic")


def wire(name="example.org.", rdtype="A", msgid=None, **kw):
    q = util.make_query(name, rdtype, **kw)
    if msgid is not None:
        q.id = msgid
    return q.to_wire()


def ancount(data):
    return int.from_bytes(data[6:8], "big")


def parse(data):
    return dns.message.from_wire(data)


class ErraticAnswersTest(unittest.TestCase):

    def setUp(self):
        self.d = util.Direct(self, "example.org:0 {\n    erratic {\n"
                                   "        drop 0\n    }\n}\n")

    def test_a(self):
        cases.run_direct(self, self.d, [Case(
            "Example.ORG.", "A", flags="QR AA RD",
            answer=["Example.ORG. 0 IN A 192.0.2.53"])])

    def test_aaaa(self):
        cases.run_direct(self, self.d, [Case(
            "a.example.org.", "AAAA", aa=True,
            answer=["a.example.org. 0 IN AAAA 2001:db8::53"])])

    def test_other_types_servfail(self):
        cases.run_direct(self, self.d, [
            Case("example.org.", t, "SERVFAIL") for t in ("MX", "TXT",
                                                          "SOA")])

    def test_axfr(self):
        raw = self.d.ask(wire(rdtype="AXFR"), proto="tcp")
        self.assertEqual(ancount(raw), 6)
        soa = ("example.org. 0 IN SOA sns.dns.icann.org. noc.dns.icann.org. "
               "2018050825 7200 3600 1209600 3600")
        cases.check_response(self, Case("example.org.", "AXFR", aa=True,
                                        answer=[
            soa, "example.org. 0 IN NS b.example.org.",
            "example.org. 0 IN NS a.example.org.",
            "a.example.org. 0 IN AAAA 2001:bd8::53",
            "b.example.org. 0 IN AAAA 2001:500::54", soa]),
            cases.parse_reply(raw))
        # In this order (dnspython merges the two SOAs).
        m = parse(raw)
        self.assertEqual([r.to_text() for r in m.answer], [
            "example.org. 0 IN SOA sns.dns.icann.org. noc.dns.icann.org. "
            "2018050825 7200 3600 1209600 3600",
            "example.org. 0 IN NS b.example.org.\n"
            "example.org. 0 IN NS a.example.org.",
            "a.example.org. 0 IN AAAA 2001:bd8::53",
            "b.example.org. 0 IN AAAA 2001:500::54",
        ])
        self.assertTrue(m.flags & dns.flags.AA)

    def test_large(self):
        d = util.Direct(self, ".:0 {\n    erratic {\n        drop 0\n"
                              "        large\n    }\n}\n")
        raw = d.ask(wire(), proto="tcp")
        self.assertEqual(parse(raw).answer[0].ttl, 0)
        self.assertEqual(ancount(raw), 30)
        # Compressed, the 30 records still fit a plain UDP answer.
        raw = d.ask(wire())
        self.assertEqual(ancount(raw), 30)
        self.assertFalse(parse(raw).flags & dns.flags.TC)

    def test_ready_flips(self):
        e = erratic_of(self.d)
        states = []
        for _ in range(6):
            states.append(e.ready())
            self.d.ask(wire())
        self.assertEqual(states, [False, False, False, True, True, False])

    def test_autopath_search_path(self):
        self.assertEqual(erratic_of(self.d).autopath(None),
                         ["a.example.org.", "b.example.org.", ""])


class ErraticDropTest(unittest.TestCase):

    def test_default_drops_every_second_from_the_first(self):
        d = util.Direct(self, ".:0 {\n    erratic\n}\n")
        got = [d.ask(wire(rdtype=t)) for t in ("A", "A", "MX", "MX", "AXFR",
                                               "AAAA")]
        self.assertEqual([g is not None for g in got],
                         [False, True, False, True, False, True])
        self.assertEqual(parse(got[3]).rcode(), 2)   # MX: SERVFAIL

    def test_drop_three(self):
        d = util.Direct(self, ".:0 {\n    erratic {\n        drop 3\n"
                              "    }\n}\n")
        got = [d.ask(wire()) is not None for _ in range(7)]
        self.assertEqual(got, [False, True, True, False, True, True, False])

    @defer.inlineCallbacks
    def test_over_tcp_replies_only_to_kept_queries(self):
        app = yield util.start(self, ".:0 {\n    prometheus 127.0.0.1:0\n"
                                     "    erratic\n}\n")
        # The families are the process's: other tests count under the same
        # labels, so what this test adds is read as a difference.
        dropped = ('coredns_dns_responses_total{plugin="",rcode="NOERROR",'
                   'server="dns://:0",view="",zone="."}')
        empty = ('coredns_dns_response_size_bytes_bucket{le="0",'
                 'proto="tcp",server="dns://:0",view="",zone="."}')
        _, body = yield util.http_get(app.http_port(), "/metrics")
        before = (_sample(body, dropped), _sample(body, empty))
        queries = [wire(msgid=100 + i) for i in range(4)]
        replies = yield util.send_tcp(app.port(), queries, count=2)
        # Queries are served in order: had 100 or 102 been answered, their
        # replies would come first.
        self.assertEqual([parse(r).id for r in replies], [101, 103])
        _, body = yield util.http_get(app.http_port(), "/metrics")
        # A dropped query counts as a NOERROR written by no plugin, of
        # size 0.
        self.assertEqual((_sample(body, dropped) - before[0],
                          _sample(body, empty) - before[1]), (2.0, 2.0))

    @defer.inlineCallbacks
    def test_over_udp_silence(self):
        app = yield util.start(self, ".:0 {\n    erratic {\n        drop 1\n"
                                     "    }\n}\n")
        d = util.send_udp(app.port(), wire(), timeout=0.2)
        yield self.assertFailure(d, util.TimeoutError)


class ErraticTruncateDelayTest(unittest.TestCase):

    def test_truncate_bitwise_as_coredns(self):
        d = util.Direct(self, ".:0 {\n    erratic {\n        truncate 2\n"
                              "    }\n}\n")
        # query number & 2 == 0 (not modulo): 0, 1, 4, 5.
        cases.run_direct(self, d, [
            Case("example.org.", "A", tc=tc, aa=True,
                 answer=["example.org. 0 IN A 192.0.2.53"], desc=str(n))
            for n, tc in enumerate([True, True, False, False, True, True,
                                    False, False])])

    def test_truncated_axfr_lacks_closing_soa(self):
        d = util.Direct(self, ".:0 {\n    erratic {\n        truncate 1\n"
                              "    }\n}\n")
        raw = d.ask(wire(rdtype="AXFR"), proto="tcp")     # query 0
        self.assertFalse(parse(raw).flags & dns.flags.TC)
        self.assertEqual(ancount(raw), 5)
        self.assertEqual(ancount(d.ask(wire(rdtype="AXFR"), proto="tcp")), 6)

    @defer.inlineCallbacks
    def test_delay_every_second(self):
        d = util.Direct(self, ".:0 {\n    erratic {\n        delay 2 1ms\n"
                              "    }\n}\n")
        first = d.ask_async(wire(msgid=1))
        self.assertFalse(first.called)          # query 0 waits
        second = d.ask_async(wire(msgid=2))
        self.assertTrue(second.called)          # query 1 does not
        third = d.ask_async(wire(msgid=3, rdtype="MX"))
        self.assertFalse(third.called)
        got = yield defer.gatherResults([first, second, third])
        self.assertEqual([parse(g).id for g in got], [1, 2, 3])
        self.assertEqual(parse(got[0]).answer[0].ttl, 0)
        self.assertEqual(parse(got[2]).rcode(), 2)

    @defer.inlineCallbacks
    def test_delay_over_udp(self):
        app = yield util.start(self, ".:0 {\n    erratic {\n"
                                     "        delay 1 5ms\n"
                                     "    }\n}\n")
        yield cases.run(self, app.port(), [Case(
            "example.org.", "AAAA", aa=True,
            answer=["example.org. 0 IN AAAA 2001:db8::53"])])


class ErraticSetupTest(unittest.TestCase):

    def parsed(self, body):
        text = ".:0 {\n    erratic {\n%s\n    }\n}\n" % body
        e = erratic_of(util.Direct(self, text))
        return e.drop, e.delay, e.truncate, e.duration

    def test_valid(self):
        e = erratic_of(util.Direct(self, ".:0 {\n    erratic\n}\n"))
        self.assertEqual((e.drop, e.delay, e.truncate), (2, 0, 0))
        self.assertEqual(self.parsed("drop 2\ndelay 3 1ms"), (2, 3, 0, 0.001))
        self.assertEqual(self.parsed("truncate 2\ndelay 3 1ms"),
                         (0, 3, 2, 0.001))
        self.assertEqual(self.parsed("drop 3\ndelay"), (3, 2, 0, 0.1))
        self.assertEqual(self.parsed("drop 3\ntruncate"), (3, 0, 2, 0))
        # A bare "drop" does not count as choosing drops.
        self.assertEqual(self.parsed("drop\ndelay"), (0, 2, 0, 0.1))

    def test_arguments_ignored(self):
        """CoreDNS's setup never reads the erratic line's arguments: its
        own rewrite tests configure ``erratic . { drop 0 }``."""
        for line in ("erratic . {\n        drop 0\n    }", "erratic a b"):
            e = erratic_of(util.Direct(self, ".:0 {\n    %s\n}\n" % line))
            self.assertEqual((e.drop, e.delay, e.truncate),
                             (0 if "drop" in line else 2, 0, 0))

    def test_errors(self):
        cases = [
            ("drop -1", 'illegal amount value given "-1"'),
            ("delay -1", 'illegal amount value given "-1"'),
            ("delay 1 2 4", "Wrong argument count"),
            ("delay 15.a", 'strconv.ParseInt: parsing "15.a": invalid syntax'),
            ("drop 3\ndelay 3 bla", 'time: invalid duration "bla"'),
            ("truncate 15.a",
             'strconv.ParseInt: parsing "15.a": invalid syntax'),
            ("drop 1 2", "Wrong argument count"),
            ("something-else", "unknown property 'something-else'"),
        ]
        for body, msg in cases:
            with self.assertRaises(CorefileError) as cm:
                self.parsed(body)
            self.assertIn("plugin/erratic: " + msg, str(cm.exception))


class Stuck(Plugin):
    """A next plugin whose answer never comes (records cancellation)."""

    name = "stuck"

    def __init__(self):
        self.cancelled = 0

    def serve(self, req):
        def canceller(d):
            self.cancelled += 1
        return defer.Deferred(canceller)


class CancelTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_slow_chain_gets_servfail(self):
        # erratic's delay (10 minutes) is far longer than cancel's 20ms.
        app = yield util.start(self, ".:0 {\n    cancel 20ms\n    erratic {\n"
                                     "        delay 1 10m\n    }\n}\n")
        case = Case("example.org.", "A", "SERVFAIL", payload=1232)
        for proto in ("udp", "tcp"):
            m = yield cases.ask(app.port(), case, proto)
            cases.check_response(self, case, m)
            self.assertEqual(m.edns, 0)

    @defer.inlineCallbacks
    def test_canceller_runs_and_timer_goes(self):
        d = util.Direct(self, ".:0 {\n    cancel 10ms\n    whoami\n}\n")
        block = d.mux.zones["."][0][1]
        stuck = Stuck()
        block.plugin("cancel").next = stuck
        reply = yield d.ask_async(wire())
        self.assertEqual(parse(reply).rcode(), 2)
        self.assertEqual(stuck.cancelled, 1)

    @defer.inlineCallbacks
    def test_answer_in_time_passes_and_timer_cancelled(self):
        from twisted.internet import reactor
        d = util.Direct(self, ".:0 {\n    cancel\n    erratic {\n"
                              "        delay 1 1ms\n    }\n}\n")
        def cancel_timers():
            return [c for c in reactor.getDelayedCalls()
                    if getattr(c.func, "__name__", "") == "cancel"]
        pending = d.ask_async(wire())
        self.assertEqual(len(cancel_timers()), 1)
        reply = yield pending
        cases.check_response(self, Case(
            "example.org.", "A", aa=True,
            answer=["example.org. 0 IN A 192.0.2.53"]),
            cases.parse_reply(reply))
        # The timer went with the answer.
        self.assertEqual(cancel_timers(), [])

    def test_synchronous_answer_untouched(self):
        d = util.Direct(self, ".:0 {\n    cancel 1s\n    whoami\n}\n")
        cases.run_direct(self, d, [Case(
            "example.org.", "A", aa=True,
            extra=cases.whoami("example.org.", port=40000))])

    def test_setup(self):
        def timeout(arg):
            d = util.Direct(self, ".:0 {\n    cancel %s\n}\n" % arg)
            return d.mux.zones["."][0][1].plugin("cancel").timeout
        self.assertEqual(timeout(""), cancelmod.DEFAULT)
        self.assertEqual(timeout("1s"), 1.0)
        self.assertEqual(timeout("250ms"), 0.25)
        for arg, msg in (("5", 'invalid duration: "5"'),
                         ("abc", 'invalid duration: "abc"'),
                         ("0s", 'invalid negative duration: "0s"'),
                         ("-1s", 'invalid negative duration: "-1s"'),
                         ("1s 2s", "Wrong argument count")):
            with self.assertRaises(CorefileError) as cm:
                timeout(arg)
            self.assertIn("plugin/cancel: " + msg, str(cm.exception))


def _sample(body, series):
    """The value of ``series`` (name and labels as printed) in a
    /metrics body, 0 when absent."""
    for line in body.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
