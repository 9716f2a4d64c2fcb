"""file: the lookup rules (a golden table derived from CoreDNS's
plugin/file tests), setup errors, reloads, fallthrough and the wire."""

import os
import struct

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdatatype
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import Response, make_query
from corednstw.engines import authority
from corednstw.plugins import file as filemod
from tests.support import cases, util
from tests.support.cases import Case
from tests.support.upstream import Upstream

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


_SECTIONS = {"an": "answer", "au": "ns", "ad": "extra"}


def read_cases(path, on_zone=None):
    """Cases from a golden table: ``CASE name type [do] rcode AA|noAA``
    lines, each followed by its records (``an``/``au``/``ad`` and a
    zone-file line; a TTL of 303 means any TTL, as in CoreDNS's tests).
    ``ZONE`` lines call ``on_zone(fields)``; the zone in force is kept in
    each case's ``zone`` attribute."""
    table = []
    zone = None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "ZONE":
                zone = tuple(parts[1:3])
            elif parts[0] == "CASE":
                do = parts[3] == "do"
                rcode, aa = parts[4:6] if do else parts[3:5]
                case = Case(parts[1], parts[2], rcode, do=do,
                            aa=aa == "AA")
                case.zone = zone
                table.append(case)
            else:
                record = line.split(None, 1)[1].strip()
                name, ttl, rest = record.split(None, 2)
                if ttl == "303":
                    record = "%s * %s" % (name, rest)
                getattr(table[-1], _SECTIONS[parts[0]]).append(record)
    return table


def golden():
    """The file plugin's own table (lookup.golden)."""
    return read_cases(os.path.join(ZONES, "lookup.golden"))


class LookupTable(unittest.TestCase):
    """Every golden case through the whole chain (sans sockets)."""

    def test_golden(self):
        d = util.Direct(self, COREFILE)
        table = golden()
        self.assertGreater(len(table), 50)
        cases.run_direct(self, d, table)

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
        cases.run_direct(self, d, [Case("example.org", "AXFR",
                                        rcode="REFUSED")], proto="tcp")

    def test_notify_for_primary_zone_dropped(self):
        d = util.Direct(self, COREFILE)
        cap = util.capture_log(self)
        q = util.make_query("example.org", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        self.assertIsNone(d.ask(q.to_wire()))
        self.assertIn("[INFO] plugin/file: Dropping notify from 127.0.0.1 "
                      "for example.org.", cap.text())

    def test_notify_dropped_behind_middleware(self):
        # The plugins that change answers on their way out leave a NOTIFY
        # that file drops unanswered (CoreDNS writes nothing at all).
        for middleware in ("loadbalance", "header {\n response set ra\n}",
                           "nsid", "bufsize 1232", "cache"):
            d = util.Direct(self, "example.org:0 {\n %s\n file %s/db."
                            "example.org example.org\n}\n"
                            % (middleware, ZONES))
            q = util.make_query("example.org", "SOA", use_edns=0)
            q.set_opcode(dns.opcode.NOTIFY)
            self.assertIsNone(d.ask(q.to_wire()), middleware)

    def test_server_written_errors_skip_header_and_nsid(self):
        # REFUSED for AXFR without transfer and SERVFAIL for a name
        # outside the zones (file last) are returned unwritten: CoreDNS's
        # server writes them, so header's rules and NSID never apply (the
        # query's empty NSID option is only echoed, as SizeAndDo does).
        d = util.Direct(self, "example.org:0 org:0 {\n nsid test\n header"
                        " {\n response set aa ra\n }\n file %s/db."
                        "example.org example.org\n}\n" % ZONES)

        def ask(name, qtype, proto="udp"):
            q = util.make_query(name, qtype, use_edns=0, options=[
                dns.edns.GenericOption(3, b"")])
            return cases.parse_reply(d.ask(q.to_wire(), proto))
        for name, qtype, proto, rcode in (
                ("example.org", "AXFR", "tcp", "REFUSED"),
                ("example.com.org", "A", "udp", "SERVFAIL")):
            m = ask(name, qtype, proto)
            cases.check_response(self, Case(name, qtype, rcode=rcode,
                                            flags="QR RD"), m)
            self.assertEqual([o.to_wire() for o in m.options], [b""])
        # An answer file writes gets both.
        m = ask("example.org", "SOA")
        self.assertTrue(m.flags & dns.flags.RA)
        self.assertEqual([o.to_wire() for o in m.options], [b"test"])

    @defer.inlineCallbacks
    def test_cname_loop_with_qtype_ns(self):
        # CoreDNS 1.14.2 (#7808) looks an in-zone CNAME target up again
        # through the server for qtype NS; a loop then ends at the loop
        # guard (nine lookups deep): SERVFAIL with one CNAME per level.
        # (1.12 chased it in the zone: NOERROR, the chain cut at nine.)
        zone = ("$ORIGIN loop.test.\n@ 3600 IN SOA ns hm 1 2 3 4 5\n"
                "@ 3600 IN NS ns\nns 3600 IN A 192.0.2.53\n"
                "a 3600 IN CNAME b\nb 3600 IN CNAME a\n")
        d = util.write_files(self, {"db": zone})
        app = yield util.start(self, "loop.test:0 {\n file %s\n}\n"
                               % os.path.join(d, "db"))
        q = util.make_query("a.loop.test.", "NS")
        m = cases.parse_reply((yield util.send_tcp(
            app.port(), [q.to_wire()], count=1))[0])
        chain = (["a.loop.test. 3600 IN CNAME b.loop.test.",
                  "b.loop.test. 3600 IN CNAME a.loop.test."] * 5)[:9]
        cases.check_response(self, Case(
            "a.loop.test.", "NS", rcode="SERVFAIL", answer=chain,
            ns=["loop.test. 3600 IN NS ns.loop.test."], flags="QR AA RD"),
            m)

    def test_out_of_zone_servfail_when_last(self):
        # The block takes the name, file does not, and nothing follows:
        # CoreDNS's plugin.NextOrFailure, SERVFAIL ("no next plugin
        # found"), checked over the wire against CoreDNS.  REFUSED is
        # only for a name no block takes.
        d = util.Direct(self, "example.org:0 org:0 {\n    file %s/db."
                        "example.org example.org\n}\n" % ZONES)
        cases.run_direct(self, d, [Case("example.com.org", "A",
                                        rcode="SERVFAIL", aa=False),
                                   Case("example.net", "A",
                                        rcode="REFUSED", aa=False)])


CONFORMANCE = os.path.join(ZONES, "conformance")


def conformance_cases():
    """Cases from conformance/cases.golden (CoreDNS's plugin/file test
    tables), each with its ``zone`` (file, origin)."""
    return read_cases(os.path.join(CONFORMANCE, "cases.golden"))


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
        got = []
        cases.ask(d, Case(name, qtype, do=do)).addCallback(got.append)
        return got[0]

    def test_tables(self):
        directs = {}
        table = conformance_cases()
        self.assertGreater(len(table), 90)
        failures = []
        for case in table:
            if case.zone not in directs:
                directs[case.zone] = self.direct(*case.zone)
            got = []
            cases.ask(directs[case.zone], case).addCallback(got.append)
            found = cases.problems(case, got[0], fields=_cmp_rdata)
            if found:
                failures.append("%s %s:\n  %s" % (
                    case.zone[0], case, "\n  ".join(found)))
        if failures:
            self.fail("\n".join(failures))

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
        for zones, rows in tables:
            d = util.Direct(self, "miek.nl:0 {\n    file %s miek.nl. {\n"
                            "        fallthrough %s\n    }\n}\n" % (
                                os.path.join(CONFORMANCE, "db.miek.nl"),
                                zones))
            p = d.app.config.blocks[0].plugin("file")
            p.upstream = _failing_upstream
            p.next = util.Stub(lambda req: Response(2))
            for name, rcode in rows:
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
        with self.assertRaises(CorefileError) as e:
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
        util.rewrite(os.path.join(self.dir, "db.reload"), text)

    @defer.inlineCallbacks
    def test_serial_change_and_broken_file(self):
        app = yield self.start({"db.reload": SOA % (1, "192.0.2.10")})
        port = app.port()
        yield cases.run(self, port, [www("192.0.2.10")])
        # Same serial: the new data is not picked up.
        self.write(SOA % (1, "192.0.2.11"))
        self.write(SOA % (2, "192.0.2.12"))
        yield cases.wait_for_answer(port, www("192.0.2.12"))
        yield util.wait_for(lambda: 'Successfully reloaded zone '
                            '"reload.test." in' in self.log.text())
        self.write("$ORIGIN reload.test.\n@ IN SOA ( broken\n")
        yield util.wait_for(lambda: '[ERROR] plugin/file: Parsing zone '
                            '"reload.test."' in self.log.text())
        yield cases.run(self, port, [www("192.0.2.12")])

    @defer.inlineCallbacks
    def test_missing_then_present(self):
        app = yield self.start({})
        self.assertIn("[WARNING] plugin/file: Failed to open", self.log.text())
        port = app.port()
        yield cases.run(self, port, [Case("www.reload.test", "A",
                                          rcode="SERVFAIL")])
        self.write(SOA % (5, "192.0.2.50"))
        yield cases.wait_for_answer(port, www("192.0.2.50"))

    @defer.inlineCallbacks
    def test_reload_by_mtime(self):
        app = yield self.start({"db.reload": SOA % (1, "192.0.2.10")},
                               "        reload_by_mtime\n")
        port = app.port()
        path = os.path.join(self.dir, "db.reload")
        st = os.stat(path)
        self.write(SOA % (1, "192.0.2.13"))
        os.utime(path, (st.st_atime + 10, st.st_mtime + 10))
        yield cases.wait_for_answer(port, www("192.0.2.13"))

    @defer.inlineCallbacks
    def test_reload_by_mtime_file_gone(self):
        """The by-mtime check's failure is reported as one to stat the
        file (not to open it); the zone loaded before keeps answering."""
        app = yield self.start({"db.reload": SOA % (1, "192.0.2.10")},
                               "        reload_by_mtime\n")
        os.remove(os.path.join(self.dir, "db.reload"))
        yield util.wait_for(lambda: '[ERROR] plugin/file: Failed to stat '
                            'zone "reload.test." in' in self.log.text())
        self.assertNotIn("Failed to open", self.log.text())
        yield cases.run(self, app.port(), [www("192.0.2.10")])


def www(addr):
    """www.reload.test's answer from the SOA zone above."""
    return Case("www.reload.test", "A", aa=True,
                answer=["www.reload.test. 300 IN A " + addr],
                ns=["reload.test. 300 IN NS ns.reload.test."])


class Wire(unittest.TestCase):

    @defer.inlineCallbacks
    def test_udp_tcp_and_fallthrough(self):
        app = yield util.start(self, "example.org:0 {\n    file %s/db.example."
                               "org {\n        fallthrough\n    }\n    "
                               "whoami\n}\n" % ZONES)
        port = app.port()
        table = {(c.qname, c.qtype): c for c in golden()}
        srv = table["srv.example.org", "SRV"]
        for proto in ("udp", "tcp"):
            yield cases.run(self, port, [srv], proto=proto)
        # NXDOMAIN falls through to whoami; NODATA does not.
        yield cases.run(self, port, [
            Case("nope.example.org", "A", aa=True,
                 extra=cases.whoami("nope.example.org")),
            table["a.example.org", "MX"],
        ])

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



class KeptAnswers(unittest.TestCase):
    """An answer given is kept made for the same query bytes (only the
    ID differs): the same bytes again, the ID the query's, and only where
    nothing in front of file edits answers."""

    def corefile(self, front):
        return COREFILE.replace("secure.test:0 {\n",
                                "secure.test:0 {\n" + front, 1)

    def direct(self, front="    prometheus localhost:0\n"):
        d = util.Direct(self, self.corefile(front))
        plugin = d.app.config.blocks[0].plugin("file")
        made = []
        serve_zone = plugin.serve_zone

        def counted(req, *a):
            out = serve_zone(req, *a)
            made.append((req.qname, isinstance(out, Response)
                         and out.plugin == "file"))
            return out
        plugin.serve_zone = counted
        return d, plugin, made

    def test_golden_again_from_kept_answers(self):
        d, plugin, made = self.direct()
        table = golden()
        for proto in ("udp", "tcp"):
            cases.run_direct(self, d, table, proto=proto)
            first = len(made)
            cases.run_direct(self, d, table, proto=proto)
            # The second pass made no answer but those that waited for
            # a lookup elsewhere (a CNAME or DNAME target outside the
            # zone) and the errors the server writes: never kept.
            self.assertEqual({q for q, _ in made[first:]},
                             {q for q, ready in made[:first] if not ready})
            self.assertNotIn(True, [ready for _, ready in made[first:]])
            del made[:]
        self.assertTrue(plugin._made)

    def test_same_bytes_but_the_id(self):
        d, plugin, made = self.direct()
        qs = [make_query("www.example.org.", w.A),
              make_query("WwW.eXample.org.", w.A),
              make_query("a.example.org.", w.MX, edns=1232, do=True),
              make_query("nothere.example.org.", w.A, edns=512),
              make_query("secure.test.", w.DNSKEY, edns=4096, do=True)]
        for proto in ("udp", "tcp"):
            for q in qs:
                first = d.ask(q, proto)
                for msgid in (1, 0xBEEF, 0xFFFF):
                    q2 = struct.pack("!H", msgid) + q[2:]
                    out = d.ask(q2, proto)
                    self.assertEqual(out[:2], q2[:2])
                    self.assertEqual(out[2:], first[2:])
        self.assertEqual(len(made), 2 * len(qs))
        m = dns.message.from_wire(d.ask(qs[1], "udp"))
        self.assertEqual(str(m.question[0].name), "WwW.eXample.org.")

    def test_transport_and_family_apart(self):
        """The same bytes over UDP (truncated at 512) and TCP (whole),
        and from an IPv6 client, are made each for their own."""
        names = "".join("big 60 IN TXT \"%s\"\n" % (str(i) * 200)
                        for i in range(10))
        z = util.write_files(self, {
            "db.big": "$ORIGIN big.test.\n@ 60 IN SOA ns a 1 2 3 4 5\n"
                      + names})
        d = util.Direct(self, "big.test:0 {\n    file %s/db.big\n}\n" % z)
        q = make_query("big.big.test.", w.TXT, edns=1400)
        for _ in range(2):
            for proto in ("udp", "tcp", "udp"):
                m = dns.message.from_wire(d.ask(q, proto))
                self.assertEqual(bool(m.flags & dns.flags.TC),
                                 proto == "udp")
                if proto == "tcp":
                    self.assertEqual(len(m.answer[0]), 10)
            v4 = d.ask(q, "udp")
            v6 = d.ask(q, "udp", client="::1")
            self.assertEqual(v4, d.ask(q, "udp"))
            self.assertEqual(v6, d.ask(q, "udp", client="::1"))
        # The whole answer over TCP is too long to keep; the truncated
        # ones are kept.
        kept = d.app.config.blocks[0].plugin("file")._made
        self.assertEqual({m.proto for m in kept.values()}, {"udp"})
        self.assertTrue(all(len(m.tail) + 2 <= filemod.LONGEST_KEPT
                            for m in kept.values()))

    def test_behind_a_plugin_that_edits_answers(self):
        """loadbalance (in front of file) shuffles each answer: no answer
        is kept made there, and every shuffle is sent."""
        d, plugin, made = self.direct("    loadbalance\n")
        q = make_query("www.example.org.", w.A)
        for _ in range(8):
            self.assertEqual(dns.message.from_wire(d.ask(q)).rcode(), 0)
        self.assertEqual(plugin._made, {})
        self.assertEqual(len(made), 8)

    def test_behind_plugins_that_pass_answers(self):
        util.capture_log(self)
        d, plugin, made = self.direct(
            "    metadata\n    cancel\n    prometheus localhost:0\n"
            "    errors\n    log\n    any\n    transfer {\n        to *\n"
            "    }\n")
        front, p = [], plugin.block.chain
        while p is not plugin:
            front.append(p.name)
            p = p.next
        self.assertEqual(sorted(front), ["any", "cancel", "errors", "log",
                                         "metadata", "prometheus",
                                         "transfer"])
        q = make_query("www.example.org.", w.A)
        self.assertEqual(d.ask(q)[2:], d.ask(q)[2:])
        self.assertEqual(len(made), 1)
        self.assertEqual(len(plugin._made), 1)

    def test_edns_options_not_kept(self):
        d, plugin, made = self.direct()
        q = util.make_query("a.example.org", "A", use_edns=0, options=[
            dns.edns.GenericOption(10, b"\x01" * 8)])
        for _ in range(2):
            m = dns.message.from_wire(d.ask(q.to_wire()))
            self.assertEqual(m.rcode(), 0)
        self.assertEqual(plugin._made, {})
        self.assertEqual(len(made), 2)

    def test_new_zone_data_made_afresh(self):
        d, plugin, made = self.direct()
        q = make_query("a.example.org.", w.A)
        before = dns.message.from_wire(d.ask(q))
        plugin.zone_map["example.org."] = authority.parse_file(
            os.path.join(ZONES, "db.elsewhere.net"), "example.org.")
        after = dns.message.from_wire(d.ask(q))
        self.assertEqual(len(made), 2)
        self.assertNotEqual(before.to_text(), after.to_text())
        self.assertEqual(d.ask(q), d.ask(q))
        self.assertEqual(len(made), 2)

    @defer.inlineCallbacks
    def test_repeated_over_tcp(self):
        """Over a real connection: pipelined repeats answered in order,
        each with its own ID (DoT's are in test_tlsstream)."""
        app = yield util.start(self, self.corefile(
            "    prometheus localhost:0\n"))
        qs = [struct.pack("!H", i) + make_query("www.example.org.", w.A)[2:]
              for i in range(1, 40)]
        got = yield util.send_tcp(app.port(), qs)
        self.assertEqual([g[:2] for g in got], [q[:2] for q in qs])
        self.assertEqual(len({g[2:] for g in got}), 1)
        self.assertEqual(len(dns.message.from_wire(got[0]).answer), 2)


# -- a file whose SOA lies below the block's zone -----------------------------

ORG = """\
$ORIGIN example.org.
@	3600 IN	SOA sns.dns.icann.org. noc.dns.icann.org. (
				2017042745 7200 3600 1209600 3600 )
	3600 IN NS a.iana-servers.net.
	3600 IN NS b.iana-servers.net.
www     IN A     127.0.0.1
        IN AAAA  ::1
"""
ORG_SOA = ("example.org. 3600 IN SOA sns.dns.icann.org. noc.dns.icann.org. "
           "2017042745 7200 3600 1209600 3600")
ORG_NS = ["example.org. 3600 IN NS a.iana-servers.net.",
          "example.org. 3600 IN NS b.iana-servers.net."]


class BelowTheZone(unittest.TestCase):
    """``. { file db.example.org }``: the file takes the block's zone
    ``.``, as CoreDNS loads it.  The example.org SOA is the zone's SOA
    all the same (CoreDNS keeps the last SOA whatever its owner), and the
    example.org NS records, not at the apex, are a delegation."""

    def test_parsed_with_origin_root(self):
        d = util.write_files(self, {"db": ORG})
        z = authority.parse_file(os.path.join(d, "db"), ".")
        self.assertEqual(z.soa.name, "example.org.")
        self.assertEqual(z.ns, [])
        self.assertEqual(sorted(authority.wire_text(k) for k in z.wires),
                         ["example.org.", "www.example.org."])

    def test_last_soa_wins(self):
        d = util.write_files(self, {
            "db": ORG + "sub 60 IN SOA ns a 9 2 3 4 5\n"})
        z = authority.parse_file(os.path.join(d, "db"), ".")
        self.assertEqual((z.soa.name, z.serial), ("sub.example.org.", 9))

    def test_names_outside_the_origin_kept(self):
        # A file for example.org loaded as example.net: CoreDNS keeps
        # every record; the example.org SOA is example.net's SOA.
        d = util.write_files(self, {"db": ORG})
        z = authority.parse_file(os.path.join(d, "db"), "example.net.")
        self.assertEqual(z.soa.name, "example.org.")
        self.assertEqual(len(z.wires), 2)
        direct = util.Direct(self, "example.net:0 {\n    file %s/db\n}\n"
                             % d)
        cases.run_direct(self, direct, [
            Case("www.example.net.", "A", "NXDOMAIN", aa=True,
                 ns=[ORG_SOA]),
            Case("example.net.", "SOA", aa=True, answer=[ORG_SOA])])

    def test_in_zone_cname_to_a_name_outside(self):
        # The target's records are in the file: answered from there, as
        # CoreDNS's tree holds them, without asking the server.
        d = util.write_files(self, {
            "db": "$ORIGIN example.org.\n@ 60 IN SOA ns a 1 2 3 4 5\n"
                  "ext 60 IN CNAME www.example.net.\n"
                  "www.example.net. 60 IN A 192.0.2.7\n"})
        direct = util.Direct(self, "example.org:0 {\n    file %s/db\n}\n"
                             % d)
        cases.run_direct(self, direct, [
            Case("ext.example.org.", "A", aa=True, answer=[
                "ext.example.org. 60 IN CNAME www.example.net.",
                "www.example.net. 60 IN A 192.0.2.7"])])

    def test_lookups(self):
        d = util.write_files(self, {"db": ORG})
        direct = util.Direct(self, ".:0 {\n    file %s/db\n}\n" % d)
        referral = {"rcode": "NOERROR", "aa": False, "ns": ORG_NS}
        nxdomain = {"rcode": "NXDOMAIN", "aa": True, "ns": [ORG_SOA]}
        cases.run_direct(self, direct, [
            Case("www.example.org.", "A", **referral),
            Case("www.example.org.", "AAAA", **referral),
            Case("nope.example.org.", "A", **referral),
            Case("example.org.", "SOA", **referral),
            Case("www.baidu.com.", "A", **nxdomain),
            Case("example.com.", "A", **nxdomain),
            # An empty non-terminal on the way to example.org: NODATA.
            Case("org.", "A", aa=True, ns=[ORG_SOA]),
            # The apex: the zone's SOA, and no NS records of its own.
            Case(".", "SOA", aa=True, answer=[ORG_SOA]),
            Case(".", "NS", aa=True),
        ])


# -- CNAME targets outside the zone -------------------------------------------

EXT = """\
$ORIGIN example.org.
@	3600 IN	SOA sns.dns.icann.org. noc.dns.icann.org. (
				2017042745 7200 3600 1209600 3600 )
	3600 IN NS a.iana-servers.net.
www      3600 IN CNAME www.example.net.
chain1   3600 IN CNAME nxdomain
nxdomain 3600 IN CNAME nxdomain.example.net.
chain2   3600 IN CNAME srvfail
srvfail  3600 IN CNAME srvfail.example.net.
chain3   3600 IN CNAME nodata
nodata   3600 IN CNAME nodata.example.net.
"""
EXT_NS = ["example.org. 3600 IN NS a.iana-servers.net."]


def cname(owner, target):
    return "%s.example.org. 3600 IN CNAME %s" % (owner, target)


class ExternalCname(unittest.TestCase):
    """A CNAME whose target is outside the zone: the target is asked of
    the server itself (CoreDNS's upstream), the answer carries the CNAME
    chain, the target's records and that lookup's rcode; the authority
    section follows the rcode (SOA for NXDOMAIN and NODATA, else NS)."""

    def setUp(self):
        self.dir = util.write_files(self, {"db": EXT})

    @defer.inlineCallbacks
    def serve(self, corefile):
        app = yield util.start(self, corefile % {"db": self.dir + "/db"})
        return app.port()

    def upstream(self):
        up = Upstream().start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def test_forward_answers_the_target(self):
        up = self.upstream()
        port = yield self.serve(".:0 {\n    file %%(db)s example.org\n"
                                "    forward . %s\n}\n" % up.addr())
        yield cases.run(self, port, [
            Case("www.example.org.", "A", aa=True, ns=EXT_NS, answer=[
                cname("www", "www.example.net."),
                "www.example.net. 300 IN A 192.0.2.1"]),
            # The upstream's NXDOMAIN ("nx..." names): NXDOMAIN, the SOA.
            Case("chain1.example.org.", "A", "NXDOMAIN", aa=True,
                 ns=[ORG_SOA], answer=[
                     cname("chain1", "nxdomain.example.org."),
                     cname("nxdomain", "nxdomain.example.net.")]),
        ])
        self.assertEqual(up.count("www.example.net.", "A"), 1)

    @defer.inlineCallbacks
    def test_upstream_servfail(self):
        up = self.upstream()
        up.rcode = dns.rcode.SERVFAIL
        port = yield self.serve(".:0 {\n    file %%(db)s example.org\n"
                                "    forward . %s\n}\n" % up.addr())
        yield cases.run(self, port, [
            Case("www.example.org.", "A", "SERVFAIL", aa=True, ns=EXT_NS,
                 answer=[cname("www", "www.example.net.")])])

    @defer.inlineCallbacks
    def test_nothing_can_answer(self):
        # forward's only upstream is down: the target's lookup fails.
        port = yield self.serve(".:0 {\n    file %%(db)s example.org\n"
                                "    forward . 127.0.0.1:%d\n}\n"
                                % util.free_port())
        yield cases.run(self, port, [
            Case("www.example.org.", "A", "SERVFAIL", aa=True, ns=EXT_NS,
                 answer=[cname("www", "www.example.net.")])])

    @defer.inlineCallbacks
    def test_no_block_for_the_target(self):
        # The server refuses the target (no block serves it), which is
        # not an error for CoreDNS's upstream lookup: NOERROR, the CNAME
        # alone (its TestZoneExternalCNAMELookupWithoutProxy).
        port = yield self.serve("example.org:0 {\n    file %(db)s\n}\n")
        yield cases.run(self, port, [
            Case("www.example.org.", "A", aa=True, ns=EXT_NS,
                 answer=[cname("www", "www.example.net.")])])

    def test_rcode_of_the_target_lookup(self):
        """CoreDNS's TestFileUpstreamError: templates answer the targets
        with NXDOMAIN, SERVFAIL and NODATA."""
        direct = util.Direct(self, """\
.:0 {
    template ANY A nxdomain.example.net. {
        rcode NXDOMAIN
    }
    template ANY A srvfail.example.net. {
        rcode SERVFAIL
    }
    template ANY A nodata.example.net. {
    }
    file %s/db example.org
}
""" % self.dir)
        chains = {"1": "nxdomain", "2": "srvfail", "3": "nodata"}
        rcodes = {"nxdomain": "NXDOMAIN", "srvfail": "SERVFAIL",
                  "nodata": "NOERROR"}
        table = []
        for n, owner in sorted(chains.items()):
            last = cname(owner, owner + ".example.net.")
            ns = EXT_NS if owner == "srvfail" else [ORG_SOA]
            table.append(Case(owner + ".example.org.", "A", rcodes[owner],
                              aa=True, ns=ns, answer=[last]))
            table.append(Case("chain%s.example.org." % n, "A", rcodes[owner],
                              aa=True, ns=ns, answer=[
                                  cname("chain" + n, owner + ".example.org."),
                                  last]))
        cases.run_direct(self, direct, table)

