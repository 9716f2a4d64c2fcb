"""The fanout add-on package (contrib/fanout, installed by scripts/test.sh):
its own tests, the upstream README's examples through ``--check``, and
fanout served over the wire against scriptable upstreams and unbound's
DNS over TLS."""

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
from tests.support.unbound import Unbound

INSTALLED = installed("corednstw_fanout")
if INSTALLED:
    from corednstw_fanout.test.test_fanout import (  # noqa: F401
        AnswerTest,
        SetupTest,
    )

#: The Corefiles of the upstream README, as written there (the host's
#: resolv.conf replaced by one written beside the Corefile).
EXAMPLES = {
    "ports": "example.org {\n    fanout . 127.0.0.1:9005 127.0.0.1:9006 "
             "127.0.0.1:9007 127.0.0.1:9008\n}\n",
    "tcp": ". {\n    fanout . 10.0.0.10:53 10.0.0.11:1053 [2003::1]:53 {\n"
           "        network TCP\n    }\n}\n",
    "except": ". {\n    fanout . 10.0.0.10:1234 {\n        except "
              "example.org\n    }\n}\n",
    "resolv.conf": ". {\n    fanout . resolv.conf {\n        except "
                   "example.org\n    }\n}\n",
    "tls": ". {\n    fanout . tls://9.9.9.9 {\n       tls-server "
           "dns.quad9.net\n    }\n}\n",
    "workers": ". {\n    fanout . 10.0.0.10:53 10.0.0.11:53 10.0.0.12:53 "
               "10.0.0.13:1053 10.0.0.14:1053 {\n        worker-count 2\n"
               "    }\n}\n",
    "race": ". {\n    fanout . 10.0.0.10:53 10.0.0.11:53 10.0.0.12:53 "
            "10.0.0.13:1053 10.0.0.14:1053 {\n        race\n    }\n}\n",
    "weighted": "example.org {\n    fanout . 127.0.0.1:9005 127.0.0.1:9006 "
                "127.0.0.1:9007 {\n      policy weighted-random\n"
                "      weighted-random-server-count 2\n"
                "      weighted-random-load-factor 50 70 100\n    }\n}\n",
    "sequential": "example.org {\n    fanout . 127.0.0.1:9005 "
                  "127.0.0.1:9006 127.0.0.1:9007 {\n        policy "
                  "sequential\n    }\n}\n",
}


class FanoutServedTest(unittest.TestCase):

    if not INSTALLED:
        skip = README_CHECK % "fanout"

    def test_readme_examples_check(self):
        check_examples(self, EXAMPLES,
                       files={"resolv.conf": "nameserver 10.0.0.53\n"})

    @defer.inlineCallbacks
    def test_first_positiveanswer(self):
        """The README's first example: four upstreams asked at once, the
        one positive answer wins over three NXDOMAINs; over UDP and
        TCP."""
        ups = upstreams(self, 4)
        for up in ups[:3]:
            up.handler = answer(None, dns.rcode.NXDOMAIN)
        ups[3].handler = answer("10.1.1.4")
        app = yield util.start(self, (
            "example.org:0 {\n    fanout . %s {\n        timeout 5s\n"
            "    }\n}\n") % " ".join(u.addr() for u in ups))
        for proto in ("udp", "tcp"):
            m = yield util.query(app.port(), "www.example.org.",
                                 proto=proto)
            self.assertEqual(util.rrs(m), ["www.example.org. 30 IN A "
                                           "10.1.1.4"])
        self.assertEqual([u.count() for u in ups], [2, 2, 2, 2])
        # fanout asks over UDP whatever the client's transport.
        self.assertEqual(sum(u.count(proto="udp") for u in ups), 8)

    @defer.inlineCallbacks
    def test_nxdomain_when_nobody_knows(self):
        ups = upstreams(self, 2)
        ups[0].handler = answer(None, dns.rcode.NXDOMAIN)
        ups[1].handler = answer(None, dns.rcode.SERVFAIL)
        app = yield util.start(self, ".:0 {\n    fanout . %s %s\n}\n"
                               % (ups[0].addr(), ups[1].addr()))
        m = yield util.query(app.port(), "nx.example.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_network_tcp(self):
        ups = upstreams(self, 2)
        app = yield util.start(self, (
            ".:0 {\n    fanout . %s %s {\n        network TCP\n    }\n}\n")
            % (ups[0].addr(), ups[1].addr()))
        m = yield util.query(app.port(), "www.example.")
        self.assertEqual(util.rrs(m), ["www.example. 300 IN A 192.0.2.1"])
        self.assertEqual(sum(u.count(proto="tcp") for u in ups), 2)
        self.assertEqual(sum(u.count(proto="udp") for u in ups), 0)

    @defer.inlineCallbacks
    def test_except(self):
        """Excepted names go on down the chain (whoami here)."""
        up, = upstreams(self, 1)
        app = yield util.start(self, (
            ".:0 {\n    fanout . %s {\n        except example.org\n"
            "    }\n    whoami\n}\n") % up.addr())
        m = yield util.query(app.port(), "www.example.org.")
        self.assertEqual((m.answer, len(m.additional)), ([], 2))
        m = yield util.query(app.port(), "www.example.net.")
        self.assertEqual(len(m.answer), 1)
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_race_with_a_dead_upstream(self):
        """The README's race example: one upstream never answers, the
        NXDOMAIN of another comes back at once."""
        dead, nx = upstreams(self, 2)
        dead.silent = True
        nx.handler = answer(None, dns.rcode.NXDOMAIN)
        app = yield util.start(self, (
            ".:0 {\n    fanout . %s %s {\n        race\n    }\n}\n")
            % (dead.addr(), nx.addr()))
        # Without race the client's 5 s would pass first (fanout's
        # timeout is 30 s).
        m = yield util.query(app.port(), "non-existent.example.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_worker_count(self):
        """Five upstreams and two workers: the first positive answer
        ends the query before all are asked."""
        ups = upstreams(self, 5)
        for up in ups:
            up.handler = answer("10.2.2.2")
        app = yield util.start(self, (
            ".:0 {\n    fanout . %s {\n        worker-count 2\n    }\n}\n")
            % " ".join(u.addr() for u in ups))
        m = yield util.query(app.port(), "www.example.")
        self.assertEqual(len(m.answer), 1)
        self.assertEqual([u.count() for u in ups][2:], [0, 0, 0])

    @defer.inlineCallbacks
    def test_tls(self):
        """DNS over TLS to unbound, its name given by ``tls-server``."""
        ub = yield Unbound(self).start()
        app = yield util.start(self, (
            ".:0 {\n    fanout . tls://127.0.0.1:%d 127.0.0.1:%d {\n"
            "        tls-server dns.example.test\n        tls %s\n    }\n"
            "}\n") % (ub.tls_port, util.free_port(), ub.ca))
        m = yield util.query(app.port(), "www.example.test.")
        self.assertEqual(util.rrs(m), ["www.example.test. 120 IN A "
                                       "192.0.2.80"])

    @defer.inlineCallbacks
    def test_metrics(self):
        up, = upstreams(self, 1)
        app = yield util.start(self, (
            ".:0 {\n    prometheus 127.0.0.1:0\n    fanout . %s\n}\n")
            % up.addr())
        yield util.query(app.port(), "www.example.")
        yield util.query(app.port(), "nx.example.")
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/metrics")
        to = up.addr()
        for line in (
                'coredns_fanout_request_count_total{to="%s"} 2' % to,
                'coredns_fanout_response_rcode_count_total{rcode="NOERROR",'
                'to="%s"} 1' % to,
                'coredns_fanout_response_rcode_count_total{rcode='
                '"NXDOMAIN",to="%s"} 1' % to,
                'coredns_fanout_request_duration_seconds_count{to="%s"} 2'
                % to,
                'coredns_dns_responses_total{plugin="fanout",rcode='
                '"NXDOMAIN",server="dns://:0",view="",zone="."} 1'):
            self.assertIn(line, body)

