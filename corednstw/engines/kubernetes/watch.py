"""List and watch against the API server, in dedicated daemon threads:
the engine the kubernetes plugin and the k8s_gateway package share (one
client, one protocol, one way into the reactor).

One thread per resource kind talks to the API server through ``client``
(plain GETs; the official client's REST layer only for the
configurations it alone can do: raw JSON bodies, streamed for watches,
no model objects).  Each thread lists
in pages of ``PAGE`` items (client-go's pager size), a helper thread
fetching one page ahead, then watches from the list's resourceVersion
with bookmarks.  A 410 Gone (HTTP status on a list, ERROR event on a
watch) means "relist now"; any other failure reconnects after a capped
backoff, the store keeping its last good data meanwhile.  Results reach
the reactor with one ``callFromThread`` per page or per batch of events,
into a ``feed.Feed`` (the store of the plugin).  A kind of an optional
API (a CRD not installed: 404) counts as listed and empty, and is asked
for again now and then.
"""

import codecs
import itertools
import json
import os
import queue
import random
import re
import threading
import time
from typing import Any, TypedDict, Union
from urllib.parse import urlparse

from corednstw.core import logger, metrics
from corednstw.engines.kubernetes import client as kc
from corednstw.service import stall

PAGE = 500
BATCH = 250             # records per hand-over to the reactor
CHUNK = 65536           # bytes read from a response at once
BACKOFF_START = 0.1
BACKOFF_MAX = 3.0
WATCH_TIMEOUT = (300, 600)      # server-side timeoutSeconds, drawn per watch
#: Seconds between two lists of an optional kind the API server does
#: not serve (its CRD may be installed later).
ABSENT_RETRY = 10.0

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

class Gone(Exception):
    """410: the resourceVersion is too old; relist."""


class APIError(Exception):
    """The API server answered with an error (an HTTP status, an ERROR
    event): logged by the watcher that got it, once per distinct error."""


class NotServed(Exception):
    """404 on a list: the API server does not serve the kind (yet)."""


class Cut(Exception):
    """A response ended early (the connection went away mid-body)."""


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

    #: The plugin named in the log lines.
    name = "kubernetes"

    def __init__(self, opts, deliver):
        self.opts = opts
        self.deliver = deliver
        self.lock = threading.Lock()
        self.client = None
        self.host = ""
        self.limiter = Limiter(opts.get("qps", 0.0), opts.get("burst", 0),
                               opts.get("inflight", 0))
        self.clock = time.monotonic
        self.down_since = None
        # Decoding and parsing hold the GIL; one thread at a time does it,
        # so the reactor waits on at most one GIL holder, not on a convoy.
        self.cpu = threading.Lock()

    def unreachable(self, e):
        """A request failed below HTTP (refused, reset, cut, timed out).
        The first failure of an outage logs one warning; the retries that
        follow log nothing."""
        with self.lock:
            if self.down_since is not None:
                return
            self.down_since = self.clock()
        self.deliver(logger.warning, self.name,
                     "Kubernetes API unreachable, serving the last known "
                     "data: %s" % _reason(e))

    def reachable(self):
        """A request got an HTTP answer: log the end of an outage."""
        if self.down_since is None:
            return
        with self.lock:
            since, self.down_since = self.down_since, None
        if since is None:
            return
        self.deliver(logger.info, self.name,
                     "Kubernetes API reachable again after %.1fs"
                     % (self.clock() - since))

    def api(self):
        with self.lock:
            if self.client is None:
                self.client = self._build()
            return self.client

    def _build(self):
        """Our own client (``client.Direct``) when the configuration
        allows, else the kubernetes client."""
        direct = _early_client(self.opts)
        try:
            if direct is None:
                direct = kc.build(self.opts)
        except kc.Unsupported:
            direct = None
        if direct is not None:
            self.host = urlparse(direct.host).netloc
            stall.freeze()
            return direct
        return kc.Fallback(self._build_client())

    def _build_client(self):
        from kubernetes import client as kclient
        from kubernetes import config as kconfig
        stall.freeze()      # the client's thousands of module objects
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
        """GET ``path``; the response (body not read yet)."""
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
            resp = api.get(path, query, timeout)
        except Exception:
            self.deliver(REQUESTS.inc, ("<error>", "GET", self.host))
            raise
        finally:
            if sem is not None:
                sem.release()
        self.deliver(REQUEST_LATENCY.observe, ("GET", self.host),
                     time.monotonic() - t0)
        self.deliver(REQUESTS.inc, (str(resp.status), "GET", self.host))
        self.reachable()
        return resp


class Watcher:
    """List-then-watch of one kind into the store, in a daemon thread.

    ``path`` is the kind's collection (``/api/v1/services``), or a tuple
    of them, the versions of one API the first served wins; ``parse``
    turns an object's JSON into the store's record (None: skipped).
    ``optional``: a 404 is an API not installed (an empty list), else an
    error.  ``keys``: the only parts of an object ``parse`` reads, as
    ``{key: None (all of its value) or (the keys of an object)}``; a list
    is then decoded keeping those alone (``list_reader``).  ``typed``: a
    callable giving (an item msgspec Struct, the parser of such an item)
    or None, called in the thread before the first list: a list is then
    decoded into those Structs (the watch events still go to ``parse``).
    """

    def __init__(self, conn, store, kind, deliver, path, parse,
                 selector=None, field_selector=None, optional=False,
                 keys=None, typed=None):
        self.conn = conn
        self.store = store
        self.kind = kind
        self.paths = (path,) if isinstance(path, str) else tuple(path)
        self.path = self.paths[0]
        self.parse = parse
        self.keys = keys
        self.typed = typed
        self.optional = optional
        self.absent = False
        self.deliver = deliver
        self.selector = selector
        self.field_selector = field_selector
        self.stopped = threading.Event()
        self.resp = None
        self.rv = None
        self.listed = False
        self.last_error = None
        self.thread = threading.Thread(target=self.run, daemon=True,
                                       name=conn.name + "-" + kind)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopped.set()
        self.store.stop()
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
                    self.last_error = None
                rv = self.watch(rv)
                backoff = 0.0
                self.last_error = None
            except Gone:
                rv = None
                backoff = 0.0
            except NotServed:
                rv = None
                at = self.paths.index(self.path) + 1
                if at < len(self.paths):
                    self.path = self.paths[at]      # the next version
                    continue
                self.path = self.paths[0]
                self.not_served()
                self.stopped.wait(ABSENT_RETRY)
            except Exception as e:
                if self.stopped.is_set():
                    break
                if rv is not None:
                    rv = self.rv or rv
                self.failed(e)
                backoff = min(max(BACKOFF_START, backoff * 2), BACKOFF_MAX)
                self.stopped.wait(backoff * (0.5 + random.random() / 2))

    def not_served(self):
        """No version of an optional kind is served: the store has it
        listed and empty (what is there is swept), logged once."""
        self.deliver(self.store.feed, "begin", self.kind)
        self.deliver(self.store.feed, "end", self.kind)
        self.listed = False
        if not self.absent:
            self.absent = True
            self.deliver(logger.warning, self.conn.name,
                         "%s: not served by the API server (%s)"
                         % (self.kind, ", ".join(self.paths)))

    def failed(self, e):
        """Log a failure once: an outage through the connection (one line
        for all kinds), an API error when it differs from the last one."""
        if not isinstance(e, APIError):
            self.conn.unreachable(e)
            return
        text = "%s: %s" % (self.kind, _reason(e))
        if text != self.last_error:
            self.last_error = text
            self.deliver(logger.error, self.conn.name, text)

    def _read_json(self, resp):
        try:
            data = resp.data
        finally:
            resp.release_conn()
        if resp.status == 410:
            raise Gone()
        if resp.status == 404 and self.optional:
            raise NotServed()
        if resp.status != 200:
            raise APIError("HTTP %d: %s" % (resp.status, data[:200]))
        return json.loads(data)

    def list(self):
        """A full list; returns its resourceVersion.

        The first list of a kind asks for ``resourceVersion=0``: the API
        server answers from its watch cache instead of a quorum read of
        etcd page by page (client-go's reflector does the same); later
        lists (after a 410) are consistent reads.  Each page is decoded
        item by item while it arrives (``ListReader``), a helper thread
        fetching the next page as soon as its continue token is known, and
        records reach the store in batches of ``BATCH``."""
        self.deliver(self.store.feed, "begin", self.kind)
        rv = None
        first = "0" if not self.listed else None
        chunks = self._start_page(None, first)
        if callable(self.typed):
            self.typed = self.typed()
        parse = self.parse
        while chunks is not None:
            reader = list_reader(chunks, self.keys, self.typed)
            records = reader.records(parse)
            nxt = None
            while True:
                with self.conn.cpu:
                    batch = [("LIST", r) for r in itertools.islice(
                        records, BATCH) if r is not None]
                    if nxt is None and reader.meta is not None:
                        cont = reader.meta.get("continue")
                        nxt = self._start_page(cont, None) if cont else False
                if self.stopped.is_set():
                    raise APIError("stopped")
                if batch:
                    self._apply(batch)
                if reader.done:
                    break
            meta = reader.meta or {}
            if rv is None:
                rv = meta.get("resourceVersion")
            if nxt is None:
                cont = meta.get("continue")
                nxt = self._start_page(cont, None) if cont else None
            chunks = nxt or None
        self.deliver(self.store.feed, "end", self.kind)
        self.listed = True
        self.absent = False
        return rv

    def _apply(self, batch):
        self.deliver(self.store.feed, "apply", self.kind, batch)

    def _start_page(self, cont, rv):
        """GET one page in a helper thread; returns an iterator over the
        body's chunks (raising what the request raised)."""
        # body chunks, then None at the end or what the request raised
        query = self._query(limit=PAGE, resourceVersion=rv,
                            **{"continue": cont})
        early = _take_early(self.conn.opts, self.path, query, self.stopped)
        if early is not None:
            return self._adopt(early)
        q: queue.Queue[Union[bytes, BaseException, None]] = queue.Queue()

        def fetch():
            try:
                resp = self.conn.get(self.path, query, (10, 60),
                                     self.stopped)
                if resp.status != 200:
                    self._read_json(resp)
                _stream(resp, q, self.stopped.is_set)
            except BaseException as e:
                q.put(e)

        threading.Thread(target=fetch, daemon=True,
                         name="kubernetes-list-" + self.kind).start()
        return _drain_queue(q)

    def _adopt(self, early):
        """The chunks of a page asked for before the watcher started
        (``prefetch``), with the request's metrics and log lines as
        ``Connection.get`` gives them."""
        conn = self.conn
        conn.api()
        if early.status is None:
            self.deliver(REQUESTS.inc, ("<error>", "GET", conn.host))
        else:
            self.deliver(REQUEST_LATENCY.observe, ("GET", conn.host),
                         early.latency)
            self.deliver(REQUESTS.inc, (str(early.status), "GET",
                                        conn.host))
            conn.reachable()
        for got in _drain_queue(early.q):
            if isinstance(got, _Answer):
                self._read_json(got.resp)
                raise APIError("HTTP %d" % got.resp.status)
            yield got

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
                batch: list[tuple[str, Any]] = []     # (event type, record)
                for line in lines:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    etype = ev.get("type")
                    obj = ev.get("object") or {}
                    if etype == "ERROR":
                        if batch:
                            self._apply(batch)
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
                    self._apply(batch)
        finally:
            self.resp = None
            try:
                resp.release_conn()
            except Exception:
                pass
        if self.stopped.is_set():
            raise APIError("stopped")
        if buf.strip():
            raise Cut("watch stream cut")
        return rv


def _stream(resp, q, stopped):
    """Put the chunks of ``resp``'s body on ``q``, then None."""
    try:
        for chunk in resp.stream(CHUNK, decode_content=True):
            q.put(chunk)
            if stopped():
                break
    finally:
        resp.release_conn()
    q.put(None)


# -- lists asked for before the server is built -------------------------------

#: Seconds a page asked for ahead is kept for a watcher that asks for
#: it, once read.
EARLY_KEEP = 30.0
_EARLY_LOCK = threading.Lock()
#: (options key, path, query) -> _Early
_EARLY: dict[Any, "_Early"] = {}
#: options key -> (pid, the client the pages were asked with)
_EARLY_CLIENTS: dict[Any, Any] = {}


def _opts_key(opts):
    return tuple(sorted(opts.items()))


class _Answer:
    """A response other than 200 to a page asked for ahead (the watcher
    that takes it reads it as its own)."""

    def __init__(self, resp):
        self.resp = resp


class _Early:
    """One list page asked for ahead of its watcher, in a daemon thread:
    its chunks wait on ``q`` as ``Watcher._start_page`` would have put
    them."""

    def __init__(self, key, client, path, query):
        self.key = key
        self.pid = os.getpid()
        self.q: queue.Queue[Any] = queue.Queue()
        self.taken = threading.Event()
        self.watcher_stopped: Any = None
        self.status = None          # None: no HTTP answer
        self.latency = 0.0
        self.client = client
        self.path = path
        self.query = query
        threading.Thread(target=self.run, daemon=True,
                         name="kubernetes-early-list").start()

    def stopped(self):
        ws = self.watcher_stopped
        return ws is not None and ws.is_set()

    def run(self):
        t0 = time.monotonic()
        try:
            try:
                resp = self.client.get(self.path, self.query, (10, 60))
            finally:
                self.latency = time.monotonic() - t0
            self.status = resp.status
            if resp.status != 200:
                self.q.put(_Answer(resp))
            else:
                _stream(resp, self.q, self.stopped)
        except BaseException as e:
            self.q.put(e)
        if not self.taken.wait(EARLY_KEEP):
            self.forget()

    def forget(self):
        """Not taken: out of the registry, and the client with it once
        no other page needs it (its idle connections closed)."""
        with _EARLY_LOCK:
            if _EARLY.get(self.key) is self:
                del _EARLY[self.key]
            opts = self.key[0]
            if any(k[0] == opts for k in _EARLY):
                return
            got = _EARLY_CLIENTS.get(opts)
            if got is None or got[1] is not self.client:
                return
            del _EARLY_CLIENTS[opts]
        for conn in self.client.idle:
            conn.close()
        self.client.idle = []


def prefetch(opts, pages, user_agent=None):
    """Ask now for the first pages ``pages`` ((path, query), ...) that
    watchers of a Connection with ``opts`` will ask for once the server
    is built: the API server prepares them meanwhile.  A watcher whose
    first request is exactly one of these takes its answer instead of
    asking (``_take_early``); one nobody takes is dropped after
    ``EARLY_KEEP`` seconds.  Nothing is asked when the connection has a
    rate limit or needs the kubernetes client; errors are left to the
    watchers.  ``user_agent``: the client's, as the Connection sets it."""
    if opts.get("qps") or opts.get("inflight"):
        return
    key = _opts_key(opts)
    with _EARLY_LOCK:
        if key in _EARLY_CLIENTS:
            client = _EARLY_CLIENTS[key][1]
        else:
            try:
                client = kc.build(opts)
            except Exception:
                return
            if user_agent:
                client.user_agent = user_agent
            _EARLY_CLIENTS[key] = (os.getpid(), client)
        for path, query in pages:
            k = (key, path, tuple(query))
            if k not in _EARLY:
                _EARLY[k] = _Early(k, client, path, list(query))


def _early_client(opts):
    """The client ``prefetch`` made for ``opts`` (its connections carry
    on to the watches), or None."""
    with _EARLY_LOCK:
        got = _EARLY_CLIENTS.pop(_opts_key(opts), None)
    if got is None or got[0] != os.getpid():
        return None
    return got[1]


def _take_early(opts, path, query, stopped):
    """The page ``prefetch`` asked for with these very options, path and
    query, or None (never in a process forked since: its threads and
    connections stayed behind)."""
    if not _EARLY:
        return None
    with _EARLY_LOCK:
        early = _EARLY.pop((_opts_key(opts), path, tuple(query)), None)
    if early is None or early.pid != os.getpid():
        return None
    early.watcher_stopped = stopped
    early.taken.set()
    return early


def _drain_queue(q):
    while True:
        got = q.get()
        if got is None:
            return
        if isinstance(got, BaseException):
            raise got
        yield got


_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\n\r]*").match
#: How ObjectMeta's last field begins in the API server's compact JSON.
_MANAGED = ',"managedFields":['


def strip_managed(text, final=True):
    """``text`` without the objects' managedFields, and the tail to carry
    over to the next chunk (from a managedFields, or its key, not
    complete yet).

    managedFields is up to half of a Service's JSON and most of its
    small objects, and nothing here reads it: cutting it out before the
    decoder sees it halves the decoding.  The cut is exact or not done:
    the key as written above cannot occur inside a JSON string (its
    quotes would be escaped); its value is an array of objects whose
    only array is itself, so its end is the first ``]`` outside a string
    (an even number of unescaped quotes since the start).  A value with
    another ``[`` or an escaped backslash in it is left as it is."""
    out = []
    pos = 0
    find = text.find
    count = text.count
    while True:
        start = find(_MANAGED, pos)
        if start < 0:
            break
        inner = start + len(_MANAGED)
        end = find("]", inner)
        while end >= 0 and (count('"', inner, end)
                            - count('\\"', inner, end)) % 2:
            end = find("]", end + 1)
        if end < 0:
            if final:
                break
            out.append(text[pos:start])
            return "".join(out), text[start:]
        if find("[", inner, end) < 0 and find("\\\\", inner, end) < 0:
            out.append(text[pos:start])
        else:
            out.append(text[pos:end + 1])
        pos = end + 1
    rest = text[pos:]
    if not final:
        # The key itself may be cut at the end of the chunk.
        i = rest.find(",", max(len(rest) - len(_MANAGED) + 1, 0))
        while i >= 0 and not _MANAGED.startswith(rest[i:]):
            i = rest.find(",", i + 1)
        if i >= 0:
            out.append(rest[:i])
            return "".join(out), rest[i:]
    out.append(rest)
    return "".join(out), ""


class ListReader:
    """Decodes a List body (``{"metadata": {...}, "items": [...]}``) one
    item at a time as its chunks arrive.

    ``json.loads`` of a whole page holds the GIL for as long as it takes
    (tens of ms for a megabyte page with managedFields), and the reactor
    waits that long.  Here each item is one ``raw_decode`` (tens of us),
    and the thread gives the GIL up between items like any Python code.
    ``meta`` is the list's metadata once read (it precedes the items in
    what the API server sends).
    """

    def __init__(self, chunks):
        self.chunks = iter(chunks)
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.carry = ""         # an incomplete managedFields, for later
        self.eof = False
        self.meta = None
        self.done = False

    def _more(self):
        """Append the next chunk to the buffer, managedFields cut out;
        False at the end."""
        if self.eof:
            return False
        chunk = next(self.chunks, None)
        if chunk is None:
            self.eof = True
            text = self.utf8.decode(b"", final=True)
        else:
            text = self.utf8.decode(chunk)
        text, self.carry = strip_managed(self.carry + text, self.eof)
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return chunk is not None or bool(text)

    def _char(self):
        """The next non-blank character (not consumed)."""
        while True:
            buf = self.buf
            blank = _BLANK(buf, self.pos)
            assert blank is not None    # "*": the empty string matches
            pos = self.pos = blank.end()
            if pos < len(buf):
                return buf[pos]
            if not self._more():
                raise Cut("list body cut")

    def _expect(self, ch):
        if self._char() != ch:
            raise APIError("list body: expected %r at %d" % (ch, self.pos))
        self.pos += 1

    def _value(self):
        """One JSON value; reads more while it is incomplete."""
        self._char()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except ValueError as e:
                if self._more():
                    continue
                raise Cut("list body: %s" % e) from e
            if end == len(self.buf) and not self.eof and self._more():
                continue            # a number may go on in the next chunk
            self.pos = end
            return value

    def items(self):
        """Yield the items; sets ``meta`` on the way, ``done`` at the
        end."""
        yield from self._object()
        self.done = True

    def records(self, parse):
        """The items through ``parse``."""
        return map(parse, self.items())

    def _object(self):
        self._expect("{")
        if self._char() == "}":
            return
        while True:
            key = self._value()
            self._expect(":")
            if key == "items" and self._char() == "[":
                yield from self._array()
            else:
                value = self._value()
                if key == "metadata":
                    self.meta = value
            ch = self._char()
            self.pos += 1
            if ch == "}":
                return
            if ch != ",":
                raise APIError("list body: unexpected %r" % ch)

    def _array(self):
        self._expect("[")
        if self._char() == "]":
            self.pos += 1
            return
        decode = _DECODER.raw_decode
        while True:
            # The API server writes compact JSON: most items start right
            # at ``pos`` and are followed at once by "," or "]", in the
            # buffer; anything else (blanks, an item not all read yet)
            # takes the general path.
            buf = self.buf
            try:
                value, end = decode(buf, self.pos)
            except ValueError:
                end = len(buf)
            if end < len(buf):
                self.pos = end
            else:
                value = self._value()
            yield value
            pos = self.pos
            ch = self.buf[pos:pos + 1]
            if ch != "," and ch != "]":
                ch = self._char()
            self.pos += 1
            if ch == "]":
                return
            if ch != ",":
                raise APIError("list body: unexpected %r" % ch)


def list_reader(chunks, keys=None, typed=None):
    """The reader of one List body: ``KeptListReader`` when the kind
    says which keys its parser reads (``keys``, or ``typed``: its item
    Struct and the parser of one) and msgspec is installed, else
    ``ListReader``."""
    if (keys is None and not typed) or _msgspec() is None:
        return ListReader(chunks)
    return KeptListReader(chunks, keys, typed)


_MSGSPEC: list[Any] = []


def _msgspec():
    """The msgspec module, or None (then every list takes ListReader)."""
    if not _MSGSPEC:
        try:
            import msgspec
        except ImportError:
            msgspec = None
        _MSGSPEC.append(msgspec)
    return _MSGSPEC[0]


_DECODERS: dict[Any, Any] = {}


def _items_decoder(keys, item=None):
    """A msgspec decoder of a JSON array of objects keeping ``keys``
    (see Watcher), or of ``item`` Structs; made once per each."""
    if item is not None:
        dec = _DECODERS.get(item)
        if dec is None:
            dec = _DECODERS[item] = _msgspec().json.Decoder(list[item])
        return dec
    key = tuple(sorted((k, v if v is None else tuple(v))
                       for k, v in keys.items()))
    dec = _DECODERS.get(key)
    if dec is None:
        msgspec = _msgspec()
        fields = {}
        for k, sub in key:
            fields[k] = Any if sub is None else TypedDict(
                "Kept", {s: Any for s in sub}, total=False)   # type: ignore
        item = TypedDict("Item", fields, total=False)   # type: ignore
        dec = _DECODERS[key] = msgspec.json.Decoder(list[item])  # type: ignore
    return dec


#: Bytes of items decoded at once by KeptListReader: about 1 ms of the
#: GIL (a few hundred Services).
SEGMENT = 262144
_ITEMS_KEY = b'"items":['


class KeptListReader:
    """``ListReader``'s interface, for a kind whose parser reads only
    some keys of an object (``keys``): the items are decoded by msgspec a
    segment of ``SEGMENT`` bytes at a time, keeping those keys alone
    (managedFields and the rest are skipped without objects made for
    them), which is several times faster than decoding everything.

    The API server writes a list as ``{...,"metadata":{...},"items":[``
    then compact items, each beginning with the same first key, then
    ``]}``.  A segment ends where ``},`` is followed by that first key,
    which occurs only between two items or between two objects of one
    array inside an item: a cut inside an item leaves its braces open,
    the segment does not decode, and the rest of the body goes to
    ``ListReader`` from the last item decoded.  Anything else unexpected
    (another layout, a value msgspec refuses) takes the same way out, so
    the records are always those ``ListReader`` would give.

    With ``typed`` (an item Struct, the parser of one) the fast path
    decodes Structs and ``records`` gives them to that parser, the
    general path's dicts to the kind's own."""

    def __init__(self, chunks, keys, typed=None):
        self.chunks = iter(chunks)
        item, self.convert = typed or (None, None)
        self.decode = _items_decoder(keys, item).decode
        self.errors = (_msgspec().DecodeError,)
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.meta = None
        self.done = False

    def _more(self):
        """Append the next chunk to what is left; False at the end."""
        if self.eof:
            return False
        chunk = next(self.chunks, None)
        if chunk is None:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def items(self):
        """Yield the items (Structs from the fast path when typed); sets
        ``meta`` on the way, ``done`` at the end."""
        return self._out(None, None)

    def records(self, parse):
        """The items' records: the fast path's through the typed parser
        (else ``parse``), the general path's through ``parse``."""
        return self._out(self.convert or parse, parse)

    def _out(self, convert, parse):
        segments = self._items()
        while True:
            try:
                items = next(segments)
            except StopIteration as end:
                rest = end.value
                break
            yield from (items if convert is None else map(convert, items))
        if rest is not None:
            items = self._general(rest)
            yield from (items if parse is None else map(parse, items))
        self.done = True

    def _general(self, head):
        """The rest of the body through ListReader: ``head`` (the bytes
        from an item's start or the body's), then the chunks not read."""
        reader = ListReader(itertools.chain((head,), self.chunks))
        yield from reader.items()
        if self.meta is None:
            self.meta = reader.meta

    def _items(self):
        """The fast path, a list of decoded items per segment; returns
        the bytes to give ListReader when it cannot go on (None when the
        body was read to its end)."""
        while (self.buf.find(_ITEMS_KEY) < 0) and self._more():
            pass
        buf = self.buf
        at = buf.find(_ITEMS_KEY)
        if at < 0:
            return buf
        start = at + len(_ITEMS_KEY)
        try:
            head = json.loads(buf[:start - 1] + b"[]}")
        except ValueError:
            return buf
        if not isinstance(head, dict) or list(head)[-1:] != ["items"]:
            return buf
        meta = head.get("metadata")
        self.meta = meta if isinstance(meta, dict) else {}
        self.pos = start
        while len(self.buf) - self.pos < 2 and self._more():
            pass
        if self.buf[self.pos:self.pos + 1] == b"]":
            while self._more():     # an empty list: a few bytes left
                pass
            rest = self.buf[self.pos:]
            return None if rest[1:].strip() == b"}" else \
                b'{"items":[' + rest
        buf, pos = self.buf, self.pos
        # The first key of the first item: ``{"metadata":``.
        while buf.find(b'":', pos) < 0 and self._more():
            buf, pos = self.buf, self.pos
        key_end = buf.find(b'":', pos)
        if buf[pos:pos + 2] != b'{"' or key_end < 0:
            return b'{"items":[' + buf[pos:]
        cut = b"}," + buf[pos:key_end + 2]
        decode = self.decode
        while True:
            buf, pos = self.buf, self.pos
            end = buf.rfind(cut, pos, pos + SEGMENT)
            if end < 0:
                end = buf.find(cut, pos)
            if end < 0:
                if self._more():
                    continue
                # The last items: ``...}]}`` at the end of the body.
                tail = buf[pos:].rstrip()
                if not tail.endswith(b"]}"):
                    return b'{"items":[' + buf[pos:]
                seg = b"[" + tail[:-2] + b"]"
            else:
                seg = b"[" + buf[pos:end + 1] + b"]"
            try:
                items = decode(seg)
            except self.errors:
                return b'{"items":[' + buf[pos:]
            yield items
            if end < 0:
                self.pos = len(buf)
                return None
            self.pos = end + 2


def _reason(e):
    text = str(e) or type(e).__name__
    return text.splitlines()[0][:300] if text else type(e).__name__
