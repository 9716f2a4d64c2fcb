"""The alternate add-on package (contrib/alternate, installed by
scripts/test.sh): its own tests, the upstream README's examples through
``--check``, and the examples served over the wire against scriptable
upstreams."""

import dns.message
import dns.rcode
import dns.rrset
from twisted.internet import defer
from twisted.trial import unittest

from tests.support import util
from tests.support.contrib import (
    README_CHECK,
    answer,
    check_examples,
    installed,
    upstreams,
)

INSTALLED = installed("corednstw_alternate")
if INSTALLED:
    from corednstw_alternate.test.test_alternate import (  # noqa: F401
        RulesTest,
        SetupTest,
    )

#: The Corefiles of the upstream README, as written there.
EXAMPLES = {
    "local": ". {\n\tforward . 8.8.8.8\n\talternate NXDOMAIN . "
             "192.168.1.1:53\n\tlog\n}\n",
    "original": ". {\n\tforward . 8.8.8.8\n\trewrite edns0 local set "
                "0xffee 0x61626364\n\talternate original NXDOMAIN . "
                "192.168.1.1:53\n\tlog\n}\n",
    "multiple": ". {\n    forward . 8.8.8.8\n    alternate NXDOMAIN . "
                "192.168.1.1:53\n    alternate original SERVFAIL,REFUSED . "
                "192.168.100.1:53\n    log\n}\n",
}


class AlternateServedTest(unittest.TestCase):

    if not INSTALLED:
        skip = README_CHECK % "alternate"

    def test_readme_examples_check(self):
        check_examples(self, EXAMPLES)

    @defer.inlineCallbacks
    def test_multiple_alternates(self):
        """The README's "Multiple alternates": NXDOMAIN goes to the first
        alternate, SERVFAIL and REFUSED to the second, other answers
        stand; over UDP and TCP."""
        main, nx_alt, err_alt = upstreams(self, 3)
        nx_alt.handler = answer("10.0.0.1")
        err_alt.handler = answer("10.0.0.2")
        main.handler = lambda q, proto: _main(q)
        app = yield util.start(self, (
            ".:0 {\n    forward . %s\n    alternate NXDOMAIN . %s\n"
            "    alternate original SERVFAIL,REFUSED . %s\n    log\n}\n")
            % (main.addr(), nx_alt.addr(), err_alt.addr()))
        port = app.port()
        for proto in ("udp", "tcp"):
            m = yield util.query(port, "www.example.", proto=proto)
            self.assertEqual(util.rrs(m), ["www.example. 300 IN A "
                                           "192.0.2.1"])
            m = yield util.query(port, "nx.example.", proto=proto)
            self.assertEqual(util.rrs(m), ["nx.example. 30 IN A 10.0.0.1"])
            for name in ("servfail.example.", "refused.example."):
                m = yield util.query(port, name, proto=proto)
                self.assertEqual(util.rrs(m), ["%s 30 IN A 10.0.0.2"
                                               % name])
            m = yield util.query(port, "notimp.example.", proto=proto)
            self.assertEqual(m.rcode(), dns.rcode.NOTIMP)
        self.assertEqual(nx_alt.count("nx.example."), 2)
        self.assertEqual(err_alt.count(), 4)
        self.assertEqual(main.count(), 10)

    @defer.inlineCallbacks
    def test_alternate_when_forward_fails(self):
        """Nothing answers forward: its SERVFAIL goes to the alternate."""
        dead, alt = upstreams(self, 2)
        dead.silent = True
        alt.handler = answer("10.0.0.3")
        app = yield util.start(self, (
            ".:0 {\n    forward . %s {\n        read_timeout 100ms\n"
            "        max_fails 0\n    }\n"
            "    alternate SERVFAIL . %s\n}\n") % (dead.addr(), alt.addr()))
        m = yield util.query(app.port(), "www.example.")
        self.assertEqual(util.rrs(m), ["www.example. 30 IN A 10.0.0.3"])

    @defer.inlineCallbacks
    def test_original_over_the_wire(self):
        """The README's "original" example: the rewrite above alternate
        adds its EDNS0 option to what both upstreams get (rewrite runs
        before alternate in the chain, as in a CoreDNS build with
        alternate before forward)."""
        main, alt = upstreams(self, 2)
        alt.handler = answer("10.0.0.4")
        app = yield util.start(self, (
            ".:0 {\n    forward . %s\n    rewrite edns0 local set 0xffee "
            "0x61626364\n    alternate original NXDOMAIN . %s\n    log\n"
            "}\n") % (main.addr(), alt.addr()))
        m = yield util.query(app.port(), "nxname.example.")
        self.assertEqual(util.rrs(m), ["nxname.example. 30 IN A 10.0.0.4"])
        sent = alt.queries[-1][3]
        self.assertEqual([(o.otype, o.data) for o in sent.options],
                         [(0xffee, b"abcd")])

    @defer.inlineCallbacks
    def test_proxy_metrics(self):
        main, alt = upstreams(self, 2)
        alt.handler = answer("10.0.0.5")
        app = yield util.start(self, (
            ".:0 {\n    prometheus 127.0.0.1:0\n    forward . %s\n"
            "    alternate NXDOMAIN . %s\n}\n") % (main.addr(), alt.addr()))
        yield util.query(app.port(), "nx1.example.")
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/metrics")
        self.assertIn('coredns_proxy_request_duration_seconds_count{'
                      'proxy_name="alternate",rcode="NOERROR",to="%s"} 1'
                      % alt.addr(), body)


def _main(q):
    """The first upstream: the rcode the name's first label says."""
    r = dns.message.make_response(q)
    name = q.question[0].name
    first = name.labels[0].decode()
    if first.startswith("nx"):
        r.set_rcode(dns.rcode.NXDOMAIN)
    elif first in ("servfail", "refused", "notimp"):
        r.set_rcode(dns.rcode.from_text(first.upper()))
    else:
        r.answer.append(dns.rrset.from_text(name, 300, "IN", "A",
                                            "192.0.2.1"))
    return r
