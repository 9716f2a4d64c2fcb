"""A local emulation of Nomad's service-discovery HTTP API for the nomad
tests (Debian has no Nomad to run ``nomad agent -dev``).

It answers what the nomad plugin and Nomad's Go client ask, as Nomad 1.3+
documents it: ``GET /v1/agent/self``, ``GET /v1/services`` (the service
names of a namespace, or of every namespace with ``namespace=*``) and
``GET /v1/service/{name}`` (the registrations of a service in a
namespace, ``default`` when none is given).  With a token set, requests
without the matching ``X-Nomad-Token`` header get 403 "Permission
denied".  ``filter`` is not evaluated: it is recorded in ``queries``, with
every other query, for the tests to check.  Thread-safe; port 0 by
default.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


class NomadAPI:
    """``srv = NomadAPI().start(); srv.register("redis", "10.0.0.1",
    6379)``; ``srv.url``; ``srv.stop()``."""

    def __init__(self, port=0, token=None, name="nomad-dev"):
        self.port = port
        self.token = token
        self.name = name
        self.lock = threading.Lock()
        self.services = {}          # (namespace, name) -> [registration]
        self.queries = []           # (path, {param: value})
        self.httpd = None
        self.index = 10

    # -- data -------------------------------------------------------------

    def register(self, name, address, port, namespace="default", tags=()):
        with self.lock:
            self.index += 1
            regs = self.services.setdefault((namespace, name), [])
            regs.append({
                "ID": "_nomad-task-%d-%s" % (self.index, name),
                "ServiceName": name, "Namespace": namespace,
                "NodeID": "node-1", "Datacenter": "dc1",
                "JobID": name, "AllocID": "alloc-%d" % self.index,
                "Tags": list(tags), "Address": address, "Port": port,
                "CreateIndex": self.index, "ModifyIndex": self.index})

    def deregister(self, name, namespace="default"):
        with self.lock:
            self.services.pop((namespace, name), None)

    # -- server -----------------------------------------------------------

    def start(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port),
                                         _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever,
                         daemon=True).start()
        return self

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def answer(self, path, params, token):
        """(status, body object) for one GET."""
        with self.lock:
            self.queries.append((path, params))
            if self.token is not None and token != self.token:
                return 403, "Permission denied"
            if path == "/v1/agent/self":
                return 200, {"config": {"Region": "global"},
                             "member": {"Name": self.name}}
            if path == "/v1/services":
                return 200, self._list(params.get("namespace", "default"))
            if path.startswith("/v1/service/"):
                name = unquote(path[len("/v1/service/"):])
                ns = params.get("namespace", "default")
                return 200, list(self.services.get((ns, name), []))
            return 404, "Not found"

    def _list(self, namespace):
        out = {}
        for (ns, name), regs in sorted(self.services.items()):
            if namespace not in ("*", ns) or not regs:
                continue
            tags = sorted({t for r in regs for t in r["Tags"]})
            out.setdefault(ns, []).append({"ServiceName": name,
                                           "Tags": tags})
        return [{"Namespace": ns, "Services": s} for ns, s in out.items()]


def _handler(api):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            u = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(u.query).items()}
            code, body = api.answer(u.path, params,
                                    self.headers.get("X-Nomad-Token"))
            data = (json.dumps(body) if code == 200 else body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json"
                             if code == 200 else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Nomad-Index", str(api.index))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass
    return Handler
