"""forward to DNS-over-HTTPS upstreams (https://): our own https://
server and a scriptable DoH server as upstreams, GET and POST, failures
(HTTP errors, garbage, wrong content type, oversized or no answer) that
fail over and end in SERVFAIL, health checks over DoH; host names in TO
resolved through ``resolver``; the Corefile errors."""

import socket

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from corednstw.dnsserver import doh
from corednstw.engines import upstream as engine
from corednstw.plugins.forward import resolve as resolvemod
from tests.support import tlsutil, util
from tests.support.dohupstream import DoHUpstream
from tests.support.syncdns import ThreadedResolver
from tests.support.upstream import Upstream

NAME = tlsutil.HOSTNAME


def forward_block(tos, opts=""):
    return (".:0 {\n errors\n forward . %s {\n%s }\n}\n"
            % (" ".join(tos), opts))


class ParseTest(unittest.TestCase):

    def parse(self, text):
        return util.build_plugins(self, ". {\n%s\n}\n" % text,
                                  "forward")[0][0]

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            self.parse(text)
        return str(cm.exception)

    def test_https_defaults(self):
        f = self.parse("forward . https://127.0.0.1 https://[::1]:8443 "
                       "10.0.0.1")
        self.assertEqual([(p.addr, p.transport) for p in f.upstreams], [
            ("127.0.0.1:443", "https"), ("[::1]:8443", "https"),
            ("10.0.0.1:53", "dns")])
        p = f.upstreams[0]
        self.assertEqual((p.doh_method, p.servername), ("POST", "127.0.0.1"))
        self.assertIsNotNone(p.tls)
        self.assertIsNone(f.upstreams[2].tls)

    def test_doh_method_and_servername(self):
        for method in ("GET", "POST"):
            f = self.parse("forward . https://127.0.0.1 {\n doh_method %s\n"
                           " tls_servername dns.example\n}" % method)
            p = f.upstreams[0]
            self.assertEqual((p.doh_method, p.servername),
                             (method, "dns.example"))
        f = self.parse("forward . https://127.0.0.1%doh.example:5443")
        self.assertEqual((f.upstreams[0].addr, f.upstreams[0].servername),
                         ("127.0.0.1:5443", "doh.example"))

    def test_host_names_resolved_at_setup(self):
        """As CoreDNS 1.14, a host name in TO is looked up while the
        Corefile is read (here through ``resolver``): one upstream per
        address, in TO's order, repeats dropped."""
        r = ThreadedResolver(self, {"dns.example.com": ["127.0.0.2",
                                                        "::2"],
                                    "dot.example": ["127.0.0.1"]})
        f = self.parse("forward . dns.example.com:5353 127.0.0.1 "
                       "tls://dot.example%%name.example {\n"
                       " resolver 127.0.0.1:%d\n}" % r.port)
        self.assertEqual([(p.addr, p.transport, p.servername)
                          for p in f.upstreams], [
            ("127.0.0.2:5353", "dns", ""), ("[::2]:5353", "dns", ""),
            ("127.0.0.1:53", "dns", ""),
            ("127.0.0.1:853", "tls", "name.example")])
        self.assertEqual(r.count("dns.example.com.", "AAAA"), 1)

    def test_unresolvable_name_refused(self):
        """``forward . a27.0.0.1``: no address, no Corefile (CoreDNS's
        setup_test.go)."""
        r = ThreadedResolver(self, {})
        err = self.error("forward . nx.example.test {\n resolver "
                         "127.0.0.1:%d\n}" % r.port)
        self.assertIn('Corefile:2 - Error during parsing: plugin/forward: '
                      'failed to resolve "nx.example.test": no addresses '
                      'found for "nx.example.test"', err)
        self.patch(resolvemod, "_ask_system", _no_such_host)
        self.assertIn('failed to resolve "a27.0.0.1"',
                      self.error("forward . a27.0.0.1"))

    def test_errors_with_lines(self):
        for text, line, msg in [
                ("forward . https://127.0.0.1 {\n doh_method PUT\n}", 3,
                 "doh_method must be either POST or GET"),
                ("forward . https://127.0.0.1 {\n doh_method\n}", 3,
                 "Wrong argument count"),
                ("forward . https://1.1.1.1/ ", 2,
                 "paths are not allowed in HTTPS upstream addresses"),
                ("forward . https://1.1.1.1/dns-query", 2,
                 "paths are not allowed in HTTPS upstream addresses"),
                ("forward . 127.0.0.1 {\n resolver\n}", 3,
                 "Wrong argument count"),
                ("forward . dns.example {\n\n resolver dns.google\n}", 4,
                 'resolver must be an IP address or IP:port: "dns.google"'),
                ("forward . 127.0.0.1 {\n resolver 10.0.0.1:99999\n}", 3,
                 "resolver must be an IP address or IP:port"),
                ("forward . https://127.0.0.1%a.example {\n"
                 " tls_servername b.example\n}", 2,
                 "both forward ('b.example') and proxy level ('a.example')"),
                ("forward . https://127.0.0.1 {\n tls /nonexistent/ca\n}",
                 3, "open /nonexistent/ca: no such file or directory"),
                ("forward . quic://127.0.0.1", 2,
                 "'quic' is not supported as a destination protocol"),
                ("forward . exa_mple..com", 2,
                 'not an IP address, file, or valid domain: '
                 '"exa_mple..com"')]:
            err = self.error(text)
            self.assertIn(msg, err, text)
            self.assertIn("Corefile:%d - " % line, err, text)
            self.assertIn("plugin/forward", err, text)


class OwnServerTest(unittest.TestCase):
    """Forward to corednstw's own https:// server (whoami behind it)."""

    @defer.inlineCallbacks
    def setUp(self):
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.up = yield util.start(self, (
            "https://.:0 {\n bind 127.0.0.1\n tls %s %s\n whoami\n}\n"
            % (self.cert, self.key)))
        self.port = self.up.port(transport="https")
        self.to = "127.0.0.1:%d" % self.port

    def served(self, status):
        return metrics.families()["coredns_dns_https_responses_total"].get(
            ("https://127.0.0.1:0", str(status)))

    @defer.inlineCallbacks
    def test_get_and_post(self):
        for method in ("GET", "POST"):
            app = yield util.start(self, forward_block(
                ["https://" + self.to],
                "  tls %s\n  tls_servername %s\n  doh_method %s\n"
                % (self.ca, NAME, method)))
            port = app.port()
            before = self.served(200)
            labels = ("forward", self.to, "https")
            hits = engine.CONN_HITS.get(labels)
            misses = engine.CONN_MISSES.get(labels)
            for proto in ("udp", "tcp"):
                q = util.make_query("Example.ORG", "A")
                q.id = 4242
                m = yield util.query(port, q, proto=proto)
                self.assertEqual(m.id, 4242)
                self.assertEqual(m.rcode(), dns.rcode.NOERROR)
                self.assertTrue(m.flags & dns.flags.QR)
                # whoami behind DoH sees a TCP client: our end of the
                # HTTPS connection.
                extra = util.rrs(m, "additional")
                self.assertIn("Example.ORG. 0 IN A 127.0.0.1", extra)
                self.assertTrue(any(x.startswith("_tcp.Example.ORG. 0 IN SRV")
                                    for x in extra), extra)
                self.assertEqual(str(m.question[0].name), "Example.ORG.")
            self.assertEqual(self.served(200) - before, 2)
            # one connection, kept alive for the second query
            self.assertEqual(engine.CONN_MISSES.get(labels) - misses, 1)
            self.assertEqual(engine.CONN_HITS.get(labels) - hits, 1)
            self.assertGreaterEqual(engine.REQUEST_DURATION.count(
                ("forward", self.to, "NOERROR")), 2)

    @defer.inlineCallbacks
    def test_wrong_servername_fails(self):
        app = yield util.start(self, forward_block(
            ["https://" + self.to],
            "  tls %s\n  tls_servername other.example\n  max_fails 0\n"
            % self.ca))
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    @defer.inlineCallbacks
    def test_server_gone_servfail(self):
        app = yield util.start(self, forward_block(
            ["https://" + self.to], "  tls %s\n  tls_servername %s\n"
            % (self.ca, NAME)))
        log = util.capture_log(self)
        yield self.up.stopService()
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        yield util.wait_for(lambda: "connection refused" in log.text())
        self.assertIn('Post "https://%s/dns-query": dial tcp %s: '
                      'connect: connection refused' % (self.to, self.to),
                      log.text())


class ScriptedTest(unittest.TestCase):
    """Against the scriptable DoH server: what goes on the wire, and every
    way an answer can be bad."""

    def setUp(self):
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.log = util.capture_log(self)

    def doh(self, **kw):
        up = DoHUpstream(self.cert, self.key, **kw).start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def serve(self, ups, opts=""):
        self.app = yield util.start(self, forward_block(
            ["https://127.0.0.1:%d" % u.number for u in ups],
            "  tls %s\n  tls_servername %s\n%s" % (self.ca, NAME, opts)))
        return self.app.port()

    @defer.inlineCallbacks
    def test_wire_get_and_post(self):
        up = self.doh()
        for method in ("GET", "POST"):
            port = yield self.serve([up], "  doh_method %s\n" % method)
            q = util.make_query("www.example.org", "A")
            q.id = 999
            m = yield util.query(port, q)
            self.assertEqual(m.id, 999)
            self.assertEqual(util.rrs(m), [
                "www.example.org. 300 IN A 192.0.2.7"])
            verb, path, ctype, sent = up.requests[-1]
            self.assertEqual((verb, path, sent.id), (method, "/dns-query", 0))
            self.assertEqual(str(sent.question[0].name), "www.example.org.")
            if method == "POST":
                self.assertEqual(ctype, doh.MIME.decode())

    @defer.inlineCallbacks
    def check_failover(self, **bad):
        """A bad upstream first (sequential), a good one next: the good
        one answers; the bad one alone gives SERVFAIL."""
        broken = self.doh(**bad)
        good = self.doh(address="192.0.2.8")
        port = yield self.serve([broken, good], "  policy sequential\n")
        m = yield util.query(port, "a.example.org", "A")
        self.assertEqual(util.rrs(m), ["a.example.org. 300 IN A 192.0.2.8"])
        self.assertEqual(broken.methods()[:1], ["POST"])
        # the failure started a health check: . NS, POSTed, which fails too
        labels = ("forward", "127.0.0.1:%d" % broken.number)
        yield util.wait_for(lambda: engine.HC_FAILURES.get(labels) >= 1)
        checks = [q for m_, p, c, q in broken.requests
                  if q.question[0].rdtype == 2]
        self.assertEqual(str(checks[0].question[0].name), ".")
        self.assertTrue(checks[0].flags & dns.flags.RD)
        port = yield self.serve([broken], "  max_fails 0\n"
                                "  read_timeout 300ms\n")
        m = yield util.query(port, "b.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        return broken

    @defer.inlineCallbacks
    def test_http_500(self):
        yield self.check_failover(status=500)
        yield util.wait_for(lambda: "unexpected HTTP status 500"
                            in self.log.text())

    @defer.inlineCallbacks
    def test_garbage(self):
        yield self.check_failover(body=b"\x01\x02garbage")
        yield util.wait_for(lambda: "overflow" in self.log.text())

    @defer.inlineCallbacks
    def test_wrong_content_type(self):
        yield self.check_failover(content_type="text/html")
        yield util.wait_for(lambda: "unexpected content type 'text/html'"
                            in self.log.text())

    @defer.inlineCallbacks
    def test_oversized(self):
        yield self.check_failover(oversize=True)
        yield util.wait_for(lambda: "response body too large"
                            in self.log.text())

    @defer.inlineCallbacks
    def test_no_answer_times_out(self):
        yield self.check_failover(hold=True)
        yield util.wait_for(lambda: "Client.Timeout exceeded"
                            in self.log.text())

    @defer.inlineCallbacks
    def test_connect_attempts(self):
        """Attempts per query: twice the upstreams by default, else
        max_connect_attempts (each a request to a DoH upstream)."""
        bad = [self.doh(status=500), self.doh(status=500)]
        for opts, want in [("", 4), ("  max_connect_attempts 1\n", 1),
                           ("  max_connect_attempts 3\n", 3)]:
            port = yield self.serve(bad, "  max_fails 0\n" + opts)
            before = sum(len(b.requests) for b in bad)
            m = yield util.query(port, "x.example.org", "A")
            self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
            self.assertEqual(sum(len(b.requests) for b in bad) - before,
                             want, opts)

    @defer.inlineCallbacks
    def test_failfast_all_unhealthy(self):
        ups = [self.doh(), self.doh()]
        broken = metrics.families()[
            "coredns_forward_healthcheck_broken_total"]
        for opts, sent in [("  failfast_all_unhealthy_upstreams\n", 0),
                           ("", 1)]:
            port = yield self.serve(ups, "  max_fails 1\n"
                                    "  health_check 1h\n" + opts)
            (f,) = [p for p in self.app.config.plugins()
                    if p.name == "forward"]
            for p in f.upstreams:
                p.fails = 2
            before = sum(len(u.requests) for u in ups)
            count = broken.get(())
            m = yield util.query(port, "x.example.org", "A")
            self.assertEqual(m.rcode(), dns.rcode.SERVFAIL if not sent
                             else dns.rcode.NOERROR)
            self.assertEqual(sum(len(u.requests) for u in ups) - before,
                             sent)
            self.assertEqual(broken.get(()) - count, 1)

    @defer.inlineCallbacks
    def test_healthy_again(self):
        up = self.doh()
        up.status = 503
        port = yield self.serve([up], "  max_fails 1\n"
                                "  health_check 20ms\n")
        (f,) = [p for p in self.app.config.plugins() if p.name == "forward"]
        p = f.upstreams[0]
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        yield util.wait_for(lambda: p.down(1))
        up.status = 200
        yield util.wait_for(lambda: p.fails == 0)
        m = yield util.query(port, "example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_idle_connection_closed_by_server(self):
        up = self.doh()
        port = yield self.serve([up])
        for i in range(3):
            m = yield util.query(port, "n%d.example.org" % i, "A")
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
            up.drop_idle()
        # each query after a drop found its pooled connection closed and
        # went on a new one: no failed attempt, so no health check
        self.assertEqual([str(q.question[0].name)
                          for _m, _p, _c, q in up.requests],
                         ["n0.example.org.", "n1.example.org.",
                          "n2.example.org."])


class ResolverTest(unittest.TestCase):
    """Host names in TO, resolved through ``resolver`` as the Corefile is
    read, then asked like any upstream."""

    def upstream(self, **kw):
        up = Upstream(**kw).start()
        self.addCleanup(up.stop)
        return up

    @defer.inlineCallbacks
    def test_plain_dns_by_name(self):
        # A server that does not answer is left for the next one.
        self.patch(resolvemod, "TIMEOUT", 0.2)
        resolver = ThreadedResolver(self, {"up.example.test": ["127.0.0.1"]})
        target = self.upstream()
        dead = util.free_port()
        app = yield util.start(self, forward_block(
            ["dns://Up.Example.TEST:%d" % target.port],
            "  resolver 127.0.0.1:%d 127.0.0.1:%d\n"
            % (dead, resolver.port)))
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(util.rrs(m), ["example.org. 300 IN A 192.0.2.1"])
        self.assertEqual(target.count(name="example.org."), 1)
        # both address types asked of the resolver that works
        self.assertEqual(resolver.count("up.example.test.", "A"), 1)
        self.assertEqual(resolver.count("up.example.test.", "AAAA"), 1)
        (f,) = [p for p in app.config.plugins() if p.name == "forward"]
        self.assertEqual([p.addr for p in f.upstreams],
                         ["127.0.0.1:%d" % target.port])

    @defer.inlineCallbacks
    def test_https_by_name(self):
        _d, ca, cert, key = tlsutil.certs(self)
        up = DoHUpstream(cert, key).start()
        self.addCleanup(up.stop)
        resolver = ThreadedResolver(self, {NAME: ["127.0.0.1"]})
        app = yield util.start(self, forward_block(
            ["https://%s:%d" % (NAME, up.number)],
            "  tls %s\n  tls_servername %s\n  resolver 127.0.0.1:%d\n"
            % (ca, NAME, resolver.port)))
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(util.rrs(m), ["example.org. 300 IN A 192.0.2.7"])


def _no_such_host(name):
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

