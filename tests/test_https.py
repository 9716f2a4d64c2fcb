"""DNS over HTTPS (RFC 8484): dnspython (httpx2, HTTP/1.1 and HTTP/2),
kdig and plain HTTP requests against the https:// listener."""

import base64
import socket

import dns.message
import dns.query
import dns.rcode
import dns.rrset
from twisted.internet import defer, threads
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.core.errors import CorefileError
from corednstw.dnsserver import doh
from tests.support import tlsutil, util

COREFILE = """https://.:0 {
    bind 127.0.0.1
    %(tls)s
    whoami
    log
    prometheus 127.0.0.1:0
%(extra)s}
"""


def http(method, url, ca=None, http2=False, **kw):
    """One HTTP request with httpx2 in a thread: Deferred firing with the
    httpx2 response."""
    import httpx2

    def run():
        with httpx2.Client(verify=ca or False, http2=http2,
                          timeout=5) as c:
            return c.request(method, url, **kw)
    return threads.deferToThread(run)


def wire(name="example.org.", rdtype="A", **kw):
    return dns.message.make_query(name, rdtype, **kw).to_wire()


class DoHTest(unittest.TestCase):

    #: The HTTP version of the requests made with ``self.http``.
    HTTP2 = False
    #: Options of the block's tls (client_auth request: pyOpenSSL's TLS).
    TLS_OPTS = ""

    def http(self, method, url, **kw):
        kw.setdefault("http2", self.HTTP2)
        return http(method, url, self.ca, **kw)

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.dir, self.ca, self.cert, self.key = tlsutil.certs(self)
        self.app = yield util.start(self, COREFILE % {
            "tls": "tls %s %s%s" % (self.cert, self.key, self.TLS_OPTS),
            "extra": ""})
        self.port = self.app.port(transport="https")
        self.url = "https://127.0.0.1:%d/dns-query" % self.port

    def count(self, status):
        return metrics.families()["coredns_dns_https_responses_total"].get(
            ("https://127.0.0.1:0", str(status)))

    @defer.inlineCallbacks
    def check_whoami(self, m):
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        extra = util.rrs(m, "additional")
        self.assertEqual(extra[0].split()[:4],
                         ["_tcp.example.org.", "0", "IN", "SRV"])
        self.assertEqual(extra[1], "example.org. 0 IN A 127.0.0.1")
        yield util.wait_for(lambda: any(
            '"A IN example.org. tcp ' in x for x in self.log.lines))

    @defer.inlineCallbacks
    def test_dnspython_post_http1(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.doh(self.port, q, self.ca,
                              http_version=dns.query.HTTPVersion.H1)
        yield self.check_whoami(m)

    @defer.inlineCallbacks
    def test_dnspython_get_http2(self):
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.doh(self.port, q, self.ca, post=False,
                              http_version=dns.query.HTTPVersion.H2)
        yield self.check_whoami(m)

    @defer.inlineCallbacks
    def test_kdig_post_and_get(self):
        tlsutil.require_kdig(self)
        for method in ("+https", "+https-get"):
            out, code = yield tlsutil.kdig(
                "@127.0.0.1", "-p", str(self.port), method,
                "+tls-ca=%s" % self.ca,
                "+tls-hostname=%s" % tlsutil.HOSTNAME, "example.org", "A")
            self.assertEqual(code, 0, out)
            self.assertIn("(HTTP/2-%s)" % method[7:].upper().lstrip("-")
                          if method == "+https-get" else "(HTTP/2-POST)",
                          out)
            self.assertIn("status: 200", out)
            self.assertIn("_tcp.example.org.", out)

    @defer.inlineCallbacks
    def test_answer_headers(self):
        before = self.count(200)
        r = yield self.http("POST", self.url, content=wire(),
                       headers={"content-type": "application/dns-message"})
        self.assertEqual(r.status_code, 200)
        self.assertEqual(r.headers["content-type"],
                         "application/dns-message")
        # whoami's records have TTL 0.
        self.assertEqual(r.headers["cache-control"], "max-age=0")
        self.assertEqual(int(r.headers["content-length"]), len(r.content))
        self.assertEqual(self.count(200), before + 1)

    @defer.inlineCallbacks
    def test_no_access_log(self):
        """Requests leave no line in twisted's log (CoreDNS logs none)."""
        events = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        r = yield self.http("POST", self.url, content=wire(),
                       headers={"content-type": "application/dns-message"})
        self.assertEqual(r.status_code, 200)
        self.assertEqual(
            [e for e in events if "dns-query" in formatEvent(e)], [])

    @defer.inlineCallbacks
    def test_http2_alpn(self):
        r = yield http("GET", self.url, self.ca, http2=True, params={
            "dns": base64.urlsafe_b64encode(wire()).rstrip(b"=").decode()})
        self.assertEqual(r.http_version, "HTTP/2")
        self.assertEqual(r.status_code, 200)

    @defer.inlineCallbacks
    def test_http2_alpn_after_plain_http_endpoints(self):
        # A server imports twisted.web without its HTTP/2 (httpd) before
        # DoH's listener starts: h2 is offered all the same (DoH's HTTP/2
        # is its own, not twisted.web's).
        from twisted.web import http as web
        self.patch(web, "H2_ENABLED", False)
        app = yield util.start(self, COREFILE % {
            "tls": "tls %s %s" % (self.cert, self.key), "extra": ""})
        url = "https://127.0.0.1:%d/dns-query" % app.port(transport="https")
        r = yield http("GET", url, self.ca, http2=True, params={
            "dns": base64.urlsafe_b64encode(wire()).rstrip(b"=").decode()})
        self.assertEqual(r.http_version, "HTTP/2")
        self.assertFalse(web.H2_ENABLED)

    @defer.inlineCallbacks
    def test_other_path_404(self):
        before = self.count(404)
        r = yield self.http("POST", self.url.replace("dns-query", "resolve"),
 content=wire())
        self.assertEqual((r.status_code, r.text), (404, "\n"))
        self.assertEqual(self.count(404), before + 1)

    @defer.inlineCallbacks
    def bad(self, method, **kw):
        before = self.count(400)
        r = yield self.http(method, self.url, **kw)
        self.assertEqual((r.status_code, r.text), (400, "invalid request\n"))
        self.assertEqual(r.headers["content-type"],
                         "text/plain; charset=utf-8")
        self.assertEqual(self.count(400), before + 1)

    def test_get_without_dns(self):
        return self.bad("GET")

    def test_get_bad_base64(self):
        return self.bad("GET", params={"dns": "!!!"})

    def test_get_padded_base64(self):
        data = wire()
        data += b"x" * (1 if len(data) % 3 == 0 else 0)
        padded = base64.urlsafe_b64encode(data)
        self.assertIn(b"=", padded)
        return self.bad("GET", params={"dns": padded})

    def test_get_two_values(self):
        b64 = base64.urlsafe_b64encode(wire()).rstrip(b"=").decode()
        return self.bad("GET", params=[("dns", b64), ("dns", b64)])

    @defer.inlineCallbacks
    def test_get_too_long(self):
        # Past what httpx2 sends: http.client.
        import http.client
        before = self.count(400)

        def run():
            c = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=5,
                context=tlsutil.client_context(self.ca))
            c.request("GET", "/dns-query?dns=" + "A" * (doh.MAX_BASE64 + 4))
            r = c.getresponse()
            return r.status, r.read()
        got = yield threads.deferToThread(run)
        self.assertEqual(got, (400, b"invalid request\n"))
        self.assertEqual(self.count(400), before + 1)

    def test_post_too_large(self):
        return self.bad("POST", content=wire() + b"\0" * 70000)

    def test_post_empty(self):
        return self.bad("POST", content=b"")

    def test_post_short(self):
        return self.bad("POST", content=wire()[:11])

    def test_post_a_response(self):
        m = dns.message.make_response(dns.message.make_query("a.", "A"))
        return self.bad("POST", content=m.to_wire())

    def test_post_cut_question(self):
        return self.bad("POST", content=wire()[:20])

    def test_post_two_questions(self):
        data = bytearray(wire())
        data[5] = 2
        return self.bad("POST", content=bytes(data))

    def test_other_method(self):
        return self.bad("PUT", content=wire())

    @defer.inlineCallbacks
    def test_opcode_status_rejected(self):
        # Over UDP an opcode other than QUERY and NOTIFY gets NOTIMP;
        # miekg's request policy makes it a 400 over DoH.
        data = bytearray(wire())
        data[2] |= 2 << 3       # opcode STATUS
        r = yield self.http("POST", self.url, content=bytes(data))
        self.assertEqual(r.status_code, 400)

    @defer.inlineCallbacks
    def test_unknown_ca_refused(self):
        _, other, _, _ = tlsutil.certs(self)
        q = dns.message.make_query("example.org.", "A")
        yield self.assertFailure(tlsutil.doh(self.port, q, other),
                                 Exception)

    @defer.inlineCallbacks
    def test_reload_keeps_the_listener(self):
        util.rewrite(self.app.path, COREFILE % {
            "tls": "tls %s %s" % (self.cert, self.key),
            "extra": "    https {\n        max_connections 3\n    }\n"})
        self.assertTrue(self.app.reload())
        self.assertEqual(self.app.port(transport="https"), self.port)
        lst = self.app.listeners[("https", "127.0.0.1", "0")]
        self.assertEqual(lst.stream.limit, 3)
        q = dns.message.make_query("example.org.", "A")
        m = yield tlsutil.doh(self.port, q, self.ca)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)


class DoH2Test(DoHTest):
    """The same requests over HTTP/2, served by ``dohh2``."""

    HTTP2 = True

    @defer.inlineCallbacks
    def test_pipelined_streams(self):
        """Ten streams sent at once on one connection, each answered with
        its own question."""
        import h2.connection
        import h2.events

        def run():
            ctx = tlsutil.client_context(self.ca)
            ctx.set_alpn_protocols(["h2"])
            raw = socket.create_connection(("127.0.0.1", self.port), 5)
            with ctx.wrap_socket(raw, server_hostname=tlsutil.HOSTNAME) as s:
                c = h2.connection.H2Connection()
                c.initiate_connection()
                for i in range(10):
                    c.send_headers(c.get_next_available_stream_id(), [
                        (":method", "POST"), (":path", "/dns-query"),
                        (":scheme", "https"), (":authority", "x")])
                    c.send_data(c.highest_outbound_stream_id,
                                wire("n%d.example.org." % i),
                                end_stream=True)
                s.sendall(c.data_to_send())
                bodies, ended = {}, 0
                while ended < 10:
                    data = s.recv(65536)
                    if not data:
                        break
                    for ev in c.receive_data(data):
                        if isinstance(ev, h2.events.DataReceived):
                            bodies[ev.stream_id] = (
                                bodies.get(ev.stream_id, b"") + ev.data)
                        elif isinstance(ev, h2.events.StreamEnded):
                            ended += 1
                    s.sendall(c.data_to_send())
                return bodies
        bodies = yield threads.deferToThread(run)
        self.assertEqual(len(bodies), 10)
        for sid, body in bodies.items():
            m = dns.message.from_wire(body)
            self.assertEqual(str(m.question[0].name),
                             "n%d.example.org." % ((sid - 1) // 2))


class DoHFallbackTest(DoHTest):
    """HTTP/1.1 again on Twisted's TLS over pyOpenSSL (the standard
    library's ssl cannot ask for a client certificate and take any)."""

    TLS_OPTS = " {\n        client_auth request\n    }"


class DoH2FallbackTest(DoH2Test):
    """HTTP/2 again on Twisted's TLS over pyOpenSSL."""

    TLS_OPTS = DoHFallbackTest.TLS_OPTS


class PlainHTTPTest(unittest.TestCase):
    """Without a tls directive the listener speaks plain HTTP (CoreDNS
    serves DoH unencrypted then, for a TLS-terminating proxy in front)."""

    @defer.inlineCallbacks
    def setUp(self):
        util.capture_log(self)
        self.app = yield util.start(self, COREFILE % {
            "tls": "", "extra": "    https {\n"
                                "        max_connections 1\n    }\n"})
        self.port = self.app.port(transport="https")
        self.front = self.app.listeners[("https", "127.0.0.1", "0")].stream

    @defer.inlineCallbacks
    def test_post(self):
        r = yield http("POST", "http://127.0.0.1:%d/dns-query" % self.port,
                       content=wire())
        self.assertEqual(r.status_code, 200)
        m = dns.message.from_wire(r.content)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    @defer.inlineCallbacks
    def test_max_connections(self):
        # One connection open: the listener accepts no other until it
        # closes; the waiting one is then served.
        first = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(first.close)
        yield util.wait_for(lambda: self.front.paused)
        second = http("POST", "http://127.0.0.1:%d/dns-query" % self.port,
                      content=wire())
        self.assertEqual(len(self.front.connections), 1)
        first.close()
        r = yield second
        self.assertEqual(r.status_code, 200)
        yield util.wait_for(lambda: not self.front.connections)


class SetupTest(unittest.TestCase):

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, text)
        return str(cm.exception)

    def test_max_connections_errors(self):
        msg = self.error("https://.:0 {\n    https {\n"
                         "        max_connections -1\n    }\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/https: "
                      "max_connections must be a non-negative integer: -1",
                      msg)
        msg = self.error("https://.:0 {\n    https {\n"
                         "        max_connections x\n    }\n}\n")
        self.assertIn("invalid max_connections value 'x'", msg)
        msg = self.error("https://.:0 {\n    https {\n"
                         "        max_connections 1\n"
                         "        max_connections 2\n    }\n}\n")
        self.assertIn("Corefile:4 - Error during parsing: plugin/https: "
                      "max_connections already defined for this server "
                      "block", msg)
        msg = self.error("https://.:0 {\n    https {\n"
                         "        idle 1\n    }\n}\n")
        self.assertIn("plugin/https: unknown property 'idle'", msg)
        msg = self.error("https://.:0 {\n    https 1\n}\n")
        self.assertIn("plugin/https: Wrong argument count", msg)

    def test_max_age(self):
        # The lowest TTL, OPT aside; errors and empty answers: 5 s.
        q = dns.message.make_query("a.example.", "A", use_edns=0)
        m = dns.message.make_response(q)
        self.assertEqual(doh.max_age(m.to_wire()), 5)
        m.answer.append(dns.rrset.from_text("a.example.", 300, "IN", "A",
                                            "192.0.2.1"))
        m.authority.append(dns.rrset.from_text("example.", 7200, "IN", "NS",
                                               "ns.example."))
        self.assertEqual(doh.max_age(m.to_wire()), 300)
        m.answer[0].ttl = 86400
        self.assertEqual(doh.max_age(m.to_wire()), 3600)
        m.set_rcode(dns.rcode.SERVFAIL)
        self.assertEqual(doh.max_age(m.to_wire()), 5)
