"""The etcd plugin: SkyDNS data in a real etcd, answers over the wire.

The table of cases is CoreDNS's etcd lookup test; the data are written
to an etcd started for the test and every answer is read over UDP.
Lookup rules that need no etcd (groups, broken values, external CNAMEs)
are checked with data handed straight to the plugin's in-memory copy.
"""

import json

import dns.rcode
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins.etcd import client as cl
from corednstw.plugins.etcd import records as rec
from tests.support import etcd as etcd_support
from tests.support import util

ZONES = ("skydns.test. skydns_extra.test. skydns_zonea.test. "
         "skydns_zoneb.test. skydns_zonec.test. skydns_zoned.test. "
         "in-addr.arpa.")

#: (DNS name standing for the key, service) as in CoreDNS's tests.
SERVICES = [
    ("a.server1.dev.region1.skydns.test.",
     {"host": "dev.server1", "port": 8080}),
    ("a.server1.prod.region1.skydns.test.",
     {"host": "10.0.0.1", "port": 8080}),
    ("b.server1.prod.region1.skydns.test.",
     {"host": "10.0.0.2", "port": 8080}),
    ("b.server6.prod.region1.skydns.test.", {"host": "::1", "port": 8080}),
    ("a.txt.server1.prod.region1.skydns.test.", {"text": "sometext"}),
    ("b.txt.server1.prod.region1.skydns.test.", {"text": "moretext"}),
    ("cname.prod.region1.skydns.test.",
     {"host": "unresolvable.skydns.test"}),
    ("priority.skydns.test.",
     {"host": "priority.server1", "priority": 333, "port": 8080}),
    ("a.sub.region1.skydns.test.", {"host": "sub.server1", "port": 0}),
    ("b.sub.region1.skydns.test.", {"host": "sub.server2", "port": 80}),
    ("c.sub.region1.skydns.test.", {"host": "10.0.0.1", "port": 8080}),
    ("a.targetstrip.skydns.test.",
     {"host": "10.0.0.1", "port": 8080, "targetstrip": 1}),
    ("b.cname.skydns.test.", {"host": "a.cname.skydns.test"}),
    ("a.cname.skydns.test.", {"host": "b.cname.skydns.test"}),
    ("a.ns.dns.skydns.test.", {"host": "10.0.0.2"}),
    ("b.ns.dns.skydns.test.", {"host": "10.0.0.3"}),
    ("ns1.c.ns.dns.skydns.test.", {"host": "10.0.0.4", "targetstrip": 1}),
    ("ns2.c.ns.dns.skydns.test.", {"host": "10.0.0.5", "targetstrip": 1}),
    ("x.skydns_zonea.test.", {"host": "10.0.0.2"}),
    ("y.skydns_zonea.test.", {"host": "10.0.0.3"}),
    ("x.skydns_zoneb.test.", {"host": "10.0.0.2"}),
    ("y.skydns_zoneb.test.", {"host": "10.0.0.3"}),
    ("apex.dns.skydns_zoneb.test.", {"host": "10.0.0.4"}),
    ("x.skydns_zonec.test.", {"host": "10.0.0.2"}),
    ("y.skydns_zonec.test.", {"host": "10.0.0.3"}),
    ("a1.apex.dns.skydns_zonec.test.", {"host": "10.0.0.4"}),
    ("a2.apex.dns.skydns_zonec.test.", {"host": "10.0.0.5"}),
    ("x.skydns_zoned.test.", {"host": "10.0.0.2"}),
    ("y.skydns_zoned.test.", {"host": "10.0.0.3"}),
    ("a1.apex.dns.skydns_zoned.test.", {"host": "10.0.0.4"}),
    ("a2.apex.dns.skydns_zoned.test.", {"host": "10.0.0.5"}),
    ("a3.apex.dns.skydns_zoned.test.", {"host": "2003::8:1"}),
    ("a4.apex.dns.skydns_zoned.test.", {"host": "2003::8:2"}),
    ("1.0.0.10.in-addr.arpa.", {"host": "reverse.example.com"}),
]

SOA = "skydns.test. 30 IN SOA ns.dns.skydns.test. hostmaster.skydns.test."

#: (qname, qtype, rcode, answer, authority, additional); SOA lines are
#: compared without their numbers.
CASES = [
    ("a.server1.dev.region1.skydns.test.", "SRV", "NOERROR",
     ["a.server1.dev.region1.skydns.test. 300 IN SRV 10 100 8080 "
      "dev.server1."], [], []),
    ("a.SERVer1.dEv.region1.skydns.tEst.", "SRV", "NOERROR",
     ["a.SERVer1.dEv.region1.skydns.tEst. 300 IN SRV 10 100 8080 "
      "dev.server1."], [], []),
    ("doesnotexist.skydns.test.", "A", "NXDOMAIN", [], [SOA], []),
    ("a.server1.prod.region1.skydns.test.", "A", "NOERROR",
     ["a.server1.prod.region1.skydns.test. 300 IN A 10.0.0.1"], [], []),
    ("a.server1.prod.region1.skydns.test.", "SRV", "NOERROR",
     ["a.server1.prod.region1.skydns.test. 300 IN SRV 10 100 8080 "
      "a.server1.prod.region1.skydns.test."], [],
     ["a.server1.prod.region1.skydns.test. 300 IN A 10.0.0.1"]),
    ("b.server6.prod.region1.skydns.test.", "AAAA", "NOERROR",
     ["b.server6.prod.region1.skydns.test. 300 IN AAAA ::1"], [], []),
    ("server1.prod.region1.skydns.test.", "A", "NOERROR",
     ["server1.prod.region1.skydns.test. 300 IN A 10.0.0.1",
      "server1.prod.region1.skydns.test. 300 IN A 10.0.0.2"], [], []),
    ("priority.skydns.test.", "SRV", "NOERROR",
     ["priority.skydns.test. 300 IN SRV 333 100 8080 priority.server1."],
     [], []),
    ("sub.region1.skydns.test.", "SRV", "NOERROR",
     ["sub.region1.skydns.test. 300 IN SRV 10 33 0 sub.server1.",
      "sub.region1.skydns.test. 300 IN SRV 10 33 80 sub.server2.",
      "sub.region1.skydns.test. 300 IN SRV 10 33 8080 "
      "c.sub.region1.skydns.test."], [],
     ["c.sub.region1.skydns.test. 300 IN A 10.0.0.1"]),
    ("targetstrip.skydns.test.", "SRV", "NOERROR",
     ["targetstrip.skydns.test. 300 IN SRV 10 100 8080 "
      "targetstrip.skydns.test."], [],
     ["targetstrip.skydns.test. 300 IN A 10.0.0.1"]),
    ("cname.prod.region1.skydns.test.", "A", "NOERROR", [], [SOA], []),
    ("txt.server1.prod.region1.skydns.test.", "TXT", "NOERROR",
     ['txt.server1.prod.region1.skydns.test. 300 IN TXT "moretext"',
      'txt.server1.prod.region1.skydns.test. 300 IN TXT "sometext"'],
     [], []),
    ("*.region1.skydns.test.", "SRV", "NOERROR",
     ["*.region1.skydns.test. 300 IN SRV 10 12 0 sub.server1.",
      "*.region1.skydns.test. 300 IN SRV 10 12 0 "
      "unresolvable.skydns.test.",
      "*.region1.skydns.test. 300 IN SRV 10 12 80 sub.server2.",
      "*.region1.skydns.test. 300 IN SRV 10 12 8080 "
      "a.server1.prod.region1.skydns.test.",
      "*.region1.skydns.test. 300 IN SRV 10 12 8080 "
      "b.server1.prod.region1.skydns.test.",
      "*.region1.skydns.test. 300 IN SRV 10 12 8080 "
      "b.server6.prod.region1.skydns.test.",
      "*.region1.skydns.test. 300 IN SRV 10 12 8080 "
      "c.sub.region1.skydns.test.",
      "*.region1.skydns.test. 300 IN SRV 10 12 8080 dev.server1."], [],
     ["a.server1.prod.region1.skydns.test. 300 IN A 10.0.0.1",
      "b.server1.prod.region1.skydns.test. 300 IN A 10.0.0.2",
      "b.server6.prod.region1.skydns.test. 300 IN AAAA ::1",
      "c.sub.region1.skydns.test. 300 IN A 10.0.0.1"]),
    ("prod.*.skydns.test.", "SRV", "NOERROR",
     ["prod.*.skydns.test. 300 IN SRV 10 25 0 unresolvable.skydns.test.",
      "prod.*.skydns.test. 300 IN SRV 10 25 8080 "
      "a.server1.prod.region1.skydns.test.",
      "prod.*.skydns.test. 300 IN SRV 10 25 8080 "
      "b.server1.prod.region1.skydns.test.",
      "prod.*.skydns.test. 300 IN SRV 10 25 8080 "
      "b.server6.prod.region1.skydns.test."], [],
     ["a.server1.prod.region1.skydns.test. 300 IN A 10.0.0.1",
      "b.server1.prod.region1.skydns.test. 300 IN A 10.0.0.2",
      "b.server6.prod.region1.skydns.test. 300 IN AAAA ::1"]),
    ("prod.any.skydns.test.", "SRV", "NOERROR",
     ["prod.any.skydns.test. 300 IN SRV 10 25 0 unresolvable.skydns.test.",
      "prod.any.skydns.test. 300 IN SRV 10 25 8080 "
      "a.server1.prod.region1.skydns.test.",
      "prod.any.skydns.test. 300 IN SRV 10 25 8080 "
      "b.server1.prod.region1.skydns.test.",
      "prod.any.skydns.test. 300 IN SRV 10 25 8080 "
      "b.server6.prod.region1.skydns.test."], [],
     ["a.server1.prod.region1.skydns.test. 300 IN A 10.0.0.1",
      "b.server1.prod.region1.skydns.test. 300 IN A 10.0.0.2",
      "b.server6.prod.region1.skydns.test. 300 IN AAAA ::1"]),
    ("a.cname.skydns.test.", "A", "NOERROR", [], [SOA], []),
    # The CNAME's target is asked of the server itself, which answers
    # (SERVFAIL, nothing serves it): CoreDNS keeps the CNAME then.
    ("a.server1.dev.region1.skydns.test.", "TXT", "NOERROR",
     ["a.server1.dev.region1.skydns.test. 300 IN CNAME dev.server1."],
     [], []),
    ("a.server1.dev.region1.skydns.test.", "HINFO", "NOERROR", [], [SOA],
     []),
    ("a.server1.nonexistent.region1.skydns.test.", "HINFO", "NXDOMAIN", [],
     [SOA], []),
    ("skydns.test.", "SOA", "NOERROR", [SOA], [], []),
    ("skydns.test.", "NS", "NOERROR",
     ["skydns.test. 300 IN NS a.ns.dns.skydns.test.",
      "skydns.test. 300 IN NS b.ns.dns.skydns.test.",
      "skydns.test. 300 IN NS c.ns.dns.skydns.test."], [],
     ["a.ns.dns.skydns.test. 300 IN A 10.0.0.2",
      "b.ns.dns.skydns.test. 300 IN A 10.0.0.3",
      "c.ns.dns.skydns.test. 300 IN A 10.0.0.4",
      "c.ns.dns.skydns.test. 300 IN A 10.0.0.5"]),
    ("a.skydns.test.", "NS", "NXDOMAIN", [], [SOA], []),
    ("ns.dns.skydns.test.", "A", "NOERROR",
     ["ns.dns.skydns.test. 300 IN A 10.0.0.2",
      "ns.dns.skydns.test. 300 IN A 10.0.0.3",
      "ns.dns.skydns.test. 300 IN A 10.0.0.4",
      "ns.dns.skydns.test. 300 IN A 10.0.0.5"], [], []),
    ("skydns_extra.test.", "SOA", "NOERROR",
     ["skydns_extra.test. 30 IN SOA ns.dns.skydns_extra.test. "
      "hostmaster.skydns_extra.test."], [], []),
    ("skydns_zonea.test.", "A", "NOERROR",
     ["skydns_zonea.test. 300 IN A 10.0.0.2",
      "skydns_zonea.test. 300 IN A 10.0.0.3"], [], []),
    ("skydns_zoneb.test.", "A", "NOERROR",
     ["skydns_zoneb.test. 300 IN A 10.0.0.4"], [], []),
    ("skydns_zonec.test.", "A", "NOERROR",
     ["skydns_zonec.test. 300 IN A 10.0.0.4",
      "skydns_zonec.test. 300 IN A 10.0.0.5"], [], []),
    ("skydns_zoned.test.", "A", "NOERROR",
     ["skydns_zoned.test. 300 IN A 10.0.0.4",
      "skydns_zoned.test. 300 IN A 10.0.0.5"], [], []),
    ("skydns_zoned.test.", "AAAA", "NOERROR",
     ["skydns_zoned.test. 300 IN AAAA 2003::8:1",
      "skydns_zoned.test. 300 IN AAAA 2003::8:2"], [], []),
    ("1.0.0.10.in-addr.arpa.", "PTR", "NOERROR",
     ["1.0.0.10.in-addr.arpa. 300 IN PTR reverse.example.com."], [], []),
]


def lines(msg, section):
    """Record lines of a section, SOA numbers cut off, sorted."""
    out = []
    for line in util.rrs(msg, section):
        if " SOA " in line:
            line = " ".join(line.split()[:6])
        out.append(line)
    return sorted(out)


def check(testcase, msg, case):
    qname, qtype, rcode, answer, authority, additional = case
    where = "%s %s" % (qname, qtype)
    testcase.assertEqual(dns.rcode.to_text(msg.rcode()), rcode, where)
    testcase.assertTrue(msg.flags & 0x0400, where + ": AA")
    testcase.assertEqual(lines(msg, "answer"), sorted(answer), where)
    testcase.assertEqual(lines(msg, "authority"), sorted(authority), where)
    testcase.assertEqual(lines(msg, "additional"), sorted(additional),
                         where)


def key(name, prefix="skydns"):
    return rec.path(name, prefix)


@defer.inlineCallbacks
def wait_answer(port, name, qtype, predicate, timeout=10.0):
    """Query until ``predicate(msg)`` holds; the last answer."""
    deadline = reactor.seconds() + timeout
    while True:
        m = yield util.query(port, name, qtype)
        if predicate(m):
            return m
        if reactor.seconds() > deadline:
            raise AssertionError("no such answer for %s %s: %s" % (
                name, qtype, m))
        yield task.deferLater(reactor, 0.02, lambda: None)


def corefile_for(e, zones=ZONES, extra=""):
    return (".:0 {\n    etcd %s {\n        endpoint %s\n%s    }\n}\n"
            % (zones, e.url, extra))


class EtcdServerTest(unittest.TestCase):
    """Against a real etcd."""

    timeout = 60

    @defer.inlineCallbacks
    def test_coredns_cases(self):
        e = yield etcd_support.start(self)
        for name, serv in SERVICES:
            e.put(key(name), serv)
        app = yield util.start(self, corefile_for(e))
        yield util.wait_for(lambda: app.config.blocks[0].plugin(
            "etcd").ready())
        for case in CASES:
            m = yield util.query(app.port(), case[0], case[1])
            check(self, m, case)

    @defer.inlineCallbacks
    def test_changes_show_up(self):
        e = yield etcd_support.start(self)
        e.put(key("web.skydns.test."), {"host": "10.0.0.1"})
        app = yield util.start(self, corefile_for(e, "skydns.test"))
        port = app.port()
        m = yield wait_answer(port, "web.skydns.test", "A",
                              lambda m: m.answer)
        self.assertEqual(util.rrs(m), ["web.skydns.test. 300 IN A 10.0.0.1"])
        e.put(key("web.skydns.test."), {"host": "10.0.0.2", "ttl": 60})
        m = yield wait_answer(port, "web.skydns.test", "A", lambda m: any(
            "10.0.0.2" in x for x in util.rrs(m)))
        self.assertEqual(util.rrs(m), ["web.skydns.test. 60 IN A 10.0.0.2"])
        # Keys below the name replace the name's own key (a prefix
        # match): hosts of one name go under x1, x2, ...
        e.put(key("x1.web.skydns.test."), {"host": "10.0.0.3"})
        e.put(key("x2.web.skydns.test."), {"host": "10.0.0.4"})
        m = yield wait_answer(port, "web.skydns.test", "A",
                              lambda m: len(util.rrs(m)) == 2)
        self.assertEqual(util.rrs(m), ["web.skydns.test. 300 IN A 10.0.0.3",
                                       "web.skydns.test. 300 IN A 10.0.0.4"])
        for k in ("web", "x1.web", "x2.web"):
            e.delete(key(k + ".skydns.test."))
        m = yield wait_answer(port, "web.skydns.test", "A",
                              lambda m: m.rcode() == dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_etcd_down_keeps_data_then_resumes(self):
        e = yield etcd_support.start(self)
        e.put(key("web.skydns.test."), {"host": "10.0.0.1"})
        log = util.capture_log(self)
        app = yield util.start(self, corefile_for(e, "skydns.test"))
        port = app.port()
        yield wait_answer(port, "web.skydns.test", "A", lambda m: m.answer)
        e.stop()
        yield util.wait_for(lambda: "serving the last data" in log.text())
        m = yield util.query(port, "web.skydns.test", "A")
        self.assertEqual(util.rrs(m), ["web.skydns.test. 300 IN A 10.0.0.1"])
        yield e.start()
        e.put(key("web.skydns.test."), {"host": "10.0.0.9"})
        m = yield wait_answer(port, "web.skydns.test", "A", lambda m: any(
            "10.0.0.9" in x for x in util.rrs(m)), timeout=30)
        self.assertEqual(util.rrs(m), ["web.skydns.test. 300 IN A 10.0.0.9"])

    @defer.inlineCallbacks
    def test_unreachable_at_start_then_ready(self):
        e = etcd_support.Etcd(util.write_files(self, {}))
        etcd_support.require(self)
        self.addCleanup(e.stop)
        log = util.capture_log(self)
        app = yield util.start(self, corefile_for(e, "skydns.test"))
        plugin = app.config.blocks[0].plugin("etcd")
        self.assertFalse(plugin.ready())
        yield util.wait_for(lambda: "plugin/etcd" in log.text())
        m = yield util.query(app.port(), "web.skydns.test", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        yield e.start()
        e.put(key("web.skydns.test."), {"host": "10.0.0.1"})
        yield util.wait_for(plugin.ready, timeout=30)
        yield wait_answer(app.port(), "web.skydns.test", "A",
                          lambda m: m.answer, timeout=30)

    @defer.inlineCallbacks
    def test_lease_ttl_clamped(self):
        e = yield etcd_support.start(self)
        lease = e.grant(600)
        e.put(key("web.skydns.test."), {"host": "10.0.0.1"}, lease=lease)
        e.put(key("short.skydns.test."), {"host": "10.0.0.2", "ttl": 20},
              lease=lease)
        app = yield util.start(self, corefile_for(
            e, "skydns.test", "        max-lease-ttl 2m\n"))
        port = app.port()
        m = yield wait_answer(port, "web.skydns.test", "A",
                              lambda m: m.answer and m.answer[0].ttl == 120)
        m = yield util.query(port, "short.skydns.test", "A")
        self.assertEqual(m.answer[0].ttl, 20)


def direct(testcase, data, zones="skydns.test", extra=""):
    """A Direct server whose etcd plugin holds ``data`` ({key: value})."""
    s = util.Direct(testcase, ".:0 {\n    etcd %s {\n%s    }\n}\n"
                    % (zones, extra))
    p = s.app.config.blocks[0].plugin("etcd")
    p.mirror = cl.Mirror(None, p.watched, p.decode, reactor)
    p.mirror._replace(1, [
        {"key": cl.b64(k), "value": cl.b64(
            v if isinstance(v, str) else json.dumps(v))}
        for k, v in data.items()])
    return s


class LookupTest(unittest.TestCase):
    """Rules checked on data handed straight to the plugin."""

    def test_group(self):
        s = direct(self, {
            key("a.web.skydns.test."): {"host": "10.0.0.1", "group": "g1"},
            key("x.b.web.skydns.test."): {"host": "10.0.0.2", "group": "g2"},
            key("y.b.web.skydns.test."): {"host": "10.0.0.4"},
            key("a.other.skydns.test."): {"host": "10.0.0.1", "group": "g1"},
            key("b.other.skydns.test."): {"host": "10.0.0.2", "group": "g2"},
        })
        m = s.query("web.skydns.test", "A")
        self.assertEqual(util.rrs(m), [
            "web.skydns.test. 300 IN A 10.0.0.1",
            "web.skydns.test. 300 IN A 10.0.0.4"])
        # The shortest keys disagree: no grouping.
        m = s.query("other.skydns.test", "A")
        self.assertEqual(util.rrs(m), [
            "other.skydns.test. 300 IN A 10.0.0.1",
            "other.skydns.test. 300 IN A 10.0.0.2"])

    def test_broken_value_servfail(self):
        s = direct(self, {key("web.skydns.test."): "{not json"})
        m = s.query("web.skydns.test", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(len(m.authority), 1)

    def test_mx_and_txt_cname(self):
        s = direct(self, {
            key("mail.skydns.test."): {"host": "10.0.0.5", "mail": True,
                                       "priority": 20},
            key("alias.skydns.test."): {"host": "t.skydns.test"},
            key("t.skydns.test."): {"text": "hello"},
        })
        m = s.query("mail.skydns.test", "MX")
        self.assertEqual(util.rrs(m), [
            "mail.skydns.test. 300 IN MX 20 mail.skydns.test."])
        self.assertEqual(util.rrs(m, "additional"), [
            "mail.skydns.test. 300 IN A 10.0.0.5"])
        m = s.query("alias.skydns.test", "TXT")
        self.assertEqual(util.rrs(m), [
            "alias.skydns.test. 300 IN CNAME t.skydns.test.",
            't.skydns.test. 300 IN TXT "hello"'])
        m = s.query("alias.skydns.test", "CNAME")
        self.assertEqual(util.rrs(m), [
            "alias.skydns.test. 300 IN CNAME t.skydns.test."])

    def test_fallthrough(self):
        s = direct(self, {}, extra="        fallthrough\n")
        m = s.query("nothing.skydns.test", "A")
        # The next plugin is the end of the chain: SERVFAIL, not NXDOMAIN.
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        s = direct(self, {})
        m = s.query("nothing.skydns.test", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_external_cname_through_server(self):
        app = yield util.start(self, (
            "skydns.test:0 {\n    etcd\n}\n"
            "example.org:0 {\n    hosts {\n"
            "        192.0.2.9 www.example.org\n    }\n}\n"))
        p = app.config.blocks[0].plugin("etcd")
        p.mirror.stop()
        p.mirror = cl.Mirror(None, p.watched, p.decode, reactor)
        p.mirror._replace(1, [{"key": cl.b64(key("web.skydns.test.")),
                               "value": cl.b64('{"host":"www.example.org"}')}])
        m = yield util.query(app.port(), "web.skydns.test", "A")
        self.assertEqual(util.rrs(m), [
            "web.skydns.test. 300 IN CNAME www.example.org.",
            "www.example.org. 3600 IN A 192.0.2.9"])


class SetupTest(unittest.TestCase):

    def error(self, body):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    etcd {\n%s\n    }\n}\n" % body)
        return str(cm.exception)

    def test_errors(self):
        self.assertIn("Corefile:3 - Error during parsing: plugin/etcd: "
                      "unknown property 'bogus'", self.error("bogus"))
        self.assertIn("Corefile:3 - Error during parsing: plugin/etcd: "
                      "credentials requires 2 arguments, username and "
                      "password", self.error("credentials a"))
        self.assertIn("Wrong argument count", self.error("endpoint"))
        self.assertIn("Wrong argument count", self.error("path"))
        self.assertIn("invalid min-lease-ttl value: invalid TTL format",
                      self.error("min-lease-ttl 5x"))
        self.assertIn("Corefile:3 - Error during parsing: plugin/etcd: "
                      "could not load TLS config",
                      self.error("tls /nonexistent.pem"))
        self.assertIn("maximum of three arguments",
                      self.error("tls a b c d"))

    def test_defaults(self):
        s = util.Direct(self, "skydns.local:0 {\n    etcd {\n"
                        "        path /other\n        stubzones\n"
                        "        min-lease-ttl 1m\n    }\n}\n")
        p = s.app.config.blocks[0].plugin("etcd")
        self.assertEqual(p.zones, ["skydns.local."])
        self.assertEqual(p.watched, "/other/")
        self.assertEqual(p.opts.endpoints, ["http://localhost:2379"])
        self.assertEqual(p.opts.min_lease_ttl, 60)
        self.assertFalse(p.ready())
