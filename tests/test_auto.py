"""auto: zones picked up from a directory, added, reloaded and removed."""

import os
import re

import dns.rcode
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from corednstw import corefile
from corednstw.app import App
from corednstw.plugins import auto
from tests import util

ZONE = ("$ORIGIN %s\n@ 300 IN SOA ns admin %d 7200 3600 1209600 60\n"
        "@ 300 IN NS ns\nns 300 IN A 192.0.2.1\nwww 300 IN A %s\n"
        "sub 300 IN NS ns.sub\nns.sub 300 IN A 192.0.2.2\n"
        "alias 300 IN CNAME www.sub\n")


@defer.inlineCallbacks
def wait_rcode(port, name, want, tries=300):
    got = None
    for _ in range(tries):
        m = yield util.query(port, name, "A")
        got = (m.rcode(), util.rrs(m))
        if got == want:
            return
        yield task.deferLater(reactor, 0.03, lambda: None)
    raise AssertionError("never got %r, last %r" % (want, got))


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
        m = yield util.query(port, "www.example.org", "A")
        self.assertEqual(util.rrs(m), ["www.example.org. 300 IN A 192.0.2.10"])
        self.assertTrue(m.flags & 0x0400)
        m = yield util.query(port, "www.example.net", "A")
        self.assertEqual(util.rrs(m), ["www.example.net. 300 IN A 192.0.2.20"])
        self.assertIn("[INFO] plugin/auto: Inserting zone `example.org.' from:"
                      " %s" % os.path.join(os.path.realpath(d),
                                           "db.example.org"), log.text())
        # Not loaded: the next plugin (none here) answers.
        m = yield util.query(port, "www.other.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
        # auto clears AA on a CNAME into a delegation (file keeps it).
        m = yield util.query(port, "alias.example.org", "A")
        self.assertFalse(m.flags & 0x0400)
        self.assertEqual(len(m.answer), 1)
        # A new zone, a new serial, a removed file.
        with open(os.path.join(d, "db.example.com.org"), "w") as f:
            f.write(ZONE % ("example.com.org.", 1, "192.0.2.30"))
        with open(os.path.join(d, "db.example.org"), "w") as f:
            f.write(ZONE % ("example.org.", 2, "192.0.2.11"))
        os.remove(os.path.join(d, "sub", "db.example.net"))
        yield wait_rcode(port, "www.example.com.org",
                         (0, ["www.example.com.org. 300 IN A 192.0.2.30"]))
        yield wait_rcode(port, "www.example.org",
                         (0, ["www.example.org. 300 IN A 192.0.2.11"]))
        yield wait_rcode(port, "www.example.net", (dns.rcode.REFUSED, []))
        self.assertIn("[INFO] plugin/auto: Deleting zone `example.net.'",
                      log.text())

    @defer.inlineCallbacks
    def test_regex_template(self):
        d = util.write_files(self, {
            "zone-example.org-v1": ZONE % ("example.org.", 1, "192.0.2.10")})
        app = yield util.start(self, ".:0 {\n    auto example.org {\n        "
                               "directory %s zone-(.*)-v(\\d) {1}\n    }\n}\n"
                               % d)
        m = yield util.query(app.port(), "www.example.org", "A")
        self.assertEqual(util.rrs(m), ["www.example.org. 300 IN A 192.0.2.10"])


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
            with self.assertRaises(corefile.CorefileError) as e:
                App(os.path.join(d, "Corefile"), dns_port=0).load()
            self.assertIn(msg, str(e.exception))
