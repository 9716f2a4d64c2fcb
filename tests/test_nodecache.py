"""node-cache: its flags, the Corefile it renders, its iptables rules, and
the whole command end to end inside a network namespace of its own."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

from twisted.trial import unittest

from corednstw.nodecache import iptables, main, template
from tests.support import util
from tests.support.util import COREDNS, NODE_CACHE

BASE = textwrap.dedent("""\
    cluster.local:53 {
        errors
        cache {
                success 9984 30
                denial 9984 5
        }
        reload
        loop
        bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
        forward . __PILLAR__CLUSTER__DNS__ {
                force_tcp
        }
        prometheus :9253
        health 169.254.20.10:8080
        }
    .:53 {
        errors
        cache 30
        reload
        loop
        bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
        forward . __PILLAR__UPSTREAM__SERVERS__
        prometheus :9253
        }
    """)


class FlagsTest(unittest.TestCase):

    def parse(self, *args):
        values, rest = main.flagset("node-cache").parse(list(args))
        self.assertEqual(rest, [])
        return main.params(values)

    def test_upstream_manifest_args(self):
        # The kubernetes addon's DaemonSet arguments.
        p = self.parse("-localip", "169.254.20.10,10.96.0.10", "-conf",
                       "/etc/Corefile", "-upstreamsvc", "kube-dns-upstream")
        self.assertEqual(p.local_ips, ["169.254.20.10", "10.96.0.10"])
        self.assertEqual((p.corefile, p.upstream_svc, p.port, p.health_port),
                         ("/etc/Corefile", "kube-dns-upstream", "53", "8080"))
        self.assertEqual(p.base_corefile, "/etc/coredns/Corefile.base")
        self.assertTrue(p.setup_interface and p.setup_iptables)
        self.assertFalse(p.skip_teardown)
        self.assertEqual(p.interface, "nodelocaldns")
        # The default 60 (nanoseconds) times a second.
        self.assertEqual(p.interval, 60.0)

    def test_flags(self):
        p = self.parse("-localip=fd00::a", "-setupinterface=false",
                       "-setupiptables=false", "-skipteardown",
                       "-health-port", "9090", "-dns.port", "5353",
                       "-syncinterval", "5ns")
        self.assertTrue(p.ipv6)
        self.assertFalse(p.setup_interface or p.setup_iptables)
        self.assertTrue(p.skip_teardown)
        self.assertEqual((p.health_port, p.port, p.interval),
                         ("9090", "5353", 5.0))
        # Without -conf, -corefile names the file to write.
        self.assertEqual(p.corefile, "/etc/Corefile")

    def test_bad_params(self):
        for args, err in (
                ([], 'invalid localip specified - ""'),
                (["-localip", "169.254.20.10,x"],
                 'invalid localip specified - "x"'),
                (["-localip", "169.254.20.10,fd00::1"],
                 'unexpected IP Family for localIP - "fd00::1", '
                 'want IPv6=false'),
                (["-localip", "169.254.20.10", "-p", "x"],
                 'invalid port specified - "x"'),
                (["-localip", "169.254.20.10", "-health-port", "x"],
                 'invalid healthcheck port specified - "x"')):
            values, _ = main.flagset("node-cache").parse(args)
            e = self.assertRaises(main.ParamError, main.params, values)
            self.assertEqual(str(e), err)

    def test_usage(self):
        r = subprocess.run([NODE_CACHE, "-h"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stderr.startswith(
            "Usage of node-cache:\nRuns CoreDNS v1.14.0 as a nodelocal "
            "cache listening on the specified ip:port\n\n  -basecorefile "
            "string\n    \tPath to the template Corefile for node-cache "
            '(default "/etc/coredns/Corefile.base")\n'), r.stderr)
        self.assertIn("  -syncinterval duration\n    \tinterval(in seconds) "
                      "to check for iptables rules (default 60ns)\n",
                      r.stderr)
        self.assertIn("  -setupiptables\n    \tindicates whether iptables "
                      "rules should be setup (default true)\n", r.stderr)

    def test_fatal_flag_error(self):
        r = subprocess.run([NODE_CACHE, "-localip", "nope"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r'\[FATAL\] Error parsing flags - invalid '
                         r'localip specified - "nope", Exiting\n\Z')


class TemplateTest(unittest.TestCase):

    def test_placeholders(self):
        text, upstream = template.render(
            BASE, ["169.254.20.10", "10.96.0.10"], "53", "10.96.0.20",
            template.KubeDNSConfig())
        self.assertEqual(upstream, "/etc/resolv.conf")
        self.assertNotIn("__PILLAR__", text)
        self.assertIn("bind 169.254.20.10 10.96.0.10 \n", text)
        self.assertIn("forward . 10.96.0.20 {\n", text)
        self.assertIn("forward . /etc/resolv.conf\n", text)

    def test_custom_upstreams_and_stub_domains(self):
        base = BASE.replace(
            "forward . __PILLAR__UPSTREAM__SERVERS__\n",
            "forward . __PILLAR__UPSTREAM__SERVERS__ {\n"
            "            force_tcp\n    }\n")
        conf = template.KubeDNSConfig.from_files({
            "upstreamNameservers": '["8.8.8.8", "8.8.4.4"]',
            "stubDomains": '{"acme.local": ["1.2.3.4"], '
                           '"b.example": ["tls://5.6.7.8"]}'})
        conf.validate()
        text, upstream = template.render(base, ["169.254.20.10"], "53",
                                         "10.96.0.20", conf)
        self.assertEqual(upstream, "8.8.8.8 8.8.4.4")
        # Custom upstreams are asked over UDP: force_tcp goes.
        self.assertIn("\n    forward . 8.8.8.8 8.8.4.4\n", text)
        self.assertTrue(text.endswith(
            "\nacme.local:53 {\n    errors\n    cache 30\n"
            "    bind 169.254.20.10\n    forward . 1.2.3.4\n}\n"
            "\nb.example:53 {\n    errors\n    cache 30\n"
            "    bind 169.254.20.10\n    forward . tls://5.6.7.8\n}\n"))

    def test_invalid_kubedns_config(self):
        for files, err in (
                ({"upstreamNameservers": '["https://1.1.1.1"]'},
                 "invalid upstream nameservers [https://1.1.1.1]: "
                 "unsupported transport https of nameserver "
                 "https://1.1.1.1"),
                ({"stubDomains": '{"a.b": ["not-an-ip"]}'},
                 "invalid nameservers [not-an-ip] for the stub domain a.b: "
                 'not an IP address or file: "not-an-ip"')):
            conf = template.KubeDNSConfig.from_files(files)
            e = self.assertRaises(template.ConfigError, conf.validate)
            self.assertEqual(str(e), err)

    def test_unparsable_key_left_out(self):
        out = util.capture_log(self)
        conf = template.KubeDNSConfig.from_files(
            {"upstreamNameservers": "[1.2"})
        self.assertEqual(conf.upstreams, [])
        self.assertIn("[ERROR] Invalid upstreamNameservers value",
                      out.text())

    def test_service_env(self):
        self.assertEqual(template.service_env("kube-dns-upstream"),
                         "KUBE_DNS_UPSTREAM_SERVICE_HOST")
        self.assertEqual(template.cluster_dns(
            "kube-dns", {"KUBE_DNS_SERVICE_HOST": "10.96.0.10"}),
            "10.96.0.10")
        out = util.capture_log(self)
        self.assertIsNone(template.cluster_dns("kube-dns", {}))
        self.assertIn("Unable to lookup IP address of Upstream service "
                      "kube-dns, env $KUBE_DNS_SERVICE_HOST ``", out.text())

    def test_read_dir_versions(self):
        d = util.write_files(self, {"Corefile.base": "a", ".hidden": "x"})
        v1, data = template.read_dir(d)
        self.assertEqual(data, {"Corefile.base": "a"})
        util.rewrite(os.path.join(d, ".hidden"), "y")
        self.assertEqual(template.read_dir(d)[0], v1)
        util.rewrite(os.path.join(d, "Corefile.base"), "b")
        self.assertNotEqual(template.read_dir(d)[0], v1)
        self.assertEqual(template.read_dir(util.write_files(self, {})),
                         ("", {}))


class RulesTest(unittest.TestCase):

    def test_rules_as_node_cache(self):
        rules = iptables.rules(["169.254.20.10"], "53", "8080")
        self.assertEqual(len(rules), 12)
        self.assertEqual(rules[0], iptables.Rule("raw", "PREROUTING", (
            "-p", "tcp", "-d", "169.254.20.10", "--dport", "53", "-j",
            "NOTRACK", "-m", "comment", "--comment",
            "NodeLocal DNS Cache: skip conntrack")))
        self.assertEqual(
            [(r.table, r.chain, r.args[1], r.args[2], r.args[5], r.args[7])
             for r in rules],
            [("raw", "PREROUTING", "tcp", "-d", "53", "NOTRACK"),
             ("raw", "PREROUTING", "udp", "-d", "53", "NOTRACK"),
             ("filter", "INPUT", "tcp", "-d", "53", "ACCEPT"),
             ("filter", "INPUT", "udp", "-d", "53", "ACCEPT"),
             ("raw", "OUTPUT", "tcp", "-s", "53", "NOTRACK"),
             ("raw", "OUTPUT", "udp", "-s", "53", "NOTRACK"),
             ("filter", "OUTPUT", "tcp", "-s", "53", "ACCEPT"),
             ("filter", "OUTPUT", "udp", "-s", "53", "ACCEPT"),
             ("raw", "OUTPUT", "tcp", "-d", "53", "NOTRACK"),
             ("raw", "OUTPUT", "udp", "-d", "53", "NOTRACK"),
             ("raw", "OUTPUT", "tcp", "-d", "8080", "NOTRACK"),
             ("raw", "OUTPUT", "tcp", "-s", "8080", "NOTRACK")])
        self.assertEqual(rules[2].args[-1],
                         "NodeLocal DNS Cache: allow DNS traffic")


#: Where the test's cluster DNS (the kube-dns-upstream Service) answers.
UPSTREAM_IP = "10.96.0.20"
LOCAL_IPS = "169.254.20.10,10.96.0.10"
UPSTREAM_COREFILE = """cluster.local:53 {
    bind %s
    prometheus %s:9153
    template IN A cluster.local {
        answer "{{ .Name }} 60 IN A 10.1.2.3"
    }
}
""" % (UPSTREAM_IP, UPSTREAM_IP)
#: The probe helpers run inside the namespace (the test process is not).
ASK = """
import sys, dns.message, dns.query
q = dns.message.make_query(sys.argv[1], "A")
fn = dns.query.tcp if sys.argv[3] == "tcp" else dns.query.udp
r = fn(q, sys.argv[2], timeout=1)
print(" ".join(rr.address for rrset in r.answer for rr in rrset))
"""
GET = """
import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=2).read()
sys.stdout.write(body.decode())
"""


def _missing():
    """Why the end-to-end test cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and iptables)"
    for tool in ("ip", "iptables", "iptables-save"):
        if shutil.which(tool) is None:
            return "needs %s (Debian: iproute2, iptables)" % tool
    return None


class NamespaceTest(unittest.TestCase):
    """node-cache end to end in a network namespace the test creates,
    with a second server as the cluster DNS behind the kube-dns-upstream
    Service address."""

    def setUp(self):
        why = _missing()
        if why:
            raise unittest.SkipTest(why)
        self.ns = "corednstw-nc-%d" % os.getpid()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", self.ns],
                        capture_output=True)
        self.nsrun("ip", "link", "set", "lo", "up")
        self.nsrun("ip", "addr", "add", UPSTREAM_IP + "/32", "dev", "lo")
        self.dir = util.write_files(self, {
            "upstream.Corefile": UPSTREAM_COREFILE,
            "cm/Corefile.base": BASE.replace("reload\n",
                                             "reload 2s 1s\n")})

    def nsrun(self, *args, check=True):
        return subprocess.run(["ip", "netns", "exec", self.ns, *args],
                              capture_output=True, text=True, check=check,
                              timeout=60)

    def start(self, *args, env=None):
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, *args], cwd=self.dir,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def ask(self, name, server="169.254.20.10", proto="udp"):
        r = self.nsrun(sys.executable, "-c", ASK, name, server, proto,
                       check=False)
        return r.stdout.strip() if r.returncode == 0 else None

    def get(self, url):
        r = self.nsrun(sys.executable, "-c", GET, url, check=False)
        return r.stdout if r.returncode == 0 else None

    def wait(self, fn, what, limit=60.0, procs=()):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            v = fn()
            if v:
                return v
            for p in procs:
                self.assertIsNone(p.poll(), "%s: exited early" % what)
            time.sleep(0.1)
        self.fail("timed out waiting for " + what)

    def rules(self):
        # Whichever backend node-cache chose (iptables-wrapper's choice).
        saves = [s for s in ("iptables-legacy-save", "iptables-nft-save")
                 if shutil.which(s)] or ["iptables-save"]
        out = "".join(self.nsrun(s).stdout for s in saves)
        return [line for line in out.splitlines() if "NodeLocal DNS" in line]

    def metric(self, url, name):
        text = self.get(url) or ""
        return sum(float(line.rsplit(" ", 1)[1])
                   for line in text.splitlines()
                   if line.startswith(name + "{") or line.startswith(
                       name + " "))

    def test_node_cache(self):
        upstream = self.start(COREDNS, "-conf", "upstream.Corefile")
        self.wait(lambda: self.ask("x.svc.cluster.local", UPSTREAM_IP),
                  "the upstream", procs=[upstream])
        env = dict(os.environ, KUBE_DNS_UPSTREAM_SERVICE_HOST=UPSTREAM_IP)
        corefile = os.path.join(self.dir, "Corefile")
        base = os.path.join(self.dir, "cm", "Corefile.base")
        nc = self.start(NODE_CACHE, "-localip", LOCAL_IPS, "-conf", corefile,
                        "-basecorefile", base, "-upstreamsvc",
                        "kube-dns-upstream", "-metrics-listen-address",
                        "127.0.0.1:9353", env=env)
        procs = [upstream, nc]
        name = "web.default.svc.cluster.local"
        first = self.wait(lambda: self.ask(name), "node-cache", procs=procs)
        self.assertEqual(first, "10.1.2.3")
        # The kube-dns Service address held locally answers too (TCP).
        self.assertEqual(self.ask(name, "10.96.0.10", "tcp"), "10.1.2.3")
        # Rules for both addresses, as node-cache installs them.
        rules = self.wait(lambda: len(self.rules()) == 24 and self.rules(),
                          "iptables rules", procs=procs)
        self.assertIn('-A PREROUTING -d 169.254.20.10/32 -p udp -m udp '
                      '--dport 53 -m comment --comment "NodeLocal DNS '
                      'Cache: skip conntrack" -j NOTRACK', rules)
        self.assertIn('-A INPUT -d 169.254.20.10/32 -p tcp -m tcp --dport '
                      '53 -m comment --comment "NodeLocal DNS Cache: allow '
                      'DNS traffic" -j ACCEPT', rules)
        # The second ask is the cache's: the upstream saw one request.
        upstream_metrics = "http://%s:9153/metrics" % UPSTREAM_IP
        asked = self.metric(upstream_metrics, "coredns_dns_requests_total")
        self.assertEqual(self.ask(name), "10.1.2.3")
        self.assertEqual(self.metric(upstream_metrics,
                                     "coredns_dns_requests_total"), asked)
        self.assertGreaterEqual(self.metric(
            "http://127.0.0.1:9253/metrics", "coredns_cache_hits_total"), 1)
        # Health on the link-local address; node-cache's own metrics.
        self.assertEqual(self.get("http://169.254.20.10:8080/health"), "OK")
        own = self.get("http://127.0.0.1:9353/metrics")
        self.assertIn('coredns_nodecache_setup_errors_total{errortype='
                      '"iptables"} 0.0', own)
        with open(corefile) as f:
            rendered = f.read()
        self.assertNotIn("__PILLAR__", rendered)
        self.assertIn("forward . %s {" % UPSTREAM_IP, rendered)
        # A changed ConfigMap is rendered again and reloaded.
        util.rewrite(base, BASE.replace(
            "reload\n", "reload 2s 1s\n").replace(
            "    cache 30\n", "    hosts {\n        10.9.9.9 "
            "changed.example\n        fallthrough\n    }\n    cache 30\n"))
        self.assertEqual(self.wait(lambda: self.ask("changed.example."),
                                   "the re-rendered Corefile", procs=procs),
                         "10.9.9.9")
        nc.send_signal(signal.SIGTERM)
        out, _ = nc.communicate(timeout=60)
        self.assertEqual(nc.returncode, 0, out)
        self.assertIn("[INFO] Tearing down", out)
        self.assertEqual(self.rules(), [])
        addrs = self.nsrun("ip", "-o", "addr", "show").stdout
        self.assertNotIn("169.254.20.10", addrs)
        self.assertNotIn("nodelocaldns", addrs)
