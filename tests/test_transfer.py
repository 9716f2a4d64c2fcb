"""transfer: AXFR/IXFR out of a file zone over real TCP, refusals, message
chunking, NOTIFY sending, setup errors."""

import os

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest

from corednstw.core import dnswire
from corednstw.core.errors import CorefileError
from corednstw.core.request import parse_response
from corednstw.engines import authority
from corednstw.engines import transfer as xfer
from corednstw.plugins import transfer
from corednstw.service.app import App
from tests.support import cases, util
from tests.support.cases import Case

ZONES = os.path.join(util.REPO, "tests", "zones")

#: The SOA of tests/zones/db.example.org.
ORG_SOA = ("example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. "
           "2024010101 7200 3600 1209600 300")


def axfr_query(zone="example.org", rdtype="AXFR", serial=None):
    q = dns.message.make_query(zone, rdtype)
    if serial is not None:
        soa = dns.rrset.from_text(zone + ".", 0, "IN", "SOA",
                                  "ns. a. %d 1 1 1 1" % serial)
        q.authority.append(soa)
    return q.to_wire()


def records(replies):
    """(owner, type, rdata object) of every answer RR, in wire order."""
    out = []
    for data in replies:
        m = parse_response(data)
        assert m.rcode == 0 and m.aa
        for rr in m.answer:
            out.append((rr.name, rr.rtype, rr.rdata_obj()))
    return out


class Outgoing(unittest.TestCase):

    @defer.inlineCallbacks
    def start(self, to="*", zone=None):
        path = zone or os.path.join(ZONES, "db.example.org")
        self.app = yield util.start(
            self, "example.org:0 {\n    file %s\n    transfer {\n        to %s"
            "\n    }\n}\n" % (path, to))
        self.port = self.app.port()

    @defer.inlineCallbacks
    def test_axfr(self):
        log = util.capture_log(self)
        yield self.start()
        replies = yield util.send_tcp(self.port, axfr_query())
        got = records(replies)
        z = authority.parse_file(os.path.join(ZONES, "db.example.org"),
                               "example.org.")
        self.assertEqual(len(got), z.count() + 1)
        self.assertEqual(got[0][1], dns.rdatatype.SOA)
        self.assertEqual(got[-1][1], dns.rdatatype.SOA)
        self.assertEqual(got[0][2].serial, 2024010101)
        self.assertIn(("a.example.org.", dns.rdatatype.A),
                      [g[:2] for g in got])
        self.assertIn('[INFO] plugin/transfer: Outgoing transfer of %d records'
                      ' of zone "example.org." to 127.0.0.1 for 2024010101 '
                      'SOA '
                      'serial' % len(got), log.text())

    @defer.inlineCallbacks
    def test_udp_refused(self):
        yield self.start()
        yield cases.run(self, self.port, [Case("example.org", "AXFR",
                                               "REFUSED")])

    @defer.inlineCallbacks
    def test_not_allowed_refused(self):
        yield self.start(to="192.0.2.99")
        replies = yield util.send_tcp(self.port, axfr_query())
        self.assertEqual(len(replies), 1)
        cases.check_response(self, Case("example.org", "AXFR", "REFUSED"),
                             cases.parse_reply(replies[0]))

    @defer.inlineCallbacks
    def test_ixfr(self):
        yield self.start(to="127.0.0.1")
        # Only the zone's own serial is "up to date": one SOA, no AA.
        replies = yield util.send_tcp(self.port, axfr_query(
            rdtype="IXFR", serial=2024010101))
        self.assertEqual(len(replies), 1)
        cases.check_response(self, Case("example.org", "IXFR", aa=False,
                                        answer=[ORG_SOA]),
                             cases.parse_reply(replies[0]))
        # Any other serial, older or newer, falls back to a full transfer.
        for serial in (2024010000, 2024010200):
            replies = yield util.send_tcp(self.port, axfr_query(
                rdtype="IXFR", serial=serial))
            self.assertGreater(len(records(replies)), 40)
        yield cases.run(self, self.port, [Case("example.org", "IXFR",
                                               "SERVFAIL")], proto="tcp")

    @defer.inlineCallbacks
    def test_chunking(self):
        body = "".join("t%d 60 IN TXT \"%s\"\n" % (i, "x" * 200)
                       for i in range(1000))
        d = util.write_files(self, {"db": "$ORIGIN example.org.\n@ 60 IN SOA "
                                    "ns a 9 2 3 4 5\n@ 60 IN NS ns\n" + body})
        yield self.start(zone=os.path.join(d, "db"))
        z = authority.parse_file(os.path.join(d, "db"), "example.org.")
        want = len(xfer.batches(z.transfer(0)))
        self.assertGreater(want, 2)
        replies = yield util.send_tcp(self.port, axfr_query(), count=want)
        self.assertEqual(len(replies), want)
        for r in replies:
            self.assertLess(len(r), 65535)
        self.assertEqual(len(records(replies)), 1000 + 3)


class _Catcher(protocol.DatagramProtocol):
    """Answers NOTIFY like a secondary and remembers it."""

    def __init__(self, rcode=0):
        self.got = []
        self.rcode = rcode

    def datagramReceived(self, data, addr):
        m = dns.message.from_wire(data)
        self.got.append(m)
        r = dns.message.make_response(m)
        r.set_rcode(self.rcode)
        self.transport.write(r.to_wire(), addr)


class Notify(unittest.TestCase):

    @defer.inlineCallbacks
    def test_notify_on_start(self):
        catcher = _Catcher()
        port = reactor.listenUDP(0, catcher, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        yield util.start(self, "example.org:0 {\n    file %s/db.example.org\n"
                         "    transfer {\n        to * 127.0.0.1:%d\n    }\n}"
                         "\n" % (ZONES, port.getHost().port))
        yield util.wait_for(lambda: catcher.got)
        m = catcher.got[0]
        self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
        self.assertTrue(m.flags & 0x0400)
        self.assertEqual(str(m.question[0].name), "example.org.")
        self.assertEqual(m.question[0].rdtype, dns.rdatatype.SOA)

    @defer.inlineCallbacks
    def test_notify_refused_logged(self):
        log = util.capture_log(self)
        catcher = _Catcher(rcode=dns.rcode.REFUSED)
        port = reactor.listenUDP(0, catcher, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        yield xfer.send_notify(reactor, "example.org.", (
            "127.0.0.1", port.getHost().port)).addErrback(
                lambda f: log.write(f.getErrorMessage()))
        self.assertEqual(len(catcher.got), 3)
        self.assertIn('rcode was "REFUSED"', log.text())



class Setup(unittest.TestCase):

    def load(self, text):
        d = util.write_files(self, {"Corefile": text})
        return App(os.path.join(d, "Corefile"), dns_port=0).load()

    def test_errors(self):
        for body, msg in [
                ("transfer\n", "'to' is required"),
                ("transfer {\n to\n}\n", "Wrong argument count"),
                ("transfer {\n to foo.example\n}\n", "not an IP address"),
                ("transfer {\n to *\n source x\n}\n",
                 'invalid source address "x"'),
                ("transfer {\n to *\n source 127.0.0.1\n source ::1\n}\n",
                 "source already specified"),
                ("transfer {\n to *\n bogus\n}\n", 'unknown property "bogus"'),
        ]:
            with self.assertRaises(CorefileError) as e:
                self.load("example.org {\n" + body + "}\n")
            self.assertIn(msg, str(e.exception))

    def test_peers_and_repeats(self):
        cfg = self.load("example.org example.net {\n transfer example.org {\n"
                        "  to 10.0.0.1 [2001:db8::1]:5300 10.0.0.2:53\n }\n"
                        " transfer example.net {\n  to *\n }\n}\n")
        t = cfg.blocks[0].plugin("transfer")
        out = t.outgoing
        self.assertEqual(out.xfrs[0].to, [("10.0.0.1", 53),
                                          ("2001:db8::1", 5300),
                                          ("10.0.0.2", 53)])
        self.assertEqual(out.longest("www.example.net.").to, ["*"])
        self.assertIsNone(out.longest("example.com."))

    def test_batches(self):
        rr = dnswire.RR("a.example.org.", 16, 60, b"\xff" + b"x" * 255)
        out = xfer.batches([[rr] * 500])
        self.assertEqual([len(b) for b in out], [224, 224, 52])



class _Transferer:
    """A zone provider as CoreDNS's transfer tests use: SOA, NS + glue,
    SOA for a full transfer; the SOA alone for a serial at or above its
    own.  Queries it does not hold go to ``next``."""

    def __init__(self, zone, serial, next_):
        self.zone = zone
        self.serial = serial
        self.next = next_

    def soa(self):
        return dnswire.RR.from_text(
            self.zone, "SOA", 100, "ns.dns.%s hostmaster.%s %d 7200 1800 "
            "86400 100" % (self.zone, self.zone, self.serial))

    def transfer_records(self, zone, serial):
        if zone != self.zone:
            return None
        if serial >= self.serial:
            return [[self.soa()]]
        return [[self.soa()],
                [dnswire.RR.from_text(self.zone, "NS", 100,
                                      "ns.dns." + self.zone),
                 dnswire.RR.from_text("ns.dns." + self.zone, "A", 100,
                                      "1.2.3.4")],
                [self.soa()]]


class Table(unittest.TestCase):
    """CoreDNS's plugin/transfer tests: zone selection, fallback to the
    next plugin, IXFR, refusal, case-insensitive zone match."""

    def plugin(self, xfrs):
        from corednstw.core.request import Response
        nx = util.Stub(lambda req: Response(dns.rcode.NXDOMAIN))
        org = _Transferer("example.org.", 12345, nx)
        com = _Transferer("example.com.", 12345, org)
        p = transfer.Transfer()
        for zones, to in xfrs:
            p.outgoing.allow(zones, to)
        p.transferers = lambda: [com, org]
        p.next = util.Stub(lambda req: nx.serve(req))
        return p

    def ask(self, p, wire, proto="tcp", client="127.0.0.1"):
        from corednstw.core.request import Request, encode
        req = Request(wire, client=client, proto=proto)
        req.parse_question(*req.parse_header()[1:])
        resp = p.serve(req)
        msgs = [encode(req, resp)] + list(getattr(resp, "more", None) or [])
        return [dns.message.from_wire(m, one_rr_per_rrset=True)
                for m in msgs]

    def default(self):
        return self.plugin([(["example.org."], ["*"]),
                            (["example.com."], ["*"])])

    def check(self, msgs, case):
        """One message, matching ``case``."""
        self.assertEqual(len(msgs), 1, case)
        cases.check_response(self, case, msgs[0])

    def assertFull(self, msgs, qname, qtype="AXFR"):
        """The whole zone: SOA, NS and glue, SOA again, in that order."""
        zone = qname.lower().rstrip(".") + "."
        soa = ("%s 100 IN SOA ns.dns.%s hostmaster.%s 12345 7200 1800 86400 "
               "100" % (zone, zone, zone))
        self.check(msgs, Case(qname, qtype, aa=True, answer=[
            soa, "%s 100 IN NS ns.dns.%s" % (zone, zone),
            "ns.dns.%s 100 IN A 1.2.3.4" % zone, soa]))
        self.assertEqual(msgs[0].answer[0].rdtype, dns.rdatatype.SOA)
        self.assertEqual(msgs[-1].answer[-1].rdtype, dns.rdatatype.SOA)

    def test_non_zone_goes_on(self):
        p = self.default()
        for name in ("sub.example.org.", "example.test."):
            self.check(self.ask(p, axfr_query(name.rstrip("."))),
                       Case(name, "AXFR", "NXDOMAIN"))

    def test_not_axfr_goes_on(self):
        p = self.default()
        self.check(self.ask(p, util.make_query("test.domain.", "A").to_wire()),
                   Case("test.domain.", "A", "NXDOMAIN"))

    def test_axfr_each_zone(self):
        p = self.default()
        for zone in ("example.org", "example.com"):
            self.assertFull(self.ask(p, axfr_query(zone)), zone)

    def test_ixfr_current_and_fallback(self):
        p = self.default()
        msgs = self.ask(p, axfr_query("example.org", "IXFR", 12345))
        self.check(msgs, Case("example.org", "IXFR", answer=[
            "example.org. 100 IN SOA ns.dns.example.org. "
            "hostmaster.example.org. 12345 7200 1800 86400 100"]))
        self.assertFull(self.ask(p, axfr_query("example.org", "IXFR",
                                               12344)), "example.org", "IXFR")

    def test_ixfr_without_soa_servfail(self):
        p = self.default()
        self.check(self.ask(p, axfr_query("example.org", "IXFR")),
                   Case("example.org", "IXFR", "SERVFAIL"))

    def test_not_allowed_refused(self):
        p = self.plugin([(["example.org."], [("1.2.3.4", 53)])])
        self.check(self.ask(p, axfr_query("example.org")),
                   Case("example.org", "AXFR", "REFUSED"))

    def test_udp_refused(self):
        p = self.default()
        self.check(self.ask(p, axfr_query("example.org"), proto="udp"),
                   Case("example.org", "AXFR", "REFUSED"))

    def test_zone_match_case_insensitive(self):
        p = self.default()
        self.assertFull(self.ask(p, axfr_query("ExAmPlE.OrG")), "ExAmPlE.OrG")

    def test_longest_match(self):
        p = self.plugin([(["example.org."], ["*"]),
                         (["a.example.org."], ["*"])])
        self.assertEqual(p.outgoing.longest("host.a.example.org.").zones,
                         ["a.example.org."])
        self.assertIsNone(p.outgoing.longest("other.net."))

    def test_zone_selection_most_specific(self):
        # example.org. allows only 192.0.2.1, sub.example.org. anyone: a
        # transfer of sub.example.org. is governed by the latter.
        p = self.plugin([(["example.org."], [("192.0.2.1", 53)]),
                         (["sub.example.org."], ["*"])])
        m = self.ask(p, axfr_query("sub.example.org"))[0]
        self.assertNotEqual(m.rcode(), dns.rcode.REFUSED)

    def test_large_records_batched(self):
        zone = "example.org."
        soa = dnswire.RR.from_text(zone, "SOA", 100, "ns.dns.%s hostmaster."
                                   "%s 1 7200 1800 86400 100" % (zone, zone))
        txt = [[dnswire.RR.from_text("r%d.%s" % (i, zone), "TXT", 3600,
                                     '"%s"' % ("x" * 240))]
               for i in range(300)]

        class Large:
            def transfer_records(self, z, serial):
                return [[soa]] + txt + [[soa]] if z == zone else None
        p = self.default()
        p.transferers = lambda: [Large()]
        msgs = self.ask(p, axfr_query("example.org"))
        self.assertGreater(len(msgs), 1)
        self.assertEqual(sum(len(r) for m in msgs for r in m.answer), 302)
        for m in msgs:
            self.assertLessEqual(len(m.to_wire()), 65535)
