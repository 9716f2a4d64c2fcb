"""secondary: transfers from one of our servers and from a real Knot DNS
primary, NOTIFY handling, SERVFAIL until loaded, setup errors."""

import os

import dns.message
import dns.opcode
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.service.app import App
from tests.support import cases, knot, util
from tests.support.cases import Case

ZONE = """\
$ORIGIN example.org.
$TTL 300
@    IN SOA ns1 hostmaster %d 3600 600 86400 60
     IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   %s
*.w  IN TXT "wild"
sub  IN NS  ns.sub
ns.sub IN A 192.0.2.54
"""


NS = "example.org. 300 IN NS ns1.example.org."


def www(addr):
    """www.example.org's answer from ZONE: the address, AA, the apex NS."""
    return Case("www.example.org", "A", aa=True, ns=[NS],
                answer=["www.example.org. 300 IN A " + addr])


class FromOurPrimary(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    @defer.inlineCallbacks
    def start_pair(self):
        self.dir = util.write_files(self, {"db": ZONE % (1, "192.0.2.10")})
        secport = knot.free_port()
        self.primary = yield util.start(
            self, "example.org:0 {\n    file %s/db {\n        reload 50ms\n"
            "    }\n    transfer {\n        to * 127.0.0.1:%d\n    }\n}\n"
            % (self.dir, secport))
        self.secondary = yield util.start(
            self, "example.org:%d {\n    secondary {\n        transfer from "
            "127.0.0.1:%d\n    }\n    transfer {\n        to *\n    }\n}\n"
            % (secport, self.primary.port()))
        self.port = secport

    def write(self, text):
        util.rewrite(os.path.join(self.dir, "db"), text)

    @defer.inlineCallbacks
    def test_transfer_lookup_and_notify(self):
        yield self.start_pair()
        yield cases.wait_for_answer(self.port, www("192.0.2.10"))
        self.assertIn("[INFO] plugin/secondary: Transferred: example.org. "
                      "from 127.0.0.1:%d" % self.primary.port(),
                      self.log.text())
        # The secondary applies the lookup rules: wildcard and delegation.
        yield cases.run(self, self.port, [
            Case("x.w.example.org", "TXT", aa=True, ns=[NS],
                 answer=['x.w.example.org. 300 IN TXT "wild"']),
            Case("a.sub.example.org", "A", aa=False,
                 ns=["sub.example.org. 300 IN NS ns.sub.example.org."],
                 extra=["ns.sub.example.org. 300 IN A 192.0.2.54"]),
        ])
        # A new serial on the primary: reload, NOTIFY, transfer.
        self.write(ZONE % (2, "192.0.2.20"))
        yield cases.wait_for_answer(self.port, www("192.0.2.20"))
        self.assertIn("[INFO] plugin/secondary: Notify from 127.0.0.1 for "
                      "example.org.: checking transfer", self.log.text())
        # The secondary passes the zone on (transfer plugin).
        replies = yield util.send_tcp(self.port, dns.message.make_query(
            "example.org", "AXFR").to_wire())
        m = dns.message.from_wire(replies[0])
        self.assertEqual(m.answer[0].rdtype, 6)
        self.assertEqual(m.answer[0][0].serial, 2)

    @defer.inlineCallbacks
    def test_notify_answer_and_unchanged_serial(self):
        yield self.start_pair()
        yield cases.wait_for_answer(self.port, www("192.0.2.10"))
        q = dns.message.make_query("example.org", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        data = yield util.send_udp(self.port, q.to_wire())
        m = dns.message.from_wire(data)
        self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
        self.assertTrue(m.flags & 0x0400)
        self.assertEqual(m.rcode(), 0)
        yield util.wait_for(lambda: "Notify from 127.0.0.1 for example.org.: "
                            "no SOA serial increase seen" in self.log.text())


class ShouldTransfer(unittest.TestCase):
    """CoreDNS's TestShouldTransfer and TestLess."""

    @defer.inlineCallbacks
    def test_serials(self):
        from corednstw.engines import authority
        from corednstw.plugins import secondary
        util.capture_log(self)
        d = util.write_files(self, {"db": ZONE % (250, "192.0.2.10")})
        primary = yield util.start(self, "example.org:0 {\n    file %s/db\n"
                                   "}\n" % d)
        app = yield util.start(self, "example.org:0 {\n    secondary {\n"
                               "        transfer from 127.0.0.1:%d\n    }\n"
                               "}\n" % primary.port())
        p = app.config.blocks[0].plugin("secondary")
        p.stop()       # no timers: the checks below are driven by hand
        sz = p.secondaries["example.org."]
        p.zone_map["example.org."] = None
        self.assertTrue((yield p.should_transfer(sz)))      # nothing yet
        for serial, want in ((249, True), (250, False), (251, False)):
            p.zone_map["example.org."] = authority.parse_file(
                util.write_files(self, {"db": ZONE % (serial, "192.0.2.1")})
                + "/db", "example.org.")
            self.assertEqual((yield p.should_transfer(sz)), want, serial)
        # A primary that answers with an error rcode (here the secondary
        # itself, SERVFAIL until loaded) gives no serial: no transfer, and
        # not a failed check.
        sz.primaries = [("127.0.0.1", app.port())]
        self.assertFalse((yield p.should_transfer(sz)))
        # One that does not answer at all: the check fails.
        from tests.support import knot
        sz.primaries = [("127.0.0.1", knot.free_port())]
        with self.assertRaises(secondary.TransferError):
            yield p.should_transfer(sz)

    def test_less(self):
        from corednstw.engines.authority import serial_less
        self.assertFalse(serial_less(0, 4294967295))
        self.assertTrue(serial_less(4294967295, 0))
        self.assertTrue(serial_less(4000000000, 12345))
        self.assertTrue(serial_less(7, 9))


class NotLoaded(unittest.TestCase):

    @defer.inlineCallbacks
    def test_servfail_until_loaded(self):
        log = util.capture_log(self)
        dead = knot.free_port()
        app = yield util.start(self, "example.org:0 {\n    secondary {\n"
                               "        transfer from 127.0.0.1:%d\n    }\n}\n"
                               % dead)
        yield cases.run(self, app.port(), [Case("www.example.org", "A",
                                                "SERVFAIL")])
        yield util.wait_for(lambda: "[WARNING] plugin/secondary: All "
                            "'example.org.' masters failed to transfer, "
                            "retrying in 250ms" in log.text())
        # NOTIFY from an address that is not a primary: no answer.
        q = dns.message.make_query("example.org", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        q.id = 4242
        d = util.Direct(self, "example.org:0 {\n    secondary {\n        "
                        "transfer from 192.0.2.1\n    }\n}\n")
        self.assertIsNone(d.ask(q.to_wire()))


class FromKnot(unittest.TestCase):

    @defer.inlineCallbacks
    def test_knot_primary(self):
        log = util.capture_log(self)
        secport = knot.free_port()
        primary = yield knot.start(self, {"example.org.": ZONE % (
            7, "192.0.2.70")}, notify_port=secport)
        yield util.start(self, "example.org:%d {\n    secondary {\n        "
                         "transfer from 127.0.0.1:%d\n    }\n}\n"
                         % (secport, primary.port))
        yield cases.wait_for_answer(secport, www("192.0.2.70"))
        yield cases.run(self, secport, [Case(
            "example.org", "SOA", aa=True, ns=[NS],
            answer=["example.org. 300 IN SOA ns1.example.org. "
                    "hostmaster.example.org. 7 3600 600 86400 60"])])
        primary.write_zone("example.org.", ZONE % (8, "192.0.2.80"))
        primary.reload()
        yield cases.wait_for_answer(secport, www("192.0.2.80"))
        self.assertIn("Notify from 127.0.0.1 for example.org.", log.text())


class Setup(unittest.TestCase):

    def load(self, text):
        d = util.write_files(self, {"Corefile": text})
        return App(os.path.join(d, "Corefile"), dns_port=0).load()

    def test_errors(self):
        for body, msg in [
                ("secondary\n", "require a transfer from property"),
                ("secondary {\n transfer to 10.0.0.1\n}\n",
                 "unknown property to"),
                ("secondary {\n transfer from\n}\n", "Wrong argument count"),
                ("secondary {\n transfer from *\n}\n", "can't use '*'"),
                ("secondary {\n transfer from 10.0.0.1\n catalog\n}\n",
                 "not supported yet"),
                ("secondary {\n transfer from 10.0.0.1\n bogus\n}\n",
                 "unknown property 'bogus'"),
        ]:
            with self.assertRaises(CorefileError) as e:
                self.load("example.org {\n" + body + "}\n")
            self.assertIn(msg, str(e.exception))

    def test_primaries(self):
        cfg = self.load("example.org {\n secondary {\n  transfer from "
                        "10.0.0.1 [::1]:5300\n  transfer from 10.0.0.2\n"
                        "  fallthrough\n }\n}\n")
        s = cfg.blocks[0].plugin("secondary")
        self.assertEqual(s.secondaries["example.org."].primaries, [
            ("10.0.0.1", 53), ("::1", 5300), ("10.0.0.2", 53)])
        self.assertTrue(s.fall)


class ApplyIxfr(unittest.TestCase):
    """The records after an IXFR answer, in its three forms."""

    def soa(self, serial):
        from corednstw.core import dnswire as w
        return w.RR("example.org.", w.SOA, 300, w.soa_rdata(
            "ns1.example.org.", "hostmaster.example.org.", serial, 3600,
            600, 86400, 60))

    def a(self, name, addr):
        from corednstw.core import dnswire as w
        return w.RR(name, w.A, 300, w.a_rdata(addr))

    def test_forms(self):
        from corednstw.plugins.secondary import apply_ixfr
        base = [self.soa(1), self.a("www.example.org.", "192.0.2.1"),
                self.a("ftp.example.org.", "192.0.2.2")]
        # Up to date (or no increment): a lone SOA.
        self.assertIsNone(apply_ixfr(base, [self.soa(1)]))
        # AXFR-style: the whole zone.
        whole = [self.soa(3), self.a("new.example.org.", "192.0.2.9"),
                 self.soa(3)]
        self.assertEqual(apply_ixfr(base, whole), whole[:-1])
        # Two increments, 1 -> 2 -> 3, owners in another case.
        out = apply_ixfr(base, [
            self.soa(3),
            self.soa(1), self.a("WWW.example.org.", "192.0.2.1"),
            self.soa(2), self.a("www.example.org.", "192.0.2.10"),
            self.soa(2), self.a("ftp.example.org.", "192.0.2.2"),
            self.soa(3), self.a("mail.example.org.", "192.0.2.25"),
            self.soa(3)])
        self.assertEqual(out, [
            self.soa(3), self.a("www.example.org.", "192.0.2.10"),
            self.a("mail.example.org.", "192.0.2.25")])

    def test_changes_that_do_not_apply(self):
        from corednstw.plugins.secondary import TransferError, apply_ixfr
        base = [self.soa(1), self.a("www.example.org.", "192.0.2.1")]
        for rrs, why in [
                ([self.soa(3), self.soa(2), self.soa(3), self.soa(3)],
                 "IXFR does not start from serial 1"),
                ([self.soa(2), self.soa(1),
                  self.a("ftp.example.org.", "192.0.2.2"), self.soa(2),
                  self.soa(2)], "IXFR deletes a record we do not hold"),
                ([self.soa(3), self.soa(1), self.soa(2), self.soa(3)],
                 "IXFR ends at serial 2"),
        ]:
            with self.assertRaises(TransferError) as cm:
                apply_ixfr(base, rrs)
            self.assertIn(why, str(cm.exception))
