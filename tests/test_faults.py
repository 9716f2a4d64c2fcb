"""Faults: upstreams that die or misbehave, reloads of broken Corefiles
under load, SIGTERM under load, descriptors and disks that run out.

Every test waits for conditions (answers counted, lines logged), never for
fixed times; the real-process tests start twistd as tests/test_signals.py
does.
"""

import errno
import os
import resource
import signal
import subprocess
import time

import dns.flags
import dns.message
import dns.rcode
from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest

from corednstw.core import logger, metrics
from tests.support import util
from tests.support.upstream import Upstream

#: Longer than forward's whole exchange (5 s): a client that waits this
#: long without an answer has met a hang.
PATIENCE = 15


def ask(port, name, rdtype="A", timeout=PATIENCE, proto="udp"):
    """Deferred: the parsed reply (a hang fails the test)."""
    wire = dns.message.make_query(name, rdtype).to_wire()
    if proto == "udp":
        d = util.send_udp(port, wire, timeout=timeout)
    else:
        d = util.send_tcp(port, wire, timeout=timeout).addCallback(
            lambda replies: replies[0])
    return d.addCallback(dns.message.from_wire)


@defer.inlineCallbacks
def _answered_over_tcp(port, name, limit):
    """The first TCP answer for ``name`` within ``limit`` seconds of
    tries (a connection closed unanswered is tried again)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            m = yield ask(port, name, proto="tcp")
            return m
        except (IndexError, ConnectionError, util.TimeoutError):
            if time.monotonic() > deadline:
                raise
            yield task.deferLater(reactor, 0.2, lambda: None)


def rcodes(replies):
    return sorted({dns.rcode.to_text(m.rcode()) for m in replies})


class Upstreams:

    def upstream(self):
        up = Upstream().start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def serve(self, body):
        self.log = util.capture_log(self)
        self.panics = sum(metrics.PANICS.values.values())
        self.app = yield util.start(self, ".:0 {\n%s\n}\n" % body)
        return self.app.port()

    def assertNoPanic(self):
        self.assertEqual(sum(metrics.PANICS.values.values()), self.panics)
        self.assertNotIn("Traceback", self.log.text())


class UpstreamFaults(Upstreams, unittest.TestCase):

    @defer.inlineCallbacks
    def test_upstream_killed_mid_run(self):
        """Queries flow while the first upstream dies: none is lost (the
        failed attempt goes to the second), the health check marks it
        down after max_fails checks, queries stop trying it; with both
        dead every query gets SERVFAIL."""
        one, two = self.upstream(), self.upstream()
        port = yield self.serve(
            "    forward . %s %s {\n        policy sequential\n"
            "        health_check 50ms\n        max_fails 2\n"
            "        read_timeout 2s\n    }" % (one.addr(), two.addr()))
        proxy = [p for p in self.app.config.plugins()
                 if p.name == "forward"][0].upstreams[0]
        replies = yield defer.gatherResults(
            [ask(port, "a%d.example." % i) for i in range(50)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
        self.assertEqual(two.count(qtype="A"), 0)
        batch = [ask(port, "b%d.example." % i) for i in range(50)]
        yield one.stop()
        batch += [ask(port, "c%d.example." % i) for i in range(50)]
        replies = yield defer.gatherResults(batch)
        self.assertEqual(rcodes(replies), ["NOERROR"])
        self.assertGreater(two.count(qtype="A"), 0)
        yield util.wait_for(lambda: proxy.down(2))
        before = two.count(qtype="A")
        replies = yield defer.gatherResults(
            [ask(port, "d%d.example." % i) for i in range(50)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
        self.assertEqual(two.count(qtype="A") - before, 50)
        yield two.stop()
        replies = yield defer.gatherResults(
            [ask(port, "e%d.example." % i, proto=proto)
             for i in range(20) for proto in ("udp", "tcp")])
        self.assertEqual(rcodes(replies), ["SERVFAIL"])
        self.assertNoPanic()

    @defer.inlineCallbacks
    def test_upstream_answers_garbage(self):
        """Replies with another ID, another question, cut short, empty or
        random: no hang, no panic, never a malformed message relayed.  As
        CoreDNS's forward: a reply miekg cannot unpack fails the attempt
        (SERVFAIL), over UDP it is relayed truncated (TC, no records), then
        FORMERR when not even its question could be read; a reply to
        another question is FORMERR.  The next sane reply is relayed."""
        table = [
            # what, reply from the answer, rcode over UDP, over TCP
            ("other id", lambda w: bytes([w[0] ^ 0xFF]) + w[1:],
             "SERVFAIL", "SERVFAIL"),
            ("header only", lambda w: w[:12], "FORMERR", "SERVFAIL"),
            ("cut in the question", lambda w: w[:16], "FORMERR",
             "SERVFAIL"),
            ("cut in a record", lambda w: w[:-3], "NOERROR", "SERVFAIL"),
            ("seven bytes", lambda w: w[:7], "SERVFAIL", "SERVFAIL"),
            ("empty", lambda w: b"", "SERVFAIL", "SERVFAIL"),
            ("random after the id", lambda w: w[:2] + bytes(
                range(251, 0, -7)), "FORMERR", "SERVFAIL"),
            ("a query, not a reply", lambda w: w[:2] + bytes(
                [w[2] & 0x7F]) + w[3:], "FORMERR", "FORMERR"),
        ]
        up = self.upstream()
        port = yield self.serve(
            "    forward . %s {\n        read_timeout 100ms\n"
            "        max_fails 0\n    }" % up.addr())
        for what, mangle, udp, tcp in table:
            for proto, want in (("udp", udp), ("tcp", tcp)):
                up.mangle = lambda w, p, fn=mangle: fn(w)
                m = yield ask(port, "x.example.", proto=proto)
                self.assertEqual(dns.rcode.to_text(m.rcode()), want,
                                 (what, proto))
                if want == "NOERROR":
                    self.assertTrue(m.flags & dns.flags.TC, what)
                    self.assertEqual(m.answer, [], what)
                up.mangle = None
                m = yield ask(port, "y.example.", proto=proto)
                self.assertEqual(m.rcode(), dns.rcode.NOERROR, (what, proto))
                self.assertEqual(len(m.answer), 1, (what, proto))
        self.assertNoPanic()

    @defer.inlineCallbacks
    def test_slow_upstream(self):
        """An upstream slower than read_timeout: SERVFAIL in time; its
        late replies are dropped (no error, no answer to anyone)."""
        up = self.upstream()
        up.held = True
        port = yield self.serve(
            "    forward . %s {\n        read_timeout 100ms\n"
            "        max_fails 0\n    }" % up.addr())
        replies = yield defer.gatherResults(
            [ask(port, "s%d.example." % i, proto=proto)
             for i in range(10) for proto in ("udp", "tcp")])
        self.assertEqual(rcodes(replies), ["SERVFAIL"])
        up.held = False
        up.release()
        m = yield ask(port, "fast.example.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertNoPanic()


GOOD = [".:0 {\n    whoami\n}\n",
        ".:0 {\n    template IN A {\n        answer \"{{ .Name }} 60 IN A "
        "192.0.2.9\"\n    }\n    whoami\n}\n"]
BROKEN = [".:0 {\n    whoami extra\n}\n", ".:0 {\n    whoami\n",
          ".:0 {\n    nosuchplugin\n}\n", "import nowhere/*.conf\n.:0 {\n"]


class ReloadFaults(unittest.TestCase):

    @defer.inlineCallbacks
    def test_twenty_reloads_under_load(self):
        """20 reloads, broken and good in turn, each with queries in
        flight on UDP and TCP: every query is answered."""
        log = util.capture_log(self)
        app = yield util.start(self, GOOD[0])
        port = app.port()
        path = app.path
        answered = 0
        for i in range(20):
            good = i % 2 == 1
            text = (GOOD[i // 2 % 2] if good else BROKEN[i // 2 % 4])
            flight = [ask(port, "r%d-%d.example." % (i, j),
                          proto=("udp", "tcp")[j % 2]) for j in range(40)]
            util.rewrite(path, text)
            self.assertEqual(app.reload(), good, text)
            replies = yield defer.gatherResults(flight)
            self.assertEqual(rcodes(replies), ["NOERROR"])
            answered += len(replies)
        self.assertEqual(answered, 800)
        self.assertEqual(log.text().count("reload failed"), 10)


class _Hold(protocol.Protocol):
    """A TCP client that connects and says nothing."""

    def connectionMade(self):
        self.factory.open += 1

    def connectionLost(self, reason):
        self.factory.lost += 1


class _Holders(protocol.ClientFactory):
    protocol = _Hold

    def __init__(self):
        self.open = self.lost = self.failed = 0

    def clientConnectionFailed(self, connector, reason):
        self.failed += 1


def _descriptors(pid):
    """Open descriptors of process ``pid``."""
    return len(os.listdir("/proc/%d/fd" % pid))


class Process:
    """twistd serving a Corefile, its output in a file (or elsewhere)."""

    def __init__(self, testcase, body, nofile=None, stdout=None):
        self.port = util.free_port()
        d = util.write_files(testcase, {
            "Corefile": ".:%d {\n%s\n}\n" % (self.port, body)})
        self.out = os.path.join(d, "out")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        with open(self.out if stdout is None else stdout, "w",
                  closefd=not isinstance(stdout, int)) as f:
            self.proc = subprocess.Popen(
                [util.TWISTD, "-n", "--pidfile=", "coredns", "-c",
                 os.path.join(d, "Corefile")], stdout=f,
                stderr=subprocess.STDOUT, preexec_fn=limit)
        testcase.addCleanup(
            lambda: self.proc.poll() is None and self.proc.kill())

    def output(self):
        with open(self.out) as f:
            return f.read()

    @defer.inlineCallbacks
    def ready(self):
        """The server answers over UDP (asked without blocking the
        reactor, which may run the test's upstream)."""
        for _ in range(150):
            if self.proc.poll() is not None:
                raise AssertionError("server exited: %s" % self.output())
            try:
                yield ask(self.port, "ready.example.", timeout=0.2)
            except Exception:
                continue
            return


class ProcessFaults(Upstreams, unittest.TestCase):

    @defer.inlineCallbacks
    def test_sigterm_under_load(self):
        """SIGTERM with 30 queries waiting on the upstream: lameduck is
        announced and honoured (new queries still answered), the waiting
        answers are delivered, exit status 0."""
        up = self.upstream()
        srv = Process(self, "    health 127.0.0.1:%d {\n"
                      "        lameduck 3s\n    }\n    forward . %s"
                      % (util.free_port(), up.addr()))
        yield srv.ready()
        up.held = True
        base = up.count(qtype="A")
        waiting = [ask(srv.port, "w%d.example." % i,
                       proto=("udp", "tcp")[i % 2]) for i in range(30)]
        yield util.wait_for(lambda: up.count(qtype="A") - base == 30)
        srv.proc.send_signal(signal.SIGTERM)
        yield util.wait_for(lambda: "lameduck mode" in srv.output())
        up.held = False
        up.release()
        replies = yield defer.gatherResults(waiting)
        self.assertEqual(rcodes(replies), ["NOERROR"])
        m = yield ask(srv.port, "during.example.")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        yield util.wait_for(lambda: srv.proc.poll() is not None, 30)
        self.assertEqual(srv.proc.returncode, 0)
        self.assertIn("Going into lameduck mode for 3s", srv.output())

    @defer.inlineCallbacks
    def test_descriptors_exhausted(self):
        """2,000 TCP clients against a server allowed 128 descriptors:
        the accept failure is logged once, not per client; UDP answers
        all along; TCP serves again once the clients leave."""
        srv = Process(self, "    whoami\n    timeouts {\n        read 24h\n"
                      "        idle 24h\n    }", nofile=128)
        yield srv.ready()
        holders = _Holders()
        conns = [reactor.connectTCP("127.0.0.1", srv.port, holders,
                                    timeout=60) for _ in range(2000)]

        def drop():
            for c in conns:
                c.disconnect()
        self.addCleanup(drop)
        yield util.wait_for(lambda: "TCP accept" in srv.output(), 60)
        replies = yield defer.gatherResults(
            [ask(srv.port, "u%d.example." % i) for i in range(200)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
        drop()
        yield util.wait_for(lambda: holders.lost + holders.failed >= 2000,
                            60)
        # The server closes its ends as it sees the clients go: until
        # then a new connection may still meet the limit and be closed.
        yield util.wait_for(
            lambda: _descriptors(srv.proc.pid) < 100, 60)
        # Connections the clients closed may still wait in the listen
        # backlog; while the server accepts and drops them a new client
        # can meet the limit once more and be closed: TCP is back when a
        # client is answered (on a busy machine, after a few tries).
        m = yield _answered_over_tcp(srv.port, "back.example.", 60)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        out = srv.output()
        self.assertEqual(out.count("TCP accept"), 1, out)
        self.assertIn("Too many open files", out)

    @defer.inlineCallbacks
    def test_ten_thousand_tcp_clients(self):
        """10,000 TCP connections held open and silent (read and idle
        timeouts of a day) do not stop UDP service, nor TCP for a new
        client."""
        clients = 10000
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = clients + 500
        self.assertGreaterEqual(hard, need, "the descriptor limit is too "
                                "low to hold %d connections" % clients)
        if soft < need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
            self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE,
                            (soft, hard))
        srv = Process(self, "    whoami\n    timeouts {\n        read 24h\n"
                      "        idle 24h\n    }", nofile=need)
        yield srv.ready()
        holders = _Holders()
        conns = []

        def drop():
            for c in conns:
                c.disconnect()
        self.addCleanup(drop)
        # In waves, so the listen backlog never overflows into SYN
        # retries (which take seconds each).
        for _ in range(clients // 500):
            conns.extend(reactor.connectTCP("127.0.0.1", srv.port, holders,
                                            timeout=60) for _ in range(500))
            yield util.wait_for(
                lambda: holders.open + holders.failed >= len(conns), 60)
        self.assertEqual((holders.open, holders.failed), (clients, 0))
        yield util.wait_for(
            lambda: _descriptors(srv.proc.pid) >= clients, 60)
        replies = yield defer.gatherResults(
            [ask(srv.port, "u%d.example." % i) for i in range(500)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
        m = yield ask(srv.port, "tcp.example.", proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertNotIn("TCP accept", srv.output())

    @defer.inlineCallbacks
    def test_log_to_a_full_disk(self):
        """Query logs written to a full disk (/dev/full): every query is
        still answered."""
        srv = Process(self, "    log\n    errors\n    whoami",
                      stdout="/dev/full")
        yield srv.ready()
        replies = yield defer.gatherResults(
            [ask(srv.port, "f%d.example." % i, proto=("udp", "tcp")[i % 2])
             for i in range(500)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
        self.assertIsNone(srv.proc.poll())

    @defer.inlineCallbacks
    def test_log_to_a_pipe_nobody_reads(self):
        """Query logs written to a pipe whose reader stalled: its 64 KiB
        fill after some 600 lines, and the 3,000 queries after that are
        answered all the same (the lines wait in the log's buffer)."""
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        srv = Process(self, "    log\n    whoami", stdout=w)
        os.close(w)
        yield srv.ready()
        for wave in range(6):
            replies = yield defer.gatherResults(
                [ask(srv.port, "p%d-%d.example." % (wave, i))
                 for i in range(500)])
            self.assertEqual(rcodes(replies), ["NOERROR"])
        self.assertIsNone(srv.proc.poll())


class _Full:
    """A log stream on a full disk."""

    def write(self, s):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")


class WriterFaults(unittest.TestCase):

    @defer.inlineCallbacks
    def test_log_writer_out_of_space(self):
        """The log and errors plugins writing to a stream that raises
        ENOSPC: the queries are answered all the same."""
        app = yield util.start(self, ".:0 {\n    log\n    errors\n"
                               "    whoami\n}\n")
        old, logger.out = logger.out, _Full()
        self.addCleanup(setattr, logger, "out", old)
        replies = yield defer.gatherResults(
            [ask(app.port(), "n%d.example." % i) for i in range(50)])
        self.assertEqual(rcodes(replies), ["NOERROR"])
