"""proxy's query path: which stanza takes a name, which host gets the
query, and what happens when the host fails.

Each ``proxy`` directive of a server block is a ``Group`` (1.4's
staticUpstream); the first directive's ``ProxyPlugin`` holds them all and
gives a name to the group with the longest matching **FROM**, as 1.4 did.
``_Query`` is one client query: the waiter of the upstream engine's
connections, trying hosts until one answers, none is left up, or
``TRY_DURATION`` has passed.
"""

import time
from typing import Optional

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.interfaces import IForwarderTap
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Response
from corednstw.engines.upstream import (
    REQUEST_DURATION,
    CachedClosed,
    error_text,
    matches,
    truncated,
)
from corednstw.plugins.proxy import policy
from corednstw.plugins.proxy.health import HealthChecker

#: How long 1.4 kept picking hosts for one query.
TRY_DURATION = 16.0
#: How long one host is given to answer (1.4's dial and read timeout).
READ_TIMEOUT = 5.0
#: When ``fail_timeout`` is 0, failures are forgotten after this.
DEFAULT_FAIL_TIMEOUT = 2.0
#: A health check runs after every this many forgotten failures.
FAILURE_CHECK = 3
#: Attempts per query; 1.4 had no cap, but a host that refuses at once
#: with ``max_fails 0`` would otherwise be asked again and again for
#: TRY_DURATION.
MAX_ATTEMPTS = 64

REQUEST_COUNT = metrics.counter(
    "coredns_proxy_request_count_total",
    "Counter of requests made per protocol, proxy protocol, family and "
    "upstream.", ("server", "proto", "proxy_proto", "family", "to"))


class Group:
    """One ``proxy FROM TO...`` directive: its zone and exceptions, its
    hosts, the policy between them and their failure bookkeeping."""

    def __init__(self, from_="."):
        self.from_ = from_
        self.ignored = []
        self.hosts = []
        self.policy = policy.Random()
        self.spray = False
        self.fail_timeout = 5.0
        self.max_fails = 3
        self.force_tcp = False
        self.hc_path = ""
        self.hc_port = ""
        self.hc_interval = 4.0
        self.reactor = None
        self.checker = None
        self.timers = set()
        self.stopped = False

    # -- matching -------------------------------------------------------------

    def takes(self, qname):
        """True when ``qname`` is under FROM and not under an ``except``
        name (FROM itself is always taken)."""
        return names.takes(qname, self.from_, self.ignored)

    # -- choosing a host ------------------------------------------------------

    def down(self, host):
        return self.max_fails != 0 and host.fails >= self.max_fails

    def select(self):
        """The host for the next attempt, or None when every host is down
        and ``spray`` is off."""
        pool = self.hosts
        if len(pool) == 1:
            if self.down(pool[0]) and not self.spray:
                return None
            return pool[0]
        if all(self.down(h) for h in pool):
            return policy.spray(pool) if self.spray else None
        host = self.policy.select(pool, self.down)
        if host is None and self.spray:
            return policy.spray(pool)
        return host

    # -- failures -------------------------------------------------------------

    def failed(self, host):
        """Count a failed exchange against ``host`` and forget it again
        after ``fail_timeout``."""
        if self.stopped:
            return      # the queries the stop itself failed
        host.fails += 1
        fails = host.fails
        if self.reactor is None:
            return
        timer = None

        def forget():
            self.timers.discard(timer)
            # May go below zero after a good health check reset; the next
            # check sets it right, as in 1.4.
            host.fails -= 1
            if fails % FAILURE_CHECK == 0 and self.checker is not None:
                self.checker.check(host)
        timer = self.reactor.callLater(
            self.fail_timeout or DEFAULT_FAIL_TIMEOUT, forget)
        self.timers.add(timer)

    # -- life cycle -----------------------------------------------------------

    def start(self, reactor, clock):
        self.reactor = reactor
        self.stopped = False
        for h in self.hosts:
            h.proxy.start(reactor, clock)
        if self.hc_path:
            self.checker = HealthChecker(reactor, self.hosts,
                                         self.hc_interval)
            self.checker.start()

    def stop(self):
        self.stopped = True
        if self.checker is not None:
            self.checker.stop()
            self.checker = None
        for t in list(self.timers):
            if t.active():
                t.cancel()
        self.timers.clear()
        for h in self.hosts:
            h.proxy.stop()


class ProxyPlugin(Plugin):
    """The proxy directives of one server block."""

    name = "proxy"
    once = False

    def __init__(self):
        self.groups = []
        self.clock = None
        #: The dnstap plugins of the block (FORWARDER_QUERY/RESPONSE).
        self.taps = ()

    def start(self):
        app = self.block.server
        reactor = app.reactor
        self.clock = getattr(reactor, "seconds", app.clock)
        self.taps = tuple(self.block.find(IForwarderTap))
        for g in self.groups:
            g.start(reactor, self.clock)

    def stop(self):
        for g in self.groups:
            g.stop()

    def group_for(self, qname):
        """The group with the longest FROM that takes ``qname``."""
        best = None
        for g in self.groups:
            if g.takes(qname) and (best is None
                                   or len(g.from_) > len(best.from_)):
                best = g
        return best

    def serve(self, req):
        g = self.group_for(req.qname)
        if g is None:
            return self.next.serve(req)
        return _Query(self, g, req).run()


class _Query:
    """The attempts for one client query (1.4's ServeDNS loop, as
    callbacks).  The engine's connections call ``reply`` or ``fail``."""

    __slots__ = ("p", "g", "req", "d", "host", "start", "deadline",
                 "attempts", "err", "proto", "tstart")

    def __init__(self, p, g, req):
        self.p = p
        self.g = g
        self.req = req
        self.d: defer.Deferred[Response] = defer.Deferred()
        #: the host asked last, set by _next before it asks
        self.host: Optional[policy.Host] = None
        self.start = p.clock()
        self.deadline = self.start + TRY_DURATION
        self.attempts = 0
        self.err = None
        self.proto = "udp"
        # dnstap's query time: when proxy started on this query.
        self.tstart = time.time_ns() if p.taps else 0

    def run(self):
        self._next()
        return self.d

    def _finish(self, resp):
        if not self.d.called:
            self.d.callback(resp)

    def _servfail(self, text):
        r = Response(w.SERVFAIL)
        r.error = "unreachable backend: %s" % text
        self._finish(r)

    def _next(self):
        if self.g.stopped:
            return self._servfail(self.err or "no upstream host")
        if self.p.clock() >= self.deadline or \
                self.attempts >= MAX_ATTEMPTS:
            return self._servfail(self.err or "no upstream host")
        host = self.g.select()
        if host is None:
            return self._servfail("no upstream host")
        self.host = host
        self.attempts += 1
        host.conns += 1
        req = self.req
        REQUEST_COUNT.inc(self._labels(host))
        self.proto = "tcp" if self.g.force_tcp else req.proto
        host.proxy.query(req.data, self.proto, self, self.p.clock())

    def _labels(self, host):
        req = self.req
        return (req.server, req.proto, "dns", str(req.family), host.name)

    # -- the waiter interface -------------------------------------------------

    def reply(self, data, conn):
        host = self.host
        assert host is not None     # a reply answers what _next asked
        host.conns -= 1
        req = self.req
        if len(data) > req.size and conn is not None and \
                conn.proto == "udp":
            data = truncated(data)
        if self.p.taps:
            self._tap(data)
        if not matches(req, data):
            return self._finish(Response(w.FORMERR, plugin="proxy"))
        REQUEST_DURATION.observe(host.proxy.duration_labels(data[3] & 0xF),
                                 self.p.clock() - self.start)
        self._finish(RawResponse.prebuilt(data, "proxy"))

    def fail(self, exc, conn):
        host = self.host
        assert host is not None     # a failure ends what _next asked
        if isinstance(exc, CachedClosed):
            # A pooled connection the upstream had closed: not the host's
            # fault, ask again on a fresh one.
            return host.proxy.query(self.req.data, conn.proto, self,
                                    self.p.clock())
        host.conns -= 1
        if self.p.taps:
            self._tap(None)
        self.err = error_text(exc, host.proxy, conn)
        if not _timeout(exc):
            # 1.4 did not hold a timeout against the host: the upstream's
            # own upstream may be the slow one.
            self.g.failed(host)
        self._next()


    def _tap(self, data):
        """FORWARDER_QUERY, and FORWARDER_RESPONSE when a reply came, to
        every dnstap of the block, as 1.4's toDnstap: the upstream as the
        response address, the transport asked for, the time proxy started
        on the query; the messages carry the client's ID."""
        req = self.req
        host = self.host
        assert host is not None     # a query was asked of it
        upstream = (host.proxy.host, host.proxy.port)
        reply = None
        for tap in self.p.taps:
            tap.tap_forwarder_query(req, upstream, req.data, self.proto,
                                    None, self.tstart)
            if data is not None:
                if reply is None and tap.full:
                    reply = req.data[:2] + data[2:]
                tap.tap_forwarder_response(req, upstream, reply,
                                           self.proto, None, self.tstart)


def _timeout(exc):
    text = str(exc).lower()
    return "timeout" in text or "timed out" in text
