"""kubernetes: Corefile parsing (CoreDNS's setup_test.go cases)."""

from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins.kubernetes import directive
from tests.support import util


class Loader(unittest.TestCase):
    """Loads a Corefile with one kubernetes directive."""

    def load(self, body, zones="cluster.local", key=".:0",
             endpoint="http://127.0.0.1:1"):
        """The kubernetes plugin of a Corefile whose options are ``body``
        (one line each, from line 4 on: line 3 is the endpoint)."""
        text = ("%s {\n    kubernetes %s {\n        endpoint %s\n%s    }\n"
                "}\n" % (key, zones, endpoint,
                         "".join("        %s\n" % x for x in body)))
        d = util.write_files(self, {"Corefile": text})
        from corednstw.service.app import App
        app = App(d + "/Corefile", dns_port=0)
        cfg = app.load()
        return cfg.blocks[0].plugin("kubernetes")

    def bad(self, body, msg, zones="cluster.local"):
        e = self.assertRaises(CorefileError, self.load, body, zones)
        self.assertIn(msg, str(e))
        return e


class SetupTest(Loader):

    def test_defaults(self):
        k = self.load([])
        self.assertEqual(k.zones, ["cluster.local."])
        self.assertEqual((k.ttl, k.pod_mode, k.startup_timeout),
                         (5, "disabled", 5.0))
        self.assertTrue(k.endpoints)
        self.assertIsNone(k.fall)

    def test_options(self):
        k = self.load(["pods verified", "namespaces a b", "ttl 0",
                       "endpoint_pod_names", "noendpoints",
                       "ignore empty_service", "fallthrough in-addr.arpa",
                       "startup_timeout 2s", "apiserver_qps 10.5",
                       "apiserver_burst 20", "apiserver_max_inflight 3",
                       "labels app in (a, b)", "tls c k ca"],
                      zones="cluster.local 10.0.0.0/24")
        self.assertEqual(k.zones, ["cluster.local.", "0.0.10.in-addr.arpa."])
        self.assertEqual(k.pod_mode, "verified")
        self.assertEqual(k.namespaces, {"a", "b"})
        self.assertEqual(k.ttl, 0)
        self.assertTrue(k.podnames and k.ignore_empty)
        self.assertFalse(k.endpoints)
        self.assertTrue(k.fall.through("1.0.0.10.in-addr.arpa."))
        self.assertFalse(k.fall.through("x.cluster.local."))
        self.assertEqual(k.startup_timeout, 2.0)
        self.assertEqual(k.labels, "app in (a, b)")
        self.assertEqual(k.conn_opts["qps"], 10.5)
        self.assertEqual(k.conn_opts["burst"], 20)
        self.assertEqual(k.conn_opts["inflight"], 3)
        self.assertEqual(k.conn_opts["tls"], ("c", "k", "ca"))

    def test_multicluster_and_zonal(self):
        k = self.load(["multicluster clusterset.local", "zonal"],
                      zones="cluster.local clusterset.local")
        self.assertEqual(k.multicluster, ["clusterset.local."])
        self.assertTrue(k.zonal)

    def test_errors(self):
        self.bad(["pods nope"], "wrong value for pods: nope")
        self.bad(["ttl 3601"], "ttl must be in range [0, 3600]: 3601")
        self.bad(["ttl -1"], "ttl must be in range")
        self.bad(["ttl"], "Wrong argument count")
        self.bad(["tls a b"], "Wrong argument count")
        self.bad(["ignore nothing"], "unable to parse ignore value")
        self.bad(["labels a=(b"], "unable to parse label selector value")
        self.bad(["namespaces a", "namespace_labels x=y"],
                 "namespaces and namespace_labels cannot both be set")
        self.bad(["multicluster other.local"],
                 "is not authoritative for the multicluster zone")
        self.bad(["zonal", "noendpoints"], "zonal requires the endpoint cache")
        self.bad(["startup_timeout 5x"], "failed to parse startup_timeout")
        self.bad(["apiserver_qps -1"], "apiserver_qps must be >= 0")
        self.bad(["apiserver_burst x"], "invalid apiserver_burst")
        self.bad(["bogus"], "unknown property 'bogus'")
        self.bad([], "non-reverse zone name must be used",
                 zones="10.0.0.0/8")

    def test_kubeconfig_errors(self):
        """Problems CoreDNS's client configuration reports at setup."""
        d = util.write_files(self, {
            "bad.yaml": "clusters: [\n",
            "list.yaml": "- a\n- b\n",
            "empty.yaml": "",
            "ok.yaml": ("current-context: a\nclusters:\n- name: c\n"
                        "  cluster:\n    server: https://k8s:6443\n"
                        "contexts:\n- name: a\n  context:\n    cluster: c\n"
                        "- name: b\n  context:\n    cluster: gone\n")})
        self.bad(["kubeconfig %s/missing.yaml" % d],
                 "stat %s/missing.yaml: no such file or directory" % d)
        self.bad(["kubeconfig %s/bad.yaml" % d],
                 'error loading config file "%s/bad.yaml": yaml: ' % d)
        self.bad(["kubeconfig %s/list.yaml" % d],
                 'error loading config file "%s/list.yaml"' % d)
        self.bad(["kubeconfig %s/empty.yaml" % d],
                 "invalid configuration: no configuration has been provided")
        self.bad(["kubeconfig %s/ok.yaml nope" % d],
                 "context was not found for specified context: nope")
        self.bad(["kubeconfig %s/ok.yaml b" % d],
                 'invalid configuration: cluster "gone" not found')
        self.bad(["kubeconfig a b c"], "Wrong argument count")
        k = self.load(["kubeconfig %s/ok.yaml" % d])
        self.assertEqual(k.conn_opts["kubeconfig"], d + "/ok.yaml")
        self.assertIsNone(k.conn_opts["context"])
        k = self.load(["kubeconfig %s/ok.yaml a" % d])
        self.assertEqual(k.conn_opts["context"], "a")

    def test_in_cluster_needs_env(self):
        self.patch(directive.os, "environ", {})
        d = util.write_files(self, {"Corefile": ".:0 {\n    kubernetes\n}\n"})
        from corednstw.service.app import App
        e = self.assertRaises(CorefileError,
                              App(d + "/Corefile", dns_port=0).load)
        self.assertIn("KUBERNETES_SERVICE_HOST", str(e))

    def test_once(self):
        d = util.write_files(self, {"Corefile": (
            ".:0 {\n    kubernetes {\n endpoint http://x\n }\n"
            "    kubernetes {\n endpoint http://x\n }\n}\n")})
        from corednstw.service.app import App
        e = self.assertRaises(CorefileError,
                              App(d + "/Corefile", dns_port=0).load)
        self.assertIn("only be used once", str(e))


class OptionLineTest(Loader):
    """An error in an option names the option's line; rules across
    options name the directive's."""

    def test_option_errors(self):
        for body in (["pods nope"], ["ttl 3601"], ["ttl x"], ["ttl"],
                     ["ignore nothing"], ["labels a=(b"], ["tls a b"],
                     ["startup_timeout 5x"], ["apiserver_qps -1"],
                     ["apiserver_burst x"], ["bogus"], ["kubeconfig"],
                     ["kubeconfig /nonexistent/kubeconfig"],
                     ["resyncperiod"], ["upstream nope"],
                     ["transfer from 10.0.0.1"]):
            e = self.bad(["ttl 5"] + body, "plugin/kubernetes: ")
            self.assertEqual(e.line, 5, body)

    def test_rules_across_options(self):
        e = self.bad(["namespaces a", "namespace_labels x=y"],
                     "namespaces and namespace_labels cannot both be set")
        self.assertEqual(e.line, 2)
        e = self.bad(["zonal", "noendpoints"], "zonal requires")
        self.assertEqual(e.line, 2)


class EndpointTest(Loader):
    """endpoint host:port: client-go's default scheme, as CoreDNS 1.x
    Corefiles (kubectl proxy on 127.0.0.1:8001) relied on."""

    def test_no_scheme_is_http(self):
        for written in ("127.0.0.1:8001", "localhost:8001", "[::1]:8001"):
            k = self.load([], endpoint=written)
            self.assertEqual(k.conn_opts["endpoint"], "http://" + written)

    def test_no_scheme_with_tls_is_https(self):
        k = self.load(["tls c k ca"], endpoint="k8s:6443")
        self.assertEqual(k.conn_opts["endpoint"], "https://k8s:6443")

    def test_scheme_kept(self):
        for written in ("http://k8s:8080", "https://k8s:6443"):
            k = self.load([], endpoint=written)
            self.assertEqual(k.conn_opts["endpoint"], written)


class DeprecatedTest(Loader):
    """Options CoreDNS removed are accepted with one notice each, at
    their own line, naming what to do today."""

    def setUp(self):
        self.log = util.capture_log(self)

    def notices(self):
        return [x for x in self.log.lines if x.startswith("[WARNING]")]

    def assertNotice(self, text, line=4):
        [notice] = self.notices()
        self.assertTrue(notice.startswith(
            "[WARNING] plugin/kubernetes: " + text + " ("), notice)
        self.assertTrue(notice.endswith("Corefile:%d)" % line), notice)

    def test_resyncperiod(self):
        k = self.load(["resyncperiod 30s"])
        self.assertNotice(directive.RESYNC_GONE)
        self.assertIn("no longer needed", directive.RESYNC_GONE)
        self.assertEqual(k.ttl, 5)

    def test_resyncperiod_errors(self):
        self.bad(["resyncperiod"], "Wrong argument count")
        self.bad(["resyncperiod 5x"], "unable to parse resync duration "
                 "value: '5x': time: invalid duration")

    def test_upstream_without_address(self):
        k = self.load(["upstream"])
        self.assertIsNone(k.upstream)
        self.assertNotice(directive.UPSTREAM_GONE)
        self.assertIn("resolved through the server itself; remove it",
                      directive.UPSTREAM_GONE)

    def test_upstream_addresses(self):
        k = self.load(["upstream 10.0.0.1 10.0.0.2:5353 [::1]:5354"])
        self.assertEqual(k.upstream.servers, [
            ("10.0.0.1", 53), ("10.0.0.2", 5353), ("::1", 5354)])
        self.assertNotice(directive.UPSTREAM_GONE
                          + directive.UPSTREAM_ADDRESSES)

    def test_upstream_resolv_conf(self):
        d = util.write_files(self, {
            "resolv.conf": "search example.test\nnameserver 10.0.0.53\n"
                           "nameserver fe80::1%eth0\noptions ndots:5\n",
            "empty.conf": "# nothing\n"})
        k = self.load(["upstream %s/resolv.conf 10.0.0.1:54" % d])
        self.assertEqual(k.upstream.servers, [
            ("10.0.0.53", 53), ("fe80::1", 53), ("10.0.0.1", 54)])
        self.bad(["upstream %s/empty.conf" % d], "no nameservers found")

    def test_upstream_errors(self):
        self.bad(["upstream nope"], 'not an IP address or file: "nope"')
        self.bad(["upstream 10.0.0.1:99999"], "not an IP address or file")

    def test_transfer_to(self):
        k = self.load(["transfer to 127.0.0.1 10.0.0.1:5300",
                       "transfer to *"])
        self.assertEqual(k.transfer_to, [("127.0.0.1", 53),
                                         ("10.0.0.1", 5300), "*"])
        notices = self.notices()
        self.assertEqual(len(notices), 2)
        for line, notice in zip((4, 5), notices):
            self.assertTrue(notice.startswith(
                "[WARNING] plugin/kubernetes: " + directive.TRANSFER_GONE))
            self.assertTrue(notice.endswith("Corefile:%d)" % line))
        self.assertIn("use the transfer plugin", directive.TRANSFER_GONE)

    def test_transfer_errors(self):
        self.bad(["transfer"], "Wrong argument count")
        self.bad(["transfer to"], "Wrong argument count")
        self.bad(["transfer nowhere 10.0.0.1"], "Wrong argument count")
        self.bad(["transfer from 10.0.0.1"],
                 "can't use `transfer from` when not being a secondary")
        self.bad(["transfer to nope"], "must specify an IP address: `nope'")

    def test_current_options_no_notice(self):
        self.load(["pods verified", "ttl 10", "fallthrough"])
        self.assertEqual(self.notices(), [])
