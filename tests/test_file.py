"""file: the lookup rules (a golden table derived from CoreDNS's
plugin/file tests), setup errors, reloads, fallthrough and the wire."""

import os

import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdatatype
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import corefile
from corednstw.engines import authority
from corednstw.core.request import make_query
from tests.support import util

ZONES = os.path.join(util.REPO, "tests", "zones")

COREFILE = """\
example.org:0 secure.test:0 {
    file %(z)s/db.example.org example.org
    file %(z)s/db.secure.test secure.test
}
elsewhere.net:0 {
    file %(z)s/db.elsewhere.net
}
""" % {"z": ZONES}


def golden():
    """[(name, type, do, rcode, aa, [record lines])] from lookup.golden."""
    cases = []
    with open(os.path.join(ZONES, "lookup.golden")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("CASE "):
                parts = line.split()
                do = parts[3] == "do"
                rest = parts[4:] if do else parts[3:]
                cases.append((parts[1], parts[2], do, rest[0], rest[1] == "AA",
                              []))
            else:
                cases[-1][5].append(line.strip())
    return cases


def lines(m):
    out = []
    for sec in ("answer", "authority", "additional"):
        out.extend("%s %s" % (sec[:2], x) for x in util.rrs(m, sec))
    return out


class LookupTable(unittest.TestCase):
    """Every golden case through the whole chain (sans sockets)."""

    def test_golden(self):
        d = util.Direct(self, COREFILE)
        cases = golden()
        self.assertGreater(len(cases), 50)
        for name, qtype, do, rcode, aa, want in cases:
            kw = {"want_dnssec": True} if do else {}
            got = []
            d.ask_async(util.make_query(name, qtype, **kw).to_wire()
                        ).addCallback(got.append)
            m = dns.message.from_wire(got[0])
            label = "%s/%s%s" % (name, qtype, " +do" if do else "")
            self.assertEqual(dns.rcode.to_text(m.rcode()), rcode, label)
            self.assertEqual(bool(m.flags & 0x0400), aa, label)
            self.assertEqual(lines(m), want, label)

    def test_answer_order_cname_first(self):
        d = util.Direct(self, COREFILE)
        m = d.query("chain1.example.org", "A")
        self.assertEqual([str(r.name) for r in m.answer],
                         ["chain1.example.org.", "chain2.example.org.",
                          "a.example.org."])

    def test_question_case_echoed(self):
        d = util.Direct(self, COREFILE)
        m = d.query("WwW.ExAmPlE.oRg", "A")
        self.assertEqual(str(m.question[0].name), "WwW.ExAmPlE.oRg.")
        self.assertEqual(m.rcode(), 0)

    def test_axfr_without_transfer_refused(self):
        d = util.Direct(self, COREFILE)
        m = d.query("example.org", "AXFR", proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)

    def test_notify_for_primary_zone_dropped(self):
        d = util.Direct(self, COREFILE)
        cap = util.capture_log(self)
        q = util.make_query("example.org", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        self.assertIsNone(d.ask(q.to_wire()))
        self.assertIn("[INFO] plugin/file: Dropping notify from 127.0.0.1 "
                      "for example.org.", cap.text())

    def test_out_of_zone_refused_when_last(self):
        d = util.Direct(self, "example.org:0 org:0 {\n    file %s/db."
                        "example.org example.org\n}\n" % ZONES)
        m = d.query("example.com.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        self.assertFalse(m.flags & 0x0400)


CONFORMANCE = os.path.join(ZONES, "conformance")


def conformance_cases():
    """[(zone file, origin, name, type, do, rcode, aa, [(section, text)])]
    from conformance/cases.golden (CoreDNS's plugin/file test tables)."""
    cases = []
    zone = None
    with open(os.path.join(CONFORMANCE, "cases.golden")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "ZONE":
                zone = (parts[1], parts[2])
            elif parts[0] == "CASE":
                do = parts[3] == "do"
                rest = parts[4:] if do else parts[3:]
                cases.append(zone + (parts[1], parts[2], do, rest[0],
                                     rest[1] == "AA", []))
            else:
                cases[-1][-1].append((parts[0], line.split(None, 1)[1]
                                      .strip()))
    return cases


def _cmp_rdata(rdtype, rdata):
    """The rdata fields CoreDNS's test.Section compares, as text."""
    t = dns.rdatatype.to_text(rdtype)
    if t == "RRSIG":
        f = rdata.split()
        return " ".join((f[0], f[2], f[7].lower()))
    if t == "NSEC":
        return rdata.split()[0].lower()
    if t == "TXT":
        rd = dns.rdata.from_text("IN", "TXT", rdata)
        return b"".join(rd.strings)
    return dns.rdata.from_text("IN", t, rdata).to_text()


def expected_rr(section, text):
    name, ttl, _cls, rtype, rdata = text.split(None, 4)
    rdtype = dns.rdatatype.from_text(rtype)
    return (section, dns.name.from_text(name).to_text(), int(ttl), rtype,
            _cmp_rdata(rdtype, rdata))


def got_rrs(m):
    out = []
    for sec, tag in (("answer", "an"), ("authority", "au"),
                     ("additional", "ad")):
        for rrset in getattr(m, sec):
            if rrset.rdtype == dns.rdatatype.OPT:
                continue
            for rd in rrset:
                out.append((tag, rrset.name.to_text(), rrset.ttl,
                            dns.rdatatype.to_text(rrset.rdtype),
                            _cmp_rdata(rrset.rdtype, rd.to_text())))
    return out


def _failing_upstream(name, qtype, req):
    # CoreDNS's unit tests run without a server: upstream lookups fail.
    return defer.fail(RuntimeError("no upstream"))


class Conformance(unittest.TestCase):
    """CoreDNS's plugin/file table tests, case for case: same zones, same
    queries, same sections (owner names compared case-sensitively), rcodes
    and AA bits, through the whole chain."""

    def direct(self, zonefile, origin):
        d = util.Direct(self, "%s:0 {\n    file %s %s\n}\n" % (
            origin, os.path.join(CONFORMANCE, zonefile), origin))
        d.app.config.blocks[0].plugin("file").upstream = _failing_upstream
        return d

    def ask(self, d, name, qtype, do=False):
        kw = {"want_dnssec": True} if do else {}
        got = []
        d.ask_async(util.make_query(name, qtype, **kw).to_wire()
                    ).addCallback(got.append)
        return dns.message.from_wire(got[0], one_rr_per_rrset=True)

    def test_tables(self):
        directs = {}
        cases = conformance_cases()
        self.assertGreater(len(cases), 90)
        failures = []
        for zonefile, origin, name, qtype, do, rcode, aa, want in cases:
            key = (zonefile, origin)
            if key not in directs:
                directs[key] = self.direct(zonefile, origin)
            m = self.ask(directs[key], name, qtype, do)
            label = "%s %s/%s%s" % (zonefile, name, qtype, " +do" if do else "")
            exp = sorted(expected_rr(s, t) for s, t in want)
            got = sorted(got_rrs(m))
            anyttl = [e[:2] + e[3:] for e in exp if e[2] == 303]
            got = sorted(g[:2] + (303,) + g[3:] if g[:2] + g[3:] in anyttl
                         else g for g in got)
            problems = []
            if dns.rcode.to_text(m.rcode()) != rcode:
                problems.append("rcode %s, want %s" % (
                    dns.rcode.to_text(m.rcode()), rcode))
            if bool(m.flags & 0x0400) != aa:
                problems.append("aa %s, want %s" % (not aa, aa))
            if got != exp:
                problems.append("records\n  got  %s\n  want %s" % (got, exp))
            if problems:
                failures.append("%s: %s" % (label, "; ".join(problems)))
        self.assertEqual(failures, [], "\n".join(failures))

    def test_fallthrough(self):
        """CoreDNS's TestLookupFallthrough: NXDOMAIN (and empty
        non-terminals) go to the next plugin for the fallthrough zones
        only; the next plugin here answers SERVFAIL as CoreDNS's
        ErrorHandler does."""
        tables = [
            ("", [("doesnotexist.miek.nl.", "SERVFAIL"),
                  ("x.miek.nl.", "SERVFAIL")]),
            ("a.miek.nl.", [("a.miek.nl.", "NOERROR"),
                            ("doesnotexist.miek.nl.", "NXDOMAIN"),
                            ("passthrough.a.miek.nl.", "SERVFAIL")]),
            ("x.miek.nl.", [("x.miek.nl.", "SERVFAIL"),
                            ("wildcard.x.miek.nl.", "NOERROR")]),
        ]
        from corednstw.core.request import Response
        for zones, cases in tables:
            d = util.Direct(self, "miek.nl:0 {\n    file %s miek.nl. {\n"
                            "        fallthrough %s\n    }\n}\n" % (
                                os.path.join(CONFORMANCE, "db.miek.nl"),
                                zones))
            p = d.app.config.blocks[0].plugin("file")
            p.upstream = _failing_upstream
            p.next = util.Stub(lambda req: Response(2))
            for name, rcode in cases:
                m = self.ask(d, name, "A")
                self.assertEqual(dns.rcode.to_text(m.rcode()), rcode,
                                 "%s fallthrough %r" % (name, zones))

    def test_closest_encloser(self):
        z = authority.parse_file(os.path.join(CONFORMANCE, "db.miek.nl"),
                               "miek.nl.")
        for name, want in [("miek.nl.", "miek.nl."),
                           ("www.miek.nl.", "www.miek.nl."),
                           ("blaat.miek.nl.", "miek.nl."),
                           ("blaat.www.miek.nl.", "www.miek.nl."),
                           ("www.blaat.miek.nl.", "miek.nl."),
                           ("blaat.a.miek.nl.", "a.miek.nl."),
                           ("blaat.z.a.miek.nl.", "a.miek.nl.")]:
            from corednstw.core import dnswire as w
            ce = z.closest_encloser(w.name_to_wire(name))
            self.assertEqual(ce.name if ce is not None else z.origin, want,
                             name)


class ZoneData(unittest.TestCase):

    def test_nsec3_rejected(self):
        with self.assertRaises(authority.ZoneError) as e:
            authority.parse_file(os.path.join(ZONES, "db.nsec3.test"),
                               "nsec3.test.")
        self.assertIn("NSEC3 zone is not supported", str(e.exception))

    def test_no_soa(self):
        d = util.write_files(self, {"db": "$ORIGIN x.\na 60 IN A 1.2.3.4\n"})
        with self.assertRaises(authority.ZoneError) as e:
            authority.parse_file(os.path.join(d, "db"), "x.")
        self.assertIn("has no SOA record for origin x.", str(e.exception))

    def test_canonical_order_and_transfer(self):
        z = authority.parse_file(os.path.join(ZONES, "db.secure.test"),
                               "secure.test.")
        names = [authority.wire_text(k) for k in z.wires]
        self.assertEqual(names, ["secure.test.", "a.secure.test.",
                                 "deleg.secure.test.", "ns.deleg.secure.test.",
                                 "*.w.secure.test.", "www.secure.test."])
        out = z.transfer(0)
        self.assertEqual(out[0][0].rtype, 6)
        self.assertEqual(out[-1], [z.soa])
        self.assertEqual(sum(len(b) for b in out), z.count() + 1)
        self.assertEqual(z.transfer(10), [[z.soa]])       # up to date
        self.assertEqual(len(z.transfer(11)), len(out))   # newer: full too
        self.assertEqual(len(z.transfer(9)), len(out))    # older: full

    def test_nested_includes_relative_to_including_file(self):
        d = util.write_files(self, {
            "db": "$ORIGIN example.org.\n@ 60 IN SOA ns a 1 2 3 4 5\n"
                  "$INCLUDE sub/one.inc\nafter 60 IN A 192.0.2.9\n",
            "sub/one.inc": "one 60 IN A 192.0.2.1\n"
                           "$INCLUDE deeper/two.inc two.example.org.\n",
            "sub/deeper/two.inc": "@ 60 IN A 192.0.2.2\n"
                                  "$INCLUDE \"../three.inc\"\n",
            "sub/three.inc": "three 60 IN A 192.0.2.3\n"})
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        os.chdir(ZONES)     # not the zone's directory
        z = authority.parse_file(os.path.join(d, "db"), "example.org.")
        names = sorted(authority.wire_text(k) for k in z.wires)
        self.assertEqual(names, ["after.example.org.", "one.example.org.",
                                 "three.two.example.org.",
                                 "two.example.org."])

    def test_include_missing(self):
        d = util.write_files(self, {
            "db": "$ORIGIN example.org.\n@ 60 IN SOA ns a 1 2 3 4 5\n"
                  "$INCLUDE nope.inc\n"})
        with self.assertRaises(authority.ZoneError) as e:
            authority.parse_file(os.path.join(d, "db"), "example.org.")
        self.assertIn("nope.inc", str(e.exception))

    def test_serial_arithmetic(self):
        self.assertTrue(authority.serial_less(1, 2))
        self.assertFalse(authority.serial_less(2, 1))
        self.assertTrue(authority.serial_less(0xFFFFFFFF, 1))
        self.assertFalse(authority.serial_less(5, 5))


class Setup(unittest.TestCase):

    def load(self, text, files=None):
        d = util.write_files(self, dict(files or {}, Corefile=text))
        from corednstw.service.app import App
        app = App(os.path.join(d, "Corefile"), dns_port=0)
        return app.load()

    def assertError(self, text, msg, files=None):
        with self.assertRaises(corefile.CorefileError) as e:
            self.load(text, files)
        self.assertIn(msg, str(e.exception))

    def test_errors(self):
        self.assertError("example.org {\n file\n}\n",
                         "Wrong argument count")
        self.assertError("example.org {\n file %s/db.example.org {\n"
                         "  bogus\n }\n}\n" % ZONES,
                         "unknown property 'bogus'")
        self.assertError("example.org {\n file %s/db.example.org {\n"
                         "  reload\n }\n}\n" % ZONES,
                         "reload duration value is expected")
        self.assertError("nsec3.test {\n file %s/db.nsec3.test\n}\n" % ZONES,
                         "NSEC3 zone is not supported")
        self.assertError("x.org {\n file db.x {\n  reload 0\n }\n}\n",
                         "no such file or directory")
        d = util.write_files(self, {"db.x": "@ IN SOA (\n"})
        self.assertError("x.org {\n file %s/db.x\n}\n" % d,
                         "failed to parse file")

    def test_relative_to_root(self):
        cfg = self.load("example.org {\n root %s\n file db.example.org\n}\n"
                        % ZONES)
        p = cfg.blocks[0].plugin("file")
        self.assertEqual(p.files[0].path,
                         os.path.join(ZONES, "db.example.org"))
        self.assertIsNotNone(p.zone_map["example.org."])

    def test_one_file_many_zones(self):
        d = util.write_files(self, {"db": "@ 60 IN SOA ns a 1 2 3 4 5\n"
                                          "www 60 IN A 192.0.2.1\n"})
        cfg = self.load(". {\n file %s/db example.org example.net\n}\n" % d)
        p = cfg.blocks[0].plugin("file")
        self.assertEqual(sorted(p.zone_map), ["example.net.", "example.org."])


SOA = ("$ORIGIN reload.test.\n@ 300 IN SOA ns admin %d 7200 3600 1209600 60\n"
       "@ 300 IN NS ns\nns 300 IN A 192.0.2.1\nwww 300 IN A %s\n")


class Reload(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    @defer.inlineCallbacks
    def start(self, files, extra=""):
        self.dir = util.write_files(self, files)
        app = yield util.start(self, "reload.test:0 {\n    file %s/db.reload "
                               "{\n        reload 50ms\n%s    }\n}\n" % (
                                   self.dir, extra))
        return app

    def write(self, text):
        tmp = os.path.join(self.dir, "db.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.dir, "db.reload"))

    @defer.inlineCallbacks
    def answer(self, port):
        m = yield util.query(port, "www.reload.test", "A")
        return (m.rcode(), util.rrs(m))

    @defer.inlineCallbacks
    def wait_answer(self, port, want):
        seen = []
        for _ in range(400):
            got = yield self.answer(port)
            seen.append(got)
            if got == want:
                return
            yield _tick()
        self.fail("never answered %r (last %r)" % (want, seen[-1]))

    @defer.inlineCallbacks
    def test_serial_change_and_broken_file(self):
        app = yield self.start({"db.reload": SOA % (1, "192.0.2.10")})
        port = app.port()
        self.assertEqual((yield self.answer(port)),
                         (0, ["www.reload.test. 300 IN A 192.0.2.10"]))
        # Same serial: the new data is not picked up.
        self.write(SOA % (1, "192.0.2.11"))
        self.write(SOA % (2, "192.0.2.12"))
        yield self.wait_answer(port, (0, [
            "www.reload.test. 300 IN A 192.0.2.12"]))
        yield util.wait_for(lambda: 'Successfully reloaded zone '
                            '"reload.test." in' in self.log.text())
        self.write("$ORIGIN reload.test.\n@ IN SOA ( broken\n")
        yield util.wait_for(lambda: '[ERROR] plugin/file: Parsing zone '
                            '"reload.test."' in self.log.text())
        self.assertEqual((yield self.answer(port)),
                         (0, ["www.reload.test. 300 IN A 192.0.2.12"]))

    @defer.inlineCallbacks
    def test_missing_then_present(self):
        app = yield self.start({})
        self.assertIn("[WARNING] plugin/file: Failed to open", self.log.text())
        port = app.port()
        self.assertEqual((yield self.answer(port)), (2, []))
        self.write(SOA % (5, "192.0.2.50"))
        yield self.wait_answer(port, (0, [
            "www.reload.test. 300 IN A 192.0.2.50"]))

    @defer.inlineCallbacks
    def test_reload_by_mtime(self):
        app = yield self.start({"db.reload": SOA % (1, "192.0.2.10")},
                               "        reload_by_mtime\n")
        port = app.port()
        path = os.path.join(self.dir, "db.reload")
        st = os.stat(path)
        self.write(SOA % (1, "192.0.2.13"))
        os.utime(path, (st.st_atime + 10, st.st_mtime + 10))
        yield self.wait_answer(port, (0, [
            "www.reload.test. 300 IN A 192.0.2.13"]))


def _tick():
    from twisted.internet import reactor, task
    return task.deferLater(reactor, 0.02, lambda: None)


class Wire(unittest.TestCase):

    @defer.inlineCallbacks
    def test_udp_tcp_and_fallthrough(self):
        app = yield util.start(self, "example.org:0 {\n    file %s/db.example."
                               "org {\n        fallthrough\n    }\n    "
                               "whoami\n}\n" % ZONES)
        port = app.port()
        for proto in ("udp", "tcp"):
            m = yield util.query(port, "srv.example.org", "SRV", proto=proto)
            self.assertEqual(util.rrs(m), [
                "srv.example.org. 3600 IN SRV 10 50 8080 a.example.org."])
            self.assertEqual(len(m.additional), 2)
        # NXDOMAIN falls through to whoami; NODATA does not.
        m = yield util.query(port, "nope.example.org", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertIn("nope.example.org. 0 IN A 127.0.0.1",
                      util.rrs(m, "additional"))
        m = yield util.query(port, "a.example.org", "MX")
        self.assertEqual(util.rrs(m, "authority")[0].split()[3], "SOA")

    @defer.inlineCallbacks
    def test_truncation_over_udp(self):
        names = "".join("big 60 IN TXT \"%s\"\n" % (str(i) * 200)
                        for i in range(10))
        d = util.write_files(self, {
            "db.big": "$ORIGIN big.test.\n@ 60 IN SOA ns a 1 2 3 4 5\n"
                      + names})
        app = yield util.start(self, "big.test:0 {\n    file %s/db.big\n}\n"
                               % d)
        data = yield util.send_udp(app.port(), make_query("big.big.test.", 16))
        m = dns.message.from_wire(data)
        self.assertTrue(m.flags & 0x0200)
        m = yield util.query(app.port(), "big.big.test", "TXT", proto="tcp")
        self.assertEqual(len(util.rrs(m)), 10)

