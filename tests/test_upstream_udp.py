"""The upstream engine's UDP queries, on real sockets: a pool of sockets,
one query in flight on each, a socket reused for at most ``max_uses``
queries (then a fresh source port), idle ones closed after ``expire`` or
``max_age`` and capped by ``max_idle``; a forged reply from another port
or with another ID ignored, a late reply (after the timeout, or a stale
one on a reused socket) never taken, a timed-out socket never reused, no
socket left behind under load, a forked child's copies closed; both ways
of watching the sockets (an epoll set of the engine's own, and one
reactor reader per socket).  And ``relay``, the one-walk check and
rewrite of a plain reply, against the general steps it stands for."""

import os
import socket
import struct

import dns.edns
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rrset
from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.request import RawResponse, Request, encode
from corednstw.engines.upstream import (
    UDPConn,
    Upstream,
    matches,
    readable,
    relay,
)
from tests.support import util


class _Server(protocol.DatagramProtocol):
    """A UDP upstream on 127.0.0.1 that records each query and its source
    and answers (or not) as ``answer(data, addr, index)`` says."""

    def __init__(self):
        self.seen = []            # (data, addr)
        self.answer = self.echo

    def datagramReceived(self, data, addr):
        self.seen.append((data, addr))
        self.answer(data, addr, len(self.seen) - 1)

    def echo(self, data, addr, i):
        self.transport.write(reply_to(data), addr)


def reply_to(data, address="192.0.2.7"):
    q = dns.message.from_wire(data)
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text(q.question[0].name, 60, "IN", "A",
                                        address))
    return r.to_wire()


class _Waiter:
    """A query's waiter: ``d`` fires with ("reply", data) or ("fail",
    error text); a second outcome is recorded in ``extra``."""

    def __init__(self):
        self.d = defer.Deferred()
        self.extra = []
        self.local = None

    def _done(self, outcome):
        if self.d.called:
            self.extra.append(outcome)
        else:
            self.d.callback(outcome)

    def reply(self, data, conn):
        self.local = conn.local()
        self._done(("reply", data))

    def fail(self, exc, conn):
        self._done(("fail", str(exc)))


def open_fds():
    """How many sockets and epoll sets this process has open."""
    if not os.path.isdir("/proc/self/fd"):
        raise unittest.SkipTest("no /proc/self/fd to count sockets")
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue            # listdir's own descriptor
        n += link.startswith(("socket:", "anon_inode:[eventpoll]"))
    return n


class _UDPCases:
    """The cases both modes run (a mixin, so trial does not collect it)."""

    use_epoll = True

    def setUp(self):
        if self.use_epoll and not UDPConn.use_epoll:
            raise unittest.SkipTest("no epoll here")
        saved = UDPConn.use_epoll
        UDPConn.use_epoll = self.use_epoll
        self.addCleanup(setattr, UDPConn, "use_epoll", saved)
        self.server = _Server()
        self.port = reactor.listenUDP(0, self.server, interface="127.0.0.1")
        self.port.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                    1 << 21)
        self.addCleanup(self.port.stopListening)
        pn = self.port.getHost().port
        self.up = Upstream("127.0.0.1:%d" % pn, "127.0.0.1", pn)
        self.up.start(reactor, reactor.seconds)
        self.addCleanup(self.up.stop)

    def ask(self, name="a.example."):
        w = _Waiter()
        wire = dns.message.make_query(name, "A").to_wire()
        self.up.query(wire, "udp", w, reactor.seconds())
        return w

    @defer.inlineCallbacks
    def test_answer(self):
        w = self.ask()
        kind, data = yield w.d
        self.assertEqual(kind, "reply")
        m = dns.message.from_wire(data)
        self.assertEqual(m.answer[0][0].address, "192.0.2.7")
        self.assertEqual(self.up.udp.epoll, self.use_epoll)

    def ports(self):
        return [addr[1] for _d, addr in self.server.seen]

    @defer.inlineCallbacks
    def test_sockets_pooled(self):
        """Twenty queries in flight together, each on a socket of its
        own; then twenty one by one, each on the idle socket that waited
        longest (all twenty in turn), none opened."""
        ws = [self.ask("p%d.example." % i) for i in range(20)]
        yield defer.gatherResults([w.d for w in ws])
        first = self.ports()
        self.assertEqual(len(set(first)), 20)
        self.assertEqual(len(self.up.udp.idle), 20)
        for i in range(20):
            kind, _data = yield self.ask("s%d.example." % i).d
            self.assertEqual(kind, "reply")
        then = self.ports()[20:]
        self.assertEqual(sorted(then), sorted(first))
        self.assertEqual(len(self.up.udp.idle), 20)

    @defer.inlineCallbacks
    def test_source_port_changes_after_max_uses(self):
        """A socket carries ``max_uses`` queries, then is closed: the next
        query leaves from a fresh port."""
        self.up.udp = conn = UDPConn(self.up, reactor.seconds())
        conn.max_uses = 4
        before = open_fds()
        for i in range(10):
            w = self.ask("u%d.example." % i)
            kind, _data = yield w.d
            self.assertEqual(kind, "reply")
            # Our end is known to the waiter, the last query's too.
            self.assertEqual(w.local, ("127.0.0.1", self.ports()[i]))
        ports = self.ports()
        self.assertEqual(len(set(ports[0:4])), 1)
        self.assertEqual(len(set(ports[4:8])), 1)
        self.assertEqual(len(set(ports[8:10])), 1)
        # Fresh random ports: a repeat is possible but rare.
        self.assertEqual(len({ports[0], ports[4], ports[8]}), 3)
        self.assertEqual(len(conn.idle), 1)
        yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertLessEqual(open_fds(), before + 1 + self.use_epoll)

    @defer.inlineCallbacks
    def test_stale_reply_on_reused_socket_ignored(self):
        """The upstream answers the first query twice, the second time
        late: the late copy reaches the reused socket while it is idle
        (dropped) or while it carries the next query (ignored: another
        ID), and never answers that query."""
        from corednstw.engines.upstream import conn as connmod
        ids = iter([0x1111, 0x2222, 0x3333, 0x4444])
        self.patch(connmod, "new_id", lambda: next(ids))
        for stale_while_idle in (True, False):
            self.server.seen = []
            held = []

            def answer(data, addr, i):
                if i == 0:
                    self.transport_write(reply_to(data), addr)
                    held.append((reply_to(data, "203.0.113.99"), addr))
                else:
                    held.append((reply_to(data), addr))
            self.server.answer = answer
            kind, data = yield self.ask("first.example.").d
            self.assertEqual(kind, "reply")
            if stale_while_idle:
                self.transport_write(*held.pop(0))
                yield task.deferLater(reactor, 0.05, lambda: None)
            second = self.ask("first.example.")
            yield util.wait_for(lambda: len(self.server.seen) == 2, 5)
            # Both from the same socket.
            self.assertEqual(len(set(self.ports())), 1)
            for data, addr in held:       # the stale copy first
                self.transport_write(data, addr)
                yield task.deferLater(reactor, 0.05, lambda: None)
            kind, data = yield second.d
            self.assertEqual(kind, "reply")
            m = dns.message.from_wire(data)
            self.assertEqual(m.answer[0][0].address, "192.0.2.7")
            self.assertEqual(second.extra, [])
            self.up.udp.close()
            self.up.udp = None

    @defer.inlineCallbacks
    def test_timed_out_socket_not_reused(self):
        """A query that timed out closes its socket: the next query
        leaves from another port, and the late reply goes nowhere."""
        self.up.read_timeout = 0.1
        held = []
        self.server.answer = lambda data, addr, i: held.append((data, addr))
        kind, text = yield self.ask().d
        self.assertEqual((kind, text), ("fail", "i/o timeout"))
        self.assertEqual(len(self.up.udp.idle), 0)
        self.server.answer = self.server.echo
        w = self.ask("next.example.")
        kind, _data = yield w.d
        self.assertEqual(kind, "reply")
        ports = self.ports()
        self.assertNotEqual(ports[0], ports[1])
        for data, addr in held:
            self.transport_write(reply_to(data, "203.0.113.99"), addr)
        yield task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(w.extra, [])

    @defer.inlineCallbacks
    def test_idle_sockets_expire(self):
        """Idle sockets unused for ``expire`` are closed by the pool's
        timer, and not taken by a query that comes first."""
        before = open_fds()
        self.up.expire = 0.1
        ws = [self.ask("e%d.example." % i) for i in range(3)]
        yield defer.gatherResults([w.d for w in ws])
        conn = self.up.udp
        self.assertEqual(len(conn.idle), 3)
        yield task.deferLater(reactor, 0.3, lambda: None)
        self.assertEqual(len(conn.idle), 0)
        self.assertIsNone(conn.sweeper)
        yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertLessEqual(open_fds(), before + self.use_epoll)
        # Met by a query before the timer: closed, a fresh one opened.
        self.up.expire = 10.0
        yield self.ask("a.example.").d
        conn.idle[0].used -= 11
        yield self.ask("b.example.").d
        ports = self.ports()
        self.assertNotEqual(ports[3], ports[4])
        self.assertEqual(len(conn.idle), 1)

    @defer.inlineCallbacks
    def test_max_age_and_max_idle(self):
        self.up.max_idle = 2
        ws = [self.ask("i%d.example." % i) for i in range(5)]
        yield defer.gatherResults([w.d for w in ws])
        conn = self.up.udp
        self.assertEqual(len(conn.idle), 2)
        self.up.max_age = 30.0
        for q in conn.idle:
            q.created -= 31
        yield self.ask("a.example.").d
        self.assertNotIn(self.ports()[5], self.ports()[:5])
        self.assertEqual(len(conn.idle), 1)

    @defer.inlineCallbacks
    def test_forged_reply_from_another_port_ignored(self):
        """A reply with the right ID and question sent to our source port
        from another port is not taken (the socket is connected: the
        kernel drops it); nor is one with another ID from the upstream's
        port; the real reply then is."""
        forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(forger.close)
        forger.bind(("127.0.0.1", 0))

        def answer(data, addr, i):
            forger.sendto(reply_to(data, "203.0.113.66"), addr)
            other = bytes([data[0] ^ 0x55, data[1]]) + data[2:]
            self.transport_write(reply_to(other, "203.0.113.67"), addr)

            def late():
                self.transport_write(reply_to(data), addr)
            reactor.callLater(0.05, late)
        self.server.answer = answer
        kind, data = yield self.ask().d
        self.assertEqual(kind, "reply")
        m = dns.message.from_wire(data)
        self.assertEqual(m.answer[0][0].address, "192.0.2.7")

    def transport_write(self, data, addr):
        self.server.transport.write(data, addr)

    @defer.inlineCallbacks
    def test_late_reply_after_timeout_dropped(self):
        self.up.read_timeout = 0.1
        held = []
        self.server.answer = lambda data, addr, i: held.append((data, addr))
        w = self.ask()
        kind, text = yield w.d
        self.assertEqual((kind, text), ("fail", "i/o timeout"))
        for data, addr in held:
            self.transport_write(reply_to(data), addr)
        yield task.deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(w.extra, [])
        self.assertEqual(self.up.udp.pending, {})

    @defer.inlineCallbacks
    def test_no_socket_left_under_load(self):
        """10,000 queries, at most 500 in flight, to an upstream that
        answers every other one: each ends once, by its answer or its
        timeout, and no socket is left open."""
        self.up.read_timeout = 0.5
        answered = []

        def answer(data, addr, i):
            if i % 2 == 0:
                answered.append(i)
                self.transport_write(reply_to(data), addr)
        self.server.answer = answer
        before = open_fds()
        total, window = 10000, 500
        outcome = {"reply": 0, "fail": 0}
        extra = []
        done = defer.Deferred()
        state = {"sent": 0, "ended": 0}

        def send():
            w = self.ask("n%d.example." % state["sent"])
            state["sent"] += 1
            w.d.addCallback(ended, w)

        def ended(result, w):
            outcome[result[0]] += 1
            extra.extend(w.extra)
            state["ended"] += 1
            if state["sent"] < total:
                send()
            elif state["ended"] == total:
                done.callback(None)
            return result
        for _ in range(window):
            send()
        yield done
        # Give the deferred closes (one reactor turn) their time.
        yield task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(extra, [])
        self.assertEqual(sum(outcome.values()), total)
        # Every answer sent is taken unless it came after the timeout (a
        # slow machine); none is taken twice.  (A query the upstream's
        # socket buffer dropped was never seen: it times out.)
        self.assertLessEqual(outcome["reply"], len(answered))
        self.assertGreaterEqual(outcome["reply"], len(answered) * 0.8)
        self.assertGreaterEqual(outcome["fail"], total - len(answered))
        conn = self.up.udp
        self.assertEqual((conn.pending, conn.spent), ({}, []))
        # What is left open is the pool: at most one socket per query
        # that was in flight at once.
        self.assertLessEqual(len(conn.idle), window)
        if self.use_epoll:
            self.assertEqual(set(conn.byfd.values()), set(conn.idle))
        self.assertLessEqual(open_fds(), before + 1 + len(conn.idle))
        conn.close()
        yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertLessEqual(open_fds(), before)

    @defer.inlineCallbacks
    def test_refused_fails_fast(self):
        pn = util.free_port()
        up = Upstream("127.0.0.1:%d" % pn, "127.0.0.1", pn)
        up.start(reactor, reactor.seconds)
        self.addCleanup(up.stop)
        w = _Waiter()
        wire = dns.message.make_query("a.example.", "A").to_wire()
        up.query(wire, "udp", w, reactor.seconds())
        kind, text = yield w.d
        self.assertEqual((kind, text), ("fail", "connection refused"))

    @defer.inlineCallbacks
    def test_stop_fails_what_waits(self):
        self.server.answer = lambda data, addr, i: None
        before = open_fds()
        ws = [self.ask("w%d.example." % i) for i in range(5)]
        yield task.deferLater(reactor, 0.01, lambda: None)
        self.up.stop()
        results = yield defer.gatherResults([w.d for w in ws])
        self.assertEqual(set(results), {("fail", "transport stopped")})
        yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertLessEqual(open_fds(), before)

    @defer.inlineCallbacks
    def test_forked_child_closes_its_copies(self):
        """A forked child (a multisocket worker) closes its copies of the
        pool's sockets and epoll set at once and draws message IDs of
        its own; the parent's sockets stay open and in use."""
        if not hasattr(os, "register_at_fork"):
            raise unittest.SkipTest("no fork hooks here")
        from corednstw.engines.upstream import ids
        yield self.ask("before.example.").d
        conn = self.up.udp
        fds = [q.sock.fileno() for q in conn.idle]
        if self.use_epoll:
            fds.append(conn.poller.fileno())
        ids.new_id()                    # a batch in the pool
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:                    # the child: report and leave
            try:
                left = []
                for fd in fds:
                    try:
                        os.fstat(fd)
                        left.append(fd)
                    except OSError:
                        pass
                ok = (not left and not conn.idle and conn.poller is None
                      and not ids._IDS.pool)
                os.write(wfd, b"ok" if ok else repr(left).encode())
            finally:
                os._exit(0)
        os.close(wfd)
        out = os.read(rfd, 100)
        os.close(rfd)
        os.waitpid(pid, 0)
        self.assertEqual(out, b"ok")
        kind, _data = yield self.ask("after.example.").d
        self.assertEqual(kind, "reply")
        ports = self.ports()
        self.assertEqual(ports[0], ports[1])

    @defer.inlineCallbacks
    def test_raising_waiter_spares_the_others(self):
        """A waiter that raises is logged; the other queries of the same
        wake-up are still answered."""
        self.server.answer = lambda data, addr, i: None
        bad, good = self.ask("bad.example."), self.ask("good.example.")

        def boom(data, conn):
            raise RuntimeError("waiter broke")
        bad.reply = boom
        yield task.deferLater(reactor, 0.02, lambda: None)
        for data, addr in self.server.seen:
            self.transport_write(reply_to(data), addr)
        kind, _data = yield good.d
        self.assertEqual(kind, "reply")
        if self.use_epoll:
            self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        else:
            self.flushLoggedErrors(RuntimeError)


class EpollUDPTest(_UDPCases, unittest.TestCase):
    """With the engine's own epoll set (where the platform has one)."""

    @defer.inlineCallbacks
    def test_after_fork_a_set_of_its_own(self):
        """In a forked child (a multisocket worker) the epoll set copied
        from the parent is let go: the next query opens one of its own."""
        from corednstw.engines.upstream import conn as connmod
        self.server.answer = lambda data, addr, i: None
        self.ask("parent.example.")
        udp = self.up.udp
        inherited = udp.poller
        saved = connmod._FORKS[0]
        self.addCleanup(connmod._FORKS.__setitem__, 0, saved)
        connmod._FORKS[0] = saved + 1       # as in a forked child
        self.server.answer = self.server.echo
        # The parent's pending query goes with the set (its client is
        # the parent's); the new one is answered.  (A worker's reactor
        # starts with no reader or timer of the parent's.)
        reactor.removeReader(udp)
        udp.timer.cancel()
        kind, _data = yield self.ask("child.example.").d
        self.assertEqual(kind, "reply")
        self.assertIsNot(udp.poller, inherited)
        self.assertTrue(inherited.closed)
        self.assertEqual(udp.pending, {})


class ReaderUDPTest(_UDPCases, unittest.TestCase):
    """With one reactor reader per socket (platforms without epoll, which
    therefore have no set to copy into a forked child)."""

    use_epoll = False


# -- relay ------------------------------------------------------------------

def _general(req, data):
    """What forward did before relay: readable, matches, the server's
    encoding of the raw answer (None where forward answers otherwise)."""
    if not readable(data) or len(data) > req.size or not matches(req, data):
        return None
    return encode(req, RawResponse.prebuilt(data, "forward"))


def _request(wire, proto="udp"):
    req = Request(wire, "127.0.0.1", 5353, proto)
    _i, _f, _qd, an, ns, ar = struct.unpack_from("!HHHHHH", wire, 0)
    req.parse_header()
    req.parse_question(an, ns, ar)
    return req


def _queries():
    """Client queries: case, EDNS sizes, DO, options, opcodes, TCP."""
    out = []
    for name in ("www.example.org.", "WwW.ExAmple.ORG."):
        out.append(dns.message.make_query(name, "A"))
        out.append(dns.message.make_query(name, "A", use_edns=0,
                                          payload=1232))
        out.append(dns.message.make_query(name, "A", use_edns=0,
                                          payload=4096, want_dnssec=True))
        q = dns.message.make_query(name, "A", use_edns=0, payload=512,
                                   options=[dns.edns.GenericOption(
                                       10, b"12345678"),
                                       dns.edns.GenericOption(65001, b"x")])
        out.append(q)
    q = dns.message.make_query("www.example.org.", "A")
    q.flags |= dns.flags.CD
    out.append(q)
    q = dns.message.make_query("www.example.org.", "SOA")
    q.set_opcode(dns.opcode.NOTIFY)
    out.append(q)
    q = dns.message.make_query("www.example.org.", "MX")
    out.append(q)
    return out


def _replies(q):
    """Upstream replies to ``q``: answers of several shapes, with and
    without their own OPT, other rcodes, and broken or foreign ones."""
    qname = q.question[0].name
    qtype = q.question[0].rdtype
    out = []

    def resp(edns=None, rcode=0, **kw):
        r = dns.message.make_response(q)
        r.flags |= dns.flags.RA
        r.use_edns(edns, **kw) if edns is not None else r.use_edns(False)
        r.set_rcode(rcode)
        return r
    r = resp()
    r.answer.append(dns.rrset.from_text(qname, 300, "IN", qtype,
                                        *(["192.0.2.1", "192.0.2.2"]
                                          if qtype == 1 else
                                          ["10 mx.example.org."]
                                          if qtype == 15 else
                                          ["ns.example. h.example. 1 2 3 "
                                           "4 5"])))
    out.append(r.to_wire())
    for edns_kw in ({"payload": 1232}, {"payload": 4096, "ednsflags":
                                        dns.flags.DO},
                    {"payload": 1232, "options": [
                        dns.edns.GenericOption(3, b"nsid")]}):
        r = resp(0, **edns_kw)
        r.answer.append(dns.rrset.from_text(
            qname, 60, "IN", "CNAME", "target.example.org."))
        r.answer.append(dns.rrset.from_text(
            "target.example.org.", 60, "IN", "A", "192.0.2.9"))
        r.authority.append(dns.rrset.from_text(
            "example.org.", 60, "IN", "NS", "ns1.example.org."))
        r.additional.append(dns.rrset.from_text(
            "ns1.example.org.", 60, "IN", "A", "192.0.2.53"))
        out.append(r.to_wire())
    r = resp(0, rcode=dns.rcode.NXDOMAIN, payload=1232)
    r.authority.append(dns.rrset.from_text(
        "example.org.", 60, "IN", "SOA",
        "ns.example.org. host.example.org. 1 7200 1800 86400 60"))
    out.append(r.to_wire())
    r = resp(0, rcode=dns.rcode.BADVERS, payload=1232)
    out.append(r.to_wire())
    r = resp()
    r.answer.append(dns.rrset.from_text(
        qname, 60, "IN", "TXT", *['"%d%s"' % (i, "x" * 200)
                                  for i in range(12)]))
    out.append(r.to_wire())                 # too big for most clients
    good = out[0]
    out.append(good + b"\x00\x00trailing")   # dropped, as encoding does
    out.append(good[:-3])                   # a record cut short
    out.append(good[:6] + b"\x00\x09" + good[8:])   # counts past the end
    out.append(good[:2] + bytes([good[2] & 0x7F]) + good[3:])   # no QR
    out.append(good[:4] + b"\x00\x00" + good[6:])   # no question count
    wrong = dns.message.make_response(q)
    wrong.question[0].name = dns.name.from_text("other.example.org.")
    out.append(wrong.to_wire())
    # An owner pointing forward (skip_rr refuses it, readable fails).
    i = good.index(b"\xc0\x0c")
    out.append(good[:i] + b"\xc0\xff" + good[i + 2:])
    return out


class RelayTest(unittest.TestCase):

    def test_same_bytes_as_the_general_steps(self):
        taken = 0
        for q in _queries():
            for proto in ("udp", "tcp"):
                req = _request(q.to_wire(), proto)
                replies = _replies(q)
                # The same written out (owners not compressed, as
                # CoreDNS-like upstreams send what fits).
                for data in replies[:6]:
                    replies.append(w.expand_message(data))
                for data in replies:
                    got = relay(req, data)
                    if got is None:
                        continue
                    taken += 1
                    self.assertEqual(got, _general(req, data),
                                     (q.to_text(), data))
        self.assertGreater(taken, 200)

    def test_plain_replies_taken(self):
        q = dns.message.make_query("WwW.ExAmple.ORG.", "A", use_edns=0,
                                   payload=1232)
        req = _request(q.to_wire())
        replies = _replies(q)
        for data in replies[:6] + replies[7:8]:
            self.assertIsNotNone(relay(req, data))
        out = dns.message.from_wire(relay(req, replies[3]))
        self.assertEqual(out.id, q.id)
        self.assertEqual(out.question[0].name.to_text(), "WwW.ExAmple.ORG.")
        self.assertEqual((out.payload, out.ednsflags & dns.flags.DO),
                         (1232, 0))
        self.assertEqual(out.options[0].otype, 3)

    def test_other_replies_left_to_the_general_steps(self):
        q = dns.message.make_query("www.example.org.", "A")
        req = _request(q.to_wire())
        replies = _replies(q)
        for data in replies[6:7] + replies[8:]:
            self.assertIsNone(relay(req, data), data)
