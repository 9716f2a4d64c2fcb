"""fanout's Corefile syntax (the upstream plugin's setup cases) and how it
picks an answer, with stand-in upstreams on a fake clock
(``trial corednstw_fanout``)."""

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import directives
from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import Request, make_query
from corednstw.engines.upstream import UpstreamError
from corednstw.service.app import App
from corednstw_fanout import RCODE_COUNT, REQUEST_COUNT, Fanout
from corednstw_fanout.plugin import ATTEMPT_DELAY


def build(body, files_dir=None):
    app = App(None, reactor=task.Clock(), dns_port=0,
              text=".:0 {\n%s\n}\n" % body)
    app.config = app.load()
    return app.config.blocks[0].plugin("fanout")


class SetupTest(unittest.TestCase):
    """The upstream plugin's setup table."""

    def check(self, body, **want):
        f = build(body)
        got = {"from_": f.from_, "attempts": f.attempts,
               "workers": f.workers, "timeout": f.timeout,
               "network": f.network, "servers": f.servers,
               "weights": f.weights}
        self.assertEqual({k: got[k] for k in want}, want, body)
        return f

    def test_defaults(self):
        f = self.check("fanout . 127.0.0.1", from_=".", attempts=3,
                       workers=1, timeout=30.0, network="udp", servers=1,
                       weights=None)
        self.assertEqual([p.addr for p in f.upstreams], ["127.0.0.1:53"])

    def test_accepted(self):
        self.check("fanout . 127.0.0.1 {\npolicy weighted-random\n"
                   "weighted-random-server-count 5\n"
                   "weighted-random-load-factor 100\n}",
                   workers=1, servers=1, weights=[100])
        f = self.check("fanout . 127.0.0.1 {\nexcept a b\n"
                       "worker-count 3\n}", workers=1)
        self.assertEqual(f.excepted, {"a.", "b."})
        f = self.check("fanout . 127.0.0.1 127.0.0.2 {\nnetwork tcp\n}",
                       workers=2, network="tcp", servers=2)
        self.assertEqual([p.addr for p in f.upstreams],
                         ["127.0.0.1:53", "127.0.0.2:53"])
        self.check("fanout . 127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 {\n"
                   "worker-count 3\ntimeout 1m\n}", timeout=60.0,
                   workers=3, servers=4)
        self.check("fanout . 127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 {\n"
                   "attempt-count 2\n}", attempts=2, workers=4)
        self.check("fanout . 127.0.0.1 127.0.0.2 127.0.0.3 {\n"
                   "policy weighted-random\n}", workers=3, servers=3,
                   weights=[100, 100, 100])
        self.check("fanout . 127.0.0.1 127.0.0.2 127.0.0.3 {\n"
                   "policy sequential\nworker-count 3\n}", workers=3,
                   weights=None)
        self.check("fanout . 127.0.0.1 127.0.0.2 {\nNETWORK TCP\n"
                   "attempt-count 0\n}", network="tcp", attempts=0)
        self.check("fanout example.org 127.0.0.1", from_="example.org.")

    def test_tls(self):
        f = self.check("fanout . tls://9.9.9.9 {\ntls-server dns.quad9.net"
                       "\n}")
        p = f.upstreams[0]
        self.assertEqual((p.addr, p.servername), ("9.9.9.9:853",
                                                  "dns.quad9.net"))
        self.assertIsNotNone(p.tls)
        f = self.check("fanout . 127.0.0.1 {\nnetwork tcp-tls\n}",
                       network="tcp")
        self.assertEqual(f.upstreams[0].servername, "127.0.0.1")
        self.assertIsNotNone(f.upstreams[0].tls)

    def test_resolv_conf(self):
        path = self.mktemp()
        with open(path, "w") as fh:
            fh.write("nameserver 10.10.255.252\nnameserver 10.10.255.253\n")
        f = build("fanout . %s" % path)
        self.assertEqual([p.addr for p in f.upstreams],
                         ["10.10.255.252:53", "10.10.255.253:53"])

    def test_except_file(self):
        path = self.mktemp()
        with open(path, "w") as fh:
            fh.write("example.org\nExample.NET.\n")
        f = build("fanout . 127.0.0.1 {\nexcept-file %s\n}" % path)
        self.assertEqual(f.excepted, {"example.org.", "example.net."})

    BAD = [
        ("fanout . aaa", 'not an IP address or file: "aaa"'),
        ("fanout .: aaa", "unable to normalize '.:'"),
        ("fanout . 127.0.0.1 {\nexcept a b\nworker-count 1\n}",
         "worker count should be more or equal 2. Consider to use "
         "Forward plugin"),
        ("fanout . 127.0.0.1 {\nworker-count 33\n}",
         "worker count more then max value: 32"),
        ("fanout . 127.0.0.1 {\nexcept a b\nworker-count ten\n}",
         "Wrong argument count or unexpected line ending after 'ten'"),
        ("fanout . 127.0.0.1 {\nexcept a:\nworker-count ten\n}",
         "unable to normalize 'a:'"),
        ("fanout . 127.0.0.1 127.0.0.2 {\nnetwork XXX\n}",
         "unknown network protocol"),
        ("fanout . 127.0.0.1 {\npolicy weighted-random\n"
         "weighted-random-server-count -100\n}",
         "Wrong argument count or unexpected line ending"),
        ("fanout . 127.0.0.1 {\npolicy weighted-random\n"
         "weighted-random-load-factor 150\n}",
         "load-factor 150 should be less than 100"),
        ("fanout . 127.0.0.1 {\npolicy weighted-random\n"
         "weighted-random-load-factor 0\n}",
         "load-factor should be more or equal 1"),
        ("fanout . 127.0.0.1 {\npolicy weighted-random\n"
         "weighted-random-load-factor 50 100\n}",
         "load-factor params count must be the same as the number of "
         "hosts"),
        ("fanout . 127.0.0.1 127.0.0.2 {\npolicy weighted-random\n"
         "weighted-random-load-factor\n}",
         "Wrong argument count or unexpected line ending"),
        ("fanout . 127.0.0.1 {\npolicy fastest\n}",
         'unknown policy "fastest"'),
        ("fanout . 127.0.0.1 {\ncolour red\n}", "unknown property colour"),
        ("fanout . 127.0.0.1 {\ntimeout soon\n}",
         'time: invalid duration "soon"'),
        ("fanout . 127.0.0.1 {\nrace now\n}", "Wrong argument count"),
        ("fanout . 127.0.0.1 {\nexcept-file /nonexistent/list\n}",
         "open /nonexistent/list: no such file or directory"),
        ("fanout . https://127.0.0.1", "'https' is not supported as a "
         "destination protocol in fanout"),
        ("fanout .", "Wrong argument count"),
        ("fanout . 127.0.0.1\nfanout . 127.0.0.2",
         "this plugin can only be used once per Server Block"),
        ("fanout . %s" % " ".join("10.0.%d.%d" % (i // 200, i % 200 + 1)
                                  for i in range(101)),
         "more than 100 TOs configured: 101"),
    ]

    def test_refused(self):
        for body, text in self.BAD:
            with self.assertRaises(CorefileError, msg=body) as cm:
                build(body)
            self.assertIn("plugin/fanout: " + text, str(cm.exception))

    def test_place_in_chain(self):
        names = directives.names()
        self.assertEqual(names.index("forward") + 1, names.index("fanout"))


class _Upstream:
    """Stands in for an engine Upstream: ``script`` is what each query gets,
    in turn: an rcode (an answer with it), "fail" (an error at once) or
    "hold" (nothing until ``release``)."""

    def __init__(self, addr, *script):
        self.addr = addr
        self.script = list(script)
        self.asked = 0
        self.held = []

    def query(self, wire, proto, waiter, now):
        self.asked += 1
        step = self.script.pop(0) if self.script else self.last
        self.last = step
        if step == "fail":
            return waiter.fail(UpstreamError("i/o timeout"), None)
        if step == "hold":
            self.held.append((wire, waiter))
            return None
        waiter.reply(_reply(wire, step, self.addr), None)

    def release(self, rcode):
        held, self.held = self.held, []
        for wire, waiter in held:
            waiter.reply(_reply(wire, rcode, self.addr), None)


def _reply(wire, rcode, addr):
    q = dns.message.from_wire(wire)
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    if rcode == dns.rcode.NOERROR:
        r.answer.append(dns.rrset.from_text(
            q.question[0].name, 60, "IN", "TXT", '"%s"' % addr))
    return r.to_wire()


class AnswerTest(unittest.TestCase):
    """Which answer the client gets, on a fake clock."""

    def fanout(self, *ups, options=""):
        f = build("fanout . %s {\n%s\n}" % (
            " ".join("127.0.0.%d" % (i + 1) for i in range(len(ups))),
            options))
        self.clock = task.Clock()
        f.reactor = self.clock
        f.clock = self.clock.seconds
        f.upstreams = list(ups)
        f.next = None
        return f

    def ask(self, f, name="www.example.org."):
        wire = make_query(name, dns.rdatatype.TXT, msgid=3)
        req = Request(wire)
        req.parse_question(*req.parse_header()[1:])
        out = []
        f.serve(req).addCallback(out.append)
        return out

    def text(self, out):
        self.assertEqual(len(out), 1)
        r = out[0]
        if r.raw is None:
            return w.rcode_text(r.rcode)
        m = dns.message.from_wire(r.raw)
        if not m.answer:
            return dns.rcode.to_text(m.rcode())
        return m.answer[0][0].strings[0].decode()

    def test_first_noerror_wins(self):
        a = _Upstream("a", "hold")
        b = _Upstream("b", dns.rcode.NOERROR)
        out = self.ask(self.fanout(a, b))
        self.assertEqual(self.text(out), "b")
        a.release(dns.rcode.NOERROR)
        self.assertEqual(len(out), 1)

    def test_nxdomain_waits_for_the_others(self):
        """NXDOMAIN is the answer only once no upstream said NOERROR."""
        a = _Upstream("a", dns.rcode.NXDOMAIN)
        b = _Upstream("b", "hold")
        out = self.ask(self.fanout(a, b))
        self.assertEqual(out, [])
        b.release(dns.rcode.NOERROR)
        self.assertEqual(self.text(out), "b")
        a = _Upstream("a", dns.rcode.NXDOMAIN)
        b = _Upstream("b", "hold")
        out = self.ask(self.fanout(a, b))
        b.release(dns.rcode.SERVFAIL)
        self.assertEqual(self.text(out), "NXDOMAIN")

    def test_race(self):
        a = _Upstream("a", dns.rcode.NXDOMAIN)
        b = _Upstream("b", "hold")
        out = self.ask(self.fanout(a, b, options="race"))
        self.assertEqual(self.text(out), "NXDOMAIN")

    def test_error_loses_to_an_answer(self):
        a = _Upstream("a", "fail")
        b = _Upstream("b", dns.rcode.REFUSED)
        out = self.ask(self.fanout(a, b, options="attempt-count 1"))
        self.assertEqual(self.text(out), "REFUSED")

    def test_attempts(self):
        """A failing upstream is asked ``attempt-count`` times, 100 ms
        apart; then the query fails with its last error."""
        a = _Upstream("a", "fail")
        b = _Upstream("b", "fail")
        f = self.fanout(a, b, options="attempt-count 2")
        out = self.ask(f)
        self.assertEqual((a.asked, b.asked, out), (1, 1, []))
        self.clock.advance(ATTEMPT_DELAY)
        self.assertEqual((a.asked, b.asked), (2, 2))
        self.assertEqual(self.text(out), "SERVFAIL")
        self.assertEqual(out[0].error, "attempt limit has been reached: "
                         "i/o timeout")

    def test_retry_then_answer(self):
        a = _Upstream("a", "fail", "fail", dns.rcode.NOERROR)
        out = self.ask(self.fanout(a, _Upstream("b", "hold")))
        self.clock.advance(ATTEMPT_DELAY)
        self.assertEqual(out, [])
        self.clock.advance(ATTEMPT_DELAY)
        self.assertEqual((self.text(out), a.asked), ("a", 3))

    def test_unlimited_attempts_until_timeout(self):
        a = _Upstream("a", "fail")
        b = _Upstream("b", dns.rcode.NXDOMAIN)
        f = self.fanout(a, b, options="attempt-count 0\ntimeout 1s")
        out = self.ask(f)
        self.clock.pump([ATTEMPT_DELAY] * 9)
        self.assertEqual((out, a.asked), ([], 10))
        self.clock.advance(0.2)     # past the timeout, whatever rounding
        self.assertEqual(self.text(out), "NXDOMAIN")

    def test_timeout_without_answer(self):
        a = _Upstream("a", "hold")
        b = _Upstream("b", "hold")
        out = self.ask(self.fanout(a, b, options="timeout 2s"))
        self.clock.advance(2)
        self.assertEqual(self.text(out), "SERVFAIL")
        self.assertEqual(out[0].error, "context deadline exceeded")

    def test_workers(self):
        """Two slots for four upstreams: the third is asked once one of
        the first two is done."""
        ups = [_Upstream(n, "hold") for n in "abcd"]
        ups[0].script = [dns.rcode.NXDOMAIN]
        f = self.fanout(*ups, options="worker-count 2")
        out = self.ask(f)
        self.assertEqual([u.asked for u in ups], [1, 1, 1, 0])
        ups[2].release(dns.rcode.SERVFAIL)
        self.assertEqual([u.asked for u in ups], [1, 1, 1, 1])
        ups[3].release(dns.rcode.NOERROR)
        self.assertEqual(self.text(out), "d")

    def test_weighted_random(self):
        """``weighted-random-server-count 2`` of three: two distinct
        upstreams per query, the heavier ones more often."""
        ups = [_Upstream(n, dns.rcode.NXDOMAIN) for n in "abc"]
        f = self.fanout(*ups, options="policy weighted-random\n"
                        "weighted-random-server-count 2\n"
                        "weighted-random-load-factor 1 50 100")
        for _ in range(300):
            picked = f.picked()
            self.assertEqual(len(set(picked)), 2)
        self.ask(f)
        self.assertEqual(sum(u.asked for u in ups), 2)
        counts = {u.addr: 0 for u in ups}
        for _ in range(2000):
            counts[f.picked()[0].addr] += 1
        self.assertLess(counts["a"], counts["b"])
        self.assertLess(counts["b"], counts["c"])

    def test_except(self):
        f = self.fanout(_Upstream("a", dns.rcode.NOERROR),
                        options="except example.org")
        self.assertFalse(f.match("example.org."))
        self.assertFalse(f.match("www.example.org."))
        self.assertTrue(f.match("example.net."))
        self.assertTrue(f.match("org."))

    def test_metrics(self):
        a = _Upstream("127.0.0.9:53", dns.rcode.NXDOMAIN)
        before = (REQUEST_COUNT.get((a.addr,)),
                  RCODE_COUNT.get(("NXDOMAIN", a.addr)))
        self.ask(self.fanout(a))
        self.assertEqual((REQUEST_COUNT.get((a.addr,)),
                          RCODE_COUNT.get(("NXDOMAIN", a.addr))),
                         (before[0] + 1, before[1] + 1))

    def test_is_fanout(self):
        self.assertIsInstance(build("fanout . 127.0.0.1"), Fanout)
