"""dns64: AAAA synthesis from A records (RFC 6052 addresses), options."""

import ipaddress
import os

import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw import corefile
from corednstw.app import App
from corednstw.plugins import dns64 as mod
from tests import util
from tests.unbound import Unbound
from tests.upstream import Upstream


def parse(testcase, body):
    d = util.write_files(testcase, {"Corefile": ". {\n%s\n}\n" % body})
    cfg = App(os.path.join(d, "Corefile"), dns_port=0).load()
    return [p for p in cfg.plugins() if p.name == "dns64"][0]


class ParseTest(unittest.TestCase):

    def test_forms(self):
        p = parse(self, " dns64")
        self.assertEqual(str(p.prefix), "64:ff9b::/96")
        self.assertFalse(p.translate_all or p.allow_ipv4)
        p = parse(self, " dns64 64:1337::/96")
        self.assertEqual(str(p.prefix), "64:1337::/96")
        p = parse(self, " dns64 {\n prefix 2001:db8::/32\n translate_all\n"
                        " allow_ipv4\n }")
        self.assertEqual(str(p.prefix), "2001:db8::/32")
        self.assertTrue(p.translate_all and p.allow_ipv4)

    def test_errors(self):
        for body, msg in [
                ("dns64 a b", "Wrong argument count"),
                ("dns64 10.0.0.0/8", "invalid netmask 32"),
                ("dns64 2001:db8::/33", "invalid prefix length"),
                ("dns64 2001:db8::/100", "invalid prefix length"),
                ("dns64 {\n bogus\n }", "unknown property 'bogus'")]:
            with self.assertRaises(corefile.CorefileError) as cm:
                parse(self, " " + body)
            self.assertIn(msg, str(cm.exception))

    def test_rfc6052_table(self):
        v4 = bytes([192, 0, 2, 33])
        for pfx, want in [("2001:db8::/32", "2001:db8:c000:221::"),
                          ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
                          ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
                          ("2001:db8:122:300::/56",
                           "2001:db8:122:3c0:0:221::"),
                          ("2001:db8:122:344::/64",
                           "2001:db8:122:344:c0:2:2100:0"),
                          ("64:ff9b::/96", "64:ff9b::c000:221")]:
            got = mod.to6(ipaddress.ip_network(pfx), v4)
            self.assertEqual(ipaddress.ip_address(got),
                             ipaddress.ip_address(want), pfx)


class DNS64Test(unittest.TestCase):

    @defer.inlineCallbacks
    def serve(self, options=""):
        self.up = Upstream().start()
        self.addCleanup(self.up.stop)
        app = yield util.start(self, ".:0 {\n dns64 %s\n forward . %s\n}\n"
                               % (options, self.up.addr()))
        self.port = app.port()
        self.app = app

    @defer.inlineCallbacks
    def test_ipv4_client_untouched_by_default(self):
        yield self.serve()
        m = yield util.query(self.port, "a.example", "AAAA")
        self.assertEqual(m.answer, [])

    @defer.inlineCallbacks
    def test_synthesis(self):
        yield self.serve("{\n allow_ipv4\n }")
        before = mod.TRANSLATED.get((self.app.muxes[0].label,))
        self.up.soa_ttl = 100
        m = yield util.query(self.port, "A.Example", "AAAA")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(util.rrs(m), [
            "A.Example. 100 IN AAAA 64:ff9b::c000:201"])
        self.assertEqual(mod.TRANSLATED.get((self.app.muxes[0].label,))
                         - before, 1)
        self.assertEqual(self.up.count(qtype="A"), 1)
        # existing AAAA records are kept unless translate_all
        self.up.aaaa = "2001:db8::1"
        m = yield util.query(self.port, "b.example", "AAAA")
        self.assertEqual(util.rrs(m), ["b.example. 300 IN AAAA 2001:db8::1"])
        # NXDOMAIN passes through
        m = yield util.query(self.port, "nxx.example", "AAAA")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_translate_all(self):
        yield self.serve("64:1337::/96 {\n allow_ipv4\n translate_all\n }")
        self.up.aaaa = "2001:db8::1"
        m = yield util.query(self.port, "b.example", "AAAA")
        self.assertEqual(util.rrs(m), ["b.example. 300 IN AAAA 64:1337::c000:201"])


class UnboundDNS64Test(unittest.TestCase):

    @defer.inlineCallbacks
    def test_against_unbound(self):
        ub = yield Unbound(self).start()
        app = yield util.start(
            self, ".:0 {\n dns64 {\n allow_ipv4\n }\n forward . 127.0.0.1:%d"
                  "\n}\n" % ub.port)
        m = yield util.query(app.port(), "v4only.example.test", "AAAA")
        self.assertEqual(util.rrs(m), [
            "v4only.example.test. 120 IN AAAA 64:ff9b::c633:6407"])
        m = yield util.query(app.port(), "www.example.test", "AAAA")
        self.assertEqual(util.rrs(m), [
            "www.example.test. 120 IN AAAA 2001:db8::80"])
