"""List and watch against the API server, in dedicated daemon threads.

One thread per resource kind talks to the API server through the official
client's REST layer (``ApiClient.param_serialize`` + ``call_api``; raw
JSON bodies, streamed for watches, no model objects).  Each thread lists
in pages of ``PAGE`` items (client-go's pager size), a helper thread
fetching one page ahead, then watches from the list's resourceVersion
with bookmarks.  A 410 Gone (HTTP status on a list, ERROR event on a
watch) means "relist now"; any other failure reconnects after a capped
backoff, the store keeping its last good data meanwhile.  Results reach
the reactor with one ``callFromThread`` per page or per batch of events.
"""

import json
import queue
import random
import threading
import time
from urllib.parse import urlparse

from corednstw.core import logger, metrics
from corednstw.plugins.kubernetes import records as rec
from corednstw.plugins.kubernetes import store as st

PAGE = 500
BACKOFF_START = 0.1
BACKOFF_MAX = 3.0
WATCH_TIMEOUT = (300, 600)      # server-side timeoutSeconds, drawn per watch

DEF_BUCKETS = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)
REQUEST_LATENCY = metrics.histogram(
    "coredns_kubernetes_rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb and host.",
    ("verb", "host"), DEF_BUCKETS)
RATE_LIMITER_LATENCY = metrics.histogram(
    "coredns_kubernetes_rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb and "
    "host.", ("verb", "host"), DEF_BUCKETS)
REQUESTS = metrics.counter(
    "coredns_kubernetes_rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ("code", "method", "host"))

#: kind -> (API path, record parser)
RESOURCES = {
    st.SERVICES: ("/api/v1/services", rec.service),
    st.SLICES: ("/apis/discovery.k8s.io/v1/endpointslices",
                rec.endpoint_slice),
    st.NAMESPACES: ("/api/v1/namespaces", rec.namespace),
    st.PODS: ("/api/v1/pods", rec.pod),
    st.IMPORTS: ("/apis/multicluster.x-k8s.io/v1alpha1/serviceimports",
                 rec.service_import),
    st.MC_SLICES: ("/apis/discovery.k8s.io/v1/endpointslices",
                   lambda o: rec.endpoint_slice(o, multicluster=True)),
}


class Gone(Exception):
    """410: the resourceVersion is too old; relist."""


class APIError(Exception):
    pass


class Key:
    """What a DELETED event needs: the object's name and namespace."""

    __slots__ = ("name", "ns")

    def __init__(self, name, ns):
        self.name = name
        self.ns = ns


class Limiter:
    """client-go's token bucket (qps, burst) and in-flight cap."""

    def __init__(self, qps=0.0, burst=0, inflight=0):
        self.qps = qps
        self.burst = max(burst, 1)
        self.tokens = float(self.burst)
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.sem = threading.BoundedSemaphore(inflight) if inflight else None

    def wait(self, stopped):
        """Block until a token is free; returns the seconds waited."""
        if self.qps <= 0:
            return None
        start = time.monotonic()
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst,
                                  self.tokens + (now - self.last) * self.qps)
                self.last = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return now - start
                need = (1 - self.tokens) / self.qps
            if stopped.wait(need):
                return now - start


class Connection:
    """The API client shared by the watch threads, built on first use
    (importing the client costs ~0.2 s: not on the reactor)."""

    def __init__(self, opts, deliver):
        self.opts = opts
        self.deliver = deliver
        self.lock = threading.Lock()
        self.client = None
        self.host = ""
        self.limiter = Limiter(opts.get("qps", 0.0), opts.get("burst", 0),
                               opts.get("inflight", 0))

    def api(self):
        with self.lock:
            if self.client is None:
                self.client = self._build()
            return self.client

    def _build(self):
        from kubernetes import client as kclient
        from kubernetes import config as kconfig
        o = self.opts
        cfg = kclient.Configuration()
        if o.get("kubeconfig"):
            kconfig.load_kube_config(config_file=o["kubeconfig"],
                                     context=o.get("context"),
                                     client_configuration=cfg)
        elif o.get("endpoint"):
            cfg.host = o["endpoint"].rstrip("/")
            if o.get("tls"):
                cfg.cert_file, cfg.key_file, cfg.ssl_ca_cert = o["tls"]
        else:
            kconfig.load_incluster_config(client_configuration=cfg)
        self.host = urlparse(cfg.host).netloc
        return kclient.ApiClient(cfg)

    def get(self, path, query, timeout, stopped):
        """GET ``path``; the urllib3 response (body not read yet)."""
        api = self.api()
        waited = self.limiter.wait(stopped)
        if waited is not None:
            self.deliver(RATE_LIMITER_LATENCY.observe, ("GET", self.host),
                         waited)
        sem = self.limiter.sem
        if sem is not None:
            sem.acquire()
        t0 = time.monotonic()
        try:
            method, url, headers, _, _ = api.param_serialize(
                "GET", path, query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"])
            resp = api.call_api(method, url, header_params=headers,
                                _request_timeout=timeout).response
        except Exception:
            self.deliver(REQUESTS.inc, ("<error>", "GET", self.host))
            raise
        finally:
            if sem is not None:
                sem.release()
        self.deliver(REQUEST_LATENCY.observe, ("GET", self.host),
                     time.monotonic() - t0)
        self.deliver(REQUESTS.inc, (str(resp.status), "GET", self.host))
        return resp


class Watcher:
    """List-then-watch of one kind into the store, in a daemon thread."""

    def __init__(self, conn, store, kind, deliver, selector=None,
                 field_selector=None, parse=None):
        self.conn = conn
        self.store = store
        self.kind = kind
        self.path, self.parse = RESOURCES[kind]
        if parse is not None:
            self.parse = parse
        self.deliver = deliver
        self.selector = selector
        self.field_selector = field_selector
        self.stopped = threading.Event()
        self.resp = None
        self.rv = None
        self.thread = threading.Thread(target=self.run, daemon=True,
                                       name="kubernetes-" + kind)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopped.set()
        resp = self.resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:
                pass

    def _query(self, **extra):
        q = []
        if self.selector:
            q.append(("labelSelector", self.selector))
        if self.field_selector:
            q.append(("fieldSelector", self.field_selector))
        q.extend((k, v) for k, v in extra.items() if v is not None)
        return q

    def run(self):
        rv = None
        backoff = 0.0
        while not self.stopped.is_set():
            try:
                if rv is None:
                    rv = self.list()
                rv = self.watch(rv)
                backoff = 0.0
            except Gone:
                rv = None
                backoff = 0.0
            except Exception as e:
                if self.stopped.is_set():
                    break
                if rv is not None:
                    rv = self.rv or rv
                self.deliver(logger.error, "kubernetes", "%s: %s" % (
                    self.kind, _reason(e)))
                backoff = min(max(BACKOFF_START, backoff * 2), BACKOFF_MAX)
                self.stopped.wait(backoff * (0.5 + random.random() / 2))

    def _read_json(self, resp):
        try:
            data = resp.data
        finally:
            resp.release_conn()
        if resp.status == 410:
            raise Gone()
        if resp.status != 200:
            raise APIError("HTTP %d: %s" % (resp.status, data[:200]))
        return json.loads(data)

    def list(self):
        """A full list in pages; returns its resourceVersion.

        The pages are fetched by a helper thread one page ahead: the API
        server builds page N+1 while this thread turns page N into
        records."""
        self.deliver(self.store.begin_list, self.kind)
        pages = queue.Queue(maxsize=1)
        done = threading.Event()
        fetcher = threading.Thread(target=self._fetch, args=(pages, done),
                                   daemon=True,
                                   name="kubernetes-list-" + self.kind)
        fetcher.start()
        rv = None
        parse = self.parse
        try:
            while True:
                got = pages.get()
                if got is None:
                    break
                if isinstance(got, BaseException):
                    raise got
                meta, items = got
                if rv is None:
                    rv = meta.get("resourceVersion")
                page = []
                for item in items:
                    r = parse(item)
                    if r is not None:
                        page.append(("LIST", r))
                del items, got
                if self.stopped.is_set():
                    raise APIError("stopped")
                self.deliver(self.store.apply, self.kind, page)
        finally:
            done.set()
        self.deliver(self.store.end_list, self.kind)
        return rv

    def _fetch(self, pages, done):
        """The list's pages into ``pages``: (metadata, items) each, then
        None; an exception ends it."""
        def put(x):
            while not done.is_set():
                try:
                    pages.put(x, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False
        cont = None
        try:
            while not done.is_set():
                resp = self.conn.get(self.path, self._query(
                    limit=PAGE, **{"continue": cont}), (10, 60), self.stopped)
                obj = self._read_json(resp)
                meta = obj.get("metadata") or {}
                cont = meta.get("continue")
                if not put((meta, obj.get("items") or ())):
                    return
                del obj
                if not cont:
                    put(None)
                    return
        except BaseException as e:
            put(e)

    def watch(self, rv):
        """Watch from ``rv`` until the server ends the stream; returns the
        last resourceVersion seen."""
        timeout = random.randint(*WATCH_TIMEOUT)
        resp = self.conn.get(self.path, self._query(
            watch="true", resourceVersion=rv, allowWatchBookmarks="true",
            timeoutSeconds=str(timeout)), (10, timeout + 30), self.stopped)
        if resp.status != 200:
            self._read_json(resp)
            raise APIError("HTTP %d" % resp.status)
        self.resp = resp
        self.rv = rv
        parse = self.parse
        buf = b""
        try:
            for chunk in resp.stream(65536, decode_content=True):
                if self.stopped.is_set():
                    break
                lines = (buf + chunk).split(b"\n")
                buf = lines.pop()
                batch = []
                for line in lines:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    etype = ev.get("type")
                    obj = ev.get("object") or {}
                    if etype == "ERROR":
                        if batch:
                            self.deliver(self.store.apply, self.kind, batch)
                        if obj.get("code") == 410:
                            raise Gone()
                        raise APIError("watch error: %s" % obj.get("message"))
                    meta = obj.get("metadata") or {}
                    rv = self.rv = meta.get("resourceVersion") or rv
                    if etype == "BOOKMARK":
                        continue
                    if etype == "DELETED":
                        batch.append((etype, Key(meta.get("name", ""),
                                                 meta.get("namespace", ""))))
                        continue
                    r = parse(obj)
                    if r is not None:
                        batch.append((etype, r))
                if batch:
                    self.deliver(self.store.apply, self.kind, batch)
        finally:
            self.resp = None
            try:
                resp.release_conn()
            except Exception:
                pass
        if buf.strip() or self.stopped.is_set():
            raise APIError("watch stream cut")
        return rv


def _reason(e):
    text = str(e) or type(e).__name__
    return text.splitlines()[0][:300] if text else type(e).__name__
