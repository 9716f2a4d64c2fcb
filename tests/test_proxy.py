"""proxy (CoreDNS 1.0-1.4): the Corefile stanza, the policies, failures
and fail_timeout, spray, the HTTP health check, metrics and the
deprecation line, against scripted upstreams."""

import os

import dns.flags
import dns.rcode
from twisted.internet import defer, reactor
from twisted.trial import unittest
from twisted.web import resource, server

from corednstw.core.errors import CorefileError
from corednstw.engines import upstream as engine
from corednstw.plugins import proxy as px
from corednstw.service.app import App
from tests.support import util
from tests.support.unbound import free_port
from tests.support.upstream import Upstream


def build(testcase, text, files=None):
    """The proxy plugins of a Corefile, built (not started)."""
    d = util.write_files(testcase, dict(files or {}, Corefile=text))
    app = App(os.path.join(d, "Corefile"), dns_port=0)
    cfg = app.load()
    return [p for p in cfg.plugins() if p.name == "proxy"]


class ParseTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def parse(self, body, files=None):
        return build(self, ". {\n%s\n}\n" % body, files)

    def error(self, body, files=None):
        with self.assertRaises(CorefileError) as cm:
            self.parse(body, files)
        return str(cm.exception)

    def test_defaults(self):
        (p,) = self.parse(" proxy . 10.0.0.1 10.0.0.2:1053 [2001:db8::1]:53")
        (g,) = p.groups
        self.assertEqual(g.from_, ".")
        self.assertEqual([h.name for h in g.hosts],
                         ["10.0.0.1:53", "10.0.0.2:1053", "[2001:db8::1]:53"])
        self.assertIsInstance(g.policy, px.policy.Random)
        # 1.4's code (its README said 2s and 1)
        self.assertEqual((g.fail_timeout, g.max_fails), (5.0, 3))
        self.assertFalse(g.spray or g.force_tcp)
        self.assertEqual(g.hc_path, "")
        self.assertEqual([h.check_url for h in g.hosts], ["", "", ""])
        e = g.hosts[0].proxy
        self.assertEqual((e.name, e.addr, e.read_timeout),
                         ("proxy", "10.0.0.1:53", px.READ_TIMEOUT))

    def test_every_option(self):
        (p,) = self.parse(""" proxy Example.ORG 10.0.0.1:1053 10.0.0.2 {
    policy least_conn
    fail_timeout 10s
    max_fails 5
    health_check /health:8080 2s
    except a.example.org B.example.org.
    spray
    protocol dns force_tcp
 }""")
        (g,) = p.groups
        self.assertEqual(g.from_, "example.org.")
        self.assertIsInstance(g.policy, px.policy.LeastConn)
        self.assertEqual((g.fail_timeout, g.max_fails), (10.0, 5))
        self.assertEqual((g.hc_path, g.hc_port, g.hc_interval),
                         ("/health", "8080", 2.0))
        self.assertEqual([h.check_url for h in g.hosts],
                         ["http://10.0.0.1:8080/health",
                          "http://10.0.0.2:8080/health"])
        self.assertEqual(g.ignored, ["a.example.org.", "b.example.org."])
        self.assertTrue(g.spray and g.force_tcp)

    def test_policies(self):
        for name, cls in [("random", px.policy.Random),
                          ("least_conn", px.policy.LeastConn),
                          ("round_robin", px.policy.RoundRobin),
                          ("sequential", px.policy.First),
                          ("first", px.policy.First)]:
            (p,) = self.parse(" proxy . 10.0.0.1 {\n policy %s\n }" % name)
            self.assertIsInstance(p.groups[0].policy, cls, name)

    def test_health_check_default_interval(self):
        (p,) = self.parse(" proxy . [::1]:53 {\n health_check /hc:80\n }")
        g = p.groups[0]
        self.assertEqual(g.hc_interval, 4.0)
        self.assertEqual(g.hosts[0].check_url, "http://[::1]:80/hc")

    def test_protocol_dns_alone(self):
        (p,) = self.parse(" proxy . 10.0.0.1 {\n protocol dns\n }")
        self.assertFalse(p.groups[0].force_tcp)

    def test_cidr_from(self):
        (p,) = self.parse(" proxy 10.0.0.0/24 10.0.0.1")
        self.assertEqual(p.groups[0].from_, "0.0.10.in-addr.arpa.")

    def test_resolv_conf(self):
        files = {"resolv.conf": "# comment\nsearch example.org\n"
                                "nameserver 10.0.0.53\n"
                                "nameserver fe80::1%eth0\n"
                                "nameserver not-an-ip\n"
                                "options ndots:5\n"}
        d = util.write_files(self, files)
        path = os.path.join(d, "resolv.conf")
        (p,) = self.parse(" proxy . %s 10.0.0.1" % path)
        self.assertEqual([h.name for h in p.groups[0].hosts],
                         ["10.0.0.53:53", "[fe80::1]:53", "10.0.0.1:53"])
        # a relative name beside the Corefile
        (p,) = self.parse(" proxy . resolv.conf", files)
        self.assertEqual([h.name for h in p.groups[0].hosts],
                         ["10.0.0.53:53", "[fe80::1]:53"])

    def test_several_directives_share_one_plugin(self):
        (p,) = self.parse(" proxy . 10.0.0.1\n proxy example.org 10.0.0.2"
                          "\n proxy example.org 10.0.0.3")
        self.assertEqual([(g.from_, g.hosts[0].name) for g in p.groups],
                         [(".", "10.0.0.1:53"),
                          ("example.org.", "10.0.0.2:53"),
                          ("example.org.", "10.0.0.3:53")])
        self.assertIs(p.group_for("www.example.org."), p.groups[1])
        self.assertIs(p.group_for("example.com."), p.groups[0])

    def test_errors(self):
        for body, line, msg in [
                (" proxy .", 2, "Wrong argument count or unexpected line "
                 "ending after '.'"),
                (" proxy . 10.0.0.1 {\n bogus\n }", 3,
                 "unknown property 'bogus'"),
                (" proxy . 10.0.0.1 {\n policy\n }", 3,
                 "Wrong argument count"),
                (" proxy . 10.0.0.1 {\n policy fastest\n }", 3,
                 "Wrong argument count or unexpected line ending after "
                 "'fastest'"),
                (" proxy . 10.0.0.1 {\n fail_timeout soon\n }", 3,
                 "soon"),
                (" proxy . 10.0.0.1 {\n max_fails x\n }", 3,
                 'strconv.Atoi: parsing "x": invalid syntax'),
                (" proxy . 10.0.0.1 {\n health_check /health\n }", 3,
                 "missing port in address"),
                (" proxy . 10.0.0.1 {\n except\n }", 3,
                 "Wrong argument count"),
                (" proxy . 10.0.0.1 {\n protocol\n }", 3,
                 "Wrong argument count"),
                (" proxy . 10.0.0.1 {\n protocol dns tcp\n }", 3,
                 "only force_tcp allowed as parameter to dns"),
                (" proxy . 10.0.0.1 {\n protocol carrier_pigeon\n }", 3,
                 "invalid protocol: carrier_pigeon"),
                (" proxy . some_bogus_filename", 2,
                 'not an IP address or file: "some_bogus_filename"'),
                (" proxy . 10.0.0.1:99999", 2, "invalid port"),
                (" proxy . tls://10.0.0.1", 2,
                 "use forward for tls:// upstreams"),
                (" proxy . %s" % " ".join("10.0.0.%d" % i
                                          for i in range(16)), 2,
                 "more than 15 TOs configured: 16")]:
            text = self.error(body)
            self.assertIn("Corefile:%d - Error during parsing: plugin/proxy: "
                          % line, text, body)
            self.assertIn(msg, text, body)

    def test_refused_protocols(self):
        grpc = self.error(" proxy . 10.0.0.1 {\n protocol grpc insecure\n }")
        self.assertIn("Corefile:3 - Error during parsing: plugin/proxy: "
                      "protocol grpc needs the gRPC transport, which is not "
                      "built yet", grpc)
        google = self.error(" proxy . 10.0.0.1 {\n"
                            " protocol https_google bootstrap 8.8.8.8:53\n"
                            " }")
        self.assertIn("Corefile:3 - Error during parsing: plugin/proxy: "
                      "protocol https_google was removed in CoreDNS 1.2.0",
                      google)

    def test_empty_resolv_conf(self):
        text = self.error(" proxy . resolv.conf",
                          {"resolv.conf": "search example.org\n"})
        self.assertIn('no nameservers found in "resolv.conf"', text)


class DeprecationTest(unittest.TestCase):

    def test_one_line_per_build(self):
        log = util.capture_log(self)
        build(self, ". {\n proxy . 10.0.0.1\n proxy example.org 10.0.0.2\n"
                    "}\nexample.net {\n proxy . 10.0.0.3\n}\n")
        self.assertEqual(log.lines, [
            "[WARNING] plugin/proxy: " + px.DEPRECATION])
        self.assertIn("forward", px.DEPRECATION)
        build(self, ". {\n proxy . 10.0.0.1\n}\n")
        self.assertEqual(len(log.lines), 2)

    def test_none_without_proxy(self):
        log = util.capture_log(self)
        build(self, ". {\n forward . 10.0.0.1\n}\n")
        self.assertEqual(log.lines, [])

    @defer.inlineCallbacks
    def test_once_when_started(self):
        log = util.capture_log(self)
        yield util.start(self, ".:0 {\n proxy . 127.0.0.1:%d\n}\n"
                         % free_port())
        self.assertEqual(
            [x for x in log.lines if x.startswith("[WARNING]")],
            ["[WARNING] plugin/proxy: " + px.DEPRECATION])


class Served:
    """Scripted upstreams and a server with a block body."""

    def upstream(self, **kw):
        up = Upstream(**kw).start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def serve(self, body, files=None):
        self.log = util.capture_log(self)
        self.app = yield util.start(self, ".:0 {\n%s\n}\n" % body, files)
        return self.app.port()

    def plugin(self):
        (p,) = [p for p in self.app.config.plugins() if p.name == "proxy"]
        return p

    def hosts(self):
        return [h for g in self.plugin().groups for h in g.hosts]


def dead_addr():
    """An address where nothing listens: UDP is refused at once."""
    return "127.0.0.1:%d" % free_port()


class ProxyTest(Served, unittest.TestCase):

    @defer.inlineCallbacks
    def test_udp_tcp_and_client_id(self):
        up = self.upstream()
        port = yield self.serve(" proxy . %s" % up.addr())
        q = util.make_query("WWW.Example.ORG", "A")
        q.id = 777
        for proto in ("udp", "tcp"):
            m = yield util.query(port, q, proto=proto)
            self.assertEqual(m.id, 777)
            self.assertEqual(str(m.question[0].name), "WWW.Example.ORG.")
            self.assertEqual(util.rrs(m),
                             ["WWW.Example.ORG. 300 IN A 192.0.2.1"])
        self.assertEqual((up.count(proto="udp"), up.count(proto="tcp")),
                         (1, 1))

    @defer.inlineCallbacks
    def test_force_tcp(self):
        up = self.upstream()
        port = yield self.serve(" proxy . %s {\n protocol dns force_tcp\n }"
                                % up.addr())
        yield util.query(port, "a.example", "A")
        self.assertEqual((up.count(proto="tcp"), up.count(proto="udp")),
                         (1, 0))

    @defer.inlineCallbacks
    def test_truncated_passed_through(self):
        up = self.upstream()
        up.truncate = True
        port = yield self.serve(" proxy . %s" % up.addr())
        m = yield util.query(port, "a.example", "A")
        self.assertTrue(m.flags & dns.flags.TC)
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_rcodes_passed_through(self):
        up = self.upstream()
        port = yield self.serve(" proxy . %s" % up.addr())
        m = yield util.query(port, "nx.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        up.rcode = dns.rcode.SERVFAIL
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(up.count(), 2)

    @defer.inlineCallbacks
    def test_wrong_question_formerr(self):
        up = self.upstream()
        up.wrong_question = True
        port = yield self.serve(" proxy . %s" % up.addr())
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.FORMERR)

    @defer.inlineCallbacks
    def test_from_and_except(self):
        up = self.upstream()
        port = yield self.serve(
            " proxy example %s {\n except skip.example\n }\n whoami"
            % up.addr())
        for name, proxied in [("example", True), ("a.example", True),
                              ("skip.example", False),
                              ("x.skip.example", False),
                              ("skip.example.example", True),
                              ("other.org", False)]:
            before = up.count()
            m = yield util.query(port, name, "A")
            self.assertEqual(up.count() - before, int(proxied), name)
            # whoami answers with two additional records
            self.assertEqual(len(m.additional), 0 if proxied else 2, name)

    @defer.inlineCallbacks
    def test_longest_from_wins(self):
        wide = self.upstream()
        narrow = self.upstream(address="192.0.2.2")
        port = yield self.serve(" proxy . %s\n proxy example.org %s"
                                % (wide.addr(), narrow.addr()))
        m = yield util.query(port, "www.example.org", "A")
        self.assertEqual(util.rrs(m), ["www.example.org. 300 IN A 192.0.2.2"])
        m = yield util.query(port, "www.example.net", "A")
        self.assertEqual(util.rrs(m), ["www.example.net. 300 IN A 192.0.2.1"])

    @defer.inlineCallbacks
    def test_metrics(self):
        up = self.upstream()
        port = yield self.serve(" proxy . %s" % up.addr())
        yield util.query(port, "a.example", "A")
        yield util.query(port, "nx.example", "A", proto="tcp")
        counts = {k[1:]: v for k, v in px.REQUEST_COUNT.values.items()
                  if k[4] == up.addr()}
        self.assertEqual(counts, {("udp", "dns", "1", up.addr()): 1,
                                  ("tcp", "dns", "1", up.addr()): 1})
        for rcode in ("NOERROR", "NXDOMAIN"):
            self.assertEqual(engine.REQUEST_DURATION.count(
                ("proxy", up.addr(), rcode)), 1)


class PolicyTest(Served, unittest.TestCase):

    @defer.inlineCallbacks
    def test_sequential_and_first_take_the_first_healthy(self):
        for name in ("sequential", "first"):
            one = self.upstream()
            two = self.upstream()
            port = yield self.serve(" proxy . %s %s {\n policy %s\n }"
                                    % (one.addr(), two.addr(), name))
            for _ in range(5):
                yield util.query(port, "a.example", "A")
            self.assertEqual((one.count(), two.count()), (5, 0), name)
            # the first one down: the second takes over
            self.hosts()[0].fails = 3
            yield util.query(port, "a.example", "A")
            self.assertEqual((one.count(), two.count()), (5, 1), name)

    @defer.inlineCallbacks
    def test_round_robin_rotates(self):
        ups = [self.upstream() for _ in range(3)]
        port = yield self.serve(" proxy . %s {\n policy round_robin\n }"
                                % " ".join(u.addr() for u in ups))
        order = []
        for _ in range(6):
            before = [u.count() for u in ups]
            yield util.query(port, "a.example", "A")
            order.append([u.count() - b for u, b in
                          zip(ups, before)].index(1))
        # as in 1.4, the counter moves first: the second host starts
        self.assertEqual(order, [1, 2, 0, 1, 2, 0])
        # a host that is down hands its turn on
        self.hosts()[1].fails = 3
        before = [u.count() for u in ups]
        for _ in range(3):
            yield util.query(port, "a.example", "A")
        self.assertEqual([u.count() - b for u, b in zip(ups, before)],
                         [1, 0, 2])

    @defer.inlineCallbacks
    def test_random_spreads(self):
        one = self.upstream()
        two = self.upstream()
        port = yield self.serve(" proxy . %s %s" % (one.addr(), two.addr()))
        for _ in range(40):
            yield util.query(port, "a.example", "A")
        self.assertEqual(one.count() + two.count(), 40)
        self.assertGreater(one.count(), 0)
        self.assertGreater(two.count(), 0)

    @defer.inlineCallbacks
    def test_least_conn_avoids_the_busy_host(self):
        one = self.upstream()
        two = self.upstream()
        one.held = two.held = True
        port = yield self.serve(" proxy . %s %s {\n policy least_conn\n }"
                                % (one.addr(), two.addr()))
        first = util.query(port, "a.example", "A")
        yield util.wait_for(lambda: one.count() + two.count() == 1)
        busy, idle = (one, two) if one.count() else (two, one)
        second = util.query(port, "b.example", "A")
        yield util.wait_for(lambda: idle.count() == 1)
        self.assertEqual(busy.count(), 1)
        one.release()
        two.release()
        yield defer.gatherResults([first, second])
        self.assertEqual([h.conns for h in self.hosts()], [0, 0])


class FailureTest(Served, unittest.TestCase):

    @defer.inlineCallbacks
    def test_failover_when_an_upstream_is_down(self):
        """A refusing host takes max_fails (3) failures, then is down and
        the next host answers the same query."""
        dead = dead_addr()
        good = self.upstream()
        port = yield self.serve(" proxy . %s %s {\n policy sequential\n }"
                                % (dead, good.addr()))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(good.count(), 1)
        h = self.hosts()[0]
        self.assertEqual(h.fails, 3)
        self.assertEqual(sum(v for k, v in px.REQUEST_COUNT.values.items()
                             if k[4] == dead), 3)
        # down: later queries go straight to the good host
        yield util.query(port, "b.example", "A")
        self.assertEqual(h.fails, 3)
        self.assertEqual(good.count(), 2)

    @defer.inlineCallbacks
    def test_max_fails(self):
        for max_fails, tries in ((1, 1), (2, 2), (5, 5)):
            dead = dead_addr()
            good = self.upstream()
            port = yield self.serve(
                " proxy . %s %s {\n policy first\n max_fails %d\n }"
                % (dead, good.addr(), max_fails))
            m = yield util.query(port, "a.example", "A")
            self.assertEqual(m.rcode(), 0)
            self.assertEqual(self.hosts()[0].fails, tries, max_fails)

    @defer.inlineCallbacks
    def test_fail_timeout_forgets_failures(self):
        dead = dead_addr()
        good = self.upstream()
        port = yield self.serve(
            " proxy . %s %s {\n policy sequential\n max_fails 1\n"
            " fail_timeout 50ms\n }" % (dead, good.addr()))
        yield util.query(port, "a.example", "A")
        h = self.hosts()[0]
        self.assertEqual(h.fails, 1)
        yield util.wait_for(lambda: h.fails == 0)
        # up again: the next query tries it first
        yield util.query(port, "b.example", "A")
        self.assertEqual((h.fails, good.count()), (1, 2))

    @defer.inlineCallbacks
    def test_all_down_servfail_without_spray(self):
        port = yield self.serve(" errors\n proxy . %s {\n max_fails 1\n }"
                                % dead_addr())
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        yield util.wait_for(lambda: "unreachable backend: no upstream host"
                            in self.log.text())

    @defer.inlineCallbacks
    def test_max_fails_zero_never_down(self):
        dead = dead_addr()
        port = yield self.serve(" proxy . %s {\n max_fails 0\n }" % dead)
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(sum(v for k, v in px.REQUEST_COUNT.values.items()
                             if k[4] == dead), px.MAX_ATTEMPTS)

    @defer.inlineCallbacks
    def test_timeouts_do_not_count(self):
        slow = self.upstream()
        slow.silent = True
        good = self.upstream()
        port = yield self.serve(" proxy . %s %s {\n max_fails 1\n }"
                                % (slow.addr(), good.addr()))
        slow_host, good_host = self.hosts()
        slow_host.proxy.read_timeout = 0.02
        for _ in range(5):
            m = yield util.query(port, "a.example", "A")
            self.assertEqual(m.rcode(), 0)
        self.assertEqual(good.count(), 5)
        self.assertEqual(slow_host.fails, 0)

    @defer.inlineCallbacks
    def test_spray(self):
        """Every host down: spray still sends the query to one."""
        up = self.upstream()
        for spray, rcode in (("", dns.rcode.SERVFAIL), ("spray\n", 0)):
            port = yield self.serve(" proxy . %s {\n max_fails 1\n %s }"
                                    % (up.addr(), spray))
            self.hosts()[0].fails = 1
            m = yield util.query(port, "a.example", "A")
            self.assertEqual(m.rcode(), rcode, spray)
        self.assertEqual(up.count(), 1)
        # a lone host is simply used (1.4 logged nothing then)
        self.assertFalse(any("spraying" in x for x in self.log.lines))

    @defer.inlineCallbacks
    def test_spray_among_several(self):
        one = self.upstream()
        two = self.upstream()
        port = yield self.serve(" proxy . %s %s {\n max_fails 1\n spray\n"
                                " policy sequential\n }"
                                % (one.addr(), two.addr()))
        for h in self.hosts():
            h.fails = 1
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)
        self.assertEqual(one.count() + two.count(), 1)
        used = one if one.count() else two
        self.assertIn("[WARNING] All hosts reported as down, spraying to "
                      "target: %s" % used.addr(), self.log.lines)


class _Health(resource.Resource):
    """A health endpoint whose status code the test sets."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.code = 200
        self.hits = 0

    def render_GET(self, request):
        self.hits += 1
        request.setResponseCode(self.code)
        return b"ok"


class HealthCheckTest(Served, unittest.TestCase):

    def http(self):
        res = _Health()
        port = reactor.listenTCP(0, server.Site(res), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        return res, port.getHost().port

    @defer.inlineCallbacks
    def test_hosts_down_and_up_again(self):
        res, hport = self.http()
        res.code = 500
        one = self.upstream()
        two = self.upstream()
        port = yield self.serve(
            " errors\n proxy . %s %s {\n health_check /health:%d 20ms\n"
            " max_fails 2\n }" % (one.addr(), two.addr(), hport))
        hosts = self.hosts()
        self.assertEqual(hosts[0].check_url,
                         "http://127.0.0.1:%d/health" % hport)
        yield util.wait_for(lambda: all(h.fails >= 2 for h in hosts))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(one.count() + two.count(), 0)
        self.assertIn("[WARNING] Host %s health check returned HTTP code 500"
                      % one.addr(), self.log.lines)
        res.code = 302    # 200-399 is healthy
        yield util.wait_for(lambda: all(h.fails == 0 for h in hosts))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)

    @defer.inlineCallbacks
    def test_probe_failure_counts(self):
        up = self.upstream()
        port = yield self.serve(
            " proxy . %s {\n health_check /health:%d 20ms\n max_fails 1\n }"
            % (up.addr(), free_port()))
        h = self.hosts()[0]
        yield util.wait_for(lambda: h.fails >= 1)
        self.assertTrue(any("Host %s health check probe failed" % up.addr()
                            in x for x in self.log.lines))
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    @defer.inlineCallbacks
    def test_checks_stop_with_the_server(self):
        res, hport = self.http()
        up = self.upstream()
        yield self.serve(" proxy . %s {\n health_check /health:%d 10ms\n }"
                         % (up.addr(), hport))
        yield util.wait_for(lambda: res.hits >= 2)
        g = self.plugin().groups[0]
        checker = g.checker
        yield self.app.stopService()
        self.assertIsNone(g.checker)
        self.assertIsNone(checker.loop)
        self.assertEqual(checker.inflight, set())

    @defer.inlineCallbacks
    def test_check_after_third_forgotten_failure(self):
        """1.4 ran the HTTP check when every third failure expired."""
        res, hport = self.http()
        dead = dead_addr()
        good = self.upstream()
        port = yield self.serve(
            " proxy . %s %s {\n policy sequential\n fail_timeout 20ms\n"
            " health_check /health:%d 1h\n }" % (dead, good.addr(), hport))
        hosts = self.hosts()
        # the checks at start (both hosts share the URL here)
        yield util.wait_for(lambda: res.hits == 2 and
                            not any(h.checking for h in hosts))
        yield util.query(port, "a.example", "A")
        self.assertEqual(hosts[0].fails, 3)
        yield util.wait_for(lambda: res.hits == 3)
        yield util.wait_for(lambda: not hosts[0].checking)
        self.assertEqual(hosts[0].fails, 0)


class OldCorefileTest(Served, unittest.TestCase):
    """The shape of the 1.x Corefiles that use proxy beside other
    plugins."""

    ZONE = ("$ORIGIN example.org.\n"
            "@ 3600 IN SOA sns.dns.icann.org. noc.dns.icann.org. "
            "1 7200 3600 1209600 3600\n"
            "  3600 IN NS a.iana-servers.net.\n"
            "www IN A 127.0.0.1\n")

    @defer.inlineCallbacks
    def test_file_for_its_zone_proxy_for_the_rest(self):
        up = self.upstream(address="115.239.210.27")
        d = util.write_files(self, {"db.example.org": self.ZONE})
        port = yield self.serve(" proxy . %s\n file %s example.org"
                                % (up.addr(),
                                   os.path.join(d, "db.example.org")))
        m = yield util.query(port, "www.example.org", "A")
        self.assertTrue(m.flags & dns.flags.AA)
        self.assertEqual(util.rrs(m), ["www.example.org. 3600 IN A 127.0.0.1"])
        m = yield util.query(port, "www.baidu.com", "A")
        self.assertEqual(util.rrs(m),
                         ["www.baidu.com. 300 IN A 115.239.210.27"])
        self.assertEqual(up.count(), 1)

    @defer.inlineCallbacks
    def test_with_loop_cache_and_loadbalance(self):
        up = self.upstream()
        port = yield self.serve(" errors\n proxy . %s\n cache 30\n loop\n"
                                " loadbalance" % up.addr())
        m = yield util.query(port, "www.example.com", "A")
        self.assertEqual(m.rcode(), 0)
        yield util.query(port, "www.example.com", "A")
        self.assertEqual(up.count(name="www.example.com."), 1)


class DnstapTest(Served, unittest.TestCase):
    """FORWARDER_QUERY / FORWARDER_RESPONSE for each attempt, as 1.4's
    toDnstap wrote them."""

    @defer.inlineCallbacks
    def serve_tapped(self, body):
        import tempfile

        from tests.support import framestream as fs
        d = tempfile.mkdtemp(prefix="proxy-tap-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        sock = os.path.join(d, "tap.sock")
        self.col = fs.Collector()
        lp = reactor.listenUNIX(sock, self.col)
        self.addCleanup(lp.stopListening)
        port = yield self.serve(" dnstap %s full\n %s" % (sock, body))
        return port

    def messages(self, mtype):
        from tests.support import framestream as fs
        want = getattr(fs.Message, mtype)
        return [f.message for f in self.col.frames
                if f.message.type == want]

    @defer.inlineCallbacks
    def test_failed_then_answered(self):
        dead = dead_addr()
        good = self.upstream()
        port = yield self.serve_tapped(
            "proxy . %s %s {\n policy sequential\n max_fails 1\n"
            " protocol dns force_tcp\n }" % (dead, good.addr()))
        q = util.make_query("a.example", "A")
        q.id = 4242
        wire = q.to_wire()
        yield util.send_udp(port, wire)
        yield util.wait_for(lambda: len(self.messages("FORWARDER_RESPONSE"))
                            == 1 and len(self.col.frames) >= 5)
        fqs = self.messages("FORWARDER_QUERY")
        (fr,) = self.messages("FORWARDER_RESPONSE")
        self.assertEqual([m.response_port for m in fqs],
                         [int(dead.split(":")[1]), good.port])
        self.assertEqual(fr.response_port, good.port)
        for m in fqs + [fr]:
            self.assertEqual(m.socket_protocol, 2)     # force_tcp
        self.assertEqual(fqs[1].query_message, wire)
        self.assertEqual(fr.response_message[:2], wire[:2])
        self.assertEqual(fr.response_message[2:], good.replies[0][2:])
        self.assertEqual(len({(x.query_time_sec, x.query_time_nsec)
                              for x in fqs + [fr]}), 1)

    @defer.inlineCallbacks
    def test_no_tap_without_dnstap(self):
        up = self.upstream()
        port = yield self.serve(" proxy . %s" % up.addr())
        self.assertEqual(self.plugin().taps, ())
        m = yield util.query(port, "a.example", "A")
        self.assertEqual(m.rcode(), 0)


class StopTest(Served, unittest.TestCase):

    @defer.inlineCallbacks
    def test_stop_with_a_query_in_flight(self):
        """Queries the stop cuts short are not failures of their host."""
        up = self.upstream()
        up.held = True
        yield self.serve(" proxy . %s" % up.addr())
        p = self.plugin()
        (g,) = p.groups
        d = p.serve(_request("a.example"))
        yield util.wait_for(lambda: up.count() == 1)
        yield self.app.stopService()
        r = yield d
        self.assertEqual(r.rcode, dns.rcode.SERVFAIL)
        self.assertEqual((g.hosts[0].fails, g.timers), (0, set()))


def _request(name):
    from corednstw.core.request import Request
    req = Request(util.make_query(name, "A").to_wire(), "127.0.0.1", 5353,
                  "udp")
    req.parse_question(*req.parse_header()[1:])
    return req
