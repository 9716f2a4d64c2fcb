"""The HTTP endpoints' small server (service/httpd.py) on real sockets:
what a client sees (status lines, headers, keep-alive, pipelining, HEAD,
any method as GET, 404, 400, 431, 505), its limits and deadlines against
slow or hostile clients, and the twisted.web Site an address gets when a
resource on it is not a page."""

import socket
import time

from twisted.internet import defer, reactor, task, threads
from twisted.trial import unittest
from twisted.web import resource

from corednstw.service import httpd

OK = httpd.Text(lambda: (200, "OK"))


class Later(httpd.Page):
    """Answers after ``delay`` seconds (a Deferred)."""

    def __init__(self, delay=0.05, body=b"later"):
        self.delay = delay
        self.body = body

    def respond(self, query):
        return task.deferLater(reactor, self.delay,
                               lambda: (200, b"text/x-later", self.body))


class Echo(httpd.Page):
    def respond(self, query):
        return 200, httpd.TEXT, b"query=" + query


class Boom(httpd.Page):
    def respond(self, query):
        raise RuntimeError("boom")


class Big(httpd.Page):
    def __init__(self, size):
        self.body = b"x" * size
        self.count = 0

    def respond(self, query):
        self.count += 1
        return 200, httpd.TEXT, self.body


class Plain(resource.Resource):
    """A twisted.web resource: its address is served by twisted.web."""

    isLeaf = True

    def render_GET(self, request):
        request.setHeader(b"content-type", b"text/plain")
        return b"plain"


def exchange(port, data, pause=0.0, timeout=5.0, chunks=None):
    """Send ``data`` (in ``chunks`` pieces ``pause`` s apart) and read
    until the server closes or ``timeout``: (bytes, closed by the
    server)."""
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.settimeout(timeout)
        try:
            if chunks:
                for i in range(0, len(data), chunks):
                    s.sendall(data[i:i + chunks])
                    if pause:
                        time.sleep(pause)
            else:
                s.sendall(data)
        except (ConnectionResetError, BrokenPipeError):
            return b"", True
        parts = []
        try:
            parts.extend(iter(lambda: s.recv(65536), b""))
            closed = True
        except socket.timeout:
            closed = False
        except ConnectionResetError:
            closed = True
        return b"".join(parts), closed
    finally:
        s.close()


def responses(raw):
    """(status line, headers dict, body) of each response in ``raw``,
    bodies by Content-Length (HEAD answers marked with a length of -1
    are not: see ``heads``)."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        n = int(headers.get(b"content-length", b"0"))
        if headers.get(b"x-head"):
            n = 0
        out.append((lines[0], headers, rest[:n]))
        raw = rest[n:]
    return out


class _Server:

    pages = None

    def setUp(self):
        self.port = httpd.serve(reactor, "127.0.0.1:0", self.paths())
        self.addCleanup(self.port.stopListening)
        self.endpoint = self.port.factory
        self.channels = []
        build = self.endpoint.plain.buildProtocol

        def keep(addr):
            p = build(addr)
            self.channels.append(p)
            return p
        self.patch(self.endpoint.plain, "buildProtocol", keep)

    def paths(self):
        return {"/health": (OK, "health"), "/later": (Later(), "x"),
                "/echo": (Echo(), "x"), "/boom": (Boom(), "x")}

    def ask(self, data, **kw):
        return threads.deferToThread(
            exchange, self.port.getHost().port, data, **kw)


class ServerTest(_Server, unittest.TestCase):

    @defer.inlineCallbacks
    def test_get(self):
        raw, closed = yield self.ask(
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", timeout=0.5)
        self.assertFalse(closed)        # kept alive
        [(status, headers, body)] = responses(raw)
        self.assertEqual(status, b"HTTP/1.1 200 OK")
        self.assertEqual(body, b"OK")
        self.assertEqual(headers[b"content-length"], b"2")
        self.assertEqual(headers[b"content-type"],
                         b"text/plain; charset=utf-8")
        self.assertNotIn(b"connection", headers)
        # An IMF-fixdate, as net/http and twisted.web write it.
        date = headers[b"date"].decode()
        self.assertEqual(time.strftime(
            "%a, %d %b %Y %H:%M:%S GMT", time.strptime(
                date, "%a, %d %b %Y %H:%M:%S GMT")), date)
        self.assertTrue(date.endswith(" GMT"))
        self.assertFalse(self.endpoint.site)

    @defer.inlineCallbacks
    def test_head(self):
        raw, _ = yield self.ask(
            b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", timeout=0.5)
        head, _, rest = raw.partition(b"\r\n\r\n")
        self.assertIn(b"Content-Length: 2\r\n", head)
        # No body: the GET's answer follows the HEAD's headers.
        self.assertTrue(rest.startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assertTrue(rest.endswith(b"\r\n\r\nOK"))

    @defer.inlineCallbacks
    def test_pipelined_in_order_across_a_deferred_answer(self):
        raw, _ = yield self.ask(
            b"GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = responses(raw)
        self.assertEqual([(s, b) for s, _, b in got], [
            (b"HTTP/1.1 200 OK", b"later"),
            (b"HTTP/1.1 200 OK", b"query=a=1"),
            (b"HTTP/1.1 404 Not Found", b"404 page not found\n"),
            (b"HTTP/1.1 200 OK", b"OK")])
        self.assertEqual(got[0][1][b"content-type"], b"text/x-later")
        self.assertEqual(got[3][1][b"connection"], b"close")

    @defer.inlineCallbacks
    def test_request_in_pieces(self):
        raw, closed = yield self.ask(
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            chunks=1, pause=0.001)
        self.assertTrue(closed)
        self.assertEqual(responses(raw)[0][2], b"OK")

    @defer.inlineCallbacks
    def test_bare_newlines_and_blank_lines_before(self):
        raw, _ = yield self.ask(
            b"\r\nGET /health HTTP/1.1\nHost: x\n\n", timeout=0.5)
        self.assertEqual(responses(raw)[0][:1], (b"HTTP/1.1 200 OK",))

    @defer.inlineCallbacks
    def test_paths(self):
        want = {b"/health": 200, b"/health?probe=1": 200,
                b"/he%61lth": 200, b"http://x:8080/health": 200,
                b"/health/": 404, b"//health": 404, b"/": 404, b"*": 404,
                b"/Health": 404}
        for target, status in want.items():
            raw, _ = yield self.ask(b"GET %s HTTP/1.1\r\nHost: x\r\n"
                                    b"Connection: close\r\n\r\n" % target)
            self.assertEqual(responses(raw)[0][0].split(b" ")[1],
                             b"%d" % status, target)

    @defer.inlineCallbacks
    def test_not_found(self):
        raw, _ = yield self.ask(b"GET /nothing HTTP/1.1\r\nHost: x\r\n"
                                b"Connection: close\r\n\r\n")
        [(status, headers, body)] = responses(raw)
        self.assertEqual((status, body), (b"HTTP/1.1 404 Not Found",
                                          b"404 page not found\n"))
        self.assertEqual(headers[b"x-content-type-options"], b"nosniff")

    @defer.inlineCallbacks
    def test_other_methods(self):
        """Any method on a page is answered as GET, as Go's handlers in
        CoreDNS answer it; an unknown path is 404 whatever the method."""
        raw, closed = yield self.ask(
            b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n"
            b"abcDELETE /nothing HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", timeout=0.5)
        self.assertFalse(closed)        # the short body was read
        got = responses(raw)
        self.assertEqual([s for s, _, _ in got], [
            b"HTTP/1.1 200 OK", b"HTTP/1.1 404 Not Found",
            b"HTTP/1.1 200 OK"])
        self.assertEqual(got[0][2], got[2][2])

    @defer.inlineCallbacks
    def test_bodies_not_read_close(self):
        for head in (b"Content-Length: %d\r\n" % (httpd.MAX_BODY + 1),
                     b"Transfer-Encoding: chunked\r\n",
                     b"Expect: 100-continue\r\nContent-Length: 10\r\n"):
            raw, closed = yield self.ask(
                b"POST /health HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
            self.assertTrue(closed, head)
            [(status, headers, _)] = responses(raw)
            self.assertEqual(status, b"HTTP/1.1 200 OK")
            self.assertEqual(headers[b"connection"], b"close")

    @defer.inlineCallbacks
    def test_body_of_a_get_waited_for(self):
        raw, _ = yield self.ask(
            b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n"
            b"ab", timeout=0.3)
        self.assertEqual(raw, b"")
        raw, _ = yield self.ask(
            b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n"
            b"abcdGET /echo?x HTTP/1.1\r\nHost: x\r\n\r\n", timeout=0.5)
        self.assertEqual([b for _, _, b in responses(raw)],
                         [b"OK", b"query=x"])

    @defer.inlineCallbacks
    def test_connection_close_and_http10(self):
        raw, closed = yield self.ask(b"GET /health HTTP/1.1\r\nHost: x\r\n"
                                     b"Connection: Keep-Alive, Close\r\n\r\n"
                                     b"GET /health HTTP/1.1\r\n\r\n")
        self.assertTrue(closed)
        self.assertEqual(len(responses(raw)), 1)
        raw, closed = yield self.ask(b"GET /health HTTP/1.0\r\n\r\n")
        self.assertTrue(closed)
        self.assertTrue(raw.startswith(b"HTTP/1.0 200 OK\r\n"))

    @defer.inlineCallbacks
    def test_bad_requests(self):
        want = {b"GARBAGE\r\n\r\n": 400,
                b"GET /health\r\n\r\n": 400,
                b"GET  /health HTTP/1.1\r\n\r\n": 400,
                b"GET /health HTTP/1.1 x\r\n\r\n": 400,
                b"GET /health FTP/1.1\r\n\r\n": 400,
                b"G(T /health HTTP/1.1\r\n\r\n": 400,
                b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n": 505,
                b"GET /health HTTP/1.1\r\nbad header\r\n\r\n": 400,
                b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n": 400,
                b"GET /health HTTP/1.1\r\n folded: x\r\n\r\n": 400,
                b"GET /health HTTP/1.1\r\nContent-Length: x\r\n\r\n": 400,
                b"GET /health HTTP/1.1\r\nContent-Length: 1\r\n"
                b"Content-Length: 2\r\n\r\n": 400}
        for data, status in want.items():
            raw, closed = yield self.ask(
                data + b"GET /health HTTP/1.1\r\n\r\n")
            self.assertTrue(closed, data)
            [(line, headers, _)] = responses(raw)
            self.assertEqual(line.split(b" ")[1], b"%d" % status, data)
            self.assertEqual(headers[b"connection"], b"close")

    @defer.inlineCallbacks
    def test_oversize_head(self):
        raw, closed = yield self.ask(
            b"GET /health HTTP/1.1\r\nHost: x\r\n"
            + b"X-Filler: %s\r\n" % (b"y" * 1000) * 70)
        self.assertTrue(closed)
        self.assertEqual(responses(raw)[0][0],
                         b"HTTP/1.1 431 Request Header Fields Too Large")
        # Just under the limit is read.
        filler = b"X-Filler: %s\r\n" % (b"y" * 1000)
        data = b"GET /health HTTP/1.1\r\n" + filler * 60
        data += b"X: %s\r\nConnection: close\r\n\r\n" % (
            b"z" * (httpd.MAX_HEAD - len(data) - 60))
        self.assertLess(len(data), httpd.MAX_HEAD)
        raw, _ = yield self.ask(data)
        self.assertEqual(responses(raw)[0][2], b"OK")

    @defer.inlineCallbacks
    def test_page_failure(self):
        raw, _ = yield self.ask(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n"
                                b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                                timeout=0.5)
        got = responses(raw)
        self.assertEqual([s for s, _, _ in got], [
            b"HTTP/1.1 500 Internal Server Error", b"HTTP/1.1 200 OK"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    @defer.inlineCallbacks
    def test_client_gone_before_a_deferred_answer(self):
        page = Later(delay=0.2)
        httpd.update(self.port, {"/later": (page, "x")})
        raw, _ = yield self.ask(b"GET /later HTTP/1.1\r\nHost: x\r\n\r\n",
                                timeout=0.05)
        self.assertEqual(raw, b"")
        yield task.deferLater(reactor, 0.3, lambda: None)
        self.assertTrue(self.channels[0].lost)

    @defer.inlineCallbacks
    def test_reload_swaps_paths_in_place(self):
        httpd.update(self.port, {"/ready": (OK, "ready")})
        raw, _ = yield self.ask(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                                b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n",
                                timeout=0.5)
        self.assertEqual([s for s, _, _ in responses(raw)], [
            b"HTTP/1.1 404 Not Found", b"HTTP/1.1 200 OK"])


class DeadlineTest(_Server, unittest.TestCase):
    """Slow clients are cut off (Go's http.Server, as CoreDNS runs its
    endpoints, has no such deadlines)."""

    def setUp(self):
        _Server.setUp(self)
        self.patch(httpd, "READ_TIMEOUT", 0.4)
        self.patch(httpd, "IDLE_TIMEOUT", 0.6)
        self.patch(httpd, "WRITE_TIMEOUT", 0.4)

    @defer.inlineCallbacks
    def test_silent_connection(self):
        t0 = time.monotonic()
        raw, closed = yield self.ask(b"", timeout=3)
        self.assertEqual((raw, closed), (b"", True))
        self.assertLess(time.monotonic() - t0, 2)

    @defer.inlineCallbacks
    def test_trickling_request_does_not_move_the_deadline(self):
        t0 = time.monotonic()
        raw, closed = yield self.ask(b"GET /health HTTP/1.1\r\n" + b"X: y\r\n"
                                     * 20, chunks=6, pause=0.05, timeout=3)
        took = time.monotonic() - t0
        self.assertTrue(closed)
        self.assertEqual(raw, b"")
        self.assertLess(took, 1.0)

    @defer.inlineCallbacks
    def test_idle_between_requests(self):
        t0 = time.monotonic()
        raw, closed = yield self.ask(b"GET /health HTTP/1.1\r\n\r\n",
                                     timeout=3)
        took = time.monotonic() - t0
        self.assertTrue(closed)
        self.assertEqual(responses(raw)[0][2], b"OK")
        # The idle timeout, not the read timeout, after an answer.
        self.assertGreater(took, 0.55)
        self.assertLess(took, 2)

    @defer.inlineCallbacks
    def test_pipelined_request_gets_its_own_deadline(self):
        # The second request's deadline starts when the first is answered
        # (0.3 s in), not with the first one's.
        httpd.update(self.port, {"/later": (Later(delay=0.3), "x"),
                                 "/health": (OK, "x")})
        t0 = time.monotonic()
        raw, closed = yield self.ask(
            b"GET /later HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n",
            timeout=3)
        took = time.monotonic() - t0
        self.assertTrue(closed)
        self.assertEqual([b for _, _, b in responses(raw)], [b"later"])
        self.assertGreater(took, 0.65)
        self.assertLess(took, 2)

    @defer.inlineCallbacks
    def test_client_not_reading(self):
        # Many pipelined requests for a big page, and no reading: the
        # server stops reading and answering once the transport's buffer
        # is full, then cuts the client off.
        big = Big(200000)
        httpd.update(self.port, {"/big": (big, "x")})
        s = socket.create_connection(("127.0.0.1", self.port.getHost().port))
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        req = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
        sent = 0
        try:
            for _ in range(2000):
                sent += s.send(req)
        except BlockingIOError:
            pass
        yield task.deferLater(reactor, 0.1, lambda: None)
        [ch] = self.channels
        self.assertTrue(ch.paused)
        self.assertFalse(ch.reading)
        # At most one answer waits in the transport's buffer; the kernel's
        # buffers hold the others.
        self.assertLessEqual(ch.transport._tempDataLen
                             + len(ch.transport.dataBuffer), 200200)
        answered = big.count
        self.assertLess(answered, 2000)
        # Then the client is cut off (the write timeout), with no more
        # than what the kernel's buffers took meanwhile answered.
        for _ in range(60):
            if ch.lost:
                break
            yield task.deferLater(reactor, 0.05, lambda: None)
        self.assertTrue(ch.lost)
        self.assertLessEqual(big.count, answered + 2)
        self.assertTrue(ch.lost)


class SiteTest(_Server, unittest.TestCase):
    """An address with a twisted.web resource is served by twisted.web,
    its pages adapted; a reload switches between the two."""

    def paths(self):
        return {"/health": (OK, "health"), "/plain": (Plain(), "x"),
                "/later": (Later(), "x")}

    def get(self, path):
        return self.ask(b"GET %s HTTP/1.1\r\nHost: x\r\n"
                        b"Connection: close\r\n\r\n" % path)

    def answer(self, raw):
        # twisted.web answers a Deferred page in chunks
        status, headers, body = responses(raw)[0]
        if headers.get(b"transfer-encoding") == b"chunked":
            body = raw.partition(b"\r\n\r\n")[2].split(b"\r\n")[1]
        return status, headers, body

    @defer.inlineCallbacks
    def test_twisted_web_serves_the_address(self):
        self.assertIsNotNone(self.endpoint.site)
        for path, body in ((b"/health", b"OK"), (b"/plain", b"plain"),
                           (b"/later", b"later")):
            raw, _ = yield self.get(path)
            status, headers, got = self.answer(raw)
            self.assertEqual((status, got), (b"HTTP/1.1 200 OK", body))
            self.assertIn(b"twistedweb", headers[b"server"].lower())
        raw, _ = yield self.get(b"/nothing")
        self.assertEqual(responses(raw)[0][0], b"HTTP/1.1 404 Not Found")
        self.assertEqual(self.channels, [])

    @defer.inlineCallbacks
    def test_reload_to_pages_and_back(self):
        httpd.update(self.port, {"/health": (OK, "health")})
        raw, _ = yield self.get(b"/health")
        self.assertNotIn(b"server", responses(raw)[0][1])
        self.assertEqual(len(self.channels), 1)
        httpd.update(self.port, {"/plain": (Plain(), "x")})
        raw, _ = yield self.get(b"/plain")
        self.assertEqual(self.answer(raw)[2], b"plain")
        self.assertEqual(len(self.channels), 1)
