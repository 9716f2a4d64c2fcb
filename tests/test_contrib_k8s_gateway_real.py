"""k8s_gateway against a real kube-apiserver (and etcd), with the
Gateway API and external-dns CRDs applied: each kind is created,
changed and deleted through the API, and the answer over the wire must
follow each change within a second.

Runs when ``KUBE_APISERVER_DIR`` names a folder prepared by the
reference kit's setup.sh (``bin/etcd``, ``bin/kube-apiserver``,
``kubeconfig``, ``start.sh``, ``stop.sh``) and ``K8S_CRDS_DIR`` a folder
holding ``gateway-api/*.yaml`` and ``external-dns/*.yaml``.  An API
server already answering there is used as it is; otherwise start.sh
starts one for the test and stop.sh stops it after.
"""

import glob
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from twisted.internet import defer, reactor, threads
from twisted.python import log
from twisted.trial import unittest

from tests.support import util
from tests.support.contrib import installed

DIR = os.environ.get("KUBE_APISERVER_DIR", "")
CRDS = os.environ.get("K8S_CRDS_DIR", "")
#: How soon an answer must follow a change of the API's objects.
FOLLOW_WITHIN = 1.0
ZONE = "example.com."
KINDS = {"namespaces": "Namespace", "ingresses": "Ingress",
         "services": "Service", "gateways": "Gateway",
         "httproutes": "HTTPRoute", "tlsroutes": "TLSRoute",
         "grpcroutes": "GRPCRoute", "dnsendpoints": "DNSEndpoint"}


def _skip():
    if not installed("corednstw_k8s_gateway"):
        return "pip install ./contrib/k8s_gateway (scripts/test.sh)"
    if not DIR or not os.path.exists(os.path.join(DIR, "bin",
                                                  "kube-apiserver")):
        return "KUBE_APISERVER_DIR: a setup.sh folder with bin/"
    if not CRDS or not glob.glob(os.path.join(CRDS, "gateway-api",
                                              "*.yaml")):
        return "K8S_CRDS_DIR: gateway-api/ and external-dns/ CRDs"
    return None


class API:
    """JSON requests to the API server with the kubeconfig's token and
    CA (blocking: run in a thread)."""

    def __init__(self, kubeconfig):
        import yaml
        with open(kubeconfig) as f:
            cfg = yaml.safe_load(f)
        cluster = cfg["clusters"][0]["cluster"]
        self.server = cluster["server"].rstrip("/")
        self.token = cfg["users"][0]["user"]["token"]
        self.ctx = ssl.create_default_context(
            cafile=cluster["certificate-authority"])

    def call(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.server + path, data=data, method=method, headers={
                "Authorization": "Bearer " + self.token,
                "Content-Type": ctype, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx,
                                        timeout=30) as r:
                return r.status, _body(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _body(e.read())

    def ready(self):
        try:
            return self.call("GET", "/readyz")[0] == 200
        except (OSError, ValueError):
            return False

    def apply_crd(self, path):
        import yaml
        with open(path) as f:
            crd = yaml.safe_load(f)
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        code, _ = self.call("POST", base, crd)
        if code not in (201, 409):
            raise AssertionError("CRD %s: HTTP %d" % (path, code))
        name = crd["metadata"]["name"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, got = self.call("GET", base + "/" + name)
            conds = (got.get("status") or {}).get("conditions") or ()
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in conds):
                return
            time.sleep(0.1)
        raise AssertionError("CRD %s not established" % name)

    def create(self, path, obj):
        """POST ``obj`` to its collection; its apiVersion is the path's,
        its kind the collection's name made singular (as these are)."""
        parts = path.split("/")
        version = "/".join(parts[2:4]) if parts[1] == "apis" else parts[2]
        obj = dict(obj, apiVersion=version, kind=KINDS[parts[-1]])
        code, got = self.call("POST", path, obj)
        if code != 201:
            raise AssertionError("POST %s: %d %s" % (path, code, got))
        return got

    def patch(self, path, patch):
        code, got = self.call("PATCH", path, patch,
                              "application/merge-patch+json")
        if code != 200:
            raise AssertionError("PATCH %s: %d %s" % (path, code, got))
        return got

    def delete(self, path):
        code, got = self.call("DELETE", path)
        if code not in (200, 202):
            raise AssertionError("DELETE %s: %d %s" % (path, code, got))


class RealAPIServerTest(unittest.TestCase):

    skip = _skip()

    def cluster(self):
        """The API server up (started, and stopped at cleanup, when it
        is not running yet) with the CRDs established (blocking)."""
        self.api = API(os.path.join(DIR, "kubeconfig"))
        if not self.api.ready():
            subprocess.run([os.path.join(DIR, "start.sh")], check=True,
                           capture_output=True, timeout=300)
            self.addCleanup(subprocess.run, [os.path.join(DIR, "stop.sh")],
                            capture_output=True, timeout=120)
        for f in sorted(glob.glob(os.path.join(CRDS, "gateway-api",
                                               "*.yaml")) +
                        glob.glob(os.path.join(CRDS, "external-dns",
                                               "*.yaml"))):
            self.api.apply_crd(f)

    @defer.inlineCallbacks
    def setUp(self):
        yield threads.deferToThread(self.cluster)
        # A namespace of its own: objects of an earlier run stay apart
        # (a deleted namespace never goes away without a controller).
        self.ns = "gw-" + uuid.uuid4().hex[:8]
        yield self.call("create", "/api/v1/namespaces",
                        {"metadata": {"name": self.ns}})
        self.app = yield util.start(self, (
            ".:0 {\n    k8s_gateway %s {\n        resources Ingress "
            "Service HTTPRoute TLSRoute GRPCRoute DNSEndpoint\n"
            "        kubeconfig %s\n    }\n}\n")
            % (ZONE, os.path.join(DIR, "kubeconfig")))
        self.port = self.app.port()
        self.gw = self.app.config.blocks[0].plugin("k8s_gateway")
        yield util.wait_for(self.gw.ready, timeout=30)
        self.latencies = {}
        self.addCleanup(lambda: log.msg("k8s_gateway answers followed: "
                                        + ", ".join(
                                            "%s %.3fs" % kv for kv in
                                            self.latencies.items())))

    def call(self, what, *args):
        return threads.deferToThread(getattr(self.api, what), *args)

    @defer.inlineCallbacks
    def change(self, label, what, args, name, expected, qtype="A",
               rcode=0):
        """Make a change through the API; the answer must follow it
        within FOLLOW_WITHIN seconds (polled every few ms)."""
        yield self.call(what, *args)
        start = time.monotonic()
        got = None
        while True:
            m = yield util.query(self.port, name, qtype)
            got = (m.rcode(), [x.split(" ", 1)[1] for x in util.rrs(m)])
            took = time.monotonic() - start
            if got == (rcode, sorted(expected)):
                break
            if took > FOLLOW_WITHIN:
                self.fail("%s: %s %s is %r after %.2fs, expected %r" % (
                    label, name, qtype, got, took, (rcode, expected)))
            yield _pause(0.005)
        self.latencies[label] = took

    def p(self, path):
        return path.replace("NS", self.ns)

    @defer.inlineCallbacks
    def test_ingress(self):
        path = self.p("/apis/networking.k8s.io/v1/namespaces/NS/ingresses")
        host = "ing-%s.example.com" % self.ns
        yield self.call("create", path, {
            "metadata": {"name": "a"},
            "spec": {"rules": [{"host": host}]}})
        yield self.change("ingress status", "patch", (
            path + "/a/status", {"status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.1"}]}}}), host + ".", ["60 IN A 192.0.2.1"])
        yield self.change("ingress change", "patch", (
            path + "/a/status", {"status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.2"}]}}}), host + ".", ["60 IN A 192.0.2.2"])
        yield self.change("ingress delete", "delete", (path + "/a",),
                          host + ".", [], rcode=3)

    @defer.inlineCallbacks
    def test_service(self):
        path = self.p("/api/v1/namespaces/NS/services")
        name = "web.%s.example.com." % self.ns
        yield self.call("create", path, {
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer",
                     "ports": [{"port": 80, "protocol": "TCP"}]}})
        yield self.change("service status", "patch", (
            path + "/web/status", {"status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.3"}]}}}), name, ["60 IN A 192.0.2.3"])
        host = "svc-%s.example.com." % self.ns
        yield self.change("service annotation", "patch", (
            path + "/web", {"metadata": {"annotations": {
                "coredns.io/hostname": host[:-1]}}}),
            host, ["60 IN A 192.0.2.3"])
        yield self.change("service delete", "delete", (path + "/web",),
                          host, [], rcode=3)

    @defer.inlineCallbacks
    def test_routes(self):
        gw = self.p("/apis/gateway.networking.k8s.io/v1/namespaces/NS/"
                    "gateways")
        yield self.call("create", gw, {
            "metadata": {"name": "gw"},
            "spec": {"gatewayClassName": "example", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"}]}})
        yield self.call("patch", gw + "/gw/status", {"status": {
            "addresses": [{"type": "IPAddress", "value": "192.0.2.4"}]}})
        for kind in ("httproutes", "tlsroutes", "grpcroutes"):
            path = self.p("/apis/gateway.networking.k8s.io/v1/namespaces/"
                          "NS/" + kind)
            host = "%s-%s.example.com" % (kind, self.ns)
            yield self.change(kind + " create", "create", (path, {
                "metadata": {"name": "r"},
                "spec": {"hostnames": [host], "parentRefs": [
                    {"name": "gw"}], "rules": [{"backendRefs": [
                        {"name": "svc", "port": 443}]}]}}),
                host + ".", ["60 IN A 192.0.2.4"])
        yield self.change("gateway change", "patch", (
            gw + "/gw/status", {"status": {"addresses": [
                {"type": "IPAddress", "value": "192.0.2.40"}]}}),
            "grpcroutes-%s.example.com." % self.ns, ["60 IN A 192.0.2.40"])
        for kind in ("httproutes", "tlsroutes", "grpcroutes"):
            path = self.p("/apis/gateway.networking.k8s.io/v1/namespaces/"
                          "NS/" + kind)
            yield self.change(kind + " delete", "delete", (path + "/r",),
                              "%s-%s.example.com." % (kind, self.ns), [],
                              rcode=3)

    @defer.inlineCallbacks
    def test_dns_endpoint(self):
        path = self.p("/apis/externaldns.k8s.io/v1alpha1/namespaces/NS/"
                      "dnsendpoints")
        host = "dep-%s.example.com" % self.ns
        yield self.change("dnsendpoint create", "create", (path, {
            "metadata": {"name": "e"},
            "spec": {"endpoints": [{"dnsName": host, "recordType": "A",
                                    "targets": ["192.168.30.1"]}]}}),
            host + ".", ["60 IN A 192.168.30.1"])
        yield self.change("dnsendpoint change", "patch", (path + "/e", {
            "spec": {"endpoints": [{"dnsName": host, "recordType": "A",
                                    "targets": ["192.168.30.2"]}]}}),
            host + ".", ["60 IN A 192.168.30.2"])
        yield self.change("dnsendpoint delete", "delete", (path + "/e",),
                          host + ".", [], rcode=3)


def _body(data):
    """A JSON body as an object, another (/readyz's "ok") as text."""
    try:
        return json.loads(data or b"{}")
    except ValueError:
        return data.decode(errors="replace")


def _pause(seconds):
    d = defer.Deferred()
    reactor.callLater(seconds, d.callback, None)
    return d
