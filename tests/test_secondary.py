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


MEMBER_ZONE = """\
$ORIGIN {origin}
$TTL 300
@    IN SOA ns1 hostmaster {serial} 3600 600 86400 60
     IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   {addr}
"""

CATALOG = "catalog.example."


def member(origin, addr, serial=1):
    return MEMBER_ZONE.format(origin=origin, addr=addr, serial=serial)


def member_www(origin, addr):
    return Case("www." + origin, "A", aa=True,
                ns=["%s 300 IN NS ns1.%s" % (origin, origin)],
                answer=["www.%s 300 IN A %s" % (origin, addr)])


class CatalogFromKnot(unittest.TestCase):
    """RFC 9432 catalog zones, from a real Knot DNS generating the catalog
    of the zones it serves: the members listed are transferred and
    served, and a member added or removed on the primary shows up or
    goes after its NOTIFY."""

    @defer.inlineCallbacks
    def start(self, catalog_line, listed):
        self.log = util.capture_log(self)
        self.port = knot.free_port()
        zones = {o: member(o, a) for o, a in (
            ("a.example.", "192.0.2.1"), ("b.example.", "192.0.2.2"),
            ("c.example.", "192.0.2.3"))}
        self.primary = yield knot.start_catalog(self, CATALOG, zones,
                                                listed, self.port)
        self.app = yield util.start(
            self, ".:%d {\n    secondary catalog.example {\n        "
            "transfer from 127.0.0.1:%d\n        %s\n    }\n    transfer "
            "{\n        to *\n    }\n}\n"
            % (self.port, self.primary.port, catalog_line))

    @defer.inlineCallbacks
    def test_members_follow_the_catalog(self):
        yield self.start("catalog", ["a.example.", "b.example."])
        yield cases.wait_for_answer(self.port,
                                    member_www("a.example.", "192.0.2.1"))
        yield cases.wait_for_answer(self.port,
                                    member_www("b.example.", "192.0.2.2"))
        # c is not listed: not served (no next plugin: SERVFAIL).
        yield cases.run(self, self.port, [Case("www.c.example", "A",
                                               "SERVFAIL")])
        # The catalog itself is served and can be passed on.
        replies = yield util.send_tcp(self.port, dns.message.make_query(
            CATALOG, "AXFR").to_wire())
        ptrs = {rd.target.to_text() for rr in dns.message.from_wire(
            replies[0]).answer if rr.rdtype == 12 for rd in rr}
        self.assertEqual(ptrs, {"a.example.", "b.example."})
        text = self.log.text()
        self.assertIn("Added catalog member zone a.example. from catalog "
                      "catalog.example.", text)
        self.assertIn("Parsed catalog zone catalog.example. with 2 member "
                      "zones", text)

        # The primary drops b and adds c: NOTIFY, new catalog, members.
        self.primary.list_members(["a.example.", "c.example."])
        yield cases.wait_for_answer(self.port,
                                    member_www("c.example.", "192.0.2.3"))
        yield cases.wait_for_answer(self.port, Case("www.b.example", "A",
                                                    "SERVFAIL"))
        self.assertIn("Removed catalog member zone b.example. from catalog "
                      "catalog.example.", self.log.text())
        # A member is kept up to date like any secondary zone.
        self.primary.write_zone("a.example.",
                                member("a.example.", "192.0.2.11", 2))
        self.primary.reload()
        yield cases.wait_for_answer(self.port,
                                    member_www("a.example.", "192.0.2.11"))
        self.assertIn("Notify from 127.0.0.1 for a.example.", self.log.text())
        # A member's zone can be passed on too (transfer plugin).
        replies = yield util.send_tcp(self.port, dns.message.make_query(
            "c.example", "AXFR").to_wire())
        self.assertEqual(dns.message.from_wire(replies[0]).answer[0][0]
                         .serial, 1)

    @defer.inlineCallbacks
    def test_member_zones_restricted(self):
        yield self.start("catalog A.example", ["a.example.", "b.example."])
        yield cases.wait_for_answer(self.port,
                                    member_www("a.example.", "192.0.2.1"))
        yield util.wait_for(lambda: "Skipped 1 member zones from catalog "
                            "catalog.example.: outside configured member "
                            "zones" in self.log.text())
        yield cases.run(self, self.port, [Case("www.b.example", "A",
                                               "SERVFAIL")])


class CatalogParse(unittest.TestCase):
    """What RFC 9432 requires of a catalog, as CoreDNS's parser checks."""

    def records(self, *lines):
        from corednstw.core import dnswire as w
        base = ["catalog.example. 0 IN SOA invalid. invalid. 1 3600 600 "
                "86400 0", "catalog.example. 0 IN NS invalid."]
        out = []
        for line in base + list(lines):
            name, ttl, _, rtype, rdata = line.split(None, 4)
            out.append(w.RR.from_text(name, rtype, int(ttl), rdata))
        return out

    def parse(self, *lines):
        from corednstw.plugins.secondary import catalog
        return catalog.parse(CATALOG, self.records(*lines))

    def test_members_groups_and_coo(self):
        members = self.parse(
            'version.catalog.example. 0 IN TXT "2"',
            "m2.zones.catalog.example. 0 IN PTR B.example.",
            "m1.zones.catalog.example. 0 IN PTR a.example.",
            'group.m1.zones.catalog.example. 0 IN TXT "y"',
            'group.m1.zones.catalog.example. 0 IN TXT "x"',
            "coo.m2.zones.catalog.example. 0 IN PTR other.example.")
        self.assertEqual([(m.id, m.zone, m.groups, m.coo) for m in members],
                         [("m1", "a.example.", ["x", "y"], ""),
                          ("m2", "b.example.", [], "other.example.")])

    def test_refused(self):
        from corednstw.plugins.secondary import catalog
        version = 'version.catalog.example. 0 IN TXT "2"'
        for lines, msg in [
                ((), "must have exactly one version TXT record"),
                (('version.catalog.example. 0 IN TXT "1"',),
                 'has unsupported version "1"'),
                ((version, "m1.zones.catalog.example. 0 IN PTR a.",
                  "m1.zones.catalog.example. 0 IN PTR b."),
                 "catalog member m1.zones.catalog.example. must have "
                 "exactly one PTR record"),
                ((version, "m1.zones.catalog.example. 0 IN PTR a.",
                  "m2.zones.catalog.example. 0 IN PTR a."),
                 "catalog member zone a. is listed by both m1 and m2")]:
            with self.assertRaises(catalog.CatalogError) as cm:
                self.parse(*lines)
            self.assertIn(msg, str(cm.exception))
        with self.assertRaises(catalog.CatalogError) as cm:
            catalog.parse(CATALOG, self.records(version)[1:])
        self.assertIn("has no SOA record", str(cm.exception))


class CatalogMembers(unittest.TestCase):
    """Which catalog owns a member: IDs, clashes and change of ownership
    (driven by hand: no transfers run)."""

    def setUp(self):
        util.capture_log(self)
        self.dir = util.write_files(self, {"db": ZONE % (1, "192.0.2.10")})
        d = util.Direct(self, ".:0 {\n    secondary one.example "
                        "two.example {\n        transfer from 192.0.2.1\n"
                        "        catalog\n    }\n    secondary "
                        "example.org {\n        transfer from 192.0.2.1\n"
                        "    }\n}\n")
        self.s = d.app.config.blocks[0].plugin("secondary")

    def members(self, *items):
        from corednstw.plugins.secondary.catalog import Member
        return [Member(i, z, [], coo) for i, z, coo in items]

    def test_add_reset_remove_and_clash(self):
        s = self.s
        s.apply_catalog("one.example.", self.members(
            ("m1", "a.example.", ""), ("m2", "example.org.", "")))
        self.assertEqual(s.dynamic, {"a.example.": ("one.example.", "m1")})
        self.assertIn("a.example.", s.names)
        self.assertEqual(s.secondaries["a.example."].primaries,
                         [("192.0.2.1", 53)])
        s.zone_map["a.example."] = "data"
        s.apply_catalog("one.example.", self.members(("m9", "a.example.",
                                                      "")))
        self.assertEqual(s.dynamic["a.example."], ("one.example.", "m9"))
        self.assertIsNone(s.zone_map["a.example."])     # reset
        # Another catalog cannot take it without a change of ownership.
        s.apply_catalog("two.example.", self.members(("m9", "a.example.",
                                                      "")))
        self.assertEqual(s.dynamic["a.example."], ("one.example.", "m9"))
        s.apply_catalog("one.example.", [])
        self.assertNotIn("a.example.", s.names)
        self.assertNotIn("a.example.", s.secondaries)
        # The configured zone was never touched.
        self.assertIn("example.org.", s.secondaries)
        self.assertNotIn("example.org.", s.dynamic)

    def test_change_of_ownership(self):
        s = self.s
        s.apply_catalog("one.example.", self.members(
            ("m1", "a.example.", "two.example."),
            ("m2", "b.example.", "two.example.")))
        s.zone_map["a.example."] = "kept"
        s.zone_map["b.example."] = "dropped"
        s.apply_catalog("two.example.", self.members(
            ("m1", "a.example.", ""), ("other", "b.example.", "")))
        self.assertEqual(s.dynamic["a.example."], ("two.example.", "m1"))
        self.assertEqual(s.zone_map["a.example."], "kept")
        self.assertEqual(s.dynamic["b.example."], ("two.example.", "other"))
        self.assertIsNone(s.zone_map["b.example."])
        # The old catalog dropping them now removes nothing.
        s.apply_catalog("one.example.", [])
        self.assertIn("a.example.", s.secondaries)


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
                ("secondary {\n transfer from 10.0.0.1\n catalog :\n}\n",
                 'invalid catalog member zone ":"'),
                ("secondary {\n transfer from 10.0.0.1\n bogus\n}\n",
                 "unknown property 'bogus'"),
        ]:
            with self.assertRaises(CorefileError) as e:
                self.load("example.org {\n" + body + "}\n")
            self.assertIn(msg, str(e.exception))

    def test_catalog_member_zones(self):
        cfg = self.load("catalog.example {\n secondary {\n  transfer from "
                        "10.0.0.1\n  catalog EXAMPLE.ORG internal.example\n"
                        "  catalog example.org 10.0.0.0/24\n }\n}\n")
        s = cfg.blocks[0].plugin("secondary")
        self.assertEqual(s.catalog_zones, {"catalog.example.": [
            "example.org.", "internal.example.", "0.0.10.in-addr.arpa."]})
        # A bare catalog line accepts any member zone.
        cfg = self.load("catalog.example {\n secondary {\n  transfer from "
                        "10.0.0.1\n  catalog example.org\n  catalog\n"
                        " }\n}\n")
        self.assertEqual(cfg.blocks[0].plugin("secondary").catalog_zones,
                         {"catalog.example.": []})

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
