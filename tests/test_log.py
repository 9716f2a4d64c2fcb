"""log: every placeholder, the common and combined formats, classes, name
scopes, and the lines compared byte for byte with CoreDNS's formats."""

import re

import dns.edns
import dns.message
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import RawResponse, Response
from corednstw.plugins import log as logplugin
from tests.support import cases, util
from tests.support.cases import Case


class FakeClock:
    """Each call is ``step`` seconds after the previous one, so the
    duration a line reports is known."""

    def __init__(self, step=0.000123):
        self.now = 1000.0
        self.step = step

    def __call__(self):
        self.now += self.step
        return self.now


def soa():
    return w.RR.from_text("example.org.", "SOA", 300,
                          "ns.example.org. admin.example.org. 1 2 3 4 5")


class Base(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def direct(self, logline="log", fn=None, extra=""):
        x = util.Direct(self, "example.org:0 {\n    %s\n%s    whoami\n}\n"
                        % (logline, extra))
        x.app.clock = FakeClock()
        if fn is not None:
            x.app.config.blocks[0].plugin("log").next = util.Stub(fn)
        return x

    def ask(self, x, name="example.org.", rdtype="A", msgid=1234,
            proto="udp", client="127.0.0.1", port=53344, **kw):
        q = dns.message.make_query(name, rdtype, **kw)
        q.id = msgid
        reply = x.ask(q.to_wire(), proto=proto, client=client, port=port)
        return q.to_wire(), reply


class CommonFormatTest(Base):

    def test_documented_line(self):
        # CoreDNS's README example: an EDNS query answered with RA and AD.
        def answer(req):
            return Response(0, [w.RR(req.name, w.A, 3600,
                                     bytes([127, 0, 0, 1]))], ra=True,
                            flags=w.AD)
        x = self.direct(fn=answer)
        q, reply = self.ask(x, client="::1", port=50759, msgid=29008,
                            use_edns=0, payload=4096)
        self.assertEqual(self.log.lines, [
            '[INFO] [::1]:50759 - 29008 "A IN example.org. udp %d false 4096"'
            ' NOERROR qr,rd,ra,ad %d 0.000123s' % (len(q), len(reply))])
        self.assertEqual(len(q), 40)

    def test_error_line(self):
        # The brief's example: nothing written at the end of the chain
        # gives a SERVFAIL line with the synthesised reply's size.
        x = self.direct(fn=lambda req: None)
        q, reply = self.ask(x)
        self.assertEqual(self.log.lines, [
            '[INFO] 127.0.0.1:53344 - 1234 "A IN example.org. udp 29 false '
            '512" SERVFAIL qr,rd 29 0.000123s'])
        cases.check_response(self, Case("example.org.", rcode="SERVFAIL"),
                             cases.parse_reply(reply))

    def test_whoami_tcp_do(self):
        x = self.direct()
        q, reply = self.ask(x, name="Example.ORG", rdtype="AAAA",
                            proto="tcp", want_dnssec=True, msgid=7)
        self.assertEqual(self.log.lines, [
            '[INFO] 127.0.0.1:53344 - 7 "AAAA IN example.org. tcp %d true '
            '65535" NOERROR qr,aa,rd %d 0.000123s' % (len(q), len(reply))])
        cases.check_response(self, Case(
            "Example.ORG", "AAAA", flags="QR AA RD",
            extra=cases.whoami("Example.ORG", "tcp", port=53344)),
            cases.parse_reply(reply))

    def test_combined(self):
        x = self.direct('log . {combined}')
        q, reply = self.ask(x)
        self.assertEqual(self.log.lines, [
            '[INFO] 127.0.0.1:53344 - 1234 "A IN example.org. udp 29 false '
            '512" NOERROR qr,aa,rd %d 0.000123s "0"' % len(reply)])

    def test_common_inside_a_format(self):
        x = self.direct('log . "X {common} Y"')
        q, reply = self.ask(x)
        self.assertEqual(self.log.lines, [
            '[INFO] X 127.0.0.1:53344 - 1234 "A IN example.org. udp 29 false '
            '512" NOERROR qr,aa,rd %d 0.000123s Y' % len(reply)])

    def test_unknown_type_and_class(self):
        x = self.direct('log . "{type} {class} {rcode}"',
                        fn=lambda req: Response(23))
        self.ask(x, rdtype="TYPE65534")
        self.assertEqual(self.log.lines, ["[INFO] TYPE65534 IN BADCOOKIE"])


class PlaceholderTest(Base):

    def test_every_placeholder(self):
        fmt = ("{type}|{name}|{class}|{proto}|{size}|{remote}|{port}|"
               "{local}|{>id}|{>opcode}|{>do}|{>bufsize}|{rcode}|{rsize}|"
               "{duration}|{>rflags}|{/meta}|{/missing}")

        def answer(req):
            req.meta()["meta"] = lambda: "value"
            return Response(3, aa=True, tc=True)
        x = self.direct('log . "%s"' % fmt, fn=answer)
        q, reply = self.ask(x, name="a.Example.org", rdtype="MX",
                            client="10.1.2.3", port=1, msgid=65535,
                            use_edns=0, payload=1232, want_dnssec=True)
        self.assertEqual(self.log.lines, [
            "[INFO] MX|a.example.org.|IN|udp|%d|10.1.2.3|1|-|65535|0|true|"
            "1232|NXDOMAIN|%d|0.000123s|qr,aa,tc,rd|value|-"
            % (len(q), len(reply))])

    def test_format_parsing(self):
        # CoreDNS's parser: nearest "{" before each "}", unknown labels
        # stay literal.
        cases = [
            ("{type}", ["A"]),
            ("A } {type}", ["A } A"]),
            ("{ {type} }", ["{ A }"]),
            ("{unknown} {type}", ["{unknown} A"]),
            ("{type", ["{type"]),
            ("x{type}y{name}z", ["xAyexample.org.z"]),
            ("{>ID} {TYPE}", ["{>ID} {TYPE}"]),
            ("100% {type} %s", ["100% A %s"]),
        ]
        for fmt, want in cases:
            req = _req()
            out = Outcome(req)
            line = logplugin.Format(fmt).render(req, out, 0.0)
            self.assertEqual([line], want, fmt)

    def test_go_float(self):
        cases = [(0.000123, "0.000123"), (1e-05, "0.00001"), (2.0, "2"),
                 (1.5, "1.5"), (0.037990251, "0.037990251"),
                 (1e-09, "0.000000001"), (0.0, "0")]
        for value, text in cases:
            self.assertEqual(logplugin.go_float(value), text)
        # A monotonic float difference is whole nanoseconds first.
        self.assertEqual(logplugin.go_seconds(0.0001484330000494083),
                         "0.000148433")

    def test_local_over_the_wire(self):
        return self._local()

    @defer.inlineCallbacks
    def _local(self):
        app = yield util.start(
            self, '.:0 {\n    log . "{local} {remote} {proto} {port}"\n'
            '    whoami\n}\n')
        lst = list(app.listeners.values())[0]
        del self.log.lines[:]       # the startup banner
        yield util.query(app.port(), "example.org", "A")
        yield util.query(app.port(), "example.org", "A", proto="tcp")
        host = lst.host
        local = "[%s]" % host if ":" in host else host
        self.assertEqual(len(self.log.lines), 2)
        for line, proto in zip(self.log.lines, ("udp", "tcp")):
            self.assertRegex(line, r"^\[INFO\] %s 127\.0\.0\.1 %s \d+$"
                             % (re.escape(local), proto))


def _req(name="example.org.", qtype=w.A):
    from corednstw.core.request import Request, make_query
    r = Request(make_query(name, qtype))
    qd, an, ns, ar = r.parse_header()
    r.parse_question(an, ns, ar)
    return r


def Outcome(req, resp=None):
    return logplugin.Outcome(req, resp)


class ClassifyTest(unittest.TestCase):
    """CoreDNS's response.Typify and Classify, as a table."""

    def test_table(self):
        a = w.RR("example.org.", w.A, 5, bytes(4))
        ns = w.RR.from_text("example.org.", "NS", 5, "ns.example.org.")
        cases = [
            # (qtype, response, type, class)
            (w.A, Response(0, [a]), "NOERROR", "success"),
            (w.A, Response(0), "NOERROR", "success"),
            (w.A, Response(0, authority=[soa()]), "NODATA", "denial"),
            (w.A, Response(3, authority=[soa()]), "NXDOMAIN", "denial"),
            (w.A, Response(3), "NXDOMAIN", "denial"),
            (w.A, Response(3, [a]), "OTHERERROR", "error"),
            (w.A, Response(2), "SERVERERROR", "error"),
            (w.A, Response(4), "SERVERERROR", "error"),
            (w.A, Response(5), "OTHERERROR", "error"),
            (w.A, Response(0, authority=[ns]), "DELEGATION", "success"),
            (w.A, None, "SERVERERROR", "error"),
            (w.AXFR, Response(0, [a]), "META", "error"),
        ]
        for qtype, resp, typ, cls in cases:
            o = logplugin.Outcome(_req(qtype=qtype), resp)
            self.assertEqual((o.type(), o.cls()), (typ, cls), (qtype, resp))

    def test_raw(self):
        req = _req()
        wire = Response(0, authority=[soa()]).finish(req)
        o = logplugin.Outcome(req, RawResponse(wire))
        self.assertEqual((o.type(), o.cls()), ("NODATA", "denial"))
        self.assertEqual(o.size, len(wire))

    def test_raw_malformed(self):
        # An answer that cannot be walked counts no records: the rcode
        # alone decides (the SOA cut short is not seen).
        req = _req()
        wire = Response(0, authority=[soa()]).finish(req)
        for rcode, typ in ((0, "NOERROR"), (3, "NXDOMAIN")):
            cut = wire[:3] + bytes([wire[3] | rcode]) + wire[4:-4]
            o = logplugin.Outcome(req, RawResponse(cut))
            self.assertEqual(o.type(), typ)


class ClassTest(Base):

    def run_classes(self, classes):
        answers = {
            "ok.example.org.": lambda req: Response(0, [w.RR(
                req.name, w.A, 5, bytes(4))]),
            "nodata.example.org.": lambda req: Response(0, authority=[soa()]),
            "nx.example.org.": lambda req: Response(3, authority=[soa()]),
            "fail.example.org.": lambda req: Response(2),
            "none.example.org.": lambda req: None,
        }
        x = self.direct('log . "{name}" {\n        class %s\n    }'
                        % classes, fn=lambda req: answers[req.qname](req))
        for name in answers:
            self.ask(x, name)
        return [line.split()[1] for line in self.log.lines]

    def test_classes(self):
        ok, nodata, nx, fail, none = ("ok.example.org.", "nodata.example.org.",
                                      "nx.example.org.", "fail.example.org.",
                                      "none.example.org.")
        self.assertEqual(self.run_classes("all"), [ok, nodata, nx, fail,
                                                   none])
        del self.log.lines[:]
        self.assertEqual(self.run_classes("denial"), [nodata, nx])
        del self.log.lines[:]
        self.assertEqual(self.run_classes("error"), [fail, none])
        del self.log.lines[:]
        self.assertEqual(self.run_classes("success denial"), [ok, nodata, nx])
        del self.log.lines[:]
        self.assertEqual(self.run_classes("success all"),
                         [ok, nodata, nx, fail, none])

    def test_log_metadata_without_metadata_plugin(self):
        x = self.direct('log . "{/log/type} {/log/class}"')
        self.ask(x)
        self.assertEqual(self.log.lines, ["[INFO] - -"])

    def test_log_metadata(self):
        x = self.direct('log . "{/log/type} {/log/class}"',
                        extra="    metadata\n")
        self.ask(x)
        self.assertEqual(self.log.lines, ["[INFO] NOERROR success"])

    def test_log_metadata_denial(self):
        x = self.direct('log . "{/log/type} {/log/class}"',
                        fn=lambda req: Response(3), extra="    metadata\n")
        self.ask(x)
        self.assertEqual(self.log.lines, ["[INFO] NXDOMAIN denial"])


class ScopeTest(Base):

    def test_scopes(self):
        x = self.direct('log a.example.org b.example.org "1 {name}"\n'
                        '    log EXAMPLE.org "2 {name}"\n'
                        '    log c.example.org')
        for name in ("a.example.org", "x.b.example.org", "c.example.org",
                     "example.org", "other.org"):
            self.ask(x, name)
        self.assertEqual(self.log.lines[:4], [
            "[INFO] 1 a.example.org.", "[INFO] 1 x.b.example.org.",
            "[INFO] 2 c.example.org.", "[INFO] 2 example.org."])
        self.assertEqual(len(self.log.lines), 4)
        self.assertEqual(
            x.app.config.blocks[0].directive_names().count("log"), 1)

    def test_single_argument_is_a_name(self):
        # As in CoreDNS, one argument is a name scope, even "{combined}".
        x = self.direct("log {combined}")
        self.ask(x)
        self.assertEqual(self.log.lines, [])

    def test_two_names_default_format(self):
        x = self.direct("log example.org example.net")
        self.ask(x)
        self.assertEqual(len(self.log.lines), 1)
        self.assertIn('"A IN example.org. udp 29 false 512"',
                      self.log.lines[0])


class AsyncTest(Base):

    def test_deferred_answer(self):
        d = defer.Deferred()
        x = self.direct('log . "{name} {rcode}"', fn=lambda req: d)
        q = dns.message.make_query("example.org", "A")
        out = x.ask_async(q.to_wire())
        self.assertEqual(self.log.lines, [])
        d.callback(Response(3))
        self.assertEqual(self.log.lines, ["[INFO] example.org. NXDOMAIN"])
        self.assertTrue(out.called)

    def test_failed_deferred(self):
        util.keep_panics(self)
        x = self.direct('log . "{name} {rcode} {>rflags}"',
                        fn=lambda req: defer.fail(RuntimeError("boom")))
        self.ask(x)
        self.assertEqual(self.log.lines[0],
                         "[INFO] example.org. SERVFAIL qr,rd")
        # The failure goes on to the server (which logs and answers).
        self.assertIn("Recovered from panic", self.log.lines[1])


class SetupTest(Base):

    def test_errors(self):
        cases = [
            ("log {\n        class\n    }", "Wrong argument count"),
            ("log {\n        class nothing\n    }", "invalid Class: nothing"),
            ("log {\n        format x\n    }", "unknown property 'format'"),
        ]
        for text, msg in cases:
            e = self.assertRaises(CorefileError, self.direct, text)
            self.assertIn("plugin/log: " + msg, str(e))

    def test_rules(self):
        x = self.direct('log a.org "{name}" {\n        class denial\n'
                        '        class error\n    }\n    log')
        rules = x.app.config.blocks[0].plugin("log").rules
        self.assertEqual([(r.scope, r.format, sorted(r.classes))
                          for r in rules],
                         [("a.org.", "{name}", ["denial", "error"]),
                          (".", logplugin.COMMON, ["all"])])

    def test_absent_costs_nothing(self):
        x = util.Direct(self, "example.org:0 {\n    whoami\n}\n")
        self.assertEqual(x.app.config.blocks[0].directive_names(),
                         ["whoami"])


class WireTest(Base):

    @defer.inlineCallbacks
    def test_udp_line(self):
        app = yield util.start(self, ".:0 {\n    log\n    whoami\n}\n")
        del self.log.lines[:]       # the startup banner
        q = dns.message.make_query("example.org", "A")
        q.id = 4321
        reply = yield util.send_udp(app.port(), q.to_wire())
        self.assertEqual(len(self.log.lines), 1)
        self.assertRegex(self.log.lines[0], (
            r'^\[INFO\] 127\.0\.0\.1:\d+ - 4321 "A IN example\.org\. udp 29 '
            r'false 512" NOERROR qr,aa,rd %d \d+\.\d+s$') % len(reply))
