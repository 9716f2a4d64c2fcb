"""explain: one query traced through a copy of its block's chain."""

import json
import urllib.parse

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.dnsserver import explainer as tracing
from tests.support import util

HOSTS = """\
example.org:0 {
    log
    hosts {
        192.0.2.1 www.example.org
        fallthrough
    }
    whoami
}
"""


def actions(out):
    return [(s["plugin"], s["action"]) for s in out["chain"]]


class TraceTest(unittest.TestCase):

    def explain(self, corefile_text, name, qtype=w.A, **kw):
        s = util.Direct(self, corefile_text)
        util.capture_log(self)
        d = tracing.explain(s.mux, name, qtype, **kw)
        out = []
        d.addCallback(out.append)
        self.assertEqual(len(out), 1)    # synchronous chains: at once
        return s, out[0]

    def test_answered_and_not_reached(self):
        _, out = self.explain(HOSTS, "www.example.org")
        self.assertEqual(actions(out), [
            ("log", "passed"), ("hosts", "answered"),
            ("whoami", "not reached")])
        self.assertEqual(out["answered_by"], "hosts")
        self.assertEqual(out["rcode"], "NOERROR")
        self.assertEqual(out["response"]["answer"],
                         ["www.example.org. 3600 IN A 192.0.2.1"])
        self.assertEqual(out["block"]["zone"], "example.org.")
        self.assertEqual(out["block"]["line"], 1)
        for step in out["chain"][:2]:
            self.assertGreaterEqual(step["ms"], step["self_ms"])
            self.assertGreaterEqual(step["self_ms"], 0)
        self.assertNotIn("ms", out["chain"][2])

    def test_fell_through(self):
        _, out = self.explain(HOSTS, "other.example.org")
        self.assertEqual(actions(out), [
            ("log", "passed"), ("hosts", "fell through"),
            ("whoami", "answered")])
        self.assertEqual(out["answered_by"], "whoami")

    def test_rewrote_question(self):
        _, out = self.explain(
            ".:0 {\n    rewrite name exact a.example.org b.example.org\n"
            "    whoami\n}\n", "a.example.org")
        step = out["chain"][0]
        self.assertEqual((step["plugin"], step["action"]),
                         ("rewrite", "rewrote"))
        self.assertIn("question a.example.org. A -> b.example.org. A",
                      step["detail"])

    def test_rewrote_answer(self):
        # minimal drops the additional section whoami wrote.
        _, out = self.explain(".:0 {\n    minimal\n    whoami\n}\n",
                              "example.org")
        self.assertEqual(out["chain"][0]["action"], "rewrote")
        self.assertEqual(out["response"]["additional"], [])

    def test_client_decides(self):
        text = (".:0 {\n    acl {\n        block net 10.0.0.0/8\n    }\n"
                "    whoami\n}\n")
        _, out = self.explain(text, "example.org", client="10.1.2.3")
        self.assertEqual(actions(out), [("acl", "answered"),
                                        ("whoami", "not reached")])
        self.assertEqual(out["rcode"], "REFUSED")
        _, out = self.explain(text, "example.org", client="192.0.2.9",
                              proto="tcp")
        self.assertEqual(out["answered_by"], "whoami")
        self.assertEqual(out["query"]["proto"], "tcp")
        self.assertIn("_tcp.example.org. 0 IN SRV 0 0 0 .",
                      out["response"]["additional"])

    def test_no_block(self):
        _, out = self.explain(HOSTS, "example.net")
        self.assertEqual((out["block"], out["chain"], out["rcode"]),
                         (None, [], "REFUSED"))

    def test_raised(self):
        s = util.Direct(self, ".:0 {\n    log\n    whoami\n}\n")
        util.capture_log(self)
        whoami = s.app.config.blocks[0].plugin("whoami")

        def boom(req):
            raise RuntimeError("boom")
        whoami.serve = boom
        out = self.successResultOf(tracing.explain(s.mux, "a.test", w.A))
        self.assertEqual(out["chain"][1]["action"], "raised")
        self.assertEqual(out["chain"][1]["detail"], "RuntimeError: boom")
        self.assertEqual((out["rcode"], out["error"]), ("SERVFAIL", "boom"))

    def test_wrote_nothing(self):
        s = util.Direct(self, ".:0 {\n    whoami\n}\n")
        s.app.config.blocks[0].plugin("whoami").serve = lambda req: None
        out = self.successResultOf(tracing.explain(s.mux, "a.test", w.A))
        self.assertEqual(actions(out), [("whoami", "wrote nothing")])
        self.assertEqual(out["rcode"], "SERVFAIL")

    def test_chain_untouched(self):
        s, _ = self.explain(HOSTS, "other.example.org")
        block = s.app.config.blocks[0]
        links = [(p, p.next) for p in block.plugins]
        tracing.explain(s.mux, "www.example.org", w.A)
        self.assertEqual([(p, p.next) for p in block.plugins], links)
        self.assertIs(block.chain, block.plugins[0])
        for p in block.plugins:
            self.assertNotIn("serve", vars(p))


COREFILE = """\
example.org:0 {
    explain 127.0.0.1:0
    hosts {
        192.0.2.1 www.example.org
        fallthrough
    }
    whoami
}
"""


class EndpointTest(unittest.TestCase):

    @defer.inlineCallbacks
    def get(self, query, corefile_text=COREFILE):
        app = yield util.start(self, corefile_text)
        port = app.http_port("127.0.0.1:0")
        status, body = yield util.http_get(
            port, "/explain?" + urllib.parse.urlencode(query))
        return status, json.loads(body)

    @defer.inlineCallbacks
    def test_explain(self):
        status, out = yield self.get({"name": "www.example.org",
                                      "type": "A"})
        self.assertEqual(status, 200)
        self.assertEqual(actions(out), [("hosts", "answered"),
                                        ("whoami", "not reached")])
        self.assertTrue(out["server"].startswith("dns://:"))

    @defer.inlineCallbacks
    def test_server_label(self):
        status, out = yield self.get({"name": "x.example.org",
                                      "server": "dns://:1"})
        self.assertEqual((status, out), (400, {"error": "no listener "
                                               "dns://:1"}))

    @defer.inlineCallbacks
    def test_bad_requests(self):
        app = yield util.start(self, COREFILE)
        port = app.http_port("127.0.0.1:0")
        for query, error in [
                ({}, "name is required"),
                ({"name": "a.", "type": "NOPE"}, "unknown type 'NOPE'"),
                ({"name": "a.", "client": "x"}, "client: "),
                ({"name": "a.", "proto": "sctp"}, "proto must be udp or "
                 "tcp")]:
            status, body = yield util.http_get(
                port, "/explain?" + urllib.parse.urlencode(query))
            self.assertEqual(status, 400)
            self.assertIn(error, json.loads(body)["error"])

    def test_setup(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    explain a b\n    whoami\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/explain: "
                      "Wrong argument count", str(cm.exception))
        s = util.Direct(self, ".:0 {\n    whoami\n    explain\n}\n")
        self.assertEqual(list(s.app.config.http), ["127.0.0.1:6054"])

    def test_loopback_only_unless_allowed(self):
        """explain takes the client address from its caller, so acl and
        view are no protection: it starts on a loopback address only,
        unless ``allow_remote`` says otherwise."""
        for address in (":6054", "0.0.0.0:6054", "192.0.2.1:6054",
                        "[::]:6054", "dns.example:6054"):
            with self.assertRaises(CorefileError) as cm:
                util.Direct(self, ".:0 {\n    explain %s\n    whoami\n}\n"
                            % address)
            self.assertIn("Corefile:2 - Error during parsing: "
                          "plugin/explain: %s is not a loopback address"
                          % address, str(cm.exception))
        for text in ("explain [::1]:6054", "explain localhost:6054",
                     "explain 127.0.0.2:6054",
                     "explain :6054 {\n        allow_remote\n    }"):
            s = util.Direct(self, ".:0 {\n    %s\n    whoami\n}\n" % text)
            self.assertEqual(len(s.app.config.http), 1, text)
        for text, error in [
                ("explain {\n        allow_remote x\n    }",
                 "Wrong argument count"),
                ("explain {\n        public\n    }",
                 "unknown property 'public'")]:
            with self.assertRaises(CorefileError) as cm:
                util.Direct(self, ".:0 {\n    %s\n    whoami\n}\n" % text)
            self.assertIn(error, str(cm.exception))
