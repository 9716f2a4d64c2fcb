"""The rpz add-on package (contrib/rpz, installed by scripts/test.sh): its
own tests; every action side by side with Unbound's RPZ on the same
policy zone, read from a file and transferred from a Knot DNS primary:
both resolve through the same scriptable upstream and must give the same
answers (rcode, TC, answer records, or no answer); a policy zone
transferred from Knot and kept up to date by NOTIFY and by SOA refresh,
and kept when the primary goes away."""

import os

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest

from tests.support import knot, util
from tests.support.contrib import (
    README_CHECK,
    check_examples,
    installed,
    upstreams,
)
from tests.support.unbound import Unbound

INSTALLED = installed("corednstw_rpz")
if INSTALLED:
    from corednstw_rpz import HITS
    from corednstw_rpz.plugin import SERIAL, TRANSFERS, Transfers
    from corednstw_rpz.test.test_rpz import (  # noqa: F401
        PolicyTest,
        ServeTest,
        SetupTest,
    )

POLICY = "rpz.test."

#: A policy zone's head: serial, then refresh, retry and expire.
HEAD = """\
$TTL 60
@ SOA localhost. root.localhost. %d %s 60
  NS localhost.
"""

#: One trigger per action, as both servers read it.
TRIGGERS = """\
nx.example CNAME .
nodata.example CNAME *.
*.wild.example CNAME .
*.blocked.example CNAME .
ok.blocked.example CNAME rpz-passthru.
drop.example CNAME rpz-drop.
tcp.example CNAME rpz-tcp-only.
local.example A 10.9.9.9
local.example TXT "policy"
alias.example CNAME www.example.
32.66.2.0.192.rpz-ip CNAME .
32.2.0.0.127.rpz-client-ip A 10.7.7.7
ns.nsd-servers.test.rpz-nsdname CNAME .
"""


def policy_zone(serial=1, timers="3600 600 86400", extra=""):
    return HEAD % (serial, timers) + TRIGGERS + extra


ZONE = policy_zone()

#: The upstream's addresses: 192.0.2.66 is caught by the rpz-ip trigger;
#: the name server of the zones below is the upstream itself.
ADDRESSES = {"badip.example.": "192.0.2.66",
             "ns.nsd-servers.test.": "127.0.0.1"}

#: Zones whose answers name their name servers (the authority section),
#: as an authoritative server gives them.
SERVERS = {"nsd.example.": "ns.nsd-servers.test.",
           "nsd-servers.test.": "ns.nsd-servers.test."}


def _upstream_answer(q, proto):
    """An A record for every name (192.0.2.1, or ADDRESSES'); AAAA and
    other types NODATA.  Below the SERVERS zones, authoritative answers
    with the zone's NS record."""
    r = dns.message.make_response(q)
    r.flags |= dns.flags.RA
    qn = q.question[0]
    name = str(qn.name).lower()
    if qn.rdtype == dns.rdatatype.A:
        r.answer.append(dns.rrset.from_text(
            qn.name, 30, "IN", "A", ADDRESSES.get(name, "192.0.2.1")))
    for zone, server in SERVERS.items():
        if name == zone or name.endswith("." + zone):
            r.flags |= dns.flags.AA
            r.authority.append(dns.rrset.from_text(zone, 30, "IN", "NS",
                                                   server))
    return r


class RPZUnbound(Unbound):
    """unbound with the policy zone (respip for the rpz-ip triggers) and
    ``example.`` forwarded to the test upstream."""

    def __init__(self, testcase, policy_file, upstream_port, primary=None):
        super().__init__(testcase)
        self.policy_file = policy_file
        self.upstream_port = upstream_port
        self.primary = primary

    def _config(self):
        conf = super()._config().replace('module-config: "iterator"',
                                         'module-config: "respip iterator"')
        return conf + """
    domain-insecure: "example."
forward-zone:
    name: "example."
    forward-addr: 127.0.0.1@{port}
stub-zone:
    name: "nsd.example."
    stub-host: "ns.nsd-servers.test@{port}"
stub-zone:
    name: "nsd-servers.test."
    stub-addr: 127.0.0.1@{port}
rpz:
    name: "{name}"
    {source}
    rpz-log: yes
""".format(port=self.upstream_port, name=POLICY, source=(
            'zonefile: "%s"' % self.policy_file if self.primary is None
            else "primary: 127.0.0.1@%d" % self.primary))


class _From(protocol.DatagramProtocol):
    """One UDP query from a chosen source address; fires with the reply
    bytes, or None when none came within ``timeout``."""

    def __init__(self, wire, addr, timeout):
        self.wire = wire
        self.addr = addr
        self.d = defer.Deferred()
        self.timer = reactor.callLater(timeout, self._silence)

    def startProtocol(self):
        self.transport.write(self.wire, self.addr)

    def datagramReceived(self, data, addr):
        if not self.d.called:
            self.timer.cancel()
            self.d.callback(data)

    def _silence(self):
        if not self.d.called:
            self.d.callback(None)


@defer.inlineCallbacks
def ask(port, name, rdtype="A", proto="udp", source="127.0.0.1",
        timeout=3.0):
    """A summary of the answer to compare: (rcode, TC, answer records
    without TTLs), or "no answer"."""
    q = util.make_query(name, rdtype)
    if proto == "udp":
        client = _From(q.to_wire(), ("127.0.0.1", port), timeout)
        listening = reactor.listenUDP(0, client, interface=source)
        try:
            data = yield client.d
        finally:
            yield listening.stopListening()
    else:
        data = (yield util.send_tcp(port, [q.to_wire()]))[0]
    if data is None:
        return "no answer"
    m = dns.message.from_wire(data)
    answer = sorted("%s %s %s" % (rrset.name, dns.rdatatype.to_text(
        rrset.rdtype), rd.to_text()) for rrset in m.answer for rd in rrset)
    authority = sorted("%s %s" % (rrset.name, dns.rdatatype.to_text(
        rrset.rdtype)) for rrset in m.authority)
    return (dns.rcode.to_text(m.rcode()), bool(m.flags & dns.flags.TC),
            answer, authority, dns.flags.to_text(m.flags))


#: (name, type, transport, source): every action, and names no trigger
#: matches.
CASES = [
    ("www.example.", "A", "udp", "127.0.0.1"),
    ("nx.example.", "A", "udp", "127.0.0.1"),
    ("nodata.example.", "A", "udp", "127.0.0.1"),
    ("a.wild.example.", "A", "udp", "127.0.0.1"),
    ("a.b.wild.example.", "TXT", "udp", "127.0.0.1"),
    ("wild.example.", "A", "udp", "127.0.0.1"),
    ("x.blocked.example.", "A", "udp", "127.0.0.1"),
    ("ok.blocked.example.", "A", "udp", "127.0.0.1"),
    ("tcp.example.", "A", "udp", "127.0.0.1"),
    ("tcp.example.", "A", "tcp", "127.0.0.1"),
    ("local.example.", "A", "udp", "127.0.0.1"),
    ("local.example.", "TXT", "udp", "127.0.0.1"),
    ("local.example.", "AAAA", "udp", "127.0.0.1"),
    ("badip.example.", "A", "udp", "127.0.0.1"),
    ("www.example.", "A", "udp", "127.0.0.2"),
    ("alias.example.", "A", "udp", "127.0.0.1"),
    ("drop.example.", "A", "udp", "127.0.0.1"),
    ("www.nsd.example.", "A", "udp", "127.0.0.1"),
]


#: The examples of docs/plugins/rpz.md.
EXAMPLES = {
    "one policy": ". {\n    rpz {\n        policy rpz.example.org. "
                  "db.rpz\n    }\n    cache\n    forward . 9.9.9.9\n}\n",
    "two policies": ". {\n    rpz example.com {\n        policy "
                    "local.rpz. local.rpz\n        policy feed.rpz. "
                    "feed.rpz\n    }\n    forward . 9.9.9.9\n}\n",
    "transferred": ". {\n    rpz {\n        policy local.rpz. local.rpz\n"
                   "        policy feed.rpz. axfr 192.0.2.53 "
                   "192.0.2.54:5300\n    }\n    cache\n    forward . "
                   "9.9.9.9\n}\n",
}


class UnboundComparisonTest(unittest.TestCase):

    if not INSTALLED:
        skip = README_CHECK % "rpz"

    def test_doc_examples_check(self):
        check_examples(self, EXAMPLES, files={
            "db.rpz": ZONE, "local.rpz": ZONE, "feed.rpz": ZONE})

    @defer.inlineCallbacks
    def test_same_answers_as_unbound(self):
        up, = upstreams(self, 1)
        up.handler = _upstream_answer
        d = util.write_files(self, {"rpz.zone": ZONE})
        policy = os.path.join(d, "rpz.zone")
        ub = yield RPZUnbound(self, policy, up.port).start()
        app = yield util.start(self, (
            ".:0 {\n    prometheus 127.0.0.1:0\n    rpz {\n"
            "        policy %s %s\n    }\n    forward . %s\n}\n")
            % (POLICY, policy, up.addr()))
        before = HITS.get(("dns://:0", POLICY, "qname", "drop"))
        yield self.compare(ub, app.port())
        self.assertEqual(HITS.get(("dns://:0", POLICY, "qname", "drop")),
                         before + 1)

    @defer.inlineCallbacks
    def test_same_answers_as_unbound_transferred(self):
        """Both transfer the policy zone from the same Knot primary."""
        up, = upstreams(self, 1)
        up.handler = _upstream_answer
        primary = yield knot.start(self, {POLICY: ZONE})
        ub = yield RPZUnbound(self, None, up.port, primary.port).start()
        app = yield util.start(self, (
            ".:0 {\n    rpz {\n        policy %s axfr 127.0.0.1:%d\n"
            "    }\n    forward . %s\n}\n") % (POLICY, primary.port,
                                               up.addr()))
        for port in (ub.port, app.port()):
            yield until(port, "nx.example.", "NXDOMAIN")
        yield self.compare(ub, app.port())

    @defer.inlineCallbacks
    def compare(self, ub, ours_port):
        """Every case asked of both servers: the same answers.  Unbound
        reached the name server name trigger through its stub-host (the
        name server it was about to ask), we through the upstream
        answer's authority section."""
        differ = []
        for case in CASES:
            theirs = yield ask(ub.port, *case)
            ours = yield ask(ours_port, *case)
            if ours != theirs:
                differ.append((case, ours, theirs))
        self.assertEqual(differ, [])
        self.assertIn("rpz: applied nsdname ns.nsd-servers.test. "
                      "rpz-nxdomain", ub.log())


@defer.inlineCallbacks
def until(port, name, rcode, timeout=15.0):
    """Ask ``name`` until the answer has ``rcode`` (a policy that arrives
    by transfer); fails after ``timeout`` seconds with the last answer."""
    deadline = reactor.seconds() + timeout
    while True:
        got = yield ask(port, name, timeout=1.0)
        if got != "no answer" and got[0] == rcode:
            return
        if reactor.seconds() > deadline:
            raise AssertionError("%s: %s, expected %s" % (name, got, rcode))
        yield task.deferLater(reactor, 0.05, lambda: None)


class TransferTest(unittest.TestCase):
    """A policy zone transferred from Knot DNS: applied once transferred,
    changes taken in by NOTIFY (IXFR) and by SOA refresh, the last policy
    kept when the primary is gone."""

    if not INSTALLED:
        skip = README_CHECK % "rpz"

    def setUp(self):
        self.log = util.capture_log(self)
        # The refresh and retry ticks at their SOA times, no jitter (set
        # on the subclass, then removed: secondary's own stays as it is).
        Transfers.jitter = staticmethod(lambda limit: 0)
        self.addCleanup(delattr, Transfers, "jitter")

    @defer.inlineCallbacks
    def start(self, zone, notify, ixfr):
        up, = upstreams(self, 1)
        up.handler = _upstream_answer
        self.port = util.free_port()
        self.primary = yield knot.start(
            self, {POLICY: zone}, notify_port=self.port if notify else None,
            ixfr=ixfr)
        yield util.start(self, (
            ".:%d {\n    rpz {\n        policy %s axfr 127.0.0.1:%d\n"
            "    }\n    forward . %s\n}\n") % (
                self.port, POLICY, self.primary.port, up.addr()))

    def change(self, zone):
        self.primary.write_zone(POLICY, zone)
        self.primary.reload()

    @defer.inlineCallbacks
    def test_notify(self):
        yield self.start(policy_zone(1), notify=True, ixfr=True)
        yield until(self.port, "nx.example.", "NXDOMAIN")
        self.assertIn("[INFO] plugin/rpz: Transferred: %s from 127.0.0.1:%d"
                      "\n" % (POLICY, self.primary.port), self.log.text())
        self.assertEqual(SERIAL.get((POLICY,)), 1)
        transfers = TRANSFERS.get((POLICY,))
        # www.example passes; a new trigger for it arrives by NOTIFY and
        # IXFR (the refresh is an hour away).
        yield until(self.port, "www.example.", "NOERROR")
        self.change(policy_zone(2, extra="www.example CNAME .\n"))
        yield until(self.port, "www.example.", "NXDOMAIN")
        text = self.log.text()
        self.assertIn("[INFO] plugin/rpz: Notify from 127.0.0.1 for %s: "
                      "checking transfer" % POLICY, text)
        self.assertIn("[INFO] plugin/rpz: Transferred: %s from 127.0.0.1:%d"
                      " (IXFR)" % (POLICY, self.primary.port), text)
        self.assertNotIn("IXFR of", text)       # no fallback to AXFR
        self.assertEqual(SERIAL.get((POLICY,)), 2)
        self.assertEqual(TRANSFERS.get((POLICY,)), transfers + 1)
        # The rest of the policy is as before.
        yield until(self.port, "nx.example.", "NXDOMAIN")

    @defer.inlineCallbacks
    def test_refresh_and_unreachable_primary(self):
        """No NOTIFY reaches us: the SOA refresh (1s) finds serial 2.
        Then the primary stops: the checks fail, the zone expires (4s),
        and the policy stays in force."""
        yield self.start(policy_zone(1, "1 1 4"), notify=False, ixfr=False)
        yield until(self.port, "nx.example.", "NXDOMAIN")
        self.change(policy_zone(2, "1 1 4", "www.example CNAME .\n"))
        yield until(self.port, "www.example.", "NXDOMAIN")
        self.assertNotIn("Notify from", self.log.text())
        self.primary.stop()
        yield util.wait_for(lambda: "[WARNING] plugin/rpz: policy %s: "
                            "expired (no primary answered), the last one "
                            "transferred (serial 2) stays in force" % POLICY
                            in self.log.text(), timeout=20)
        self.assertIn("[WARNING] plugin/rpz: Failed retry check",
                      self.log.text())
        for name in ("www.example.", "nx.example."):
            yield until(self.port, name, "NXDOMAIN", timeout=0)
        # A new configuration (a reload) starts with the policy it had,
        # the primary still away.
        app = yield util.start(self, (
            ".:0 {\n    rpz {\n        policy %s axfr 127.0.0.1:%d\n"
            "    }\n}\n") % (POLICY, self.primary.port))
        yield until(app.port(), "www.example.", "NXDOMAIN", timeout=0)

