"""kubernetes: Corefile parsing (CoreDNS's setup_test.go cases)."""

from twisted.trial import unittest

from corednstw.core import corefile
from corednstw.plugins.kubernetes import directive
from tests.support import util


class SetupTest(unittest.TestCase):

    def load(self, body, zones="cluster.local", key=".:0"):
        text = ("%s {\n    kubernetes %s {\n"
                "        endpoint http://127.0.0.1:1\n%s    }\n}\n") % (
            key, zones, "".join("        %s\n" % x for x in body))
        d = util.write_files(self, {"Corefile": text})
        from corednstw.service.app import App
        app = App(d + "/Corefile", dns_port=0)
        cfg = app.load()
        return cfg.blocks[0].plugin("kubernetes")

    def bad(self, body, msg, zones="cluster.local"):
        e = self.assertRaises(corefile.CorefileError, self.load, body, zones)
        self.assertIn(msg, str(e))

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
        e = self.assertRaises(corefile.CorefileError,
                              App(d + "/Corefile", dns_port=0).load)
        self.assertIn("KUBERNETES_SERVICE_HOST", str(e))

    def test_once(self):
        d = util.write_files(self, {"Corefile": (
            ".:0 {\n    kubernetes {\n endpoint http://x\n }\n"
            "    kubernetes {\n endpoint http://x\n }\n}\n")})
        from corednstw.service.app import App
        e = self.assertRaises(corefile.CorefileError,
                              App(d + "/Corefile", dns_port=0).load)
        self.assertIn("only be used once", str(e))
