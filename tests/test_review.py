"""Edge cases of the request path checked against miekg/dns's unpacking and
CoreDNS's ServeDNS (what a malformed or unusual query gets back)."""

import os
import signal
import socket
import struct
import subprocess
import time

import dns.message
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.plugins import reload as reloadmod
from corednstw.core.request import make_query
from tests.support import util
from tests import test_signals

HDR = struct.Struct("!HHHHHH")
WHOAMI = ".:0 {\n    whoami\n}\n"


def query(name="example.org.", qtype=w.A, msgid=0x1234, **kw):
    return make_query(name, qtype, msgid=msgid, **kw)


class ShortQueryTest(unittest.TestCase):
    """miekg unpacks what is there: a header alone is a message without a
    question (CoreDNS: SERVFAIL), a question cut after its name or type
    has type/class 0 (CoreDNS: REFUSED, class not IN), record counts that
    run past the end are lies it stops at."""

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_header_only_servfail_dropped(self):
        key = (self.s.mux.label, "dropped", "", "SERVFAIL", "")
        before = metrics.RESPONSES.get(key)
        r = self.s.ask(HDR.pack(9, w.RD | w.CD, 1, 0, 0, 0))
        msgid, flags, qd, an, ns, ar = HDR.unpack(r)
        self.assertEqual(len(r), 12)
        self.assertEqual(msgid, 9)
        self.assertEqual(flags, w.QR | w.RD | w.CD | w.SERVFAIL)
        self.assertEqual((qd, an, ns, ar), (0, 0, 0, 0))
        self.assertEqual(metrics.RESPONSES.get(key), before + 1)

    def test_question_without_type_and_class_refused(self):
        q = query()
        for cut in (4, 2):
            r = dns.message.from_wire(self.s.ask(q[:-cut]))
            self.assertEqual(r.rcode(), dns.rcode.REFUSED)
            self.assertEqual(str(r.question[0].name), "example.org.")
            self.assertEqual(r.question[0].rdclass, 0)
        self.assertEqual(dns.message.from_wire(
            self.s.ask(q[:-4])).question[0].rdtype, 0)
        self.assertEqual(dns.message.from_wire(
            self.s.ask(q[:-2])).question[0].rdtype, w.A)

    def test_half_a_class_is_class_zero(self):
        r = dns.message.from_wire(self.s.ask(query()[:-1]))
        self.assertEqual(r.rcode(), dns.rcode.REFUSED)

    def test_half_a_type_formerr(self):
        r = self.s.ask(query()[:-3])
        self.assertEqual(HDR.unpack(r[:12])[1] & 0xF, w.FORMERR)
        self.assertEqual(len(r), 12)

    def test_counts_past_the_end_are_ignored(self):
        for off in (6, 8, 10):
            q = bytearray(query())
            struct.pack_into("!H", q, off, 1)
            r = dns.message.from_wire(self.s.ask(bytes(q)))
            self.assertEqual(r.rcode(), 0)
            self.assertEqual(len(r.additional), 2)  # whoami answered

    def test_count_lie_after_opt(self):
        q = bytearray(query(edns=1232))
        struct.pack_into("!H", q, 10, 2)
        r = dns.message.from_wire(self.s.ask(bytes(q)))
        self.assertEqual(r.rcode(), 0)
        self.assertEqual(r.payload, 1232)


class FormerrTest(unittest.TestCase):
    """miekg's reject reply is the query's own header (QR set, AA and Z
    cleared, opcode QUERY for FORMERR) and, when the question could be read
    before a later record failed, the question too."""

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_reject_keeps_query_header_bits(self):
        bits = w.TC | w.RD | w.RA | w.AD | w.CD | w.AA | 0x40
        r = self.s.ask(HDR.pack(7, bits, 2, 0, 0, 0))
        self.assertEqual(HDR.unpack(r)[1],
                         w.QR | w.TC | w.RD | w.RA | w.AD | w.CD | w.FORMERR)

    def test_notimp_keeps_query_header_bits(self):
        r = self.s.ask(HDR.pack(7, (2 << 11) | w.AD | w.RD, 1, 0, 0, 0))
        self.assertEqual(HDR.unpack(r)[1],
                         w.QR | (2 << 11) | w.AD | w.RD | w.NOTIMP)

    def test_bad_record_keeps_question(self):
        q = query(edns=1232)
        bad = q[:-2] + b"\x00\x10"      # OPT rdlength past the end
        r = self.s.ask(bad)
        msgid, flags, qd, an, ns, ar = HDR.unpack(r[:12])
        self.assertEqual(flags & 0xF, w.FORMERR)
        self.assertEqual((qd, an, ns, ar), (1, 0, 0, 0))
        qlen = len(query()) - 12
        self.assertEqual(r[12:], q[12:12 + qlen])


def _with_opt_flags(wire, flags):
    """``wire`` (a query ending in an OPT without options) with the OPT's
    16 flag bits set to ``flags``."""
    b = bytearray(wire)
    struct.pack_into("!H", b, len(b) - 4, flags)
    return bytes(b)


class EchoTest(unittest.TestCase):
    """SizeAndDo keeps the OPT's DO and upper flag byte (TTL & 0xff00);
    SetReply copies RD and CD only for opcode QUERY."""

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_opt_upper_flag_byte_echoed(self):
        q = _with_opt_flags(query(edns=1232), 0x8000 | 0x4100 | 0x0001)
        r = dns.message.from_wire(self.s.ask(q))
        self.assertEqual(r.ednsflags & 0xFFFF, 0x8000 | 0x4100)

    def test_notify_reply_without_rd_cd(self):
        q = bytearray(query())
        q[2] = (q[2] & 0x87) | (4 << 3)
        q[3] |= 0x10        # CD
        r = self.s.ask(bytes(q))
        flags = HDR.unpack(r[:12])[1]
        self.assertEqual((flags >> 11) & 0xF, 4)
        self.assertFalse(flags & (w.RD | w.CD))

    def test_query_reply_keeps_rd_cd(self):
        q = bytearray(query())
        q[3] |= 0x10
        flags = HDR.unpack(self.s.ask(bytes(q))[:12])[1]
        self.assertEqual(flags & (w.RD | w.CD), w.RD | w.CD)

    def test_badvers_notify_without_rd(self):
        q = dns.message.make_query("example.org.", "SOA", use_edns=1)
        q.set_opcode(4)
        flags = HDR.unpack(self.s.ask(q.to_wire())[:12])[1]
        self.assertFalse(flags & w.RD)


class ReloadEdgeTest(unittest.TestCase):
    """A reload whose new listener cannot be opened fails as a whole (the
    old configuration keeps serving, as CoreDNS rolls a failed restart
    back); a kept listener takes the new TCP limits."""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, ".:0 {\n    whoami\n}\n")
        self.port = self.app.port()

    def _rewrite(self, text):
        with open(self.app.path, "w") as f:
            f.write(text)

    @defer.inlineCallbacks
    def test_port_in_use_keeps_old_config(self):
        busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        before = self.app.config
        failed = reloadmod.FAILED.get(())
        self._rewrite(".:0 {\n    whoami\n}\nexample.org:%d {\n"
                      "    bind 127.0.0.1\n    whoami\n}\n" % taken)
        self.assertFalse(self.app.reload())
        self.assertIs(self.app.config, before)
        self.assertEqual(reloadmod.FAILED.get(()), failed + 1)
        self.assertIn("reload failed", self.log.text())
        m = yield util.query(self.port, "a.example.com.")
        self.assertEqual(m.rcode(), 0)
        m = yield util.query(self.port, "b.example.com.", proto="tcp")
        self.assertEqual(m.rcode(), 0)

    def test_kept_listener_takes_new_timeouts(self):
        self._rewrite(".:0 {\n    whoami\n    timeouts {\n        idle 7s\n"
                      "    }\n}\n")
        self.assertTrue(self.app.reload())
        lst = next(iter(self.app.listeners.values()))
        self.assertEqual(lst.port, self.port)
        self.assertEqual(lst.tcp.factory.timeouts.idle, 7.0)


class SignalEdgeTest(unittest.TestCase):
    """CoreDNS ignores SIGHUP (caddy's signal trap) and says "Quitting
    process immediately" on SIGQUIT."""

    start = test_signals.SignalTest.start
    write = test_signals.SignalTest.write
    ask = test_signals.SignalTest.ask
    wait = test_signals.SignalTest.wait

    def test_sighup_ignored_sigquit_message(self):
        self.start(test_signals.SERVING)
        self.proc.send_signal(signal.SIGHUP)
        m = self.wait(lambda m: m is not None)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIsNone(self.proc.poll())
        self.proc.send_signal(signal.SIGQUIT)
        out, _ = self.proc.communicate(timeout=30)
        self.assertEqual(self.proc.returncode, 0)
        self.assertIn("[INFO] SIGQUIT: Quitting process immediately", out)

    def test_second_sigint_forces_quit(self):
        port = util.free_port()
        d = util.write_files(self, {"Corefile": ".:%d {\n    whoami\n"
                                    "    health 127.0.0.1:%d {\n"
                                    "        lameduck 20s\n    }\n}\n"
                                    % (port, util.free_port())})
        out = os.path.join(d, "out")
        with open(out, "w") as f:
            proc = subprocess.Popen(
                [test_signals.TWISTD, "-n", "--pidfile=", "coredns", "-c",
                 os.path.join(d, "Corefile")], stdout=f,
                stderr=subprocess.STDOUT)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def logged(text):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with open(out) as f:
                    if text in f.read():
                        return
                self.assertIsNone(proc.poll(), "server exited")
                time.sleep(0.05)
            self.fail("%r never logged" % text)
        self.port, self.proc = port, proc
        self.wait(lambda m: m is not None)     # handlers are in place
        proc.send_signal(signal.SIGINT)
        logged("[INFO] SIGINT: Shutting down")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=30), 2)
        with open(out) as f:
            self.assertIn("[INFO] SIGINT: Force quit", f.read())


class PanicMetricsTest(unittest.TestCase):
    """A recovered panic is answered by errorAndMetricsFunc: SERVFAIL,
    counted under zone "dropped" (and in coredns_panics_total)."""

    def _check(self, fn):
        util.keep_panics(self)
        log = util.capture_log(self)
        s = util.Direct(self, WHOAMI)
        s.app.config.blocks[0].chain = util.Stub(fn)
        key = (s.mux.label, "dropped", "", "SERVFAIL", "")
        before = metrics.RESPONSES.get(key)
        panics = metrics.PANICS.get(())
        r = dns.message.from_wire(s.ask(query()))
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(metrics.RESPONSES.get(key), before + 1)
        self.assertEqual(metrics.PANICS.get(()), panics + 1)
        self.assertIn("Recovered from panic", log.text())

    def test_raised(self):
        def boom(req):
            raise KeyError("kaput")
        self._check(boom)

    def test_failed_deferred(self):
        self._check(lambda req: defer.fail(KeyError("kaput")))


class EmptyBlockTest(unittest.TestCase):
    """A block without a plugin on the request path (nothing, or only
    configuration plugins) has no chain in CoreDNS: REFUSED, counted
    under zone "dropped"; the root block is then skipped for one that
    has a chain."""

    def test_empty_block_refused(self):
        for text in (".:0 {\n}\n", ".:0 {\n    debug\n}\n"):
            s = util.Direct(self, text)
            key = (s.mux.label, "dropped", "", "REFUSED", "")
            before = metrics.RESPONSES.get(key)
            r = s.query("example.org.")
            self.assertEqual(r.rcode(), dns.rcode.REFUSED)
            self.assertEqual(metrics.RESPONSES.get(key), before + 1)

    def test_empty_zone_block_refused_before_root(self):
        s = util.Direct(self, "example.org:0 {\n}\n.:0 {\n    whoami\n}\n")
        self.assertEqual(s.query("a.example.org.").rcode(),
                         dns.rcode.REFUSED)
        self.assertEqual(s.query("a.example.net.").rcode(), 0)


class MaxTCPQueriesTest(unittest.TestCase):
    """miekg counts every message it reads on a connection, answered or
    not, and closes after the limit: an ignored last query (a response,
    a short header) still ends the connection."""

    @defer.inlineCallbacks
    def test_ignored_last_query_closes(self):
        app = yield util.start(self, ".:0 {\n    timeouts {\n"
                                     "        maxtcpqueries 2\n    }\n"
                                     "    whoami\n}\n")
        response = bytearray(query(msgid=2))
        response[2] |= 0x80
        for last in (bytes(response), b"\x00\x01\x02"):
            # count=3 waits for a third reply or the close: the close
            # comes, with the one answer.
            replies = yield util.send_tcp(
                app.port(), [query(msgid=1), last], count=3, timeout=10)
            self.assertEqual([HDR.unpack(r[:12])[0] for r in replies], [1])


class ChaosClassTest(unittest.TestCase):
    """CoreDNS opens non-IN classes on a server that has chaos, forward
    or proxy in any block (EnableChaos)."""

    def test_forward_opens_other_classes(self):
        s = util.Direct(self, ".:0 {\n    forward . 127.0.0.1:9\n}\n")
        self.assertTrue(s.mux.chaos)

    def test_whoami_alone_refuses(self):
        self.assertFalse(util.Direct(self, WHOAMI).mux.chaos)


class CommandLineTest(unittest.TestCase):

    def test_p_is_dns_port(self):
        # CoreDNS has -p as the short form of -dns.port.
        from corednstw.tap import Options, load_app
        d = util.write_files(self, {"Corefile": ". {\n    whoami\n}\n"})
        o = Options()
        o.parseOptions(["-p", "1053", "-c", os.path.join(d, "Corefile")])
        self.assertEqual(o["dns-port"], 1053)
        app = load_app(o)
        self.assertEqual(app.config.blocks[0].keys[0].port, "1053")
