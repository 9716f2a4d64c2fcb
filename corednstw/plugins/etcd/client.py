"""etcd v3 through its JSON gateway, and a watched copy of one prefix.

etcd serves every gRPC call of its v3 API as JSON over HTTP as well
(``POST /v3/kv/range``, ``/v3/watch``, ``/v3/lease/timetolive``,
``/v3/auth/authenticate``; keys and values in base64, 64-bit numbers as
strings).  ``Client`` speaks it with twisted.web's Agent, so nothing
blocks the reactor and no gRPC stack is needed.

``Mirror`` keeps the whole prefix in memory: it reads it with one range
request, then follows a watch from the revision that read returned.  When
the watch or a read fails the data stay as they were, and after a capped
backoff the prefix is read again and a new watch started.
"""

import base64
import bisect
import io
import json
import random

from twisted.internet import defer
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Protocol, connectionDone
from twisted.web.client import (
    Agent,
    FileBodyProducer,
    HTTPConnectionPool,
    readBody,
)
from twisted.web.http_headers import Headers
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from corednstw.core import logger

NAME = "etcd"
TIMEOUT = 5.0            # CoreDNS's etcdTimeout, for every unary call
BACKOFF_START = 0.1
BACKOFF_MAX = 5.0


class EtcdError(Exception):
    """An error etcd reported, or a failed request."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def b64(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return base64.b64encode(data).decode("ascii")


def unb64(text):
    return base64.b64decode(text or "")


def prefix_end(prefix):
    """The range_end that makes a range request cover ``prefix`` and
    everything below it (etcd's GetPrefixRangeEnd)."""
    b = bytearray(prefix.encode("utf-8"))
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[:i + 1])
    return b"\x00"


@implementer(IPolicyForHTTPS)
class TLSPolicy:
    """Client TLS for https endpoints: CoreDNS's ``tls`` forms (CA,
    client certificate), TLS 1.2 at least."""

    def __init__(self, trust=None, client=None):
        self.trust = trust
        self.client = client

    def creatorForNetloc(self, hostname, port):
        from twisted.internet import ssl
        return ssl.optionsForClientTLS(
            hostname.decode("ascii"), trustRoot=self.trust,
            clientCertificate=self.client,
            extraCertificateOptions={
                "raiseMinimumTo": ssl.TLSVersion.TLSv1_2})


class Client:
    """Unary calls and watches against a list of endpoints.

    A request that cannot reach its endpoint moves the client on to the
    next one; with credentials a token is fetched first and again when
    etcd says it is no longer valid.
    """

    def __init__(self, reactor, endpoints, tls=None, username="",
                 password=""):
        self.reactor = reactor
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.current = 0
        self.username = username
        self.password = password
        self.token = None
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        kwargs = {"pool": self.pool, "connectTimeout": TIMEOUT}
        if tls is not None:
            kwargs["contextFactory"] = tls
        self.agent = Agent(reactor, **kwargs)
        self.watch_agent = Agent(
            reactor, pool=HTTPConnectionPool(reactor, persistent=False),
            **{k: v for k, v in kwargs.items() if k != "pool"})

    @property
    def endpoint(self):
        return self.endpoints[self.current]

    def rotate(self):
        """Use the next endpoint from now on."""
        self.current = (self.current + 1) % len(self.endpoints)

    def close(self):
        return self.pool.closeCachedConnections()

    def _headers(self):
        h = Headers({b"Content-Type": [b"application/json"]})
        if self.token:
            h.addRawHeader(b"Authorization", self.token.encode("utf-8"))
        return h

    def _body(self, payload):
        return FileBodyProducer(io.BytesIO(json.dumps(payload).encode()))

    @defer.inlineCallbacks
    def call(self, path, payload, retry_auth=True):
        """POST ``payload`` to ``path``; the decoded JSON answer."""
        if self.username and self.token is None \
                and path != "/v3/auth/authenticate":
            yield self.authenticate()
        d = self.agent.request(
            b"POST", (self.endpoint + path).encode("utf-8"),
            self._headers(), self._body(payload))
        d.addTimeout(TIMEOUT, self.reactor)
        try:
            resp = yield d
            body = yield readBody(resp)
        except Exception as e:
            self.rotate()
            raise EtcdError("%s: %s" % (self.endpoint, _reason(e))) from e
        data = _json(body)
        if resp.code != 200 or "error" in data:
            err = EtcdError(data.get("message") or data.get("error")
                            or "HTTP %d" % resp.code, data.get("code"))
            if retry_auth and self.username and _auth_failed(err):
                self.token = None
                result = yield self.call(path, payload, retry_auth=False)
                return result
            raise err
        return data

    @defer.inlineCallbacks
    def authenticate(self):
        data = yield self.call("/v3/auth/authenticate", {
            "name": self.username, "password": self.password},
            retry_auth=False)
        self.token = data.get("token")

    def range(self, prefix):
        """Every key under ``prefix``: Deferred (revision, [kv dicts])."""
        d = self.call("/v3/kv/range", {
            "key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return d.addCallback(lambda data: (
            int(data.get("header", {}).get("revision", 0)),
            data.get("kvs", [])))

    def lease_ttl(self, lease):
        """Seconds left on ``lease`` (-1: gone)."""
        d = self.call("/v3/lease/timetolive", {"ID": str(lease)})
        return d.addCallback(lambda data: int(data.get("TTL", -1)))

    @defer.inlineCallbacks
    def watch(self, prefix, start_revision, on_events):
        """Follow changes under ``prefix`` from ``start_revision``.

        Fires with a Watch once etcd accepted it; ``Watch.done`` fires
        when the stream ends (an error: the watch never ends by itself).
        """
        if self.username and self.token is None:
            yield self.authenticate()
        payload = {"create_request": {
            "key": b64(prefix), "range_end": b64(prefix_end(prefix)),
            "start_revision": str(start_revision)}}
        d = self.watch_agent.request(
            b"POST", (self.endpoint + "/v3/watch").encode("utf-8"),
            self._headers(), self._body(payload))
        d.addTimeout(TIMEOUT, self.reactor)
        try:
            resp = yield d
        except Exception as e:
            self.rotate()
            raise EtcdError("%s: %s" % (self.endpoint, _reason(e))) from e
        if resp.code != 200:
            body = yield readBody(resp)
            if resp.code == 401:
                self.token = None
            raise EtcdError(_json(body).get("message")
                            or "HTTP %d" % resp.code)
        w = Watch(resp, on_events)
        resp.deliverBody(w)
        return w


class Watch(Protocol):
    """The body of a watch response: one JSON object a line, each a
    WatchResponse; events go to ``on_events(events)``."""

    def __init__(self, response, on_events):
        self.response = response
        self.on_events = on_events
        self.buf = b""
        #: fires with the reason the watch ended
        self.done: defer.Deferred[str] = defer.Deferred()
        self.error = None

    def dataReceived(self, data):
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                self._message(line)

    def _message(self, line):
        data = _json(line)
        result = data.get("result")
        if result is None:
            self.error = data.get("error", {}).get("message") or "bad data"
            self.cancel()
            return
        if result.get("canceled"):
            self.error = result.get("cancel_reason") or (
                "compacted at revision %s" % result.get("compact_revision")
                if result.get("compact_revision") else "watch canceled")
            self.cancel()
            return
        events = result.get("events")
        if events:
            self.on_events(events)

    def connectionLost(self, reason=connectionDone):
        if not self.done.called:
            self.done.callback(self.error or _reason(reason))

    def cancel(self):
        if self.transport is not None:
            # A response body's transport is a push producer (Twisted's
            # IResponse.deliverBody): stopping it ends the body.
            IPushProducer(self.transport).stopProducing()


class Mirror:
    """Every key under a prefix, decoded, kept current by a watch.

    ``entries`` maps keys to what ``decode(key, value, lease)`` made of
    them; ``keys`` is their sorted list (etcd's order), for prefix
    ranges.  ``synced`` turns True after the first complete read.  Only
    the reactor thread touches them.
    """

    def __init__(self, client, prefix, decode, reactor):
        self.client = client
        self.prefix = prefix
        self.decode = decode
        self.reactor = reactor
        self.entries = {}
        self.keys = []
        self.revision = 0
        self.synced = False
        self.stopped = False
        self.watch = None
        self.backoff = 0.0
        self.retry = None
        self.failing = False
        self.pending = None

    def start(self):
        self._cycle()

    def stop(self):
        self.stopped = True
        if self.retry is not None and self.retry.active():
            self.retry.cancel()
        if self.pending is not None:
            self.pending.cancel()
        if self.watch is not None:
            self.watch.cancel()
        if self.client is not None:
            return self.client.close()
        return None

    def _wait(self, d):
        """``d``, remembered so that stop() can cancel it."""
        self.pending = d
        d.addBoth(self._settled)
        return d

    def _settled(self, result):
        self.pending = None
        return result

    # -- reading ---------------------------------------------------------

    def get(self, key):
        """[(key, entry)] for exactly ``key`` (empty when absent)."""
        e = self.entries.get(key)
        return [] if e is None else [(key, e)]

    def range(self, prefix):
        """[(key, entry)] for every key starting with ``prefix``, in key
        order."""
        keys = self.keys
        i = bisect.bisect_left(keys, prefix)
        out = []
        entries = self.entries
        while i < len(keys) and keys[i].startswith(prefix):
            out.append((keys[i], entries[keys[i]]))
            i += 1
        return out

    # -- list and watch --------------------------------------------------

    @defer.inlineCallbacks
    def _cycle(self):
        """Read the prefix, then watch it until the watch breaks."""
        self.retry = None
        try:
            revision, kvs = yield self._wait(self.client.range(self.prefix))
            if self.stopped:
                return
            self._replace(revision, kvs)
            self.watch = yield self._wait(self.client.watch(
                self.prefix, self.revision + 1, self._events))
            if self.stopped:
                self.watch.cancel()
                return
            if self.failing:
                logger.info(NAME, "watching %s again" % self.prefix)
                self.failing = False
            self.backoff = 0.0
            reason = yield self.watch.done
            self.watch = None
            if not self.stopped:
                self._failed(reason)
        except Exception as e:
            if not self.stopped:
                self._failed(_reason(e))

    def _failed(self, reason):
        self.failing = True
        logger.error(NAME, "%s: %s; serving the last data" % (
            self.prefix, reason))
        self.backoff = min(max(BACKOFF_START, self.backoff * 2), BACKOFF_MAX)
        self.retry = self.reactor.callLater(
            self.backoff * (0.5 + random.random() / 2), self._cycle)

    def _replace(self, revision, kvs):
        entries = {}
        for kv in kvs:
            key, value, lease = _kv(kv)
            entries[key] = self.decode(key, value, lease)
        self.entries = entries
        self.keys = sorted(entries)
        self.revision = revision
        self.synced = True

    def _events(self, events):
        for ev in events:
            kv = ev.get("kv", {})
            key, value, lease = _kv(kv)
            if ev.get("type") == "DELETE":
                if self.entries.pop(key, None) is not None:
                    del self.keys[bisect.bisect_left(self.keys, key)]
            else:
                if key not in self.entries:
                    bisect.insort(self.keys, key)
                self.entries[key] = self.decode(key, value, lease)
            self.revision = max(self.revision,
                                int(kv.get("mod_revision", 0)))


def _kv(kv):
    """(key text, value bytes, lease id) of a KeyValue in JSON."""
    return (unb64(kv.get("key")).decode("utf-8", "replace"),
            unb64(kv.get("value")), int(kv.get("lease", 0)))


def _json(body):
    try:
        data = json.loads(body)
    except ValueError:
        return {"error": "not JSON: %r" % body[:100]}
    return data if isinstance(data, dict) else {"error": "not an object"}


def _auth_failed(err):
    text = str(err).lower()
    return err.code == 16 or "token" in text or "auth" in text


def _reason(e):
    """A one-line reason for a failure (a Failure, an exception, text)."""
    value = getattr(e, "value", e)
    if isinstance(value, str):
        return value
    text = str(value) or type(value).__name__
    return text.splitlines()[0] if text else type(value).__name__
