"""The Kubernetes manifests in deploy/ against the Kubernetes API schemas
(offline, from the kubernetes-validate package), their CoreDNS-compatible
content, and the Dockerfile's essentials."""

import copy
import glob
import os

import kubernetes_validate
import yaml
from kubernetes_validate.utils import ValidationError
from twisted.trial import unittest

from corednstw.core import corefile, directives
from tests.support.util import REPO

DEPLOY = os.path.join(REPO, "deploy", "kubernetes")
VERSION = kubernetes_validate.latest_version()


def _documents():
    out = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yaml"),
                                 recursive=True)):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    out.append((os.path.relpath(path, DEPLOY), doc))
    return out


def _find(kind, name):
    for _, doc in _documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError((kind, name))


def _validate(doc):
    kubernetes_validate.validate(doc, VERSION, strict=True)


class SchemaTest(unittest.TestCase):

    def test_every_manifest_is_valid(self):
        docs = _documents()
        kinds = sorted({d["kind"] for _, d in docs})
        self.assertEqual(kinds, ["ClusterRole", "ClusterRoleBinding",
                                 "ConfigMap", "DaemonSet", "Deployment",
                                 "Service", "ServiceAccount"])
        for path, doc in docs:
            try:
                _validate(doc)
            except ValidationError as e:
                self.fail("%s: %s %s: %s" % (path, doc["kind"],
                                             doc["metadata"]["name"], e))

    def test_wrong_field_type_fails(self):
        svc = copy.deepcopy(_find("Service", "kube-dns"))
        svc["spec"]["ports"][0]["port"] = "fifty-three"
        self.assertRaises(ValidationError, _validate, svc)

    def test_unknown_field_fails(self):
        dep = copy.deepcopy(_find("Deployment", "coredns"))
        dep["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
        self.assertRaises(ValidationError, _validate, dep)

    def test_wrong_nested_type_fails(self):
        dep = copy.deepcopy(_find("Deployment", "coredns"))
        dep["spec"]["template"]["spec"]["containers"][0][
            "securityContext"]["readOnlyRootFilesystem"] = "yes"
        self.assertRaises(ValidationError, _validate, dep)


class ContentTest(unittest.TestCase):

    def test_cluster_role_is_read_only_and_minimal(self):
        role = _find("ClusterRole", "system:coredns")
        got = sorted((g, r, tuple(sorted(rule["verbs"])))
                     for rule in role["rules"]
                     for g in rule["apiGroups"] for r in rule["resources"])
        self.assertEqual(got, [
            ("", "endpoints", ("list", "watch")),
            ("", "namespaces", ("list", "watch")),
            ("", "pods", ("list", "watch")),
            ("", "services", ("list", "watch")),
            ("discovery.k8s.io", "endpointslices", ("list", "watch")),
        ])
        mc = _find("ClusterRole", "system:coredns-multicluster")
        self.assertEqual(mc["rules"], [{
            "apiGroups": ["multicluster.x-k8s.io"],
            "resources": ["serviceimports"], "verbs": ["list", "watch"]}])

    def test_binding_names_the_service_account(self):
        crb = _find("ClusterRoleBinding", "system:coredns")
        sa = _find("ServiceAccount", "coredns")
        self.assertEqual(crb["roleRef"]["name"], "system:coredns")
        self.assertEqual(crb["subjects"], [{
            "kind": "ServiceAccount", "name": sa["metadata"]["name"],
            "namespace": "kube-system"}])

    def test_deployment(self):
        dep = _find("Deployment", "coredns")
        pod = dep["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], "coredns")
        (c,) = pod["containers"]
        self.assertEqual(c["resources"], {"limits": {"memory": "170Mi"},
                                          "requests": {"cpu": "100m",
                                                       "memory": "70Mi"}})
        self.assertEqual((c["livenessProbe"]["httpGet"]["path"],
                          c["livenessProbe"]["httpGet"]["port"]),
                         ("/health", 8080))
        self.assertEqual((c["readinessProbe"]["httpGet"]["path"],
                          c["readinessProbe"]["httpGet"]["port"]),
                         ("/ready", 8181))
        sc = c["securityContext"]
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertEqual(sc["capabilities"], {"add": ["NET_BIND_SERVICE"],
                                              "drop": ["ALL"]})
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertNotEqual(pod["securityContext"]["runAsUser"], 0)
        # CoreDNS's arguments, unchanged: the image runs `coredns`.
        self.assertEqual(c["args"], ["-conf", "/etc/coredns/Corefile"])
        self.assertNotIn("command", c)
        self.assertEqual(
            dep["spec"]["selector"]["matchLabels"], {"k8s-app": "kube-dns"})
        self.assertEqual({(p["name"], p["containerPort"], p["protocol"])
                          for p in c["ports"]},
                         {("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"),
                          ("metrics", 9153, "TCP")})

    def test_service(self):
        svc = _find("Service", "kube-dns")
        self.assertEqual(svc["spec"]["selector"], {"k8s-app": "kube-dns"})
        self.assertEqual([(p["name"], p["port"], p["protocol"])
                          for p in svc["spec"]["ports"]],
                         [("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"),
                          ("metrics", 9153, "TCP")])

    def _corefile(self, name):
        text = _find("ConfigMap", name)["data"]["Corefile"]
        return corefile.parse(text, name, env={"CLUSTER_DNS": "10.96.0.10"})

    def test_kubeadm_corefile(self):
        (block,) = self._corefile("coredns")
        self.assertEqual([d.name for d in block.directives], [
            "errors", "health", "ready", "kubernetes", "prometheus",
            "forward", "cache", "loop", "reload", "loadbalance"])
        for d in block.directives:
            self.assertTrue(directives.known(d.name), d.name)

    def test_node_local_corefile(self):
        # The template, rendered as node-cache renders it.
        from corednstw.nodecache import template
        text = _find("ConfigMap", "node-local-dns")["data"]["Corefile"]
        rendered, _ = template.render(text, ["169.254.20.10"], "53",
                                      "10.96.0.20",
                                      template.KubeDNSConfig())
        blocks = corefile.parse(rendered, "node-local-dns")
        self.assertEqual([b.keys[0].zone for b in blocks],
                         ["cluster.local.", "in-addr.arpa.", "ip6.arpa.",
                          "."])
        fwd = [d for d in blocks[0].directives if d.name == "forward"][0]
        self.assertEqual(fwd.args, [".", "10.96.0.20"])
        fwd = [d for d in blocks[3].directives if d.name == "forward"][0]
        self.assertEqual(fwd.args, [".", "/etc/resolv.conf"])
        bind = [d for d in blocks[0].directives if d.name == "bind"][0]
        self.assertEqual(bind.args, ["169.254.20.10"])

    def test_node_local_daemonset(self):
        # The addon's node-cache arguments; flags node-cache accepts.
        from corednstw.nodecache import main
        ds = _find("DaemonSet", "node-local-dns")
        pod = ds["spec"]["template"]["spec"]
        self.assertNotIn("initContainers", pod)
        (c,) = pod["containers"]
        self.assertEqual(c["command"], ["node-cache"])
        values, rest = main.flagset("node-cache").parse(c["args"])
        self.assertEqual(rest, [])
        p = main.params(values)
        self.assertEqual((p.local_ips, p.upstream_svc),
                         (["169.254.20.10"], "kube-dns-upstream"))
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        self.assertIn(os.path.dirname(p.corefile), mounts)
        self.assertIn(os.path.dirname(p.base_corefile), mounts)
        self.assertIn("/run/xtables.lock", mounts)
        self.assertEqual(c["securityContext"]["capabilities"]["add"],
                         ["NET_ADMIN"])


class DockerfileTest(unittest.TestCase):

    def setUp(self):
        with open(os.path.join(REPO, "Dockerfile")) as f:
            self.lines = [ln.strip() for ln in f if ln.strip() and
                          not ln.lstrip().startswith("#")]

    def test_base_user_entrypoint(self):
        froms = [ln for ln in self.lines if ln.startswith("FROM ")]
        self.assertTrue(all(ln.split()[1] == "python:3.11-slim"
                            for ln in froms), froms)
        users = [ln for ln in self.lines if ln.startswith("USER ")]
        self.assertEqual(len(users), 1)
        self.assertNotIn(users[0].split()[1].split(":")[0], ("0", "root"))
        # CoreDNS's entrypoint and no CMD, so CoreDNS's args work.
        self.assertIn('ENTRYPOINT ["coredns"]', self.lines)
        self.assertFalse([ln for ln in self.lines if ln.startswith("CMD")])

    def test_build_time_steps(self):
        text = "\n".join(self.lines)
        self.assertIn("from twisted.plugin import IPlugin, getPlugins; "
                      "list(getPlugins(IPlugin))", text)
        self.assertIn("setcap cap_net_bind_service=+ep", text)
        self.assertIn("python -m compileall", text)
        self.assertIn('"$stdlib"', text)
        # iproute2 depends on libcap2-bin: purging it would remove `ip`.
        self.assertIn("iproute2 iptables", text)
        self.assertIn("apt-get purge -y --auto-remove binutils", text)
        self.assertNotRegex(text, r"purge[^\n]*libcap2-bin")
        self.assertIn("ip -V && iptables -V", text)

    def test_plugin_cache_command_finds_coredns(self):
        from twisted.application.service import IServiceMaker
        from twisted.plugin import IPlugin, getPlugins
        names = [p.tapname for p in getPlugins(IServiceMaker)]
        self.assertIn("coredns", names)
        self.assertTrue(list(getPlugins(IPlugin)))
