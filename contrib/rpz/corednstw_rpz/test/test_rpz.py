"""rpz's Corefile syntax, policy zones and the order of their triggers,
through corednstw's configuration with no sockets
(``trial corednstw_rpz``)."""

import ipaddress
import os
import tempfile

from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import directives, logger
from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import NoReply, Request, Response, make_query
from corednstw.service.app import App
from corednstw_rpz import HITS, RPZ
from corednstw_rpz.policy import (
    CLIENT_IP,
    DROP,
    IP,
    LOCAL,
    NODATA,
    NXDOMAIN,
    PASSTHRU,
    QNAME,
    TCP_ONLY,
    load,
)

SOA = "$TTL 60\n@ SOA localhost. root.localhost. 1 3600 600 86400 60\n" \
      "  NS localhost.\n"

FIRST = SOA + """\
nx.example CNAME .
nodata.example CNAME *.
*.wild.example CNAME .
exact.wild.example CNAME rpz-passthru.
drop.example CNAME rpz-drop.
tcp.example CNAME rpz-tcp-only.
local.example A 10.9.9.9
local.example A 10.9.9.10
24.0.2.0.192.rpz-ip CNAME .
32.66.2.0.192.rpz-ip CNAME *.
128.1.zz.db8.2001.rpz-ip CNAME rpz-drop.
16.0.0.168.192.rpz-client-ip CNAME rpz-drop.
ns.example.rpz-nsdname CNAME .
"""

SECOND = SOA + """\
nx.example A 10.1.1.1
later.example CNAME .
"""


class _Dir:
    """Policy files in a temporary directory."""

    def __init__(self, testcase, files):
        self.path = tempfile.mkdtemp(prefix="rpz-test-")
        testcase.addCleanup(_rmtree, self.path)
        for name, text in files.items():
            with open(os.path.join(self.path, name), "w") as f:
                f.write(text)

    def __call__(self, name):
        return os.path.join(self.path, name)


def _rmtree(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def build(body):
    app = App(None, reactor=task.Clock(), dns_port=0,
              text=".:0 {\n%s\n}\n" % body)
    app.config = app.load()
    return app.config.blocks[0].plugin("rpz")


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.files = _Dir(self, {"first.zone": FIRST, "second.zone": SECOND,
                                 "bad.zone": SOA + "x.rpz-ip CNAME .\n"})

    def test_policies_in_order(self):
        r = build("rpz example.org {\n policy first.rpz %s\n"
                  " policy Second.RPZ. %s\n}" % (self.files("first.zone"),
                                                 self.files("second.zone")))
        self.assertIsInstance(r, RPZ)
        self.assertEqual(r.zones, ["example.org."])
        self.assertEqual([z.name for z in r.policies],
                         ["first.rpz.", "second.rpz."])

    def test_refused(self):
        for body, text in [
                ("rpz", "no policy given"),
                ("rpz {\n policy a.rpz\n}", "Wrong argument count"),
                ("rpz {\n policy a.rpz /nonexistent/zone\n}",
                 "policy a.rpz.: "),
                ("rpz {\n policy a.rpz %s\n}" % self.files("bad.zone"),
                 "policy a.rpz.: bad IP trigger x.rpz-ip"),
                ("rpz {\n policy a.rpz %s\n policy a.rpz. %s\n}" % (
                    self.files("first.zone"), self.files("second.zone")),
                 "policy 'a.rpz.' is given twice"),
                ("rpz {\n zone a.rpz\n}", "unknown property 'zone'"),
        ]:
            with self.assertRaises(CorefileError, msg=body) as cm:
                build(body)
            self.assertIn("plugin/rpz: " + text, str(cm.exception))

    def test_place_in_chain(self):
        names = directives.names()
        self.assertEqual(names.index("rpz") + 1, names.index("cache"))


class PolicyTest(unittest.TestCase):

    def setUp(self):
        self.files = _Dir(self, {"first.zone": FIRST,
                                 "second.zone": SECOND})
        self.zone = load("first.rpz.", self.files("first.zone"))

    def test_triggers(self):
        z = self.zone
        self.assertEqual(sorted(z.exact), [
            "drop.example.", "exact.wild.example.", "local.example.",
            "nodata.example.", "nx.example.", "tcp.example."])
        self.assertEqual(sorted(z.wild), ["wild.example."])
        self.assertEqual([str(n) for n, _a in z.ips],
                         ["2001:db8::1/128", "192.0.2.66/32",
                          "192.0.2.0/24"])
        self.assertEqual([str(n) for n, _a in z.clients],
                         ["192.168.0.0/16"])
        self.assertEqual(z.skipped, 1)

    def test_actions(self):
        z = self.zone
        kinds = {n: a.kind for n, a in z.exact.items()}
        self.assertEqual(kinds, {
            "nx.example.": NXDOMAIN, "nodata.example.": NODATA,
            "exact.wild.example.": PASSTHRU, "drop.example.": DROP,
            "tcp.example.": TCP_ONLY, "local.example.": LOCAL})
        ttl, rdatas = z.exact["local.example."].records[w.A]
        self.assertEqual((ttl, sorted(rdatas)), (60, sorted([
            w.a_rdata("10.9.9.10"), w.a_rdata("10.9.9.9")])))

    def test_qname_matching(self):
        z = self.zone
        self.assertEqual(z.qname("nx.example.").action.kind, NXDOMAIN)
        self.assertIsNone(z.qname("a.nx.example."))
        self.assertIsNone(z.qname("wild.example."))
        self.assertEqual(z.qname("a.wild.example.").action.kind, NXDOMAIN)
        self.assertEqual(z.qname("a.b.wild.example.").action.kind,
                         NXDOMAIN)
        # An exact trigger beats the wildcard above it.
        self.assertEqual(z.qname("exact.wild.example.").action.kind,
                         PASSTHRU)

    def test_longest_prefix(self):
        z = self.zone
        ip = ipaddress.ip_address
        self.assertEqual(z.answer([ip("192.0.2.66")]).action.kind, NODATA)
        self.assertEqual(z.answer([ip("192.0.2.7")]).action.kind, NXDOMAIN)
        self.assertEqual(z.answer([ip("192.0.2.7"), ip("192.0.2.66")])
                         .action.kind, NODATA)
        self.assertEqual(z.answer([ip("2001:db8::1")]).action.kind, DROP)
        self.assertIsNone(z.answer([ip("198.51.100.1")]))
        self.assertEqual(z.client("192.168.3.4").kind, CLIENT_IP)
        self.assertIsNone(z.client("10.0.0.1"))


class _Chain:
    """The chain below rpz: an A record with ``address`` for every
    question; counts what it is asked."""

    def __init__(self, address="192.0.2.1"):
        self.address = address
        self.asked = 0

    def serve(self, req):
        self.asked += 1
        rr = w.RR(req.name, w.A, 30, w.a_rdata(self.address))
        return Response(0, [rr], plugin="forward")


def request(name, client="127.0.0.1", proto="udp"):
    req = Request(make_query(name, w.A, msgid=2), client, 4000, proto,
                  server="dns://:0")
    req.parse_question(*req.parse_header()[1:])
    return req


class ServeTest(unittest.TestCase):
    """Actions and the order of triggers, in one zone and across two."""

    def setUp(self):
        self.files = _Dir(self, {"first.zone": FIRST,
                                 "second.zone": SECOND})
        self.rpz = build("rpz {\n policy first.rpz %s\n policy second.rpz "
                         "%s\n}" % (self.files("first.zone"),
                                    self.files("second.zone")))
        self.chain = self.rpz.next = _Chain()
        self.lines = []
        old = logger.out
        logger.out = self
        self.addCleanup(setattr, logger, "out", old)

    def write(self, text):
        self.lines.append(text)

    def flush(self):
        pass

    def ask(self, name, **kw):
        return self.rpz.serve(request(name, **kw))

    def test_actions(self):
        self.assertEqual(self.ask("nx.example.").rcode, w.NXDOMAIN)
        r = self.ask("nodata.example.")
        self.assertEqual((r.rcode, r.answer), (0, []))
        self.assertIsInstance(self.ask("drop.example."), NoReply)
        r = self.ask("tcp.example.")
        self.assertEqual((r.answer, bool(r.flags & w.TC)), ([], True))
        r = self.ask("tcp.example.", proto="tcp")
        self.assertEqual((r.plugin, len(r.answer)), ("forward", 1))
        r = self.ask("local.example.")
        self.assertEqual(sorted(rr.rdata for rr in r.answer),
                         sorted([w.a_rdata("10.9.9.10"),
                                 w.a_rdata("10.9.9.9")]))
        # PASSTHRU: the chain's answer, though its address is one an
        # rpz-ip trigger of the same zone has (QNAME comes first).
        self.assertEqual(self.ask("exact.wild.example.").plugin, "forward")
        self.chain.address = "198.51.100.1"
        self.assertEqual(self.ask("www.example.").plugin, "forward")

    def test_first_policy_wins(self):
        """nx.example is NXDOMAIN in the first zone and local data in the
        second: the first zone's answer; later.example only the second
        has."""
        self.assertEqual(self.ask("nx.example.").rcode, w.NXDOMAIN)
        self.assertEqual(self.ask("later.example.").rcode, w.NXDOMAIN)

    def test_client_before_qname(self):
        self.assertIsInstance(self.ask("local.example.",
                                       client="192.168.1.1"), NoReply)

    def test_answer_address(self):
        """An answer in 192.0.2.0/24 is caught by the first zone's rpz-ip
        trigger, even for a name the second zone's QNAME trigger has:
        the first zone comes first."""
        r = self.ask("later.example.")
        self.assertEqual((r.rcode, r.plugin), (w.NXDOMAIN, "rpz"))
        self.chain.address = "198.51.100.1"
        r = self.ask("later.example.")
        self.assertEqual((r.rcode, r.plugin), (w.NXDOMAIN, "rpz"))
        self.assertEqual(self.ask("www.example.").plugin, "forward")
        self.chain.address = "192.0.2.66"
        r = self.ask("www.example.")
        self.assertEqual((r.rcode, r.answer, r.aa), (0, [], False))

    def test_no_answer_needed_without_ip_triggers(self):
        """A QNAME hit in the first zone answers without asking the
        chain (no earlier zone has rpz-ip triggers)."""
        self.ask("nx.example.")
        self.assertEqual(self.chain.asked, 0)

    def test_log_and_metric(self):
        key = ("dns://:0", "first.rpz.", QNAME, NXDOMAIN)
        before = HITS.get(key)
        self.ask("nx.example.")
        self.assertEqual(HITS.get(key), before + 1)
        self.assertIn("[INFO] plugin/rpz: first.rpz. nxdomain: qname "
                      "nx.example./A for 127.0.0.1 (nx.example)",
                      "".join(self.lines))
        self.chain.address = "192.0.2.66"
        key = ("dns://:0", "first.rpz.", IP, NODATA)
        before = HITS.get(key)
        self.ask("www.example.")
        self.assertEqual(HITS.get(key), before + 1)
