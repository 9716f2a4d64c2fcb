"""forward: Corefile parsing, and exchanges with real upstreams (a
scriptable test server and Debian's unbound, over UDP, TCP and TLS)."""

import os

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.engines import upstream as engine
from corednstw.plugins import forward as fwd
from corednstw.plugins.forward.directive import _parse_to
from tests.support import cases, util
from tests.support.cases import Case
from tests.support.unbound import Unbound
from tests.support.upstream import Upstream


class ParseTest(unittest.TestCase):

    def test_defaults(self):
        (f,), _ = util.build_plugins(
            self, ". {\n forward . 10.0.0.1 [2001:db8::1]:5353"
                  " tls://9.9.9.9%dns.quad9.net\n}\n", "forward")
        self.assertEqual([p.addr for p in f.upstreams],
                         ["10.0.0.1:53", "[2001:db8::1]:5353", "9.9.9.9:853"])
        self.assertEqual(f.policy, "random")
        self.assertEqual(f.maxfails, 2)
        p = f.upstreams[0]
        self.assertEqual((p.expire, p.read_timeout, p.hc_interval),
                         (10.0, 2.0, 0.5))
        self.assertIsNotNone(f.upstreams[2].tls)
        self.assertIsNone(f.upstreams[0].tls)

    def test_all_options(self):
        (f,), _ = util.build_plugins(self, """. {
    forward example.org 10.0.0.1:1053 10.0.0.2 {
        except a.example.org b.example.org
        force_tcp
        prefer_udp
        expire 20s
        max_age 30s
        max_idle_conns 4
        read_timeout 1s
        max_fails 3
        max_connect_attempts 5
        policy round_robin
        health_check 5s no_rec domain Health.Example.
        max_concurrent 100
        next NXDOMAIN servfail
        next_on_nodata
        failover REFUSED
        failfast_all_unhealthy_upstreams
        source_address 127.0.0.1
    }
}
""", "forward")
        self.assertEqual(f.from_, "example.org.")
        self.assertEqual(f.ignored, ["a.example.org.", "b.example.org."])
        self.assertTrue(f.force_tcp and f.prefer_udp and f.failfast)
        self.assertEqual(f.max_attempts, 5)
        self.assertEqual(f.next_rcodes, (3, 2))
        self.assertEqual(f.failover_rcodes, (5,))
        p = f.upstreams[0]
        self.assertEqual((p.expire, p.max_age, p.max_idle, p.read_timeout),
                         (20.0, 30.0, 4, 1.0))
        self.assertEqual((p.hc_interval, p.hc_rd, p.hc_domain, p.hc_proto),
                         (5.0, False, "health.example.", "tcp"))
        self.assertEqual(p.source, "127.0.0.1")

    def test_resolv_conf(self):
        d = util.write_files(self, {"resolv.conf": "# x\nnameserver 10.1.1.1"
                                    "\nsearch example\nnameserver ::1\n"})
        (f,), _ = util.build_plugins(
            self, ". {\n forward . %s/resolv.conf\n}\n" % d, "forward")
        self.assertEqual([p.addr for p in f.upstreams],
                         ["10.1.1.1:53", "[::1]:53"])

    def test_errors(self):
        cases = [
            ("forward .", "Wrong argument count"),
            ("forward . 10.0.0.1 {\n bogus\n}", "unknown property 'bogus'"),
            ("forward . 10.0.0.1 {\n policy foo\n}", "unknown policy 'foo'"),
            ("forward . 10.0.0.1 {\n failover NOERROR\n}",
             "NoError cannot be used in failover"),
            ("forward . 10.0.0.1 {\n next FOO\n}", "FOO is not a valid rcode"),
            ("forward . 10.0.0.1 {\n max_concurrent -1\n}",
             "max_concurrent can't be negative"),
            ("forward . 10.0.0.1 {\n read_timeout 0s\n}",
             "read_timeout must be positive"),
            ("forward . 10.0.0.1 {\n health_check 1s foo\n}",
             "health_check: unknown option foo"),
            ("forward . 10.0.0.1 {\n source_address nope\n}",
             "invalid IP address: nope"),
            ("forward . 10.0.0.1 {\n doh_method PUT\n}",
             "doh_method must be either POST or GET"),
            ("forward . https://9.9.9.9/dns-query",
             "paths are not allowed in HTTPS upstream addresses"),
            ("forward . grpc://9.9.9.9", "is not supported as a destination"),
            ("forward . /nonexistent/resolv.conf",
             "not an IP address, file, or valid domain"),
            ("forward . tls://9.9.9.9%a.example {\n tls_servername b\n}",
             "both forward ('b') and proxy level ('a.example')"),
            ("forward . " + " ".join("10.0.0.%d" % i for i in range(1, 17)),
             "more than 15 TOs configured: 16"),
        ]
        for text, msg in cases:
            with self.assertRaises(CorefileError) as cm:
                util.build_plugins(self, ". {\n %s\n}\n" % text,
                                   "forward")
            self.assertIn(msg, str(cm.exception), text)
            self.assertIn("plugin/forward", str(cm.exception))

    def test_tls_servername_split(self):
        self.assertEqual(
            _parse_to(None, "tls://10.0.0.1%dns.example:10853"),
            [("tls", "10.0.0.1", 10853, "dns.example")])
        self.assertEqual(_parse_to(None, "dns://[::1]:53"),
                         [("dns", "::1", 53, "")])


class SetupTableTest(unittest.TestCase):
    """CoreDNS's forward setup tables (setup_test.go, setup_policy_test.go)
    as far as they apply: input -> settings or an error text."""

    def parse(self, text):
        return util.build_plugins(self, ". {\n%s\n}\n" % text,
                                  "forward")[0]

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            self.parse(text)
        return str(cm.exception)

    def test_setup(self):
        for text, frm, maxfails, hc_rd, hc_domain, force, prefer in [
                ("forward . 127.0.0.1", ".", 2, True, ".", False, False),
                ("forward . 127.0.0.1 {\nhealth_check 0.5s domain "
                 "example.org\n}", ".", 2, True, "example.org.", False,
                 False),
                ("forward . 127.0.0.1 {\nexcept miek.nl\n}", ".", 2, True,
                 ".", False, False),
                ("forward . 127.0.0.1 {\nmax_fails 3\n}", ".", 3, True, ".",
                 False, False),
                ("forward . 127.0.0.1 {\nforce_tcp\n}", ".", 2, True, ".",
                 True, False),
                ("forward . 127.0.0.1 {\nprefer_udp\n}", ".", 2, True, ".",
                 False, True),
                ("forward . 127.0.0.1 {\nforce_tcp\nprefer_udp\n}", ".", 2,
                 True, ".", True, True),
                ("forward . 127.0.0.1:53", ".", 2, True, ".", False, False),
                ("forward . 127.0.0.1:8080", ".", 2, True, ".", False, False),
                ("forward . [::1]:53", ".", 2, True, ".", False, False),
                ("forward . [2003::1]:53", ".", 2, True, ".", False, False),
                ("forward 10.9.3.0/18 127.0.0.1", "0.9.10.in-addr.arpa.", 2,
                 True, ".", False, False)]:
            (f,) = self.parse(text)
            p = f.upstreams[0]
            self.assertEqual((f.from_, f.maxfails, p.hc_rd, p.hc_domain,
                              f.force_tcp, f.prefer_udp),
                             (frm, maxfails, hc_rd, hc_domain, force, prefer),
                             text)

    def test_escaped_dot_is_no_label_boundary(self):
        """``a\\.internal.`` is one label under the root, not a name
        below ``internal.`` (miekg's IsSubDomain): FROM and except
        compare labels."""
        [f] = self.parse("forward internal 127.0.0.1 {\n"
                         "    except skip.internal\n}")
        self.assertTrue(f.match("a.internal."))
        self.assertFalse(f.match("a\\.internal."))
        self.assertFalse(f.match("x.skip.internal."))
        self.assertTrue(f.match("x\\.skip.internal."))

    def test_multi_forward(self):
        fs = self.parse("forward . ::1\nforward com ::2")
        self.assertEqual(
            [(f.from_, [p.addr for p in f.upstreams]) for f in fs],
            [(".", ["[::1]:53"]), ("com.", ["[::2]:53"])])

    def test_setup_errors(self):
        for text, msg in [
                ("forward . 127.0.0.1 {\nblaatl\n}", "unknown property"),
                ("forward . 127.0.0.1 {\nhealth_check 0.5s domain\n}",
                 "Wrong argument count or unexpected line ending after "
                 "'domain'"),
                ("forward %s 127.0.0.1" % ("x" * 64),
                 "unable to normalize '%s'" % ("x" * 64)),
                ("forward . a27.0.0.1 {\nresolver a27.0.0.2\n}",
                 "resolver must be an IP address"),
                ("forward . 127.0.0.1 {\npolicy random2\n}",
                 "unknown policy"),
                ("forward . 127.0.0.1 {\nsource_address not-an-ip\n}",
                 "invalid IP address"),
                ("forward . 127.0.0.1 {\nsource_address\n}",
                 "Wrong argument count or unexpected line ending after "
                 "'source_address'"),
                ("forward . 127.0.0.1 {\nmax_concurrent many\n}", "invalid"),
                ("forward . 127.0.0.1 {\nmax_concurrent -4\n}", "negative"),
                ("forward . 127.0.0.1 {\nmax_connect_attempts many\n}",
                 "invalid"),
                ("forward . 127.0.0.1 {\nmax_connect_attempts -4\n}",
                 "invalid"),
                ("forward . 127.0.0.1 {\nmax_idle_conns many\n}", "invalid"),
                ("forward . 127.0.0.1 {\nmax_idle_conns -1\n}", "negative"),
                ("forward . 127.0.0.1 {\nhealth_check no_rec\n}",
                 "time: invalid duration"),
                ("forward . 127.0.0.1 {\nhealth_check domain example.org\n}",
                 "time: invalid duration"),
                ("forward . 127.0.0.1 {\nhealth_check 0.5s rec\n}",
                 "health_check: unknown option rec"),
                ("forward . 127.0.0.1 {\nhealth_check 0.5s domain "
                 "example..org\n}", "health_check: invalid domain name"),
                ("forward . 127.0.0.1 {\nfailfast_all_unhealthy_upstreams "
                 "false\n}", "Wrong argument count"),
                ("forward . 127.0.0.1 {\nfailover NOERROR\n}",
                 "NoError cannot be used in failover"),
                ("forward . 127.0.0.1 {\nfailover NOT_A_VALID_RCODE\n}",
                 "not a valid rcode"),
                ("forward . 127.0.0.1 {\nmax_age -1s\n}", "negative"),
                ("forward . 127.0.0.1 {\nmax_age invalid\n}", "invalid"),
                ("forward . 127.0.0.1 {\nexpire 30s\nmax_age 10s\n}",
                 "max_age"),
                ("forward . 127.0.0.1 {\nread_timeout 0s\n}", "positive"),
                ("forward . 127.0.0.1 {\nread_timeout -1s\n}", "positive"),
                ("forward . 127.0.0.1 {\nread_timeout invalid\n}",
                 "invalid"),
                ("forward . 127.0.0.1 {\nread_timeout\n}",
                 "Wrong argument count"),
                ("forward . tls://127.0.0.1%example.net:854 {\n"
                 "tls_servername foo\n}",
                 "both forward ('foo') and proxy level ('example.net') TLS "
                 "servernames are set for upstream proxy "
                 "'tls://127.0.0.1:854'")]:
            self.assertIn(msg, self.error(text), text)

    def test_values(self):
        for text, attr, want in [
                ("forward . 127.0.0.1", "max_age", 0.0),
                ("forward . 127.0.0.1 {\nmax_age 30s\n}", "max_age", 30.0),
                ("forward . 127.0.0.1 {\nexpire 10s\nmax_age 10s\n}",
                 "max_age", 10.0),
                ("forward . 127.0.0.1 {\nmax_age 0s\n}", "max_age", 0.0),
                ("forward . 127.0.0.1", "read_timeout", 2.0),
                ("forward . 127.0.0.1 {\nread_timeout 5s\n}",
                 "read_timeout", 5.0),
                ("forward . 127.0.0.1 {\nread_timeout 500ms\n}",
                 "read_timeout", 0.5),
                ("forward . 127.0.0.1", "max_idle", 0),
                ("forward . 127.0.0.1 {\nmax_idle_conns 10\n}", "max_idle",
                 10),
                ("forward . 127.0.0.1 {\nsource_address 192.0.2.1\n}",
                 "source", "192.0.2.1"),
                ("forward . 127.0.0.1 {\nsource_address 2001:0db8:85a3:0000:"
                 "1319:8a2e:0370:7344\n}", "source",
                 "2001:db8:85a3:0:1319:8a2e:370:7344"),
                ("forward . 127.0.0.1 {\nsource_address ::ffff:192.0.2.1\n}",
                 "source", "192.0.2.1")]:
            (f,) = self.parse(text)
            self.assertEqual(getattr(f.upstreams[0], attr), want, text)
        for text, attr, want in [
                ("forward . 127.0.0.1 {\n}", "max_attempts", None),
                ("forward . 127.0.0.1 {\nmax_connect_attempts 0\n}",
                 "max_attempts", 0),
                ("forward . 127.0.0.1 {\nmax_connect_attempts 5\n}",
                 "max_attempts", 5),
                ("forward . 127.0.0.1 {\nmax_concurrent 1000\n}",
                 "max_concurrent", 1000),
                ("forward . 127.0.0.1 {\nnext NXDOMAIN\n}", "next_rcodes",
                 (3,)),
                ("forward . 127.0.0.1 {\nnext SERVFAIL\n}", "next_rcodes",
                 (2,)),
                ("forward . 127.0.0.1 {\nnext NXDOMAIN SERVFAIL REFUSED\n}",
                 "next_rcodes", (3, 2, 5)),
                ("forward . 127.0.0.1", "failfast", False),
                ("forward . 127.0.0.1 {\nfailfast_all_unhealthy_upstreams"
                 "\n}", "failfast", True),
                ("forward . 127.0.0.1 {\npolicy round_robin\n}", "policy",
                 "round_robin"),
                ("forward . 127.0.0.1 {\npolicy sequential\n}", "policy",
                 "sequential")]:
            (f,) = self.parse(text)
            self.assertEqual(getattr(f, attr), want, text)

    def test_tls_servernames(self):
        for text, want in [
                ("forward . tls://127.0.0.1 {\ntls_servername dns\n}",
                 "dns"),
                ("forward . tls://127.0.0.1%example.net {\ntls\n}",
                 "example.net"),
                ("forward . tls://127.0.0.1%example.net:854 "
                 "tls://127.0.0.2%example.net tls://fe80::1%example.com "
                 "{\ntls\n}", "example.net"),
                ("forward . tls://127.0.0.1%example.net:854 {\ntls\n}",
                 "example.net"),
                ("forward . 127.0.0.1 {\ntls_servername dns\n}", ""),
                ("forward . 127.0.0.1 {\ntls\n}", ""),
                ("forward . tls://127.0.0.1", "127.0.0.1"),
                ("forward . tls://[2400:3200::1%dns.alidns.com]:853 {\ntls"
                 "\n}", "dns.alidns.com"),
                ("forward . tls://[2400:3200::1]:853 {\ntls\n"
                 "tls_servername dns.alidns.com\n}", "dns.alidns.com")]:
            (f,) = self.parse(text)
            self.assertEqual(f.upstreams[0].servername, want, text)

    def test_resolv_conf_forms(self):
        d = util.write_files(self, {
            "resolv": "nameserver 10.10.255.252\nnameserver 10.10.255.253\n",
            "null": "# nothing\n",
            "v6": "nameserver 0388:d254:7aec:6892:9f7f:e93b:5806:1b0f\n",
            "empty": ""})
        for text, want in [
                ("forward . %s/resolv" % d,
                 ["10.10.255.252:53", "10.10.255.253:53"]),
                ("forward . %s/v6" % d,
                 ["[0388:d254:7aec:6892:9f7f:e93b:5806:1b0f]:53"]),
                ("forward . %s/empty 127.0.0.1" % d, ["127.0.0.1:53"])]:
            (f,) = self.parse(text)
            self.assertEqual([p.addr for p in f.upstreams], want, text)
        self.assertIn("no valid upstream addresses found",
                      self.error("forward . %s/null" % d))

    def test_round_robin_list(self):
        """TestList: the first round_robin list starts at the second
        upstream, the others follow in order."""
        (f,) = self.parse("forward . 1.1.1.1 2.2.2.2 3.3.3.3 {\n"
                          "policy round_robin\n}")
        self.assertEqual([p.host for p in f.ordered()],
                         ["2.2.2.2", "1.1.1.1", "3.3.3.3"])
        self.assertEqual([p.host for p in f.ordered()],
                         ["3.3.3.3", "1.1.1.1", "2.2.2.2"])
        self.assertEqual([p.host for p in f.ordered()],
                         ["1.1.1.1", "2.2.2.2", "3.3.3.3"])
        (f,) = self.parse("forward . 1.1.1.1 2.2.2.2 3.3.3.3 {\n"
                          "policy sequential\n}")
        self.assertEqual([p.host for p in f.ordered()],
                         ["1.1.1.1", "2.2.2.2", "3.3.3.3"])
        (f,) = self.parse("forward . 1.1.1.1 2.2.2.2 3.3.3.3")
        seen = set()
        for _ in range(200):
            order = tuple(p.host for p in f.ordered())
            self.assertEqual(sorted(order),
                             ["1.1.1.1", "2.2.2.2", "3.3.3.3"])
            seen.add(order)
        self.assertGreater(len(seen), 1)


#: The SOA the scripted upstream denies with.
UPSTREAM_SOA = ("example. 3600 IN SOA ns.example. host.example. 1 7200 1800 "
                "86400 60")


def big_answer(prefix, n):
    """An upstream handler answering ``n`` A records, ``prefix`` 1 to
    ``n``."""
    def big(q, proto):
        r = dns.message.make_response(q)
        r.answer.append(dns.rrset.from_text(
            q.question[0].name, 300, "IN", "A",
            *["%s%d" % (prefix, i) for i in range(1, n + 1)]))
        return r
    return big


class Served:
    """Scripted upstreams and a server with a block body, for test cases."""

    def upstream(self, **kw):
        up = Upstream(**kw).start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def serve(self, body):
        self.app = yield util.start(self, ".:0 {\n%s\n}\n" % body)
        return self.app.port()

    def forwarders(self):
        return [p for p in self.app.config.plugins() if p.name == "forward"]


class ForwardTest(Served, unittest.TestCase):

    @defer.inlineCallbacks
    def test_udp_tcp_and_client_id(self):
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        q = util.make_query("WWW.Example.ORG", "A")
        q.id = 4321
        want = Case("WWW.Example.ORG", ra=True, answer=[
            "WWW.Example.ORG. 300 IN A 192.0.2.1"])
        for proto in ("udp", "tcp"):
            m = yield util.query(port, q, proto=proto)
            self.assertEqual(m.id, 4321)
            cases.check_response(self, want, m)
        # the client's transport is used upstream
        self.assertEqual(up.count(proto="udp"), 1)
        self.assertEqual(up.count(proto="tcp"), 1)

    @defer.inlineCallbacks
    def test_notify_reply_flags_relayed(self):
        # CoreDNS writes the upstream's reply as it came: a NOTIFY's
        # reply from miekg's SetReply has no RD, whatever the query had.
        up = self.upstream()

        def handler(q, proto):
            r = dns.message.make_response(q)
            r.flags &= ~dns.flags.RD
            return r
        up.handler = handler
        port = yield self.serve(" forward . %s" % up.addr())
        q = util.make_query("example.org.", "SOA")
        q.set_opcode(dns.opcode.NOTIFY)
        m = yield util.query(port, q)
        self.assertEqual(m.opcode(), dns.opcode.NOTIFY)
        self.assertFalse(m.flags & dns.flags.RD)
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_every_class_forwarded(self):
        # forward in any block of a server lets every class through
        # (CoreDNS's classChaos); without it only IN is served.
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        for n, cls in enumerate(("CH", "NONE", "ANY", "HS"), 1):
            for proto in ("udp", "tcp"):
                q = util.make_query("example.org.", "A", rdclass=cls)
                m = yield util.query(port, q, proto=proto)
                self.assertEqual(m.rcode(), dns.rcode.NOERROR, cls)
            self.assertEqual(up.count(), 2 * n)
        port = yield self.serve(" whoami")
        m = yield util.query(port, util.make_query(
            "example.org.", "A", rdclass="NONE"))
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)

    @defer.inlineCallbacks
    def test_udp_sockets_pooled(self):
        """UDP queries in flight together each have a socket of their own
        (its own random source port); an answered query's socket is
        reused by later ones, counted as connection cache hits.  Twenty
        queries in flight together, then twenty one by one."""
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        replies = yield defer.gatherResults(
            [util.query(port, "p%d.example" % i) for i in range(20)])
        for i in range(20):
            m = yield util.query(port, "s%d.example" % i)
            replies.append(m)
        self.assertEqual({m.rcode() for m in replies}, {dns.rcode.NOERROR})
        ports = [p for _host, p in up.sources]
        self.assertEqual(len(ports), 40)
        # As many sockets as queries were in flight at once (up to 20),
        # each a miss; every other query a hit.
        self.assertLessEqual(set(ports[20:]), set(ports[:20]))
        labels = ("forward", up.addr(), "udp")
        self.assertEqual(engine.CONN_MISSES.get(labels), len(set(ports)))
        self.assertEqual(engine.CONN_HITS.get(labels),
                         40 - len(set(ports)))

    def spy(self, f):
        """The values ``f.serve`` returns, recorded."""
        seen = []
        serve = f.serve

        def spied(req):
            r = serve(req)
            seen.append(r)
            return r
        f.serve = spied
        return seen

    @defer.inlineCallbacks
    def test_late_slot_first_in_chain_over_udp(self):
        """forward first in its chain answers a UDP query through the
        server's late slot (no Deferred), a TCP query with a Deferred;
        the answer and the mux's count of queries in flight are the
        same either way, and a failure (no upstream listening) is a
        SERVFAIL through the slot too."""
        from corednstw.core.request import LATE
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        (f,) = self.forwarders()
        seen = self.spy(f)
        q = util.make_query("WWW.Example.ORG", "A")
        q.id = 1234
        want = Case("WWW.Example.ORG", ra=True, answer=[
            "WWW.Example.ORG. 300 IN A 192.0.2.1"])
        for proto in ("udp", "tcp"):
            m = yield util.query(port, q, proto=proto)
            self.assertEqual(m.id, 1234)
            cases.check_response(self, want, m)
        self.assertIs(seen[0], LATE)
        self.assertIsInstance(seen[1], defer.Deferred)
        self.assertEqual([m.inflight for m in self.app.muxes], [0])

        # A reply bigger than the client's 512 bytes is not relayed as
        # is: truncated (TC, no records), through the slot as well.
        up.handler = big_answer("192.0.2.", 59)
        m = yield util.query(port, "big.example", use_edns=False)
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(m.answer, [])
        self.assertIs(seen[2], LATE)
        up.handler = None
        up.stop()
        m = yield util.query(port, "gone.example")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertIs(seen[3], LATE)
        self.assertEqual([m.inflight for m in self.app.muxes], [0])

    @defer.inlineCallbacks
    def test_late_slot_not_taken_behind_another_plugin(self):
        """With a plugin in front of forward (``log`` sees the answer) or
        ``max_concurrent`` (its count is released when the answer
        comes), forward returns a Deferred over UDP too."""
        up = self.upstream()
        for body in (" log\n forward . %s" % up.addr(),
                     " forward . %s {\n max_concurrent 10\n }"
                     % up.addr()):
            port = yield self.serve(body)
            (f,) = self.forwarders()
            seen = self.spy(f)
            m = yield util.query(port, "example.org.")
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
            self.assertIsInstance(seen[0], defer.Deferred)
            self.assertEqual(f.concurrent, 0)

    @defer.inlineCallbacks
    def test_udp_idle_socket_closed_after_expire(self):
        """``expire`` closes an idle UDP socket: a query after it opens a
        new one (a miss, another source port)."""
        up = self.upstream()
        port = yield self.serve(" forward . %s {\n expire 200ms\n }"
                                % up.addr())
        for name in ("a.example", "b.example"):
            yield util.query(port, name)
        yield task.deferLater(reactor, 0.5, lambda: None)
        yield util.query(port, "c.example")
        ports = [p for _host, p in up.sources]
        self.assertEqual(ports[0], ports[1])
        self.assertNotEqual(ports[1], ports[2])
        labels = ("forward", up.addr(), "udp")
        self.assertEqual(engine.CONN_MISSES.get(labels), 2)
        self.assertEqual(engine.CONN_HITS.get(labels), 1)

    @defer.inlineCallbacks
    def test_tcp_connection_reused(self):
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        for _ in range(3):
            yield util.query(port, "a.example", "A", proto="tcp")
        labels = ("forward", up.addr(), "tcp")
        self.assertEqual(engine.CONN_MISSES.get(labels), 1)
        self.assertEqual(engine.CONN_HITS.get(labels), 2)

    @defer.inlineCallbacks
    def test_force_tcp(self):
        up = self.upstream()
        port = yield self.serve(" forward . %s {\n force_tcp\n }" % up.addr())
        yield util.query(port, "a.example", "A")
        self.assertEqual((up.count(proto="tcp"), up.count(proto="udp")),
                         (1, 0))

    @defer.inlineCallbacks
    def test_truncated_passed_through(self):
        up = self.upstream()
        up.truncate = True
        port = yield self.serve(" forward . %s" % up.addr())
        m = yield util.query(port, "a.example", "A")
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_prefer_udp_retries_truncated_over_tcp(self):
        up = self.upstream()
        up.truncate = True
        port = yield self.serve(" forward . %s {\n prefer_udp\n }"
                                % up.addr())
        yield cases.run(self, port, [Case("a.example", tc=False, answer=[
            "a.example. 300 IN A 192.0.2.1"])], proto="tcp")
        self.assertEqual((up.count(proto="udp"), up.count(proto="tcp")),
                         (1, 1))

    @defer.inlineCallbacks
    def test_wrong_id_ignored(self):
        up = self.upstream()
        up.wrong_id = True
        port = yield self.serve(" forward . %s" % up.addr())
        yield cases.run(self, port, [Case("a.example", answer=[
            "a.example. 300 IN A 192.0.2.1"])])

    @defer.inlineCallbacks
    def test_wrong_question_formerr(self):
        up = self.upstream()
        up.wrong_question = True
        port = yield self.serve(" forward . %s" % up.addr())
        yield cases.run(self, port, [Case("a.example", rcode="FORMERR")])

    @defer.inlineCallbacks
    def test_timeout_then_next_upstream(self):
        dead = self.upstream()
        dead.silent = True
        good = self.upstream()
        port = yield self.serve(
            " forward . %s %s {\n policy sequential\n read_timeout 100ms\n"
            " max_fails 0\n }" % (dead.addr(), good.addr()))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual((dead.count(), good.count()), (1, 1))

    @defer.inlineCallbacks
    def test_all_fail_servfail(self):
        dead = self.upstream()
        dead.silent = True
        port = yield self.serve(
            " forward . %s {\n read_timeout 50ms\n max_fails 0\n }"
            % dead.addr())
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        # max_fails 0: no health check (TestHealthNoMaxFails)
        self.assertFalse(self.forwarders()[0].upstreams[0].probing)
        self.assertEqual(dead.count(qtype="NS"), 0)
        # max_connect_attempts defaults to twice the number of upstreams
        self.assertEqual(dead.count(), 2)

    @defer.inlineCallbacks
    def test_failover_and_return_with_health_checks(self):
        one = self.upstream()
        two = self.upstream()
        port = yield self.serve(
            " forward . %s %s {\n policy sequential\n health_check 20ms\n"
            " max_fails 1\n read_timeout 200ms\n }" % (one.addr(), two.addr()))
        yield util.query(port, "a.example", "A")
        self.assertEqual((one.count(), two.count()), (1, 0))
        oneport = one.port
        yield one.stop()
        m = yield util.query(port, "b.example", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(two.count(name="b.example."), 1)
        p1 = self.forwarders()[0].upstreams[0]
        yield util.wait_for(lambda: p1.down(1))
        self.assertGreaterEqual(
            engine.HC_FAILURES.get(("forward", one.addr())), 2)
        yield util.query(port, "c.example", "A")
        self.assertEqual(two.count(name="c.example."), 1)
        # back: the health check sees it and queries return to it
        one.start(oneport)
        yield util.wait_for(lambda: not p1.down(1))
        self.assertGreaterEqual(one.count(name=".", qtype="NS"), 1)
        m = yield util.query(port, "d.example", "A")
        self.assertEqual(one.count(name="d.example."), 1)
        self.assertEqual(two.count(name="d.example."), 0)

    @defer.inlineCallbacks
    def test_max_concurrent(self):
        up = self.upstream()
        up.held = True
        port = yield self.serve(" forward . %s {\n max_concurrent 2\n }"
                                % up.addr())
        before = fwd.MAX_CONCURRENT_REJECTS.get()
        d1 = util.query(port, "one.example", "A")
        d2 = util.query(port, "two.example", "A")
        yield util.wait_for(lambda: up.count() == 2)
        m3 = yield util.query(port, "three.example", "A")
        self.assertEqual(m3.rcode(), dns.rcode.REFUSED)
        self.assertEqual(fwd.MAX_CONCURRENT_REJECTS.get() - before, 1)
        up.release()
        m1, m2 = yield defer.gatherResults([d1, d2])
        self.assertEqual((m1.rcode(), m2.rcode()), (0, 0))
        self.assertEqual(up.count(), 2)
        self.assertEqual(self.forwarders()[0].concurrent, 0)

    @defer.inlineCallbacks
    def test_next_and_failover(self):
        one = self.upstream()
        two = self.upstream(address="192.0.2.2")
        port = yield self.serve(
            " forward . %s {\n next NXDOMAIN\n }\n forward . %s"
            % (one.addr(), two.addr()))
        yield cases.run(self, port, [Case("nxname.example", rcode="NXDOMAIN",
                                          ns=[UPSTREAM_SOA])])
        self.assertEqual((one.count(), two.count()), (1, 1))
        yield cases.run(self, port, [Case("ok.example", answer=[
            "ok.example. 300 IN A 192.0.2.1"])])
        self.assertEqual(two.count(), 1)

    @defer.inlineCallbacks
    def test_failover_rcode(self):
        one = self.upstream()
        one.rcode = dns.rcode.SERVFAIL
        two = self.upstream()
        port = yield self.serve(
            " forward . %s %s {\n policy sequential\n failover SERVFAIL\n }"
            % (one.addr(), two.addr()))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual((one.count(), two.count()), (1, 1))

    @defer.inlineCallbacks
    def test_except_and_from(self):
        up = self.upstream()
        port = yield self.serve(
            " forward example %s {\n except skip.example\n }\n whoami"
            % up.addr())
        # whoami answered
        yield cases.run(self, port, [Case(
            "x.skip.example", aa=True, extra=cases.whoami("x.skip.example"))])
        yield util.query(port, "other.org", "A")
        self.assertEqual(up.count(), 0)
        yield util.query(port, "skip.example.example", "A")
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_duration_metric(self):
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        yield util.query(port, "nxdomain.example", "A")
        self.assertEqual(engine.REQUEST_DURATION.count(
            ("forward", up.addr(), "NXDOMAIN")), 1)


class ConformanceTest(Served, unittest.TestCase):
    """Behaviour cases of CoreDNS's forward_test.go, health_test.go and
    proxy_test.go, against scripted upstreams."""

    @staticmethod
    def empty(q, proto):
        return dns.message.make_response(q)

    @defer.inlineCallbacks
    def test_next_on_nodata(self):
        one = self.upstream()
        one.handler = self.empty
        two = self.upstream()
        for opt, want in (("", []),
                          (" {\n next_on_nodata\n }",
                           ["example.org. 300 IN A 192.0.2.1"])):
            port = yield self.serve(" forward . %s%s\n forward . %s"
                                    % (one.addr(), opt, two.addr()))
            yield cases.run(self, port, [
                Case("example.org", answer=want, desc=opt.strip())])

    @defer.inlineCallbacks
    def test_error_rcodes_passed_through(self):
        """FORMERR, NOTIMP, REFUSED and SERVFAIL from the upstream go to the
        client as they are (no retry without failover), RA kept."""
        up = self.upstream()
        port = yield self.serve(" forward . %s" % up.addr())
        for rcode in (dns.rcode.FORMERR, dns.rcode.NOTIMP, dns.rcode.REFUSED,
                      dns.rcode.SERVFAIL):
            up.rcode = rcode
            before = up.count()
            yield cases.run(self, port, [
                Case("example.org", rcode=rcode, ra=True)])
            self.assertEqual(up.count() - before, 1)

    @defer.inlineCallbacks
    def test_failover_stops_after_all_upstreams(self):
        one = self.upstream()
        two = self.upstream()
        one.rcode = two.rcode = dns.rcode.SERVFAIL
        port = yield self.serve(
            " forward . %s %s {\n policy sequential\n failover SERVFAIL\n }"
            % (one.addr(), two.addr()))
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual((one.count(), two.count()), (1, 1))

    @defer.inlineCallbacks
    def test_failover_table(self):
        fail = self.upstream()
        fail.rcode = dns.rcode.SERVFAIL
        refused = self.upstream()
        refused.rcode = dns.rcode.REFUSED
        good = self.upstream()
        record = ["example.org. 300 IN A 192.0.2.1"]
        for order, opt, rcode, answer in [
                ((fail, refused, good), "failover ServFail Refused",
                 "NOERROR", record),
                ((fail, refused, good), "", "SERVFAIL", []),
                ((good, fail, refused), "", "NOERROR", record)]:
            port = yield self.serve(
                " forward . %s {\n policy sequential\n %s\n }"
                % (" ".join(u.addr() for u in order), opt))
            yield cases.run(self, port, [Case(
                "example.org", rcode=rcode, answer=answer, desc=opt)])

    @defer.inlineCallbacks
    def test_default_connect_attempt_cap(self):
        """Two connection attempts per upstream, then SERVFAIL with the
        last error (refused TCP connections)."""
        from tests.support.unbound import free_port
        for n in (1, 3):
            ports = [free_port() for _ in range(n)]
            errors = util.capture_log(self)
            port = yield self.serve(
                " errors\n forward . %s {\n force_tcp\n max_fails 0\n }"
                % " ".join("127.0.0.1:%d" % p for p in ports))
            before = [engine.CONN_MISSES.get(
                ("forward", "127.0.0.1:%d" % p, "tcp")) for p in ports]
            m = yield util.query(port, "example.com", "A")
            self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
            after = [engine.CONN_MISSES.get(
                ("forward", "127.0.0.1:%d" % p, "tcp")) for p in ports]
            self.assertEqual([a - b for a, b in zip(after, before)], [2] * n)
            yield util.wait_for(lambda: any("[ERROR]" in x
                                            for x in errors.lines))
            self.assertIn("example.com. A:", errors.text())
            self.assertIn("refused", errors.text().lower())

    @defer.inlineCallbacks
    def test_max_connect_attempts(self):
        from tests.support.unbound import free_port
        dead = free_port()
        for attempts in (1, 10):
            port = yield self.serve(
                " forward . 127.0.0.1:%d {\n force_tcp\n max_fails 0\n"
                " max_connect_attempts %d\n }" % (dead, attempts))
            labels = ("forward", "127.0.0.1:%d" % dead, "tcp")
            before = engine.CONN_MISSES.get(labels)
            m = yield util.query(port, "example.com", "A")
            self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
            self.assertEqual(engine.CONN_MISSES.get(labels) - before, attempts)

    @defer.inlineCallbacks
    def test_all_upstreams_down(self):
        one = self.upstream()
        two = self.upstream()
        one.silent = two.silent = True
        errors = util.capture_log(self)
        port = yield self.serve(
            " errors\n forward . %s %s {\n max_fails 1\n"
            " failfast_all_unhealthy_upstreams\n read_timeout 50ms\n"
            " health_check 1h\n }" % (one.addr(), two.addr()))
        (f,) = self.forwarders()
        for p in f.upstreams:
            p.fails = 2
        broken = fwd.HEALTHCHECK_BROKEN.get()
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual((one.count(), two.count()), (0, 0))
        self.assertEqual(fwd.HEALTHCHECK_BROKEN.get() - broken, 1)
        yield util.wait_for(lambda: "no healthy proxies" in errors.text())
        # without failfast one upstream is tried at random
        f.failfast = False
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(one.count(name="example.org.")
                         + two.count(name="example.org."), 1)

    @defer.inlineCallbacks
    def test_health_check_after_a_dropped_query(self):
        """health_test.go: the first query is dropped; one health check
        (. NS with RD) follows, over TCP with force_tcp; no_rec and domain
        change it."""
        for opts, proto, name, rd in [
                ("", "udp", ".", True),
                ("force_tcp\n", "tcp", ".", True),
                ("health_check 0.5s no_rec\n", "udp", ".", False),
                ("health_check 0.5s domain example.org\n", "udp",
                 "example.org.", True)]:
            up = self.upstream()
            up.drop = 1
            port = yield self.serve(
                " forward . %s {\n %s read_timeout 50ms\n }"
                % (up.addr(), opts))
            m = yield util.query(port, "example.org", "A")
            self.assertEqual(m.rcode(), 0)
            yield util.wait_for(lambda: up.count(qtype="NS"))
            hc = [(p, n, msg) for p, n, t, msg in up.queries if t == "NS"]
            self.assertEqual(len(hc), 1, opts)
            self.assertEqual(hc[0][0], proto, opts)
            self.assertEqual(hc[0][1], name, opts)
            self.assertEqual(bool(hc[0][2].flags & dns.flags.RD), rd, opts)

    @defer.inlineCallbacks
    def test_health_max_fails(self):
        up = self.upstream()
        up.silent = True
        port = yield self.serve(
            " forward . %s {\n read_timeout 20ms\n health_check 10ms\n"
            " max_fails 2\n max_connect_attempts 1\n }" % up.addr())
        yield util.query(port, "example.org", "A")
        p = self.forwarders()[0].upstreams[0]
        yield util.wait_for(lambda: p.down(2))
        self.assertGreater(p.fails, 2)

    @defer.inlineCallbacks
    def test_protocol_selection(self):
        for client, opts, want in [
                ("udp", "", "udp"), ("udp", "force_tcp", "tcp"),
                ("udp", "prefer_udp", "udp"),
                ("udp", "force_tcp\n prefer_udp", "tcp"),
                ("tcp", "", "tcp"), ("tcp", "force_tcp", "tcp"),
                ("tcp", "prefer_udp", "udp"),
                ("tcp", "force_tcp\n prefer_udp", "tcp")]:
            up = self.upstream()
            port = yield self.serve(" forward . %s {\n %s\n }"
                                    % (up.addr(), opts))
            m = yield util.query(port, "example.org", "A", proto=client)
            self.assertEqual(m.rcode(), 0)
            self.assertEqual(up.queries[0][0], want, (client, opts))

    @defer.inlineCallbacks
    def test_overflow_truncates(self):
        """An upstream UDP answer bigger than the client's buffer becomes
        an empty TC answer (TestCoreDNSOverflow); over TCP it is whole."""
        up = self.upstream()
        up.handler = big_answer("127.0.0.", 40)
        # (options, client transport, TC, records): with prefer_udp the
        # truncated answer is asked again over TCP, then cut to the
        # client's 512 bytes as every answer is.
        for opts, client, truncated, n in [
                ("", "udp", True, 0), ("prefer_udp", "udp", True, 30),
                ("force_tcp", "udp", True, 30),
                ("prefer_udp\n force_tcp", "udp", True, 30),
                ("", "tcp", False, 40)]:
            port = yield self.serve(" forward . %s {\n %s\n }"
                                    % (up.addr(), opts))
            m = yield util.query(port, "example.org", "A", proto=client)
            self.assertEqual(bool(m.flags & dns.flags.TC), truncated, opts)
            self.assertEqual(len(util.rrs(m)), n, opts)
            self.assertEqual(str(m.question[0].name), "example.org.")
        # a client with a big enough EDNS buffer gets it all over UDP
        m = yield util.query(port, "example.org", "A", use_edns=0,
                             payload=1232)
        self.assertFalse(m.flags & dns.flags.TC)
        self.assertEqual(len(util.rrs(m)), 40)

    @defer.inlineCallbacks
    def test_malformed_udp_then_valid(self):
        """Short datagrams and replies with other IDs are skipped; the
        right reply that follows is taken."""
        from twisted.internet import protocol, reactor

        class Bad(protocol.DatagramProtocol):
            def datagramReceived(self, data, addr):
                q = dns.message.from_wire(data)
                bad = ((q.id + 1) & 0xFFFF).to_bytes(2, "big")
                self.transport.write(bad + b"\x00", addr)
                self.transport.write(bad + bytes.fromhex(
                    "818000010000000000000001"), addr)
                r = dns.message.make_response(q)
                r.answer.append(dns.rrset.from_text(
                    "variant.example.", 60, "IN", "A", "192.0.2.55"))
                self.transport.write(r.to_wire(), addr)
        import dns.rrset
        lp = reactor.listenUDP(0, Bad(), interface="127.0.0.1")
        self.addCleanup(lp.stopListening)
        port = yield self.serve(" forward . 127.0.0.1:%d"
                                % lp.getHost().port)
        yield cases.run(self, port, [Case("variant.example", answer=[
            "variant.example. 60 IN A 192.0.2.55"])])

    @defer.inlineCallbacks
    def test_taps_in_order(self):
        """TestSetTapPlugin: every dnstap of the block, in order."""
        util.capture_log(self)      # the collectors are absent
        port = yield self.serve(" dnstap /nonexistent/a.sock full\n"
                                " dnstap tcp://127.0.0.1:1\n"
                                " forward . 127.0.0.1:1")
        (f,) = self.forwarders()
        self.assertEqual([t.output.address for t in f.taps],
                         ["/nonexistent/a.sock", ("127.0.0.1", 1)])
        self.assertTrue(port)


class DnstapTest(unittest.TestCase):
    """FORWARDER_QUERY / FORWARDER_RESPONSE through the block's dnstap,
    decoded by a Frame Streams collector."""

    @defer.inlineCallbacks
    def serve(self, forward, full=" full"):
        import tempfile

        from twisted.internet import reactor

        from tests.support import framestream as fs
        d = tempfile.mkdtemp(prefix="fwd-tap-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        sock = os.path.join(d, "tap.sock")
        self.col = fs.Collector()
        lp = reactor.listenUNIX(sock, self.col)
        self.addCleanup(lp.stopListening)
        app = yield util.start(self, ".:0 {\n dnstap %s%s\n %s\n}\n"
                               % (sock, full, forward))
        return app.port()

    def messages(self, mtype=None):
        from tests.support import framestream as fs
        out = [f.message for f in self.col.frames]
        if mtype is not None:
            out = [m for m in out if m.type == getattr(fs.Message, mtype)]
        return out

    @defer.inlineCallbacks
    def test_udp_and_tcp_exchanges(self):
        from tests.support import framestream as fs
        M = fs.Message
        up = Upstream().start()
        self.addCleanup(up.stop)
        port = yield self.serve("forward . %s" % up.addr())
        q = util.make_query("Www.Example.ORG", "A")
        q.id = 777
        wire = q.to_wire()
        reply = yield util.send_udp(port, wire)
        yield util.wait_for(lambda: len(self.col.frames) >= 4)
        self.assertEqual([m.type for m in self.messages()], [
            M.CLIENT_QUERY, M.FORWARDER_QUERY, M.FORWARDER_RESPONSE,
            M.CLIENT_RESPONSE])
        fq, fr = self.messages()[1:3]
        # the forwarded query and the upstream's reply, with the client's ID
        self.assertEqual(fq.query_message, wire)
        self.assertFalse(fq.HasField("response_message"))
        got = fr.response_message
        self.assertEqual(got[:2], wire[:2])
        self.assertEqual(got[2:], up.replies[0][2:])
        # what the client got is that answer
        self.assertEqual(dns.message.from_wire(reply).answer,
                         dns.message.from_wire(got).answer)
        self.assertFalse(fr.HasField("query_message"))
        for m in (fq, fr):
            self.assertEqual(m.socket_family, 1)
            self.assertEqual(m.socket_protocol, 1)
            self.assertEqual(m.query_address, b"\x7f\x00\x00\x01")
            self.assertGreater(m.query_port, 0)
            self.assertNotEqual(m.query_port, port)
            self.assertEqual(m.response_address, b"\x7f\x00\x00\x01")
            self.assertEqual(m.response_port, up.port)
        # both carry the time forward started; the response its own
        self.assertEqual((fq.query_time_sec, fq.query_time_nsec),
                         (fr.query_time_sec, fr.query_time_nsec))
        self.assertFalse(fq.HasField("response_time_sec"))
        self.assertGreaterEqual(
            (fr.response_time_sec, fr.response_time_nsec),
            (fr.query_time_sec, fr.query_time_nsec))
        cq = self.messages("CLIENT_QUERY")[0]
        self.assertGreaterEqual((fq.query_time_sec, fq.query_time_nsec),
                                (cq.query_time_sec, cq.query_time_nsec))
        # over TCP the protocol is TCP and the local end is the connection's
        replies = yield util.send_tcp(port, wire)
        yield util.wait_for(lambda: len(self.col.frames) >= 8)
        fq, fr = self.messages("FORWARDER_QUERY")[1], \
            self.messages("FORWARDER_RESPONSE")[1]
        self.assertEqual((fq.socket_protocol, fr.socket_protocol), (2, 2))
        self.assertEqual(fq.query_message, wire)
        self.assertEqual(dns.message.from_wire(fr.response_message).answer,
                         dns.message.from_wire(replies[0]).answer)

    @defer.inlineCallbacks
    def test_failed_attempt_logs_query_only(self):
        dead = Upstream().start()
        self.addCleanup(dead.stop)
        dead.silent = True
        good = Upstream().start()
        self.addCleanup(good.stop)
        port = yield self.serve(
            "forward . %s %s {\n policy sequential\n read_timeout 50ms\n"
            " max_fails 0\n }" % (dead.addr(), good.addr()), full="")
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)
        yield util.wait_for(lambda: len(self.col.frames) >= 5)
        fqs = self.messages("FORWARDER_QUERY")
        frs = self.messages("FORWARDER_RESPONSE")
        self.assertEqual([q.response_port for q in fqs],
                         [dead.port, good.port])
        self.assertEqual([r.response_port for r in frs], [good.port])
        # without "full" no message bytes are kept
        for x in fqs + frs:
            self.assertFalse(x.HasField("query_message"))
            self.assertFalse(x.HasField("response_message"))
        # one query time for every attempt
        self.assertEqual(len({(x.query_time_sec, x.query_time_nsec)
                              for x in fqs + frs}), 1)

    @defer.inlineCallbacks
    def test_no_tap_without_dnstap(self):
        up = Upstream().start()
        self.addCleanup(up.stop)
        app = yield util.start(self, ".:0 {\n forward . %s\n}\n"
                               % up.addr())
        f = [p for p in app.config.plugins() if p.name == "forward"][0]
        self.assertEqual(f.taps, ())
        m = yield util.query(app.port(), "a.example", "A")
        self.assertEqual(m.rcode(), 0)


class UnboundTest(unittest.TestCase):
    """Against Debian's unbound: plain DNS and DNS-over-TLS."""

    @defer.inlineCallbacks
    def setUp(self):
        self.ub = yield Unbound(self).start()

    @defer.inlineCallbacks
    def test_udp_and_tcp(self):
        app = yield util.start(self, ".:0 {\n forward . 127.0.0.1:%d\n}\n"
                               % self.ub.port)
        for proto in ("udp", "tcp"):
            yield cases.run(self, app.port(), [Case(
                "WWW.example.test", answer=[
                    "WWW.example.test. 120 IN A 192.0.2.80"])], proto)
        # unbound's SOA, whatever its fields
        yield cases.run(self, app.port(), [Case(
            "nope.example.test", rcode="NXDOMAIN",
            ns=["example.test. * IN SOA * * * * * * *"])])

    @defer.inlineCallbacks
    def test_tls_verified(self):
        app = yield util.start(
            self, ".:0 {\n forward . tls://127.0.0.1:%d {\n"
                  "  tls %s\n  tls_servername dns.example.test\n }\n}\n"
            % (self.ub.tls_port, self.ub.ca))
        mx = Case("mail.example.test", "MX", answer=[
            "mail.example.test. 300 IN MX 10 mx.example.test."])
        yield cases.run(self, app.port(), [mx, mx])
        labels = ("forward", "127.0.0.1:%d" % self.ub.tls_port, "tcp-tls")
        self.assertEqual(engine.CONN_MISSES.get(labels), 1)
        self.assertEqual(engine.CONN_HITS.get(labels), 1)

    @defer.inlineCallbacks
    def test_tls_per_host_servername_and_ip(self):
        app = yield util.start(
            self, ".:0 {\n forward . tls://127.0.0.1%%dns.example.test:%d {\n"
                  "  tls %s\n }\n}\n" % (self.ub.tls_port, self.ub.ca))
        yield cases.run(self, app.port(), [Case(
            "www.example.test", "AAAA", answer=[
                "www.example.test. 120 IN AAAA 2001:db8::80"])])

    @defer.inlineCallbacks
    def test_tls_wrong_name_fails(self):
        app = yield util.start(
            self, ".:0 {\n forward . tls://127.0.0.1:%d {\n"
                  "  tls %s\n  tls_servername other.example\n  max_fails 0\n"
                  " }\n}\n" % (self.ub.tls_port, self.ub.ca))
        yield cases.run(self, app.port(), [
            Case("www.example.test", rcode="SERVFAIL")])


class ReplyTest(unittest.TestCase):

    def test_reply_is_a_raw_response(self):
        """The prebuilt answer forward relays reads like a RawResponse."""
        from corednstw.core.request import RawResponse
        for flags in (0x8180, 0x8583, 0x87B5, 0x8002):
            raw = bytes.fromhex("1234%04x000100000000000000000100"
                                "01" % flags)
            a = RawResponse.prebuilt(raw, "forward")
            b = RawResponse(raw, plugin="forward")
            for attr in ("rcode", "flags", "answer", "authority",
                         "additional", "plugin", "opt", "wire", "raw",
                         "error", "more", "aa", "tc"):
                self.assertEqual(getattr(a, attr), getattr(b, attr),
                                 (hex(flags), attr))
