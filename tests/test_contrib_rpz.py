"""The rpz add-on package (contrib/rpz, installed by scripts/test.sh): its
own tests, and every action side by side with Unbound's RPZ on the same
policy zone: both resolve through the same scriptable upstream and must
give the same answers (rcode, TC, answer records, or no answer)."""

import os

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest

from tests.support import util
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
    from corednstw_rpz.test.test_rpz import (  # noqa: F401
        PolicyTest,
        ServeTest,
        SetupTest,
    )

POLICY = "rpz.test."

#: One trigger per action, as both servers read it.
ZONE = """\
$TTL 60
@ SOA localhost. root.localhost. 1 3600 600 86400 60
  NS localhost.
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
"""

#: The upstream's addresses: 192.0.2.66 is caught by the rpz-ip trigger.
ADDRESSES = {"badip.example.": "192.0.2.66"}


def _upstream_answer(q, proto):
    """An A record for every name (192.0.2.1, or ADDRESSES'); AAAA and
    other types NODATA."""
    r = dns.message.make_response(q)
    r.flags |= dns.flags.RA
    qn = q.question[0]
    if qn.rdtype == dns.rdatatype.A:
        r.answer.append(dns.rrset.from_text(
            qn.name, 30, "IN", "A",
            ADDRESSES.get(str(qn.name).lower(), "192.0.2.1")))
    return r


class RPZUnbound(Unbound):
    """unbound with the policy zone (respip for the rpz-ip triggers) and
    ``example.`` forwarded to the test upstream."""

    def __init__(self, testcase, policy_file, upstream_port):
        super().__init__(testcase)
        self.policy_file = policy_file
        self.upstream_port = upstream_port

    def _config(self):
        conf = super()._config().replace('module-config: "iterator"',
                                         'module-config: "respip iterator"')
        return conf + """
    domain-insecure: "example."
forward-zone:
    name: "example."
    forward-addr: 127.0.0.1@{port}
rpz:
    name: "{name}"
    zonefile: "{file}"
    rpz-log: yes
""".format(port=self.upstream_port, name=POLICY, file=self.policy_file)


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
]


#: The examples of docs/plugins/rpz.md.
EXAMPLES = {
    "one policy": ". {\n    rpz {\n        policy rpz.example.org. "
                  "db.rpz\n    }\n    cache\n    forward . 9.9.9.9\n}\n",
    "two policies": ". {\n    rpz example.com {\n        policy "
                    "local.rpz. local.rpz\n        policy feed.rpz. "
                    "feed.rpz\n    }\n    forward . 9.9.9.9\n}\n",
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
        differ = []
        for case in CASES:
            theirs = yield ask(ub.port, *case)
            ours = yield ask(app.port(), *case)
            if ours != theirs:
                differ.append((case, ours, theirs))
        self.assertEqual(differ, [])
        self.assertEqual(HITS.get(("dns://:0", POLICY, "qname", "drop")), 1)

