"""fanout's query path: the upstreams asked in parallel for one client
query, and the answer chosen among theirs.

``Fanout.serve`` makes one ``_Query`` per client query.  It hands the
upstreams, in policy order, to at most ``workers`` parallel slots; a slot
asks its upstream (an ``_Ask``, the waiter of the upstream engine's
connections) up to ``attempts`` times, 100 ms apart after a failure, and
on its outcome takes the next upstream.  The first NOERROR answer (with
``race``: the first answer) is the client's; otherwise, once every
upstream is done or ``timeout`` passes, the best outcome seen: an answer
before an error, NOERROR before another rcode.
"""

import random

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Response
from corednstw.engines.upstream import (
    CachedClosed,
    UpstreamError,
    error_text,
    matches,
    readable,
    start_all,
    stop_all,
    truncated,
)

#: Between two attempts on one upstream after a failure.
ATTEMPT_DELAY = 0.1

REQUEST_COUNT = metrics.counter(
    "coredns_fanout_request_count_total",
    "Counter of requests made per upstream.", ("to",))
RCODE_COUNT = metrics.counter(
    "coredns_fanout_response_rcode_count_total",
    "Counter of requests made per upstream.", ("rcode", "to"))
REQUEST_DURATION = metrics.histogram(
    "coredns_fanout_request_duration_seconds",
    "Histogram of the time each request took.", ("to",),
    metrics.TIME_BUCKETS)


class Fanout(Plugin):
    """One fanout stanza: its zone, the names it leaves alone, its
    upstreams (engine ``Upstream`` objects) and how they are asked."""

    name = "fanout"

    def __init__(self):
        self.from_ = "."
        self.excepted = set()
        self.upstreams = []
        self.network = "udp"
        self.workers = 0
        self.servers = 0
        self.attempts = 3
        self.timeout = 30.0
        self.race = False
        self.weights = None         # weighted-random: one per upstream
        self.clock = None

    def start(self):
        self.clock = self.reactor.seconds
        start_all(self.upstreams, self.reactor, self.clock)

    def stop(self):
        return stop_all(self.upstreams)

    def match(self, qname):
        f = self.from_
        if not names.in_zone(qname, f):
            return False
        if self.excepted:
            # The name and each of its parents, down to the root.
            name = qname
            while True:
                if name in self.excepted:
                    return False
                if name == ".":
                    return True
                name = name.split(".", 1)[1] or "."
        return True

    def picked(self):
        """The upstreams to ask, in the order the policy hands them out:
        Corefile order, or (weighted-random) ``servers`` of them drawn
        without replacement, each with the chance of its weight."""
        if self.weights is None:
            return self.upstreams[:self.servers]
        pool = list(zip(self.upstreams, self.weights))
        out = []
        while pool and len(out) < self.servers:
            i = _draw(pool)
            out.append(pool[i][0])
            pool[i] = pool[-1]
            pool.pop()
        return out

    def serve(self, req):
        if not self.match(req.qname):
            return self.next.serve(req)
        return _Query(self, req).run()


def _draw(pool):
    """The index of one (proxy, weight) pair, by weight."""
    n = random.randint(1, sum(wt for _p, wt in pool))
    for i, (_p, wt) in enumerate(pool):
        n -= wt
        if n <= 0:
            return i
    return len(pool) - 1


class _Outcome:
    """What one upstream gave: reply bytes or the error text."""

    __slots__ = ("proxy", "data", "err")

    def __init__(self, proxy, data, err):
        self.proxy = proxy
        self.data = data
        self.err = err

    def rcode(self):
        return self.data[3] & 0xF


def _better(old, new):
    """Whether ``new`` beats the best outcome so far (fanout's isBetter):
    anything beats nothing, an answer beats an error, NOERROR beats any
    other rcode."""
    if old is None:
        return True
    if new.err is not None:
        return False
    if old.err is not None:
        return True
    return old.rcode() != w.NOERROR and new.rcode() == w.NOERROR


class _Query:
    """The upstreams asked for one client query."""

    __slots__ = ("f", "req", "queue", "active", "best", "done", "d",
                 "timer", "asks")

    def __init__(self, f, req):
        self.f = f
        self.req = req
        self.queue = f.picked()
        self.active = 0
        self.best = None
        self.done = False
        self.d = defer.Deferred()
        self.timer = None
        self.asks = set()

    def run(self):
        f = self.f
        self.timer = f.reactor.callLater(f.timeout, self._timed_out)
        for _ in range(min(f.workers, len(self.queue))):
            self._take()
        return self.d

    def _take(self):
        """Start the next upstream in a free slot."""
        if self.done or not self.queue:
            return
        ask = _Ask(self, self.queue.pop(0))
        self.active += 1
        self.asks.add(ask)
        ask.send()

    def outcome(self, ask, out):
        """One upstream is done with this query."""
        self.asks.discard(ask)
        if self.done:
            return
        self.active -= 1
        if _better(self.best, out):
            self.best = out
        if out.err is None and (self.f.race or out.rcode() == w.NOERROR):
            return self._finish(out)
        self._take()
        if not self.active:
            self._finish(self.best)

    def _timed_out(self):
        self.timer = None
        self._finish(self.best, "context deadline exceeded")

    def _finish(self, out, why=None):
        if self.done:
            return
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for ask in self.asks:
            ask.cancel()
        self.asks.clear()
        self.d.callback(self._response(out, why))

    def _response(self, out, why):
        req = self.req
        if out is None or out.err is not None:
            r = Response(w.SERVFAIL)
            r.error = why if out is None else (
                "attempt limit has been reached: " + out.err)
            return r
        if req.metadata is not None:
            req.metadata["fanout/upstream"] = out.proxy.addr
        if not matches(req, out.data):
            return Response(w.FORMERR, plugin="fanout")
        return RawResponse.prebuilt(out.data, "fanout")


class _Ask:
    """The attempts on one upstream for one query: the waiter of its
    connections (``reply`` / ``fail``)."""

    __slots__ = ("q", "proxy", "tries", "start", "retry", "cancelled")

    def __init__(self, q, proxy):
        self.q = q
        self.proxy = proxy
        self.tries = 0
        self.start = 0.0
        self.retry = None
        self.cancelled = False

    def send(self):
        self.retry = None
        if self.cancelled:
            return
        f = self.q.f
        self.start = now = f.clock()
        self.proxy.query(self.q.req.data, f.network, self, now)

    def cancel(self):
        self.cancelled = True
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None

    def fail(self, exc, conn):
        if self.cancelled:
            return
        if isinstance(exc, CachedClosed):
            # A pooled connection the peer had closed: not an attempt.
            return self.send()
        self.tries += 1
        attempts = self.q.f.attempts
        if attempts and self.tries >= attempts:
            return self.q.outcome(self, _Outcome(
                self.proxy, None, error_text(exc, self.proxy, conn)))
        self.retry = self.q.f.reactor.callLater(ATTEMPT_DELAY, self.send)

    def reply(self, data, conn):
        if self.cancelled:
            return
        req = self.q.req
        if not readable(data):
            return self.fail(UpstreamError("malformed reply"), conn)
        if len(data) > req.size and conn is not None and \
                conn.proto == "udp":
            # Bigger than the client's buffer: header and question with
            # TC, as forward cuts it.
            data = truncated(data)
        proxy = self.proxy
        to = (proxy.addr,)
        REQUEST_COUNT.inc(to)
        RCODE_COUNT.inc((w.rcode_text(data[3] & 0xF), proxy.addr))
        REQUEST_DURATION.observe(to, self.q.f.clock() - self.start)
        self.q.outcome(self, _Outcome(proxy, data, None))
