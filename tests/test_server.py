"""The response path and the block mux, as CoreDNS (on miekg/dns) behaves.

Table tests go straight into the mux (no sockets); the wire tests start the
service on port 0 and use real UDP and TCP.
"""

import struct

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core import metrics, request
from corednstw.core.request import (
    RawResponse,
    Request,
    Response,
    encode,
    make_query,
)
from tests.support import util

HDR = struct.Struct("!HHHHHH")
WHOAMI = ".:0 {\n    whoami\n}\n"


def query(name="example.org.", qtype=w.A, msgid=0x1234, **kw):
    return make_query(name, qtype, msgid=msgid, **kw)


def header(data):
    return HDR.unpack(data[:12])


class MalformedTest(unittest.TestCase):
    """miekg's accept rules: silence, NOTIMP or a header-only FORMERR."""

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_short_header_is_silent(self):
        self.assertIsNone(self.s.ask(b"\x12\x34\x01"))
        self.assertIsNone(self.s.ask(b""))

    def test_response_bit_is_silent(self):
        q = bytearray(query())
        q[2] |= 0x80
        self.assertIsNone(self.s.ask(bytes(q)))

    def test_other_opcode_notimp(self):
        q = bytearray(query())
        q[2] = (q[2] & 0x87) | (2 << 3)  # STATUS
        r = self.s.ask(bytes(q))
        msgid, flags, qd, an, ns, ar = header(r)
        self.assertEqual(msgid, 0x1234)
        self.assertEqual(flags & 0xF, w.NOTIMP)
        self.assertEqual((flags >> 11) & 0xF, 2)
        self.assertTrue(flags & w.QR)
        self.assertEqual((qd, an, ns, ar), (0, 0, 0, 0))
        self.assertEqual(len(r), 12)

    def test_update_opcode_notimp(self):
        q = bytearray(query())
        q[2] = (q[2] & 0x87) | (5 << 3)
        self.assertEqual(header(self.s.ask(bytes(q)))[1] & 0xF, w.NOTIMP)

    def assertFormerr(self, data):
        r = self.s.ask(data)
        self.assertIsNotNone(r)
        msgid, flags, qd, an, ns, ar = header(r)
        self.assertEqual(flags & 0xF, w.FORMERR)
        self.assertTrue(flags & w.QR)
        self.assertEqual((qd, an, ns, ar), (0, 0, 0, 0))
        return flags

    def test_no_question(self):
        self.assertFormerr(HDR.pack(1, 0x0100, 0, 0, 0, 0))

    def test_two_questions(self):
        q = query()
        body = q[12:]
        self.assertFormerr(HDR.pack(1, 0x0100, 2, 0, 0, 0) + body + body)

    def test_answer_records_in_query(self):
        # One answer RR is allowed (NOTIFY carries a SOA); two are not.
        q = bytearray(query())
        struct.pack_into("!H", q, 6, 2)
        self.assertFormerr(bytes(q))

    def test_authority_records_in_query(self):
        q = bytearray(query())
        struct.pack_into("!H", q, 8, 2)
        self.assertFormerr(bytes(q))

    def test_too_many_additional(self):
        q = bytearray(query())
        struct.pack_into("!H", q, 10, 3)
        self.assertFormerr(bytes(q))

    def test_truncated_question(self):
        self.assertFormerr(query()[:-3])

    def test_label_overrun(self):
        self.assertFormerr(HDR.pack(1, 0, 1, 0, 0, 0) + b"\x3fabc")

    def test_half_an_additional_record(self):
        # A record count past the end is a lie miekg ignores (see
        # test_review); a record cut short is FORMERR, question kept.
        q = bytearray(query())
        struct.pack_into("!H", q, 10, 1)
        r = self.s.ask(bytes(q) + b"\x00\x00\x29")
        self.assertEqual(header(r)[1] & 0xF, w.FORMERR)
        self.assertEqual(header(r)[2:], (1, 0, 0, 0))

    def test_formerr_keeps_rd(self):
        flags = self.assertFormerr(HDR.pack(7, w.RD, 0, 0, 0, 0))
        self.assertTrue(flags & w.RD)

    def test_notify_reaches_chain(self):
        q = bytearray(query())
        q[2] = (q[2] & 0x87) | (4 << 3)
        r = dns.message.from_wire(self.s.ask(bytes(q)))
        self.assertEqual(r.opcode(), 4)
        self.assertEqual(r.rcode(), 0)
        self.assertEqual(len(r.additional), 2)  # whoami answered


class ClassAndZoneTest(unittest.TestCase):

    def test_non_in_class_refused(self):
        s = util.Direct(self, WHOAMI)
        r = dns.message.from_wire(s.ask(query(qtype=w.TXT) [:-2]
                                        + b"\x00\x03"))
        self.assertEqual(r.rcode(), dns.rcode.REFUSED)
        self.assertEqual(len(r.question), 1)

    def test_no_zone_refused_and_counted_as_dropped(self):
        s = util.Direct(self, "example.org:0 {\n    whoami\n}\n")
        before = metrics.RESPONSES.get(
            (s.mux.label, "dropped", "", "REFUSED", ""))
        r = s.query("example.net.")
        self.assertEqual(r.rcode(), dns.rcode.REFUSED)
        self.assertEqual(str(r.question[0].name), "example.net.")
        self.assertEqual(metrics.RESPONSES.get(
            (s.mux.label, "dropped", "", "REFUSED", "")), before + 1)
        self.assertEqual(s.query("a.example.org.").rcode(), 0)
        self.assertEqual(s.query("example.org.").rcode(), 0)
        # A name that only ends like the zone is not in it.
        self.assertEqual(s.query("badexample.org.").rcode(),
                         dns.rcode.REFUSED)

    def test_longest_zone_wins(self):
        s = util.Direct(self, """
example.org:0 {
    whoami
}
sub.example.org:0 {
    prometheus 127.0.0.1:0
}
.:0 {
    whoami
}
""")
        # sub.example.org's chain has no terminal plugin: SERVFAIL.
        self.assertEqual(s.query("a.sub.example.org.").rcode(),
                         dns.rcode.SERVFAIL)
        self.assertEqual(s.query("a.example.org.").rcode(), 0)
        self.assertEqual(s.query("example.com.").rcode(), 0)

    def test_ds_goes_to_parent_block(self):
        s = util.Direct(self, """
example.org:0 {
    whoami
}
sub.example.org:0 {
    prometheus 127.0.0.1:0
}
""")
        self.assertEqual(s.query("sub.example.org.", "A").rcode(),
                         dns.rcode.SERVFAIL)
        r = s.query("sub.example.org.", "DS")
        self.assertEqual(r.rcode(), 0)
        self.assertEqual(len(r.additional), 2)

    def test_ds_for_only_zone_stays(self):
        # CoreDNS keeps the handler it found when no parent block exists.
        s = util.Direct(self, "example.org:0 {\n    whoami\n}\n")
        self.assertEqual(s.query("example.org.", "DS").rcode(), 0)

    def test_empty_chain_servfail(self):
        s = util.Direct(self, ".:0 {\n    prometheus 127.0.0.1:0\n}\n")
        r = s.query("example.org.")
        self.assertEqual(r.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(str(r.question[0].name), "example.org.")


class EDNSTest(unittest.TestCase):

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_no_opt_without_edns(self):
        r = self.s.query("example.org.")
        self.assertEqual(r.edns, -1)

    def test_opt_echoes_client_size_and_do(self):
        r = self.s.query("example.org.", use_edns=0, payload=1400,
                         want_dnssec=True)
        self.assertEqual(r.edns, 0)
        self.assertEqual(r.payload, 1400)
        self.assertTrue(r.ednsflags & dns.flags.DO)

    def test_unknown_options_not_echoed(self):
        import dns.edns
        opt = dns.edns.GenericOption(65001, b"hello")
        r = self.s.query("example.org.", use_edns=0, options=[opt])
        self.assertEqual(r.options, ())

    def test_badvers(self):
        q = dns.message.make_query("example.org.", "A", use_edns=1)
        r = dns.message.from_wire(self.s.ask(q.to_wire()))
        self.assertEqual(r.rcode(), dns.rcode.BADVERS)
        self.assertEqual(r.edns, 0)
        self.assertEqual(len(r.question), 1)
        self.assertEqual(r.additional, [])


def _big_response(name, n):
    return Response(0, answer=[
        w.RR(name, w.A, 300, bytes([10, 0, i // 256, i % 256]))
        for i in range(n)], aa=True)


def _mx_response(n):
    """``n`` MX records of example.org. (exchanges mx10 onwards)."""
    return Response(0, answer=[
        w.RR("example.org.", w.MX, 300,
             b"\x00\x0a" + w.name_to_wire("mx%d.example.org." % (10 + i)))
        for i in range(n)], aa=True)


def _rrs(out, req=None):
    """The records of a wire answer (or of a Response, encoded for
    ``req`` over TCP) as text."""
    if req is not None:
        req.proto, proto = "tcp", req.proto
        out = encode(req, out)
        req.proto = proto
    return util.rrs(dns.message.from_wire(out))


def _request(wire, proto="udp"):
    req = Request(wire, "127.0.0.1", 5353, proto)
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req


class EncodeTest(unittest.TestCase):
    """Truncation and compression, sans I/O."""

    def test_udp_512_truncates_whole_rrs(self):
        req = _request(query("many.example.org."))
        out = encode(req, _big_response("many.example.org.", 100))
        self.assertLessEqual(len(out), 512)
        m = dns.message.from_wire(out)
        self.assertTrue(m.flags & dns.flags.TC)
        # header 12 + question 22 + RRs of 16 bytes (compressed owner)
        self.assertEqual(len(m.answer[0]), (512 - 12 - 22) // 16)

    def test_edns_size_respected_and_opt_kept(self):
        req = _request(query("many.example.org.", edns=1232))
        out = encode(req, _big_response("many.example.org.", 100))
        self.assertLessEqual(len(out), 1232)
        m = dns.message.from_wire(out)
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(m.edns, 0)
        self.assertEqual(m.payload, 1232)

    def test_tcp_not_truncated(self):
        req = _request(query("many.example.org."), "tcp")
        m = dns.message.from_wire(
            encode(req, _big_response("many.example.org.", 100)))
        self.assertFalse(m.flags & dns.flags.TC)
        self.assertEqual(len(m.answer[0]), 100)

    def test_tcp_over_64k_truncated_not_crashed(self):
        req = _request(query("many.example.org."), "tcp")
        out = encode(req, _big_response("many.example.org.", 5000))
        self.assertLessEqual(len(out), 65535)
        self.assertTrue(dns.message.from_wire(out).flags & dns.flags.TC)

    def test_additional_cut_sets_tc(self):
        # miekg's Truncate sets TC when any record had to go, additional
        # records included.
        req = _request(query("x.example.org."))
        resp = Response(0, answer=[w.RR("x.example.org.", w.A, 5,
                                        b"\x01\x02\x03\x04")],
                        additional=_big_response("y.example.org.",
                                                 100).answer)
        m = dns.message.from_wire(encode(req, resp))
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(len(m.answer), 1)
        self.assertLess(len(m.additional), 100)

    def test_question_case_and_bytes_echoed(self):
        wire = query("MiXeD.ExAmPlE.oRg.")
        req = _request(wire)
        out = encode(req, Response(0, answer=[
            w.RR(req.name, w.A, 5, b"\x01\x02\x03\x04"),
            w.RR("mixed.example.org.", w.A, 5, b"\x01\x02\x03\x05")]))
        self.assertEqual(out[12:len(wire)], wire[12:])
        # An answer that fits is written uncompressed (miekg's Truncate
        # turns compression off): each owner in its own spelling.
        first = len(wire)
        self.assertEqual(out[first:first + 19], wire[12:-4])
        second = first + 19 + 10 + 4
        self.assertEqual(out[second:second + 19],
                         w.name_to_wire("mixed.example.org."))
        self.assertEqual(len(out), second + 19 + 10 + 4)

    def test_fitting_answer_uncompressed(self):
        req = _request(query("example.org.", w.MX))
        out = encode(req, _mx_response(3))
        self.assertNotIn(b"\xc0", out)
        self.assertEqual(len(out), 12 + 17 + 3 * (13 + 10 + 2 + 18))
        self.assertEqual(_rrs(out), _rrs(_mx_response(3), req))

    def test_big_answer_compresses_rdata_names(self):
        # 40 MX records do not fit 512 bytes: compressed as miekg packs
        # them, the owner and the exchange's "example.org." pointing to
        # the question, 21 bytes a record, so 23 fit (14 when only owners
        # were compressed).
        req = _request(query("example.org.", w.MX))
        out = encode(req, _mx_response(40))
        self.assertEqual(header(out)[3], (512 - 12 - 17) // 21)
        self.assertTrue(header(out)[1] & w.TC)
        first = 12 + 17
        self.assertEqual(out[first:first + 21],
                         b"\xc0\x0c" + struct.pack("!HHIH", w.MX, 1, 300, 9)
                         + b"\x00\x0a\x04mx10\xc0\x0c")
        m = dns.message.from_wire(out)
        self.assertEqual(
            [r.exchange.to_text() for r in m.answer[0]][:2],
            ["mx10.example.org.", "mx11.example.org."])

    def test_srv_target_offered_not_compressed(self):
        # miekg writes an SRV target whole (RFC 2782) but an address
        # record owned by it then points into it.  50 SRV records are
        # too many for one unfragmented UDP answer: compressed.
        name = "_x._tcp.example.org."
        target = "host.example.org."
        resp = Response(0, answer=[
            w.RR(name, w.SRV, 5, w.srv_rdata(0, 0, 53 + i, target))
            for i in range(50)], additional=[
            w.RR(target, w.A, 5, b"\x01\x02\x03\x04")])
        req = _request(query(name, w.SRV, edns=4096))
        out = encode(req, resp)
        qlen = 12 + 21 + 4
        srv = qlen + 2 + 10 + 6
        self.assertEqual(out[qlen:srv], b"\xc0\x0c" + struct.pack(
            "!HHIHHHH", w.SRV, 1, 5, 24, 0, 0, 53))
        self.assertEqual(out[srv:srv + 18], w.name_to_wire(target))
        a_owner = qlen + 50 * (2 + 10 + 6 + 18)
        self.assertEqual(out[a_owner:a_owner + 2],
                         struct.pack("!H", 0xC000 | srv))
        self.assertEqual(header(out)[3:], (50, 0, 2))
        # Over TCP it is sent as it is.
        req = _request(query(name, w.SRV, edns=4096), "tcp")
        out = encode(req, resp)
        self.assertNotIn(b"\xc0", out)
        self.assertEqual(_rrs(out), _rrs(resp, req))

    def test_udp_fragment_limits_compress(self):
        # CoreDNS's Scrub compresses a UDP answer bigger than 1480 bytes
        # (IPv4) or 1220 (IPv6) even when the client takes more; TCP gets
        # it uncompressed.
        resp = _mx_response(40)
        plain = 12 + 17 + 40 * 43 + 11
        for client, proto, compressed in (
                ("127.0.0.1", "udp", True), ("::1", "udp", True),
                ("127.0.0.1", "tcp", False)):
            req = Request(query("example.org.", w.MX, edns=4096), client,
                          53, proto)
            qd, an, ns, ar = req.parse_header()
            req.parse_question(an, ns, ar)
            out = encode(req, resp)
            self.assertEqual(len(out) < plain, compressed, (client, proto))
            self.assertEqual(header(out)[3], 40)
        resp = _mx_response(30)    # 1330 bytes: only IPv6 compresses
        for client, compressed in (("127.0.0.1", False), ("::1", True)):
            req = Request(query("example.org.", w.MX, edns=4096), client)
            qd, an, ns, ar = req.parse_header()
            req.parse_question(an, ns, ar)
            self.assertEqual(b"\xc0" in encode(req, resp), compressed)

    def test_relayed_answer_expanded(self):
        # An upstream's compressed answer goes out uncompressed when it
        # fits, as CoreDNS packs the message it unpacked.
        req = _request(query("example.org.", w.MX))
        upstream = dns.message.from_wire(query("example.org.", w.MX))
        upstream = dns.message.make_response(upstream)
        upstream.answer.append(dns.rrset.from_text(
            "example.org.", 300, "IN", "MX",
            *["10 mx%d.example.org." % i for i in range(5)]))
        raw = upstream.to_wire()
        self.assertIn(b"\xc0", raw)
        out = RawResponse(raw).finish(req)
        self.assertNotIn(b"\xc0", out)
        self.assertEqual(len(out), 12 + 17 + 5 * (13 + 10 + 2 + 17))
        self.assertEqual(_rrs(out), _rrs(raw))
    def test_flags_copied(self):
        req = _request(make_query("a.org.", w.A, rd=True))
        m = dns.message.from_wire(encode(req, Response(3, aa=True)))
        self.assertTrue(m.flags & dns.flags.RD)
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertFalse(m.flags & dns.flags.RA)
        self.assertEqual(m.rcode(), 3)


class WireTest(unittest.TestCase):
    """The real listeners: UDP, TCP framing, pipelining."""

    @defer.inlineCallbacks
    def setUp(self):
        self.app = yield util.start(self, WHOAMI)
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_tcp_pipelined(self):
        qs = [make_query("q%d.example.org." % i, w.A, msgid=100 + i)
              for i in range(5)]
        replies = yield util.send_tcp(self.port, qs)
        self.assertEqual(sorted(header(r)[0] for r in replies),
                         [100, 101, 102, 103, 104])

    @defer.inlineCallbacks
    def test_udp_silence_then_answer(self):
        # A response packet gets no reply; the next query does.
        bad = bytearray(make_query("x.org.", w.A, msgid=1))
        bad[2] |= 0x80
        good = make_query("x.org.", w.A, msgid=2)
        reply = yield util.send_udp(self.port, [bytes(bad), good])
        self.assertEqual(header(reply)[0], 2)

    @defer.inlineCallbacks
    def test_ipv6_client(self):
        try:
            m = yield util.query(self.port, "v6.example.org.", host="::1")
        except Exception as e:
            raise unittest.SkipTest("no IPv6 loopback on this host") from e
        self.assertEqual(util.rrs(m, "additional")[1],
                         "v6.example.org. 0 IN AAAA ::1")


class RawResponseTest(unittest.TestCase):
    """Upstream answers sent as they came, with CoreDNS's SizeAndDo."""

    def upstream(self, name, opt=True, size=4096):
        q = dns.message.make_query(name, "A", use_edns=0 if opt else False,
                                   payload=size)
        r = dns.message.make_response(q)
        r.answer.append(dns.rrset.from_text(name, 300, "IN", "A",
                                            "192.0.2.1"))
        r.id = 999
        return r.to_wire()

    def test_opt_takes_client_size_and_do(self):
        from corednstw.core.request import RawResponse
        req = _request(query("a.example.org.", edns=1232, do=True))
        out = encode(req, RawResponse(self.upstream("a.example.org."),
                                      "forward"))
        m = dns.message.from_wire(out)
        self.assertEqual(m.id, 0x1234)
        self.assertEqual(m.payload, 1232)
        self.assertTrue(m.ednsflags & dns.flags.DO)
        self.assertEqual(m.answer[0][0].address, "192.0.2.1")

    def test_opt_added_when_upstream_has_none(self):
        from corednstw.core.request import RawResponse
        req = _request(query("a.example.org.", edns=1400))
        m = dns.message.from_wire(encode(req, RawResponse(
            self.upstream("a.example.org.", opt=False), "forward")))
        self.assertEqual(m.payload, 1400)

    def test_question_case_from_client(self):
        from corednstw.core.request import RawResponse
        req = _request(query("A.Example.ORG."))
        out = encode(req, RawResponse(self.upstream("a.example.org.",
                                                    opt=False), "forward"))
        self.assertEqual(w.read_name(out, 12)[0], "A.Example.ORG.")

    def test_other_question_length_reencoded(self):
        from corednstw.core.request import RawResponse
        req = _request(query("b.example.org."))
        m = dns.message.from_wire(encode(req, RawResponse(
            self.upstream("long.example.org.", opt=False), "forward")))
        self.assertEqual(str(m.question[0].name), "b.example.org.")
        self.assertEqual(str(m.answer[0].name), "long.example.org.")


class ChainTogetherTest(unittest.TestCase):
    """Middleware around ready-made answers (cache hits) still works."""

    def test_errors_and_log_around_cache_hits(self):
        s = util.Direct(self, """.:0 {
    errors
    log
    cache 30
    whoami
}
""")
        util.capture_log(self)
        for _ in range(3):
            m = s.query("example.org.")
            self.assertEqual(m.rcode(), 0)
            self.assertEqual(len(m.additional), 2)


class _Idle(protocol.Protocol):
    """A TCP client that sends nothing and records when it is closed."""

    def __init__(self):
        self.closed = defer.Deferred()

    def connectionLost(self, reason):
        self.closed.callback(None)


class TCPTimeoutTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_idle_connection_closed(self):
        app = yield util.start(self, ".:0 {\n    timeouts {\n        read 1s\n"
                                     "        idle 1s\n    }\n    whoami\n}\n")
        client = _Idle()
        yield protocol.ClientCreator(reactor, lambda: client).connectTCP(
            "127.0.0.1", app.port())
        # The server, not the client, ends the silent connection.
        yield client.closed


class TCPLimitsTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_maxtcpqueries_closes_after_answers(self):
        app = yield util.start(self, ".:0 {\n    timeouts {\n"
                                     "        maxtcpqueries 2\n    }\n"
                                     "    whoami\n}\n")
        qs = [make_query("q%d.example.org." % i, w.A, msgid=i)
              for i in range(4)]
        # Four pipelined queries: two answers, then the server closes.
        replies = yield util.send_tcp(app.port(), qs, count=4)
        self.assertEqual(sorted(header(r)[0] for r in replies), [0, 1])

    def test_defaults(self):
        from corednstw.dnsserver.listener import _timeouts
        s = util.Direct(self, WHOAMI)
        limits = _timeouts(s.app.config.listeners[("dns", None, "0")])
        self.assertEqual((limits.read, limits.write, limits.idle,
                          limits.max_queries), (3.0, 5.0, 10.0, -1))

    def test_write_timeout_aborts_stuck_client(self):
        from corednstw.dnsserver import stream
        clock = task.Clock()
        p = stream.DNSStreamProtocol(None, None, stream.Timeouts(write=5.0))
        p.callLater = clock.callLater
        p.transport = _BufferedTransport()
        p._send(b"answer")
        clock.advance(4.9)
        self.assertFalse(p.transport.aborted)
        clock.advance(0.2)
        self.assertTrue(p.transport.aborted)

    def test_write_timeout_spares_a_draining_client(self):
        """A busy client whose buffer never empties, but which takes
        bytes all along, is not aborted (the buffer alone would look
        stuck: as large at the check as when it was set)."""
        from corednstw.dnsserver import stream

        class Transport(_BufferedTransport):
            def writeSomeData(self, data):
                return len(data)

            def setTcpNoDelay(self, on):
                pass

            def registerProducer(self, producer, streaming):
                pass

            def getPeer(self):
                return type("A", (), {"host": "127.0.0.1", "port": 5})()

        clock = task.Clock()
        p = stream.DNSStreamProtocol(None, None, stream.Timeouts(
            read=3600.0, write=5.0, idle=3600.0))
        p.callLater = clock.callLater
        p.makeConnection(Transport())
        p._send(b"answer")
        for _ in range(4):
            clock.advance(3.0)
            p.transport.writeSomeData(b"taken by the kernel")
        self.assertFalse(p.transport.aborted)
        for _ in range(5):      # and then nothing more is taken
            clock.advance(2.5)
        self.assertTrue(p.transport.aborted)


class _BufferedTransport:
    """A TCP transport with 100 bytes the kernel has not taken."""

    disconnecting = disconnected = False
    aborted = False
    dataBuffer = b"x" * 100
    _tempDataLen = 0
    offset = 0

    def write(self, data):
        pass

    def abortConnection(self):
        self.aborted = True


class OverlongAndTrailingTest(unittest.TestCase):

    def setUp(self):
        self.s = util.Direct(self, WHOAMI)

    def test_name_over_255_octets_formerr(self):
        for labels in (128, 5000):
            wire = (HDR.pack(77, w.RD, 1, 0, 0, 0) + b"\x01a" * labels
                    + b"\x00\x00\x01\x00\x01")
            self.assertEqual(self.s.ask(wire), HDR.pack(77, 0x8101, 0, 0, 0,
                                                        0))

    def test_trailing_bytes_dropped(self):
        q = query()
        req = _request(q + b"\x00" * 10)
        self.assertEqual(req.data, q)
        req = _request(query(edns=1232) + b"junk")
        self.assertEqual(req.data, query(edns=1232))
        self.assertEqual(self.s.query("example.org.").rcode(), 0)


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

    def test_malformed_client_subnet(self):
        # miekg cannot unpack these ECS options (RFC 7871), so the whole
        # query fails: FORMERR with the question.  The address itself is
        # not checked (miekg cuts or pads it).
        qlen = len(query()) - 12
        for value, rcode in (
                (b"\x00\x01\x18", w.FORMERR),            # too short
                (b"\x00\x03\x18\x00\x01\x02\x03", w.FORMERR),  # family
                (b"\x00\x00\x08\x00", w.FORMERR),        # family 0, /8
                (b"\x00\x01\x21\x00\x01\x02\x03\x04", w.FORMERR),
                (b"\x00\x01\x18\x21\x01\x02\x03", w.FORMERR),  # scope
                (b"\x00\x02\x81\x00" + bytes(16), w.FORMERR),
                (b"\x00\x00\x00\x00", w.NOERROR),
                (b"\x00\x01\x18\x00\x01\x02\x03", w.NOERROR),
                (b"\x00\x01\x18\x00\x01\x02\x03\x04\x05", w.NOERROR),
                (b"\x00\x02\x80\x00" + bytes(16), w.NOERROR)):
            q = _with_option(query(edns=1232), 8, value)
            r = self.s.ask(q)
            self.assertEqual(HDR.unpack(r[:12])[1] & 0xF, rcode, value)
            if rcode == w.FORMERR:
                self.assertEqual(HDR.unpack(r[:12])[2:], (1, 0, 0, 0))
                self.assertEqual(r[12:], q[12:12 + qlen])

    def test_other_malformed_options(self):
        # The other options miekg checks: EXPIRE, TCP-KEEPALIVE, EDE.
        for code, value, rcode in (
                (9, b"\x00\x01", w.FORMERR), (9, b"", w.NOERROR),
                (11, b"\x00", w.FORMERR), (11, b"\x00\x10", w.NOERROR),
                (15, b"\x00", w.FORMERR), (10, b"\x01", w.NOERROR)):
            r = self.s.ask(_with_option(query(edns=1232), code, value))
            self.assertEqual(HDR.unpack(r[:12])[1] & 0xF, rcode,
                             (code, value))


def _with_option(wire, code, value):
    """``wire`` (a query ending in an OPT without options) with one EDNS
    option added."""
    option = struct.pack("!HH", code, len(value)) + value
    return wire[:-2] + struct.pack("!H", len(option)) + option


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


class QuestionNamesTest(unittest.TestCase):
    """The texts of question names asked before come from a bounded
    table; each spelling keeps its own case."""

    def _parse(self, name):
        req = Request(make_query(name, w.A))
        req.parse_question(*req.parse_header()[1:])
        return req.name, req.qname

    def test_case_kept_per_spelling(self):
        self.assertEqual(self._parse("www.example.org."),
                         ("www.example.org.", "www.example.org."))
        self.assertEqual(self._parse("WWW.Example.org."),
                         ("WWW.Example.org.", "www.example.org."))
        self.assertEqual(self._parse("www.example.org."),
                         ("www.example.org.", "www.example.org."))

    def test_escaped_names(self):
        self.assertEqual(self._parse("a\\.b.example.org."),
                         ("a\\.b.example.org.", "a\\.b.example.org."))

    def test_bounded(self):
        self.patch(request, "NAMES_KEPT", 3)
        request._NAMES.clear()
        for i in range(10):
            self.assertEqual(self._parse("n%d.example.org." % i)[1],
                             "n%d.example.org." % i)
            self.assertLessEqual(len(request._NAMES), 3)
