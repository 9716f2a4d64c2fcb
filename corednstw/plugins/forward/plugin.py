"""forward's query path: choosing an upstream, the attempts of one client
query, and the reply handed back.

``Forward.serve`` makes one ``_Query`` per client query; it is the
waiter of the upstream engine's connections (``reply``/``fail``), so an
upstream query costs no Deferred.  The answer is the upstream's bytes
(``RawResponse.prebuilt``); the server puts the client's ID and question
case back.  First in its block's chain on a UDP listener (no plugin in
front of it to see the answer), forward hands the answer to the
server's late slot (``Request.late``) and returns ``LATE``: no Deferred
at all; elsewhere ``serve`` returns a Deferred.
"""

import random
import time
from typing import Optional

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.interfaces import IForwarderTap
from corednstw.core.plugin import Plugin
from corednstw.core.request import LATE, RawResponse, Response
from corednstw.engines.upstream import (
    REQUEST_DURATION,
    CachedClosed,
    UpstreamError,
    error_text,
    matches,
    readable,
    relay,
    start_all,
    stop_all,
    truncated,
)

#: The whole exchange (all attempts) gives up after this (CoreDNS: 5s).
DEADLINE = 5.0
HEALTHCHECK_BROKEN = metrics.counter(
    "coredns_forward_healthcheck_broken_total",
    "Counter of the number of complete failures of the healthchecks.")
MAX_CONCURRENT_REJECTS = metrics.counter(
    "coredns_forward_max_concurrent_rejects_total",
    "Counter of the number of queries rejected because the concurrent "
    "queries were at maximum.")


class Forward(Plugin):
    """One forward stanza: the zone it takes, its upstreams (engine
    ``Upstream`` objects) and the policy between them."""

    name = "forward"
    once = False

    def __init__(self):
        self.from_ = "."
        self.ignored = []
        self.upstreams = []
        self.policy = "random"
        self.robin = 0
        self.maxfails = 2
        self.max_concurrent = 0
        self.concurrent = 0
        self.force_tcp = False
        self.prefer_udp = False
        self.next_rcodes = ()
        self.next_on_nodata = False
        self.failover_rcodes = ()
        self.failfast = False
        self.max_attempts = None
        self.reactor = None
        self.clock = None
        #: The dnstap plugins of the block (FORWARDER_QUERY/RESPONSE).
        self.taps = ()
        #: Every name is ours (FROM is the root, no ``except``): set by
        #: ``start``, so ``serve`` skips ``match``.
        self.takes_all = False

    # -- life cycle -----------------------------------------------------------

    def start(self):
        app = self.block.server
        self.reactor = app.reactor
        self.clock = getattr(app.reactor, "seconds", app.clock)
        self.taps = tuple(self.block.find(IForwarderTap))
        self.takes_all = self.from_ == "." and not self.ignored
        start_all(self.upstreams, self.reactor, self.clock)

    def stop(self):
        return stop_all(self.upstreams)

    # -- matching -------------------------------------------------------------

    def match(self, qname):
        return names.takes(qname, self.from_, self.ignored)

    def ordered(self):
        """The upstreams in the order the policy tries them."""
        ps = self.upstreams
        n = len(ps)
        if n == 1 or self.policy == "sequential":
            return ps
        if self.policy == "round_robin":
            # CoreDNS's roundRobin: the counter is incremented first (the
            # first query starts at the second upstream); the chosen one
            # leads, the others follow in Corefile order.
            self.robin += 1
            i = self.robin % n
            return [ps[i]] + ps[:i] + ps[i + 1:]
        if n == 2:
            return ps if random.getrandbits(1) else [ps[1], ps[0]]
        return random.sample(ps, n)

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        if not self.takes_all and not self.match(req.qname):
            return self.next.serve(req)
        if self.max_concurrent:
            if self.concurrent >= self.max_concurrent:
                MAX_CONCURRENT_REJECTS.inc()
                r = Response(w.REFUSED)
                r.error = "concurrent queries exceeded maximum %d" % (
                    self.max_concurrent)
                return r
            self.concurrent += 1
            d = _Query(self, req, None).run()
            return d.addBoth(self._release)
        late = req.late
        if late is not None and req.block.chain is self:
            # Nothing in front of us: the answer goes straight to the
            # server's late slot.
            _Query(self, req, late)._next()
            return LATE
        return _Query(self, req, None).run()

    def _release(self, result):
        self.concurrent -= 1
        return result

    def proto_for(self, req):
        if self.force_tcp:
            return "tcp"
        if self.prefer_udp:
            return "udp"
        return req.proto


class _Query:
    """The attempts for one query (CoreDNS's ServeDNS loop, as callbacks).

    It is the *waiter* of each upstream query: the connection calls
    ``reply`` or ``fail``.  The answer goes to the server's late slot
    ``late`` when given, else fires the Deferred ``d``."""

    __slots__ = ("f", "req", "list", "i", "fails", "failovers", "attempts",
                 "max_attempts", "deadline", "d", "err", "proxy", "proto",
                 "start", "tries", "tstart", "force_tcp", "late")

    def __init__(self, f, req, late):
        self.f = f
        self.req = req
        self.list = f.ordered()
        self.i = 0
        self.fails = 0
        self.failovers = 0
        self.attempts = 0
        n = len(f.upstreams)
        self.max_attempts = 2 * n if f.max_attempts is None else \
            f.max_attempts
        self.deadline = f.clock() + DEADLINE
        self.late = late
        self.d: Optional[defer.Deferred[Optional[Response]]] = (
            None if late is not None else defer.Deferred())
        self.err = None
        self.tries = 0
        self.force_tcp = False
        # dnstap's query time: when forward started on this query.
        self.tstart = time.time_ns() if f.taps else 0

    def run(self):
        self._next()
        return self.d

    def _finish(self, resp):
        late = self.late
        if late is not None:
            self.late = None        # one answer only
            req = self.req
            late.deliver(resp, req, req.reply)
            return
        d = self.d
        if d is not None and not d.called:
            d.callback(resp)

    def _servfail(self, text):
        r = Response(w.SERVFAIL)
        r.error = text
        self._finish(r)

    def _give_up(self):
        """No attempt left: SERVFAIL with the last error (CoreDNS's
        upstreamErr, else ErrNoHealthy)."""
        if self.err is not None:
            return self._servfail(self.err)
        return self._servfail("no healthy proxies")

    def _next(self):
        f = self.f
        while True:
            if f.clock() >= self.deadline or (
                    self.max_attempts and self.attempts >= self.max_attempts):
                return self._give_up()
            if self.i >= len(self.list):
                self.i = 0
                self.fails = 0
            proxy = self.list[self.i]
            self.i += 1
            if proxy.down(f.maxfails):
                self.fails += 1
                if self.fails < len(f.upstreams):
                    continue
                HEALTHCHECK_BROKEN.inc()
                if f.failfast:
                    return self._give_up()
                proxy = random.choice(f.upstreams)
            break
        self.proxy = proxy
        req = self.req
        if req.metadata is not None:
            req.metadata["forward/upstream"] = proxy.addr
        self.proto = f.proto_for(req)
        self._send()

    def _send(self):
        self.tries += 1
        if self.tries > 64:
            # Only reachable when every attempt fails at once (no socket):
            # keep the stack bounded.
            return self._give_up()
        self.start = now = self.f.clock()
        self.proxy.query(self.req.data, self.proto, self, now)

    # -- the waiter interface -------------------------------------------------

    def fail(self, exc, conn):
        if isinstance(exc, CachedClosed):
            # The peer closed a pooled connection: retry on a fresh one.
            return self._send()
        f = self.f
        if f.taps:
            self._tap(conn, None)
        self.err = error_text(exc, self.proxy, conn)
        if f.maxfails != 0:
            self.proxy.healthcheck()
        if self.max_attempts:
            self.attempts += 1
            if self.attempts >= self.max_attempts:
                return self._give_up()
        if self.fails < len(f.upstreams):
            return self._next()
        return self._give_up()

    def reply(self, data, conn):
        f = self.f
        req = self.req
        proxy = self.proxy
        # The plain reply (the question asked, every record whole, fits
        # the client): checked and made the client's in one walk.
        wire = relay(req, data) if len(data) <= req.size else None
        if wire is None:
            if not readable(data):
                if conn is None or conn.proto != "udp":
                    return self.fail(UpstreamError("malformed reply"), conn)
                data = truncated(data)
            elif (len(data) > req.size and conn is not None
                  and conn.proto == "udp"):
                # Bigger than the client's buffer, which is CoreDNS's read
                # buffer: it keeps the header and question, sets TC and
                # drops the records (the client retries over TCP).
                data = truncated(data)
        rcode = data[3] & 0xF
        REQUEST_DURATION.observe(proxy.duration_labels(rcode),
                                 f.clock() - self.start)
        if (data[2] & 0x02 and self.proto == "udp" and f.prefer_udp
                and not f.force_tcp):
            # Truncated with prefer_udp: the same upstream over TCP.
            self.proto = "tcp"
            return self._send()
        if f.taps:
            self._tap(conn, data)
        if wire is None and not matches(req, data):
            return self._finish(Response(w.FORMERR, plugin="forward"))
        if rcode in f.failover_rcodes:
            self.failovers += 1
            if self.failovers < len(f.upstreams):
                return self._next()
        nxt = f.next
        if isinstance(nxt, Forward):
            if rcode in f.next_rcodes or (
                    f.next_on_nodata and rcode == w.NOERROR
                    and data[6:8] == b"\x00\x00"):
                return self._finish_next(nxt)
        late = self.late
        if late is not None and wire is not None:
            # The server's late slot and the client's bytes made: no
            # Response needed.
            self.late = None
            return late.deliver_wire(wire, req)
        r = RawResponse.prebuilt(data, "forward")
        # The client's bytes when already made (a plugin changing the
        # answer on its way out drops them, as for any encoded answer).
        r.wire = wire
        self._finish(r)

    def _tap(self, conn, data):
        """FORWARDER_QUERY (and FORWARDER_RESPONSE when a reply came) to
        every dnstap of the block, as CoreDNS's toDnstap: our end of the
        socket as the query address, the upstream as the response address,
        'udp' or 'tcp' (DNS-over-TLS counts as tcp), the time forward
        started as the query time; the messages carry the client's ID."""
        req = self.req
        proxy = self.proxy
        upstream = (proxy.host, proxy.port)
        local = conn.local() if conn is not None else None
        # Without a connection (the dial failed) CoreDNS reports the
        # transport it asked for.
        proto = conn.proto if conn is not None else self.proto
        if proto != "udp":
            proto = "tcp"
        reply = None
        for tap in self.f.taps:
            tap.tap_forwarder_query(req, upstream, req.data, proto, local,
                                    self.tstart)
            if data is not None:
                if reply is None and tap.full:
                    reply = req.data[:2] + data[2:]
                tap.tap_forwarder_response(req, upstream, reply, proto,
                                           local, self.tstart)

    def _finish_next(self, nxt):
        r = nxt.serve(self.req)
        if isinstance(r, defer.Deferred):
            r.addCallbacks(self._finish, lambda fl: self._finish(
                Response(w.SERVFAIL)))
        else:
            self._finish(r)
