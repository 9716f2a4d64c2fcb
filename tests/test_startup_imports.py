"""What a start imports: the modules of the listeners, upstreams and
plugins a Corefile does not use are not loaded (start-up time), and a
Corefile that uses them still gets them.  Each start runs in a fresh
interpreter (this process has imported everything long ago)."""

import json
import os
import subprocess
import sys

from twisted.trial import unittest

from tests.support import k8s_apiserver as k8s
from tests.support import k8s_cluster, tlsutil, util

#: Loads the Corefile as ``twistd coredns`` does, starts the service
#: (listeners open, plugins started, lists begun) and prints the names of
#: the modules loaded by then.
SCRIPT = """
import json, os, sys
from twisted.internet import reactor
from corednstw.tap import Options, load_app
o = Options()
o.parseOptions(["-c", sys.argv[1]])
app = load_app(o, reactor)
app.startService()
print(json.dumps({"modules": sorted(sys.modules),
                  "listeners": sorted(k[0] for k in app.listeners)}))
sys.stdout.flush()
os._exit(0)
"""

#: Loaded only by the Corefiles that use them.
LAZY = (
    "corednstw.dnsserver.doh", "corednstw.dnsserver.doh_h2",
    "corednstw.dnsserver.doh_h1", "corednstw.dnsserver.http2",
    "corednstw.dnsserver.hpack_codec",
    "corednstw.dnsserver.grpcdns", "corednstw.dnsserver.doq",
    "corednstw.dnsserver.doh3", "corednstw.dnsserver.dot",
    "corednstw.dnsserver.tlsstream",
    "corednstw.dnsserver.proxyprotocol", "corednstw.dnsserver.explainer",
    "corednstw.engines.upstream.https", "aioquic", "prometheus_client",
    "twisted.names.client", "urllib3", "kubernetes", "yaml",
    # twisted.web's HTTP/2 (the HTTP endpoints are plain HTTP/1.1), and
    # twisted.web itself (health, ready and metrics are served by the
    # small server of service/httpd.py)
    "twisted.web._http2", "h2", "twisted.web.http", "twisted.web.server",
    "twisted.web.resource", "twisted.spread.pb",
    "corednstw.service.website",
    # the expression language (view, template), and the Go regexp of the
    # same package (errors without ``consolidate``)
    "corednstw.engines.expressions.exprlang",
    "corednstw.engines.expressions.goregexp", "re2",
    # health's self-check client (made at its first check) and
    # prometheus's web configuration (read for ``tls FILE``)
    "twisted.web.client", "corednstw.service.webconfig",
    # installed add-on packages: their entry points are read, their
    # plugins imported only where a Corefile names them
    "corednstw_rpz.plugin", "corednstw_fanout.plugin",
    "corednstw_rrl.plugin", "corednstw_k8s_gateway.plugin",
)


class ImportsTest(unittest.TestCase):

    def start(self, corefile):
        d = util.write_files(self, {"Corefile": corefile})
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, os.path.join(d, "Corefile")],
            capture_output=True, text=True, timeout=60, cwd=d)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return json.loads(out.stdout.splitlines()[-1])

    def test_kubernetes_cluster_dns(self):
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        k8s_cluster.cluster(api)
        got = self.start(
            ".:0 {\n    bind 127.0.0.1\n    errors\n"
            "    health 127.0.0.1:0\n    ready 127.0.0.1:0\n"
            "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"
            "        endpoint %s\n        pods insecure\n"
            "        fallthrough in-addr.arpa ip6.arpa\n    }\n"
            "    prometheus 127.0.0.1:0\n"
            "    forward . 127.0.0.1:53\n"
            "    cache 30\n    loop\n    reload\n    loadbalance\n}\n"
            % api.url)
        self.assertEqual(got["listeners"], ["dns"])
        loaded = [m for m in got["modules"] if m.split(".")[0] in
                  ("corednstw", "aioquic", "prometheus_client", "twisted",
                   "urllib3", "kubernetes", "yaml", "h2", "corednstw_rpz",
                   "corednstw_fanout", "corednstw_rrl",
                   "corednstw_k8s_gateway")]
        self.assertIn("corednstw.engines.kubernetes.watch", loaded)
        for name in LAZY:
            self.assertNotIn(name, loaded)

    def test_each_used_where_the_corefile_uses_it(self):
        _, _, cert, key = tlsutil.certs(self)
        tls = "    tls %s %s\n" % (cert, key)
        got = self.start(
            "tls://.:0 {\n" + tls + "    whoami\n}\n"
            "https://.:0 {\n" + tls + "    whoami\n}\n"
            "grpc://.:0 {\n" + tls + "    whoami\n}\n"
            "quic://.:0 {\n" + tls + "    whoami\n}\n"
            "https3://.:0 {\n" + tls + "    whoami\n}\n"
            ".:0 {\n    proxyproto {\n        allow 127.0.0.1/32\n    }\n"
            "    forward . https://127.0.0.1:1\n"
            "    explain 127.0.0.1:0\n}\n")
        self.assertEqual(got["listeners"], [
            "dns", "grpc", "https", "https3", "quic", "tls"])
        for name in ("corednstw.dnsserver.doh", "corednstw.dnsserver.grpcdns",
                     "corednstw.dnsserver.doq", "corednstw.dnsserver.doh3",
                     "corednstw.dnsserver.dot",
                     "corednstw.dnsserver.proxyprotocol",
                     "corednstw.engines.upstream.https"):
            self.assertIn(name, got["modules"])
