"""A small Kubernetes API server for tests and the benchmark.

It speaks the list/watch protocol over real HTTP (a threaded stdlib
server): paged lists with resourceVersion and continue tokens, label and
(pod phase) field selectors, chunked watch streams with ADDED, MODIFIED,
DELETED and BOOKMARK events, 410 Gone (an ERROR event on watches, HTTP
410 on lists) and dropped connections on demand.  No authentication.

In a test: ``srv = APIServer(); srv.start(); srv.add(...)``; mutations
are thread-safe.  As a program it serves a generated cluster for the
benchmark (``python -m tests.k8s_apiserver --help``); POST
``/_control/expire`` or ``/_control/drop`` forces a relist or a reconnect.
"""

import argparse
import base64
import bisect
import copy
import gzip
import json
import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from corednstw.engines.kubernetes import selector

_GW = "/apis/gateway.networking.k8s.io/"
PATHS = {
    "/api/v1/services": "services",
    "/api/v1/namespaces": "namespaces",
    "/api/v1/pods": "pods",
    "/api/v1/nodes": "nodes",
    "/apis/discovery.k8s.io/v1/endpointslices": "endpointslices",
    "/apis/multicluster.x-k8s.io/v1alpha1/serviceimports": "serviceimports",
    "/apis/networking.k8s.io/v1/ingresses": "ingresses",
    _GW + "v1/gateways": "gateways",
    _GW + "v1/httproutes": "httproutes",
    _GW + "v1/grpcroutes": "grpcroutes",
    _GW + "v1/tlsroutes": "tlsroutes",
    _GW + "v1alpha2/tlsroutes": "tlsroutes",
    "/apis/externaldns.k8s.io/v1alpha1/dnsendpoints": "dnsendpoints",
}
KIND_NAMES = {
    "services": ("v1", "Service"), "namespaces": ("v1", "Namespace"),
    "pods": ("v1", "Pod"), "nodes": ("v1", "Node"),
    "endpointslices": ("discovery.k8s.io/v1", "EndpointSlice"),
    "serviceimports": ("multicluster.x-k8s.io/v1alpha1", "ServiceImport"),
    "ingresses": ("networking.k8s.io/v1", "Ingress"),
    "gateways": ("gateway.networking.k8s.io/v1", "Gateway"),
    "httproutes": ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    "grpcroutes": ("gateway.networking.k8s.io/v1", "GRPCRoute"),
    "tlsroutes": ("gateway.networking.k8s.io/v1", "TLSRoute"),
    "dnsendpoints": ("externaldns.k8s.io/v1alpha1", "DNSEndpoint"),
}


# -- object builders ----------------------------------------------------------

def _meta(name, ns=None, labels=None, annotations=None):
    m = {"name": name}
    if ns is not None:
        m["namespace"] = ns
    if labels:
        m["labels"] = dict(labels)
    if annotations:
        m["annotations"] = dict(annotations)
    return m


def service(name, ns, ips=("10.0.0.1",), ports=(("http", "TCP", 80),),
            type="ClusterIP", external=None, labels=None, pna=False,
            external_ips=(), ingress=(), annotations=None):
    """A Service; ``ips=("None",)`` makes it headless.  ``ingress``: the
    load balancer's entries, an address or a host name each."""
    spec = {"type": type, "ports": [
        dict({"port": p[2], "protocol": p[1]}, **({"name": p[0]} if p[0]
                                                  else {}))
        for p in ports]}
    if type == "ExternalName":
        spec["externalName"] = external
    else:
        spec["clusterIP"] = ips[0]
        spec["clusterIPs"] = list(ips)
    if pna:
        spec["publishNotReadyAddresses"] = True
    if external_ips:
        spec["externalIPs"] = list(external_ips)
    obj = {"metadata": _meta(name, ns, labels, annotations), "spec": spec}
    if ingress:
        obj["status"] = {"loadBalancer": {"ingress": _lb(ingress)}}
    return obj


def _lb(entries):
    """Load balancer ingress entries: an address or a host name each."""
    return [{"hostname" if any(c.isalpha() for c in x) and ":" not in x
             else "ip": x} for x in entries]


def ingress(name, ns, hosts, addresses=(), cls=None, labels=None):
    """An Ingress with a rule per host; ``addresses`` its load balancer's
    (addresses or host names)."""
    spec = {"rules": [{"host": h} for h in hosts]}
    if cls is not None:
        spec["ingressClassName"] = cls
    obj = {"metadata": _meta(name, ns, labels), "spec": spec}
    if addresses:
        obj["status"] = {"loadBalancer": {"ingress": _lb(addresses)}}
    return obj


def gateway(name, ns, addresses=(), cls="example"):
    """A Gateway; ``addresses`` in its status (an address, else a host
    name)."""
    return {"metadata": _meta(name, ns),
            "spec": {"gatewayClassName": cls, "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"}]},
            "status": {"addresses": [
                {"type": "Hostname" if any(c.isalpha() for c in x)
                 and ":" not in x else "IPAddress", "value": x}
                for x in addresses]}}


def route(name, ns, hostnames, parents, labels=None):
    """An HTTPRoute, GRPCRoute or TLSRoute: ``parents`` are Gateway
    names, or (namespace, name)."""
    refs = []
    for p in parents:
        refs.append({"name": p[1], "namespace": p[0]} if isinstance(
            p, tuple) else {"name": p})
    return {"metadata": _meta(name, ns, labels),
            "spec": {"hostnames": list(hostnames), "parentRefs": refs}}


def dns_endpoint(name, ns, endpoints, labels=None):
    """A DNSEndpoint: ``endpoints`` are (dnsName, recordType, targets)."""
    return {"metadata": _meta(name, ns, labels), "spec": {"endpoints": [
        {"dnsName": n, "recordType": t, "targets": list(targets)}
        for n, t, targets in endpoints]}}


def node(name, addresses):
    """A Node; ``addresses`` are (type, address)."""
    return {"metadata": _meta(name), "status": {"addresses": [
        {"type": t, "address": a} for t, a in addresses]}}


def endpoint(addresses, hostname=None, ready=True, target=None, zone=None):
    e = {"addresses": list(addresses), "conditions": {}}
    if ready is not None:
        e["conditions"]["ready"] = ready
    if hostname:
        e["hostname"] = hostname
    if target:
        e["targetRef"] = {"kind": "Pod", "name": target}
    if zone:
        e["zone"] = zone
    return e


def endpoint_slice(name, ns, svc, endpoints, ports=(("http", "TCP", 80),),
                   labels=None, address_type="IPv4", trigger=None,
                   cluster=None):
    """An EndpointSlice of Service ``svc`` (``cluster``: an MCS slice)."""
    lab = dict(labels or {})
    if cluster is not None:
        lab["multicluster.kubernetes.io/service-name"] = svc
        lab["multicluster.kubernetes.io/source-cluster"] = cluster
    elif svc is not None:
        lab["kubernetes.io/service-name"] = svc
    ann = {"endpoints.kubernetes.io/last-change-trigger-time": trigger} \
        if trigger else None
    return {"metadata": _meta(name, ns, lab, ann), "addressType": address_type,
            "endpoints": list(endpoints),
            "ports": [dict({"port": p[2], "protocol": p[1]},
                           **({"name": p[0]} if p[0] else {}))
                      for p in ports]}


def namespace(name, labels=None):
    return {"metadata": _meta(name, None, labels)}


def pod(name, ns, ip, phase="Running", labels=None, deleting=False):
    m = _meta(name, ns, labels)
    if deleting:
        m["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": m, "status": {"podIP": ip, "phase": phase}}


def service_import(name, ns, ips=(), ports=(("http", "TCP", 80),),
                   type="ClusterSetIP"):
    return {"metadata": _meta(name, ns), "spec": {
        "type": type, "ips": list(ips),
        "ports": [{"name": p[0], "protocol": p[1], "port": p[2]}
                  for p in ports]}}


# -- the server ---------------------------------------------------------------

class _Server(ThreadingHTTPServer):
    """The test server, quiet about clients that go away: a client that
    refuses the certificate (a test of that) resets its connection."""

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            return
        super().handle_error(request, client_address)


class APIServer:
    """The cluster state, its event log and the HTTP server."""

    def __init__(self, page_limit=None):
        self.cond = threading.Condition()
        self.rv = 1
        self.objects = {k: {} for k in KIND_NAMES}
        self.events = []            # (rv, kind, type, object)
        self.compacted = 0          # watches from below this get 410
        self.expire_gen = 0
        self.drop_gen = 0
        self.list_gone = 0          # the next N lists answer HTTP 410
        self.list_drop = 0          # the next N lists are cut
        self.page_limit = page_limit
        self.requests = []          # (kind, 'list'|'watch', query)
        self.user_agents = []       # the User-Agent of each request
        self.authorizations = []    # the Authorization of each request
        self.connections = 0        # connections accepted
        self.gzip = False           # lists gzipped when the client asks
        self.scheme = "http"
        self.list_gate = None       # a threading.Event lists wait for
        self.hidden = set()         # paths answered 404 (a CRD absent)
        self.bookmark_every = None  # seconds between BOOKMARKs
        self.httpd = None
        self.closing = False
        self._sorted = {}
        self._wire = {}             # (kind, key) -> the object's JSON bytes

    # -- life cycle --
    def start(self, port=0, host="127.0.0.1", tls=None):
        """Serve; ``tls`` (a server ``ssl.SSLContext``) makes it https."""
        server = self

        class Handler(_Handler):
            api = server
        self.httpd = _Server((host, port), Handler)
        if tls is not None:
            self.scheme = "https"
            self.httpd.socket = tls.wrap_socket(self.httpd.socket,
                                                server_side=True)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                         daemon=True,
                         name="k8s-apiserver").start()
        return self

    @property
    def url(self):
        h, p = self.httpd.server_address[:2]
        return "%s://%s:%d" % (self.scheme, h, p)

    def kubeconfig(self, testcase):
        """The absolute path of a kubeconfig (no credentials) for this
        server, in ``testcase``'s temporary directory."""
        path = os.path.abspath(testcase.mktemp())
        with open(path, "w") as f:
            f.write(_KUBECONFIG % self.url)
        return path

    def stop(self):
        if self.list_gate is not None:
            self.list_gate.set()
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    # -- mutations --
    def _record(self, kind, etype, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        api, k = KIND_NAMES[kind]
        obj.setdefault("apiVersion", api)
        obj.setdefault("kind", k)
        self.events.append((self.rv, kind, etype, copy.deepcopy(obj)))
        self.cond.notify_all()

    @staticmethod
    def _key(obj):
        m = obj["metadata"]
        return (m.get("namespace", ""), m["name"])

    def add(self, kind, *objs):
        """Create or replace objects (ADDED or MODIFIED events)."""
        with self.cond:
            for obj in objs:
                obj = copy.deepcopy(obj)
                key = self._key(obj)
                etype = "MODIFIED" if key in self.objects[kind] else "ADDED"
                self.objects[kind][key] = obj
                self._wire.pop((kind, key), None)
                self._record(kind, etype, obj)

    update = add

    def delete(self, kind, ns, name):
        with self.cond:
            obj = self.objects[kind].pop((ns or "", name), None)
            self._wire.pop((kind, (ns or "", name)), None)
            if obj is not None:
                self._record(kind, "DELETED", copy.deepcopy(obj))

    def load(self, kind, objs):
        """Bulk load without events (a cluster that already exists)."""
        with self.cond:
            for obj in objs:
                self.rv += 1
                obj["metadata"]["resourceVersion"] = str(self.rv)
                self.objects[kind][self._key(obj)] = obj
            self.compacted = self.rv

    def replace_silently(self, kind, objs):
        """Swap a kind's whole content without watch events and expire
        every watch: clients see the change only through a relist."""
        with self.cond:
            self.objects[kind] = {}
            self._wire = {}
            for obj in objs:
                obj = copy.deepcopy(obj)
                self.rv += 1
                obj["metadata"]["resourceVersion"] = str(self.rv)
                self.objects[kind][self._key(obj)] = obj
            self._expire()

    def expire(self):
        """Compact history: open watches get an ERROR 410 event, and
        watches from older versions are refused the same way."""
        with self.cond:
            self._expire()

    def _expire(self):
        self.rv += 1
        self.compacted = self.rv
        self.events = []
        self.expire_gen += 1
        self.cond.notify_all()

    def drop(self):
        """Cut every open watch connection (no final chunk)."""
        with self.cond:
            self.drop_gen += 1
            self.cond.notify_all()

    def sorted_keys(self, kind):
        """The kind's keys in list order (cached until it changes)."""
        n = len(self.objects[kind])
        cached = self._sorted.get(kind)
        if cached is None or cached[0] != self.rv or len(cached[1]) != n:
            cached = self._sorted[kind] = (self.rv,
                                           sorted(self.objects[kind]))
        return cached[1]

    def wire(self, kind, key):
        """An object's JSON, serialized once (as the API server's watch
        cache keeps objects serialized)."""
        data = self._wire.get((kind, key))
        if data is None:
            data = self._wire[(kind, key)] = json.dumps(
                self.objects[kind][key], separators=(",", ":")).encode()
        return data

    def count(self, kind, what):
        return sum(1 for k, w, _ in list(self.requests)
                   if k == kind and w == what)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api = None

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with self.api.cond:
            self.api.connections += 1
        # Headers and body go out in separate writes: without NODELAY
        # every request waits for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        u = urlparse(self.path)
        if u.path == "/_control/expire":
            self.api.expire()
        elif u.path == "/_control/drop":
            self.api.drop()
        else:
            return self._json(404, _status(404, "not found"))
        self._json(200, {})

    def _json(self, code, obj):
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlparse(self.path)
        kind = PATHS.get(u.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        if kind is None or u.path in self.api.hidden:
            return self._json(404, _status(404, "the server could not find "
                                           "the requested resource"))
        try:
            reqs = selector.parse(q.get("labelSelector", ""))
        except selector.SelectorError as e:
            return self._json(400, _status(400, str(e)))
        fields = _fields(q.get("fieldSelector", ""))
        api = self.api
        api.user_agents.append(self.headers.get("User-Agent"))
        api.authorizations.append(self.headers.get("Authorization"))
        if q.get("watch") in ("true", "1"):
            api.requests.append((kind, "watch", q))
            return self._watch(kind, q, reqs, fields)
        api.requests.append((kind, "list", q))
        gate = api.list_gate
        if gate is not None:
            gate.wait()         # a slow API server: the list comes later
        with api.cond:
            if api.list_drop:
                api.list_drop -= 1
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if api.list_gone:
                api.list_gone -= 1
                return self._json(410, _status(410, "too old resource "
                                               "version", "Expired"))
            cont = q.get("continue")
            if cont:
                tok = json.loads(base64.b64decode(cont))
                list_rv, after = tok["rv"], tuple(tok["after"])
            else:
                list_rv, after = api.rv, None
            limit = int(q.get("limit") or 0)
            if api.page_limit:
                limit = min(limit or api.page_limit, api.page_limit)
            keys = api.sorted_keys(kind)
            start = bisect.bisect_right(keys, after) if after else 0
            items, last, more = [], None, False
            for key in keys[start:]:
                obj = api.objects[kind][key]
                if not _match(obj, reqs, fields):
                    continue
                if limit and len(items) >= limit:
                    more = True
                    break
                items.append(api.wire(kind, key))
                last = key
            meta = {"resourceVersion": str(list_rv)}
            if more:
                meta["continue"] = base64.b64encode(json.dumps(
                    {"rv": list_rv, "after": list(last)}).encode()).decode()
            head = json.dumps({"kind": KIND_NAMES[kind][1] + "List",
                               "apiVersion": KIND_NAMES[kind][0],
                               "metadata": meta}, separators=(",", ":"))
            body = (head[:-1].encode() + b',"items":[' + b",".join(items)
                    + b"]}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if api.gzip and "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, kind, q, reqs, fields):
        api = self.api
        since = int(q.get("resourceVersion") or 0)
        deadline = time.monotonic() + int(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with api.cond:
            gen, drop = api.expire_gen, api.drop_gen
            gone = since < api.compacted
            pos = 0
        try:
            if gone:
                self._chunk({"type": "ERROR", "object": _status(
                    410, "too old resource version", "Expired")})
                return self._end()
            last_mark = time.monotonic()
            while True:
                with api.cond:
                    while True:
                        if api.closing or api.drop_gen != drop:
                            break
                        if api.expire_gen != gen:
                            break
                        if pos < len(api.events):
                            break
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        wait = left
                        if bookmarks and api.bookmark_every:
                            wait = min(wait, api.bookmark_every)
                        if not api.cond.wait(wait):
                            break
                    if api.closing or api.drop_gen != drop:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if api.expire_gen != gen:
                        self._chunk({"type": "ERROR", "object": _status(
                            410, "too old resource version", "Expired")})
                        return self._end()
                    batch = api.events[pos:]
                    pos = len(api.events)
                    rv_now = api.rv
                for rv, k, etype, obj in batch:
                    if k != kind or rv <= since:
                        continue
                    if not _match(obj, reqs, fields):
                        continue
                    self._chunk({"type": etype, "object": obj})
                now = time.monotonic()
                if (bookmarks and api.bookmark_every
                        and now - last_mark >= api.bookmark_every):
                    last_mark = now
                    api_v, k = KIND_NAMES[kind]
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": k, "apiVersion": api_v,
                        "metadata": {"resourceVersion": str(rv_now)}}})
                if now >= deadline:
                    return self._end()
        except OSError:
            self.close_connection = True

    def _end(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


_KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
users:
- name: test
  user: {}
"""


def _status(code, message, reason="NotFound"):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _fields(text):
    out = []
    for part in filter(None, text.split(",")):
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k, False, v))
        else:
            k, v = part.split("=", 1)
            out.append((k.rstrip("="), True, v))
    return out


def _match(obj, reqs, fields):
    if reqs and not selector.matches(
            reqs, (obj.get("metadata") or {}).get("labels")):
        return False
    for path, eq, value in fields:
        cur = obj
        for p in path.split("."):
            cur = (cur or {}).get(p) if isinstance(cur, dict) else None
        if (cur == value) != eq:
            return False
    return True


# -- a generated cluster (the benchmark) --------------------------------------

def generate(srv, services=10000, namespaces=100, headless=0.1):
    """``services`` services over ``namespaces`` namespaces; a fraction
    ``headless`` of them headless with one 3-endpoint slice each."""
    srv.load("namespaces", [namespace("ns%d" % i) for i in range(namespaces)])
    every = int(round(1 / headless)) if headless else 0
    svcs, slices = [], []
    for i in range(services):
        ns = "ns%d" % (i % namespaces)
        name = "svc%d" % i
        if every and i % every == 0:
            svcs.append(service(name, ns, ips=("None",)))
            base = "10.%d.%d." % (100 + (i >> 16) % 100, (i >> 8) & 255)
            slices.append(endpoint_slice(name + "-abcde", ns, name, [
                endpoint(["%s%d" % (base, (i & 63) * 3 + j + 1)],
                         target="%s-%d" % (name, j)) for j in range(3)]))
        else:
            svcs.append(service(name, ns, ips=("10.%d.%d.%d" % (
                (i >> 16) & 255, (i >> 8) & 255, i & 255 or 1),)))
    srv.load("services", svcs)
    srv.load("endpointslices", slices)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--headless", type=float, default=0.1)
    a = ap.parse_args()
    srv = APIServer()
    generate(srv, a.services, a.namespaces, a.headless)
    for kind in srv.objects:        # a warm cache, as a running API server's
        for key in srv.sorted_keys(kind):
            srv.wire(kind, key)
    srv.start(a.port)
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
