"""auto: zones picked up from a directory, added, reloaded and removed."""

import os
import re

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins import auto
from corednstw.service.app import App
from tests.support import cases, util
from tests.support.cases import Case

ZONE = ("$ORIGIN %s\n@ 300 IN SOA ns admin %d 7200 3600 1209600 60\n"
        "@ 300 IN NS ns\nns 300 IN A 192.0.2.1\nwww 300 IN A %s\n"
        "sub 300 IN NS ns.sub\nns.sub 300 IN A 192.0.2.2\n"
        "alias 300 IN CNAME www.sub\n")


def www(zone, addr):
    """The answer for www in a ZONE above: the address, AA, and the
    zone's NS in the authority section."""
    return Case("www." + zone, "A", aa=True,
                answer=["www.%s 300 IN A %s" % (zone, addr)],
                ns=["%s 300 IN NS ns.%s" % (zone, zone)])


class Directory(unittest.TestCase):

    @defer.inlineCallbacks
    def test_add_reload_remove(self):
        log = util.capture_log(self)
        d = util.write_files(self, {
            "db.example.org": ZONE % ("example.org.", 1, "192.0.2.10"),
            "sub/db.example.net": ZONE % ("example.net.", 1, "192.0.2.20"),
            "ignored.txt": "not a zone"})
        app = yield util.start(self, "org:0 net:0 {\n    auto {\n        "
                               "directory %s\n        reload 50ms\n    }\n"
                               "}\n" % d)
        port = app.port()
        yield cases.run(self, port, [www("example.org.", "192.0.2.10"),
                                     www("example.net.", "192.0.2.20")])
        self.assertIn("[INFO] plugin/auto: Inserting zone `example.org.' from:"
                      " %s" % os.path.join(os.path.realpath(d),
                                           "db.example.org"), log.text())
        yield cases.run(self, port, [
            # Not loaded: the next plugin (none here) answers.
            Case("www.other.org", "A", "REFUSED"),
            # auto clears AA on a CNAME into a delegation (file keeps it).
            Case("alias.example.org", "A", aa=False, answer=[
                "alias.example.org. 300 IN CNAME www.sub.example.org."],
                ns=["sub.example.org. 300 IN NS ns.sub.example.org."],
                extra=["ns.sub.example.org. 300 IN A 192.0.2.2"]),
        ])
        # A new zone, a new serial, a removed file.
        util.rewrite(os.path.join(d, "db.example.com.org"),
                     ZONE % ("example.com.org.", 1, "192.0.2.30"))
        util.rewrite(os.path.join(d, "db.example.org"),
                     ZONE % ("example.org.", 2, "192.0.2.11"))
        os.remove(os.path.join(d, "sub", "db.example.net"))
        yield cases.wait_for_answer(port, www("example.com.org.",
                                              "192.0.2.30"))
        yield cases.wait_for_answer(port, www("example.org.", "192.0.2.11"))
        yield cases.wait_for_answer(port, Case("www.example.net", "A",
                                               "REFUSED"))
        self.assertIn("[INFO] plugin/auto: Deleting zone `example.net.'",
                      log.text())

    @defer.inlineCallbacks
    def test_regex_template(self):
        d = util.write_files(self, {
            "zone-example.org-v1": ZONE % ("example.org.", 1, "192.0.2.10")})
        app = yield util.start(self, ".:0 {\n    auto example.org {\n        "
                               "directory %s zone-(.*)-v(\\d) {1}\n    }\n}\n"
                               % d)
        yield cases.run(self, app.port(), [www("example.org.",
                                               "192.0.2.10")])


class ServeTable(unittest.TestCase):
    """CoreDNS's auto ServeDNS tests, through the chain without sockets."""

    def direct(self, files, corefile):
        util.capture_log(self)
        d = util.write_files(self, files)
        dd = util.Direct(self, corefile % d)
        p = dd.app.config.blocks[0].plugin("auto")
        return dd, p, d, p.scan()      # the scan runs in a thread

    @defer.inlineCallbacks
    def test_table(self):
        dd, p, d, scanned = self.direct(
            {"db.example.org": ZONE % ("example.org.", 1, "192.0.2.10")},
            "org:0 {\n    auto {\n        directory %s\n    }\n}\n")
        yield scanned
        cases.run_direct(self, dd, [
            Case("test.example.org", "AXFR", "REFUSED"),
            Case("test.example.org", "IXFR", "REFUSED")], proto="tcp")
        cases.run_direct(self, dd, [
            # In the plugin's zones but no zone loaded, nothing after.
            Case("test.notfound.org", "A", "REFUSED"),
            Case("sub.test.example.org", "A", "NXDOMAIN", aa=True, ns=[
                "example.org. 300 IN SOA ns.example.org. admin.example.org. "
                "1 7200 3600 1209600 60"]),
        ])

    @defer.inlineCallbacks
    def test_outside_origins_go_on(self):
        dd, p, d, scanned = self.direct(
            {"db.example.org": ZONE % ("example.org.", 1, "192.0.2.10")},
            ".:0 {\n    auto other.org {\n        directory %s\n    }\n"
            "    whoami\n}\n")
        yield scanned
        # example.org. is loaded but not in the plugin's zones: whoami.
        cases.run_direct(self, dd, [Case(
            "www.example.org", "A", aa=True, extra=cases.whoami(
                "www.example.org", port=40000))])

    @defer.inlineCallbacks
    def test_notify_answered_as_query(self):
        import dns.message
        import dns.opcode
        dd, p, d, scanned = self.direct(
            {"db.example.org": ZONE % ("example.org.", 7, "192.0.2.10")},
            "org:0 {\n    auto {\n        directory %s\n    }\n}\n")
        yield scanned
        q = util.make_query("example.org", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        m = dns.message.from_wire(dd.ask(q.to_wire()))
        self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
        self.assertTrue(m.flags & 0x0400)
        self.assertEqual(m.answer[0][0].serial, 7)

    @defer.inlineCallbacks
    def test_symlinked_directory_and_duplicate_origin(self):
        log = util.capture_log(self)
        real = util.write_files(self, {
            "example.org.zone": ZONE % ("example.org.", 1, "192.0.2.10"),
            "example.org.zone.bak": ZONE % ("example.org.", 1, "192.0.2.99"),
            "db.example.com": ZONE % ("example.com.", 1, "192.0.2.20")})
        link = os.path.join(util.write_files(self, {}), "zones")
        os.symlink(real, link)
        dd = util.Direct(self, ".:0 {\n    auto {\n        directory %s "
                         "(.*)\\.zone {1}\n    }\n}\n" % link)
        yield dd.app.config.blocks[0].plugin("auto").scan()
        cases.run_direct(self, dd, [www("example.org.", "192.0.2.10")])
        self.assertIn("Multiple zone files match origin", log.text())


class Units(unittest.TestCase):

    def test_origin_of(self):
        re1 = re.compile(auto.DEFAULT_REGEX)
        self.assertEqual(auto.origin_of(re1, "{1}", "db.example.org"),
                         "example.org.")
        self.assertIsNone(auto.origin_of(re1, "{1}", "example.org"))
        re2 = re.compile(r"www\.db\.(.*)")
        self.assertEqual(auto.origin_of(re2, "{1}", "www.db.Example.ORG"),
                         "example.org.")
        re3 = re.compile(r"(.*)\.(.*)\.zone$")
        self.assertEqual(auto.origin_of(re3, "{2}.{1}", "a.b.zone"), "b.a.")

    def test_errors(self):
        util.capture_log(self)
        for body, msg in [
                ("auto {\n directory /x (.*\n}\n", "Wrong argument count"),
                ("auto {\n directory /x [ {1}\n}\n", "error parsing regexp"),
                ("auto {\n directory /x abc {1}\n}\n",
                 "Need at least one sub expression"),
                ("auto {\n directory /x\n reload\n}\n",
                 "reload duration value is expected"),
                ("auto {\n directory /x\n reload -1s\n}\n",
                 "invalid duration"),
                ("auto {\n bogus\n}\n", "unknown property 'bogus'"),
                ("auto\n", "directory is required"),
        ]:
            d = util.write_files(self, {"Corefile": "org {\n" + body + "}\n"})
            with self.assertRaises(CorefileError) as e:
                App(os.path.join(d, "Corefile"), dns_port=0).load()
            self.assertIn(msg, str(e.exception))


class Metrics(unittest.TestCase):

    @defer.inlineCallbacks
    def test_loaded_zone_labels_requests(self):
        """As CoreDNS's AddZone: prometheus counts under the zone auto
        loaded, not the block's key."""
        from corednstw.core import metrics
        d = util.write_files(self, {
            "db.example.org": ZONE % ("example.org.", 1, "192.0.2.10")})
        app = yield util.start(self, "org:0 {\n    bind 127.0.0.78\n"
                               "    prometheus 127.0.0.1:0\n    auto {\n"
                               "        directory %s\n    }\n}\n" % d)
        yield util.query(app.port(), "www.example.org", "A",
                         host="127.0.0.78")
        yield util.query(app.port(), "www.other.org", "A",
                         host="127.0.0.78")
        server = "dns://127.0.0.78:0"
        self.assertEqual(metrics.REQUESTS.get(
            (server, "example.org.", "", "udp", "1", "A")), 1)
        self.assertEqual(metrics.REQUESTS.get(
            (server, "org.", "", "udp", "1", "A")), 1)
