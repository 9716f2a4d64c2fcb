"""forward: proxies queries to upstream resolvers (CoreDNS's forward).

One ``Proxy`` per upstream.  UDP goes over one connected socket per
upstream with a map of pending message IDs (the socket is replaced after
``expire`` so source ports rotate); TCP and DNS-over-TLS use pooled
connections, one query at a time each, reused until ``expire``.  Upstream
answers go back to the client as the upstream's bytes (``RawResponse``):
the server patches the client's ID and question case.

A failed exchange starts the upstream's health check (``. IN NS``, every
``health_check`` interval until it answers); ``max_fails`` failed checks in
a row mark it down.  Every failure path ends in SERVFAIL, never a hang.
"""

import ipaddress
import os
import random
import socket
import struct
import time

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core import metrics
from corednstw.core import names
from corednstw.core.durations import format_duration, parse_duration
from corednstw.core.interfaces import IForwarderTap
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Response, make_query

MAX_UPSTREAMS = 15
DEFAULT_EXPIRE = 10.0
DEFAULT_READ_TIMEOUT = 2.0
HC_INTERVAL = 0.5
HC_TIMEOUT = 1.0
#: The whole exchange (all attempts) gives up after this (CoreDNS: 5s).
DEADLINE = 5.0
MIN_DIAL, MAX_DIAL = 1.0, 30.0

_ID = struct.Struct("!H")

HEALTHCHECK_BROKEN = metrics.counter(
    "coredns_forward_healthcheck_broken_total",
    "Counter of the number of complete failures of the healthchecks.")
MAX_CONCURRENT_REJECTS = metrics.counter(
    "coredns_forward_max_concurrent_rejects_total",
    "Counter of the number of queries rejected because the concurrent "
    "queries were at maximum.")
REQUEST_DURATION = metrics.histogram(
    "coredns_proxy_request_duration_seconds",
    "Histogram of the time each request took.",
    ("proxy_name", "to", "rcode"), metrics.TIME_BUCKETS)
HC_FAILURES = metrics.counter(
    "coredns_proxy_healthcheck_failures_total",
    "Counter of the number of failed healthchecks.", ("proxy_name", "to"))
CONN_HITS = metrics.counter(
    "coredns_proxy_conn_cache_hits_total",
    "Counter of connection cache hits per upstream and protocol.",
    ("proxy_name", "to", "proto"))
CONN_MISSES = metrics.counter(
    "coredns_proxy_conn_cache_misses_total",
    "Counter of connection cache misses per upstream and protocol.",
    ("proxy_name", "to", "proto"))


class UpstreamError(Exception):
    """The exchange with one upstream failed (timeout, refused, closed)."""


class CachedClosed(UpstreamError):
    """A reused connection was closed by the peer: retry on a new one."""


# -- message IDs ----------------------------------------------------------------

class _IDs:
    """Random 16-bit message IDs drawn from the OS's generator in batches
    (one urandom call per 2048 queries instead of one per query)."""

    __slots__ = ("pool",)
    BATCH = 2048

    def __init__(self):
        self.pool = []

    def next(self):
        pool = self.pool
        if not pool:
            pool.extend(struct.unpack("!%dH" % self.BATCH,
                                      os.urandom(2 * self.BATCH)))
        return pool.pop()


_new_id = _IDs().next


#: Receive buffer of an upstream UDP socket.  All queries to an upstream
#: share one socket (CoreDNS spreads them over a pool of sockets, each with
#: its own buffer), so a burst of replies needs more room than the
#: default; the kernel caps it at net.core.rmem_max.
UDP_RCVBUF = 1 << 20


def _grow_rcvbuf(port):
    try:
        sock = port.socket
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < UDP_RCVBUF:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)
    except (AttributeError, OSError):
        pass


def _local_end(transport):
    """(host, port) of our end of a Twisted port or transport, or None."""
    if transport is None:
        return None
    try:
        a = transport.getHost()
        return (a.host, a.port)
    except (AttributeError, OSError):
        return None


# -- transports ---------------------------------------------------------------
#
# A query is handed to a connection with a *waiter*: an object with
# ``reply(data, conn)`` and ``fail(exc, conn)`` (the _Exchange of one
# client query).  Plain method calls, no Deferred per upstream query.

class _UDPConn(protocol.DatagramProtocol):
    """One connected UDP socket to an upstream; replies are matched to
    queries by message ID (replies with an unknown ID are ignored).

    Every query on a socket has the same read timeout, so the pending map
    (insertion ordered) is also ordered by deadline: one timer per socket,
    armed for the oldest query, replaces a timer per query."""

    proto = "udp"

    def __init__(self, proxy, created):
        self.proxy = proxy
        self.created = created
        self.pending = {}        # msgid -> (waiter, deadline)
        self.retired = False
        self.dead = False
        self.port = None
        self.timer = None
        self._local = None

    def local(self):
        """Our (host, port) on this socket (CoreDNS's LocalAddr)."""
        if self._local is None:
            self._local = _local_end(self.port)
        return self._local

    def stopProtocol(self):
        # The reactor closed the socket (a read error): replace it.
        self.dead = True
        self._fail_all(UpstreamError("socket closed"))

    def query(self, wire, timeout, waiter, now):
        pending = self.pending
        msgid = _new_id()
        while msgid in pending:
            msgid = _new_id()
        pending[msgid] = (waiter, now + timeout)
        if self.timer is None:
            self.timer = self.proxy.reactor.callLater(timeout, self._expire)
        try:
            self.transport.write(_ID.pack(msgid) + wire[2:])
        except OSError as e:
            entry = pending.pop(msgid, None)
            if entry is not None:
                entry[0].fail(UpstreamError(str(e)), self)

    def datagramReceived(self, data, addr):
        if len(data) < 12:
            return
        entry = self.pending.pop((data[0] << 8) | data[1], None)
        if entry is None:
            return
        entry[0].reply(data, self)
        if self.retired and not self.pending:
            self.close()

    def _expire(self):
        self.timer = None
        pending = self.pending
        now = self.proxy.reactor.seconds()
        late = []
        for msgid, entry in pending.items():
            if entry[1] > now:
                break
            late.append(msgid)
        for msgid in late:
            entry = pending.pop(msgid, None)
            if entry is not None:
                entry[0].fail(UpstreamError("i/o timeout"), self)
        if pending and self.timer is None and self.port is not None:
            first = next(iter(pending.values()))[1]
            self.timer = self.proxy.reactor.callLater(
                max(first - self.proxy.reactor.seconds(), 0), self._expire)
        if self.retired and not pending:
            self.close()

    def _fail_all(self, exc):
        pending, self.pending = self.pending, {}
        for waiter, _deadline in pending.values():
            waiter.fail(exc, self)

    def connectionRefused(self):
        # ICMP port unreachable: every query on this socket went to the
        # same dead upstream.
        self._fail_all(UpstreamError("connection refused"))

    def close(self):
        if self.timer is not None:
            if self.timer.active():
                self.timer.cancel()
            self.timer = None
        self._fail_all(UpstreamError("transport stopped"))
        if self.port is not None:
            port, self.port = self.port, None
            port.stopListening()


class _StreamConn(Int16StringReceiver):
    """A TCP or TLS connection carrying one query at a time."""

    MAX_LENGTH = 65535

    def __init__(self, proxy, proto):
        self.proxy = proxy
        self.proto = proto
        self.ready = defer.Deferred()
        self.pending = None      # (msgid, waiter, timer)
        self.created = self.used = proxy.clock()
        self.reused = False
        self.closed = False
        self.idle_timer = None
        self._local = None

    def local(self):
        if self._local is None:
            self._local = _local_end(self.transport)
        return self._local

    def connectionMade(self):
        self.local()
        d, self.ready = self.ready, None
        d.callback(self)

    def query(self, wire, timeout, waiter):
        msgid = _new_id()
        timer = self.proxy.reactor.callLater(timeout, self._timeout)
        self.pending = (msgid, waiter, timer)
        self.sendString(_ID.pack(msgid) + wire[2:])

    def stringReceived(self, data):
        p = self.pending
        if p is None or len(data) < 12 or _ID.unpack_from(data)[0] != p[0]:
            return
        self.pending = None
        p[2].cancel()
        self.used = self.proxy.clock()
        self.proxy.yield_conn(self)
        p[1].reply(data, self)

    def _timeout(self):
        p, self.pending = self.pending, None
        self.close()
        if p is not None:
            p[1].fail(UpstreamError("i/o timeout"), self)

    def lengthLimitExceeded(self, length):
        self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abortConnection()

    def connectionLost(self, reason):
        self.closed = True
        if self.idle_timer is not None and self.idle_timer.active():
            self.idle_timer.cancel()
        self.proxy.forget_conn(self)
        p, self.pending = self.pending, None
        if p is not None:
            if p[2].active():
                p[2].cancel()
            cls = CachedClosed if self.reused else UpstreamError
            p[1].fail(cls("connection closed: %s"
                          % reason.getErrorMessage()), self)


class _StreamFactory(protocol.ClientFactory):
    def __init__(self, conn):
        self.conn = conn

    def buildProtocol(self, addr):
        return self.conn

    def clientConnectionFailed(self, connector, reason):
        d, self.conn.ready = self.conn.ready, None
        if d is not None:
            d.errback(UpstreamError(reason.getErrorMessage()))


# -- one-shot exchanges (health checks, loop probes) ------------------------

class _OneShotUDP(protocol.DatagramProtocol):
    def __init__(self, wire, d):
        self.wire = wire
        self.d = d

    def send(self):
        try:
            self.transport.write(self.wire)
        except OSError as e:
            self._done(None, UpstreamError(str(e)))

    def datagramReceived(self, data, addr):
        if data[:2] == self.wire[:2]:
            self._done(data)

    def connectionRefused(self):
        self._done(None, UpstreamError("connection refused"))

    def _done(self, data, exc=None):
        if self.d.called:
            return
        if exc is not None:
            self.d.errback(exc)
        else:
            self.d.callback(data)


class _OneShotStream(Int16StringReceiver):
    MAX_LENGTH = 65535

    def __init__(self, wire, d):
        self.wire = wire
        self.d = d

    def connectionMade(self):
        self.sendString(self.wire)

    def stringReceived(self, data):
        if data[:2] == self.wire[:2] and not self.d.called:
            self.d.callback(data)
        self.transport.loseConnection()

    def connectionLost(self, reason):
        if not self.d.called:
            self.d.errback(UpstreamError(reason.getErrorMessage()))


def exchange(reactor, host, port, wire, proto="udp", timeout=2.0,
             tls=None, source=None):
    """Send one query on a fresh socket; Deferred firing with the reply
    bytes or failing with UpstreamError (timeout, refused, closed)."""
    d = defer.Deferred()
    cleanup = []
    if proto == "udp":
        proto_obj = _OneShotUDP(wire, d)
        iface = source or ("::" if ":" in host else "")
        try:
            lp = reactor.listenUDP(0, proto_obj, interface=iface,
                                   maxPacketSize=65535)
            lp.connect(host, port)
        except Exception as e:
            return defer.fail(UpstreamError(str(e)))
        cleanup.append(lp.stopListening)
        proto_obj.send()
    else:
        conn = _OneShotStream(wire, d)
        fac = protocol.ClientFactory.forProtocol(lambda: conn)
        fac.clientConnectionFailed = lambda c, r: (
            d.called or d.errback(UpstreamError(r.getErrorMessage())))
        bind = (source, 0) if source else None
        if tls is not None:
            c = reactor.connectSSL(host, port, fac, tls, timeout=timeout,
                                   bindAddress=bind)
        else:
            c = reactor.connectTCP(host, port, fac, timeout=timeout,
                                   bindAddress=bind)
        cleanup.append(c.disconnect)
    timer = reactor.callLater(timeout, lambda: d.called or d.errback(
        UpstreamError("i/o timeout")))

    def done(result):
        if timer.active():
            timer.cancel()
        for fn in cleanup:
            try:
                fn()
            except Exception:
                pass
        return result
    return d.addBoth(done)


# -- one upstream ---------------------------------------------------------------

class Proxy:
    """One upstream: its sockets, connection pool and health."""

    def __init__(self, addr, host, port, transport="dns", name="forward"):
        self.addr = addr            # the metrics label, "IP:port"
        self.host = host
        self.port = port
        self.transport = transport  # "dns" or "tls"
        self.name = name
        self.fails = 0
        self.expire = DEFAULT_EXPIRE
        self.max_age = 0.0
        self.max_idle = 0
        self.read_timeout = DEFAULT_READ_TIMEOUT
        self.tls = None             # twisted client TLS options
        self.servername = ""        # the name a TLS upstream must have
        self.source = None
        self.hc_interval = HC_INTERVAL
        self.hc_domain = "."
        self.hc_rd = True
        self.hc_proto = "udp"
        self.reactor = None
        self.clock = None
        self.udp = None
        self.idle = {"tcp": [], "tcp-tls": []}
        self.conns = set()
        self.probing = False
        self.hc_timer = None
        self.hc_inflight = None
        self.stopped = False
        self.avg_dial = 0.0
        self.labels_udp = (name, addr, "udp")
        self._dur_labels = {}

    def start(self, reactor, clock):
        self.reactor = reactor
        self.clock = clock
        self.stopped = False

    def stop(self):
        self.stopped = True
        if self.hc_timer is not None and self.hc_timer.active():
            self.hc_timer.cancel()
        if self.hc_inflight is not None:
            self.hc_inflight.cancel()
        if self.udp is not None:
            self.udp.close()
            self.udp = None
        for c in list(self.conns):
            c.close()
        self.conns.clear()
        self.idle = {"tcp": [], "tcp-tls": []}

    def down(self, maxfails):
        return maxfails != 0 and self.fails > maxfails

    # -- exchanging --------------------------------------------------------------

    def query(self, wire, proto, waiter, now):
        """Send query ``wire`` (``now``: the clock's time); the outcome is
        ``waiter.reply(data, conn)`` or ``waiter.fail(exc, conn)``."""
        if self.stopped or self.reactor is None:
            return waiter.fail(UpstreamError("transport stopped"), None)
        if self.tls is not None:
            proto = "tcp-tls"
        if proto == "udp":
            return self._query_udp(wire, waiter, now)
        return self._query_stream(wire, proto, waiter)

    def _query_udp(self, wire, waiter, now):
        u = self.udp
        if u is not None and (u.dead or self._expired(u, u.created, now)):
            u.retired = True
            if not u.pending:
                u.close()
            u = self.udp = None
        if u is None:
            u = _UDPConn(self, now)
            iface = self.source or ("::" if ":" in self.host else "")
            try:
                u.port = self.reactor.listenUDP(0, u, interface=iface,
                                                maxPacketSize=65535)
                u.port.connect(self.host, self.port)
            except Exception as e:
                if u.port is not None:
                    u.port.stopListening()
                return waiter.fail(UpstreamError(str(e)), None)
            _grow_rcvbuf(u.port)
            self.udp = u
            CONN_MISSES.inc(self.labels_udp)
        else:
            CONN_HITS.inc(self.labels_udp)
        u.query(wire, self.read_timeout, waiter, now)

    def _expired(self, conn, used, now):
        if now - used > self.expire:
            return True
        return self.max_age > 0 and now - conn.created > self.max_age

    def _query_stream(self, wire, proto, waiter):
        now = self.clock()
        idle = self.idle[proto]
        labels = (self.name, self.addr, proto)
        while idle:
            c = idle.pop(0)
            if c.closed or self._expired(c, c.used, now):
                c.close()
                continue
            if c.idle_timer is not None and c.idle_timer.active():
                c.idle_timer.cancel()
            c.reused = True
            CONN_HITS.inc(labels)
            return c.query(wire, self.read_timeout, waiter)
        CONN_MISSES.inc(labels)
        c = _StreamConn(self, proto)
        self.conns.add(c)
        started = now
        dial = self._dial_timeout()
        bind = (self.source, 0) if self.source else None
        fac = _StreamFactory(c)
        if proto == "tcp-tls":
            self.reactor.connectSSL(self.host, self.port, fac, self.tls,
                                    timeout=dial, bindAddress=bind)
        else:
            self.reactor.connectTCP(self.host, self.port, fac, timeout=dial,
                                    bindAddress=bind)

        def connected(conn):
            self.avg_dial += (self.clock() - started - self.avg_dial) / 4
            conn.query(wire, self.read_timeout, waiter)

        def failed(f):
            self.avg_dial += (self.clock() - started - self.avg_dial) / 4
            waiter.fail(f.value, None)
        c.ready.addCallbacks(connected, failed)

    def duration_labels(self, rcode):
        """The label tuple of coredns_proxy_request_duration_seconds for
        ``rcode`` (built once per rcode)."""
        labels = self._dur_labels.get(rcode)
        if labels is None:
            labels = self._dur_labels[rcode] = (self.name, self.addr,
                                                w.rcode_text(rcode))
        return labels

    def _dial_timeout(self):
        avg = self.avg_dial
        if avg < MIN_DIAL:
            return MIN_DIAL
        if avg < MAX_DIAL / 2:
            return 2 * avg
        return MAX_DIAL

    def yield_conn(self, c):
        """A stream connection finished its query: keep it for reuse."""
        if self.stopped or c.closed:
            return
        idle = self.idle[c.proto]
        if self.max_idle and len(idle) >= self.max_idle:
            c.close()
            return
        idle.append(c)
        c.idle_timer = self.reactor.callLater(self.expire, c.close)

    def forget_conn(self, c):
        self.conns.discard(c)
        idle = self.idle.get(c.proto)
        if idle and c in idle:
            idle.remove(c)

    # -- health ------------------------------------------------------------------

    def healthcheck(self):
        """Check now and then every interval until the upstream answers."""
        if self.probing or self.stopped or self.reactor is None:
            return
        self.probing = True
        self._check()

    def _check(self):
        self.hc_timer = None
        if self.stopped:
            self.probing = False
            return
        wire = make_query(self.hc_domain, w.NS, rd=self.hc_rd,
                          msgid=_new_id())
        proto = "tcp-tls" if self.tls is not None else self.hc_proto
        d = exchange(self.reactor, self.host, self.port, wire,
                     "udp" if proto == "udp" else "tcp", HC_TIMEOUT,
                     self.tls if proto == "tcp-tls" else None, self.source)
        self.hc_inflight = d
        d.addCallbacks(self._check_ok, self._check_failed)

    def _check_ok(self, data):
        self.hc_inflight = None
        self.fails = 0
        self.probing = False

    def _check_failed(self, failure):
        self.hc_inflight = None
        if self.stopped:
            self.probing = False
            return
        HC_FAILURES.inc((self.name, self.addr))
        self.fails += 1
        self.hc_timer = self.reactor.callLater(self.hc_interval, self._check)

    def __repr__(self):
        return "<Proxy %s>" % self.addr


# -- the plugin -------------------------------------------------------------------

class Forward(Plugin):
    name = "forward"
    once = False

    def __init__(self):
        self.from_ = "."
        self.ignored = []
        self.proxies = []
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

    # -- life cycle ----------------------------------------------------------------

    def start(self):
        app = self.block.config.app
        self.reactor = app.reactor
        self.clock = getattr(app.reactor, "seconds", app.clock)
        self.taps = tuple(self.block.find(IForwarderTap))
        for p in self.proxies:
            p.start(self.reactor, self.clock)

    def stop(self):
        for p in self.proxies:
            p.stop()

    # -- matching --------------------------------------------------------------------

    def match(self, qname):
        f = self.from_
        if not (f == "." or qname == f or qname.endswith("." + f)):
            return False
        if qname == f:
            return True
        for ig in self.ignored:
            if ig == "." or qname == ig or qname.endswith("." + ig):
                return False
        return True

    def ordered(self):
        """The upstreams in the order the policy tries them."""
        ps = self.proxies
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

    # -- serving -----------------------------------------------------------------

    def serve(self, req):
        if not self.match(req.qname):
            return self.next.serve(req)
        if self.max_concurrent:
            if self.concurrent >= self.max_concurrent:
                MAX_CONCURRENT_REJECTS.inc()
                r = Response(w.REFUSED)
                r.error = "concurrent queries exceeded maximum %d" % (
                    self.max_concurrent)
                return r
            self.concurrent += 1
            d = _Exchange(self, req).run()
            return d.addBoth(self._release)
        return _Exchange(self, req).run()

    def _release(self, result):
        self.concurrent -= 1
        return result

    def proto_for(self, req):
        if self.force_tcp:
            return "tcp"
        if self.prefer_udp:
            return "udp"
        return req.proto


class _Exchange:
    """The attempts for one query (CoreDNS's ServeDNS loop, as callbacks).

    It is the *waiter* of each upstream query: the connection calls
    ``reply`` or ``fail``."""

    __slots__ = ("f", "req", "list", "i", "fails", "failovers", "attempts",
                 "max_attempts", "deadline", "d", "err", "proxy", "proto",
                 "start", "tries", "tstart", "force_tcp")

    def __init__(self, f, req):
        self.f = f
        self.req = req
        self.list = f.ordered()
        self.i = 0
        self.fails = 0
        self.failovers = 0
        self.attempts = 0
        n = len(f.proxies)
        self.max_attempts = 2 * n if f.max_attempts is None else \
            f.max_attempts
        self.deadline = f.clock() + DEADLINE
        self.d = defer.Deferred()
        self.err = None
        self.tries = 0
        self.force_tcp = False
        # dnstap's query time: when forward started on this query.
        self.tstart = time.time_ns() if f.taps else 0

    def run(self):
        self._next()
        return self.d

    def _finish(self, resp):
        if not self.d.called:
            self.d.callback(resp)

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
                if self.fails < len(f.proxies):
                    continue
                HEALTHCHECK_BROKEN.inc()
                if f.failfast:
                    return self._give_up()
                proxy = random.choice(f.proxies)
            break
        self.proxy = proxy
        if self.req.metadata is not None:
            self.req.metadata["forward/upstream"] = proxy.addr
        self.proto = f.proto_for(self.req)
        self._send()

    def _send(self):
        self.tries += 1
        if self.tries > 64:
            # Only reachable when every attempt fails at once (no socket):
            # keep the stack bounded.
            return self._give_up()
        self.start = now = self.f.clock()
        self.proxy.query(self.req.data, self.proto, self, now)

    # -- the waiter interface ------------------------------------------------------

    def fail(self, exc, conn):
        if isinstance(exc, CachedClosed):
            # The peer closed a pooled connection: retry on a fresh one.
            return self._send()
        f = self.f
        if f.taps:
            self._tap(conn, None)
        self.err = _error_text(exc, self.proxy, conn)
        if f.maxfails != 0:
            self.proxy.healthcheck()
        if self.max_attempts:
            self.attempts += 1
            if self.attempts >= self.max_attempts:
                return self._give_up()
        if self.fails < len(f.proxies):
            return self._next()
        return self._give_up()

    def reply(self, data, conn):
        f = self.f
        req = self.req
        proxy = self.proxy
        if len(data) > req.size and conn is not None and conn.proto == "udp":
            # Bigger than the client's buffer, which is CoreDNS's read
            # buffer: it keeps the header and question, sets TC and drops
            # the records (the client retries over TCP).
            data = _truncated(data)
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
        if not _matches(req, data):
            return self._finish(Response(w.FORMERR, plugin="forward"))
        if rcode in f.failover_rcodes:
            self.failovers += 1
            if self.failovers < len(f.proxies):
                return self._next()
        nxt = f.next
        if isinstance(nxt, Forward):
            if rcode in f.next_rcodes or (
                    f.next_on_nodata and rcode == w.NOERROR
                    and data[6:8] == b"\x00\x00"):
                return self._finish_next(nxt)
        self._finish(RawResponse.prebuilt(data, "forward"))

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


def _truncated(data):
    """``data`` cut to its header and question, TC set, no records."""
    try:
        qend = w.skip_name(data, 12) + 4 if data[4:6] == b"\x00\x01" \
            else 12
    except w.FormatError:
        qend = 12
    if qend > len(data):
        qend = 12
    qd = b"\x00\x01" if qend > 12 else b"\x00\x00"
    return (data[:2] + bytes((data[2] | 0x02, data[3])) + qd
            + b"\x00\x00\x00\x00\x00\x00" + data[12:qend])


def _error_text(exc, proxy, conn):
    """The error as CoreDNS's net package words it, with both ends of the
    socket when known ("read udp 127.0.0.1:4242->10.0.0.1:53: i/o
    timeout")."""
    text = str(exc) if isinstance(exc, UpstreamError) else repr(exc)
    local = conn.local() if conn is not None else None
    if local is None:
        return text
    net = "udp" if conn.proto == "udp" else "tcp"
    if text == "connection refused":
        text = "read: connection refused"
    return "read %s %s->%s: %s" % (net, _hostport(*local),
                                   _hostport(proxy.host, proxy.port), text)


def _hostport(host, port):
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


def _matches(req, data):
    """CoreDNS's request.Match: a response with one question whose name
    (any case) and type are the query's."""
    if not data[2] & 0x80 or data[4:6] != b"\x00\x01":
        return False
    qw = req.qwire
    end = 12 + len(qw)
    if data[12:end].lower() == qw.lower():
        return data[end:end + 2] == req.data[req.qend - 4:req.qend - 2]
    try:
        name, off = w.read_name(data, 12)
    except w.FormatError:
        return False
    return (name.lower() == req.qname
            and data[off:off + 2] == req.data[req.qend - 4:req.qend - 2])


# -- setup --------------------------------------------------------------------------

def setup(d, block):
    f = Forward()
    args = list(d.args)
    if len(args) < 2:
        raise d.arg_error()
    zs = names.normalize(args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % args[0])
    if len(zs) > 1:
        logger.warning("forward", "Unsupported CIDR notation: '%s' expands to "
                    "multiple zones. Using only '%s'." % (args[0], zs[0]))
    f.from_ = zs[0]
    opts = _Options()
    for c in d.children:
        _parse_option(d, c, f, opts, block)
    if opts.max_age and opts.max_age < opts.expire:
        raise d.error("max_age (%s) must not be less than expire (%s)"
                      % (format_duration(opts.max_age),
                         format_duration(opts.expire)))
    hosts = []
    for to in args[1:]:
        hosts.extend(_parse_to(d, to))
    seen = []
    for h in hosts:
        if h not in seen:
            seen.append(h)
    if not seen:
        raise d.error("no valid upstream addresses found")
    if len(seen) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d" % (MAX_UPSTREAMS,
                                                          len(seen)))
    for trans, host, port, sni in seen:
        if trans == "tls" and sni and opts.servername:
            raise d.error(
                "both forward ('%s') and proxy level ('%s') TLS servernames "
                "are set for upstream proxy '%s'" % (
                    opts.servername, sni, _label(trans, host, port)))
        p = Proxy(_label("dns", host, port), host, port, trans)
        p.expire = opts.expire
        p.max_age = opts.max_age
        p.max_idle = opts.max_idle
        p.read_timeout = opts.read_timeout
        p.hc_interval = opts.hc_interval
        p.hc_domain = opts.hc_domain
        p.hc_rd = opts.hc_rd
        p.source = opts.source
        if f.force_tcp and trans != "tls":
            p.hc_proto = "tcp"
        if trans == "tls":
            p.servername = sni or opts.servername or host
            p.tls = _tls_options(d, opts, p.servername)
        f.proxies.append(p)
    return f


class _Options:
    def __init__(self):
        self.expire = DEFAULT_EXPIRE
        self.max_age = 0.0
        self.max_idle = 0
        self.read_timeout = DEFAULT_READ_TIMEOUT
        self.hc_interval = HC_INTERVAL
        self.hc_domain = "."
        self.hc_rd = True
        self.source = None
        self.tls_args = None
        self.servername = ""


def _label(trans, host, port):
    h = "[%s]" % host if ":" in host else host
    return ("tls://" if trans == "tls" else "") + "%s:%d" % (h, port)


def _godur(seconds):
    """A duration as Go's time.Duration prints it ("-1s", "1m30s")."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    return format_duration(seconds)


def _duration(d, c, text, what):
    try:
        return parse_duration(text, strict=True)
    except ValueError as e:
        raise c.error(str(e))


def _uint(c, text):
    try:
        n = int(text, 10)
    except ValueError:
        raise c.error('strconv.ParseUint: parsing "%s": invalid syntax' % text)
    if n < 0 or n >= 1 << 32:
        raise c.error('strconv.ParseUint: parsing "%s": invalid syntax' % text)
    return n


def _int(c, text):
    try:
        return int(text, 10)
    except ValueError:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax' % text)


def _rcodes(c, args, failover=False):
    out = []
    for a in args:
        try:
            rc = w.rcode_value(a)
        except ValueError:
            raise c.error("%s is not a valid rcode" % a)
        if failover and rc == w.NOERROR:
            raise c.error("NoError cannot be used in failover")
        out.append(rc)
    return tuple(out)


def _parse_option(d, c, f, o, block):
    name, args = c.name, list(c.args)

    def want(n):
        if len(args) != n:
            raise c.arg_error()

    if name == "except":
        if not args:
            raise c.arg_error()
        for a in args:
            f.ignored.extend(names.normalize(a))
    elif name == "max_fails":
        want(1)
        f.maxfails = _uint(c, args[0])
    elif name == "max_connect_attempts":
        want(1)
        f.max_attempts = _uint(c, args[0])
    elif name == "health_check":
        if not args:
            raise c.arg_error()
        dur = _duration(d, c, args[0], name)
        if dur < 0:
            # Go prints the duration as nanoseconds here (%d).
            raise c.error("health_check can't be negative: %d"
                          % round(dur * 1e9))
        o.hc_interval = dur
        o.hc_domain = "."
        rest = args[1:]
        while rest:
            opt = rest.pop(0)
            if opt == "no_rec":
                o.hc_rd = False
            elif opt == "domain":
                if not rest:
                    raise c.arg_error()
                dom = rest.pop(0)
                if not names.is_domain_name(dom):
                    raise c.error("health_check: invalid domain name %s"
                                  % dom)
                o.hc_domain = names.normalize_name(dom)
            else:
                raise c.error("health_check: unknown option %s" % opt)
    elif name == "force_tcp":
        want(0)
        f.force_tcp = True
    elif name == "prefer_udp":
        want(0)
        f.prefer_udp = True
    elif name == "tls":
        if len(args) > 3:
            raise c.arg_error()
        o.tls_args = [block.path(a) for a in args]
        for a in o.tls_args:
            if not os.path.exists(a):
                raise c.error("open %s: no such file or directory" % a)
    elif name == "tls_servername":
        want(1)
        o.servername = args[0]
    elif name in ("expire", "max_age"):
        want(1)
        dur = _duration(d, c, args[0], name)
        if dur < 0:
            raise c.error("%s can't be negative: %s" % (name, _godur(dur)))
        setattr(o, name, dur)
    elif name == "max_idle_conns":
        want(1)
        n = _int(c, args[0])
        if n < 0:
            raise c.error("max_idle_conns can't be negative: %d" % n)
        o.max_idle = n
    elif name == "read_timeout":
        want(1)
        dur = _duration(d, c, args[0], name)
        if dur <= 0:
            raise c.error("read_timeout must be positive: %s"
                          % _godur(dur))
        o.read_timeout = dur
    elif name == "policy":
        if not args:
            raise c.arg_error()
        if args[0] not in ("random", "round_robin", "sequential"):
            raise c.error("unknown policy '%s'" % args[0])
        f.policy = args[0]
    elif name == "max_concurrent":
        want(1)
        n = _int(c, args[0])
        if n < 0:
            raise c.error("max_concurrent can't be negative: %d" % n)
        f.max_concurrent = n
    elif name == "next":
        if not args:
            raise c.arg_error()
        f.next_rcodes = f.next_rcodes + _rcodes(c, args)
    elif name == "next_on_nodata":
        want(0)
        f.next_on_nodata = True
    elif name == "failfast_all_unhealthy_upstreams":
        want(0)
        f.failfast = True
    elif name == "failover":
        if not args:
            raise c.arg_error()
        f.failover_rcodes = f.failover_rcodes + _rcodes(c, args, True)
    elif name == "source_address":
        want(1)
        try:
            ip = ipaddress.ip_address(args[0])
            # An IPv4-mapped address binds as the IPv4 address (Go's net.IP).
            o.source = str(getattr(ip, "ipv4_mapped", None) or ip)
        except ValueError:
            raise c.error("invalid IP address: %s" % args[0])
    elif name in ("doh_method", "resolver"):
        raise c.error("%s: not supported yet" % name)
    else:
        raise c.error("unknown property '%s'" % name)


def _parse_to(d, to):
    """(transport, host, port, servername) tuples for one TO argument."""
    trans, rest = names.split_transport(to)
    if trans not in ("dns", "tls"):
        if trans == "https":
            raise d.error("https:// upstreams: not supported yet")
        raise d.error("'%s' is not supported as a destination protocol in "
                      "forward: %s" % (trans, to))
    if not rest:
        raise d.error('invalid address: "%s"' % to)
    sni = ""
    if trans == "tls" and "%" in rest:
        pct = rest.rfind("%")
        host_part, tail = rest[:pct], rest[pct + 1:]
        if ":" in tail:
            colon = tail.rfind(":")
            sni, port_part = tail[:colon].rstrip("]"), tail[colon:]
            rest = host_part + ("]" if host_part.startswith("[") else "") \
                + port_part
        else:
            sni = tail
            rest = host_part + ("]" if host_part.startswith("[") else "")
    default = 853 if trans == "tls" else 53
    host, port = _split_host_port(rest)
    if host is None or not _is_ip(host):
        # Not an address: a resolv.conf-style file.
        path = rest
        if not os.path.isfile(path):
            if _looks_like_hostname(rest):
                raise d.error("hostname upstreams (%s): not supported yet"
                              % to)
            raise d.error('not an IP address or file "%s"' % rest)
        return [("dns", h, p, "") for h, p in _resolv_conf(d, path)]
    return [(trans, host, int(port) if port else default, sni)]


def _split_host_port(s):
    if s.startswith("["):
        end = s.find("]")
        if end == -1:
            return None, None
        host = s[1:end]
        rest = s[end + 1:]
        if rest.startswith(":") and rest[1:].isdigit():
            return host, rest[1:]
        return (host, None) if not rest else (None, None)
    if s.count(":") == 1:
        h, p = s.split(":")
        if p.isdigit():
            return h, p
        return None, None
    return s, None


def _is_ip(s):
    try:
        ipaddress.ip_address(s.split("%")[0])
        return True
    except ValueError:
        return False


def _looks_like_hostname(s):
    return "/" not in s and names.is_domain_name(s.split(":")[0])


def _resolv_conf(d, path):
    """The nameserver lines of a resolv.conf (port 53)."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    host = parts[1].split("%")[0]
                    if _is_ip(host):
                        out.append((host, 53))
    except OSError as e:
        raise d.error('failed to open file "%s": %s' % (path, e))
    return out


def _tls_options(d, o, servername):
    """Twisted client TLS options: CoreDNS's tls argument forms, TLS 1.2 at
    least, the server certificate verified against ``servername``."""
    from twisted.internet import ssl
    args = o.tls_args or []
    trust = None
    client = None
    try:
        if len(args) in (1, 3):
            with open(args[-1], "rb") as fh:
                trust = ssl.trustRootFromCertificates(
                    [ssl.Certificate.loadPEM(c) for c in _pem_blocks(
                        fh.read())])
        if len(args) >= 2:
            with open(args[0], "rb") as fh:
                cert = fh.read()
            with open(args[1], "rb") as fh:
                key = fh.read()
            client = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)
    except Exception as e:
        raise d.error("tls: %s" % e)
    return ssl.optionsForClientTLS(
        servername, trustRoot=trust, clientCertificate=client,
        extraCertificateOptions={"raiseMinimumTo": ssl.TLSVersion.TLSv1_2})


def _pem_blocks(data):
    marker = b"-----END CERTIFICATE-----"
    out = []
    for part in data.split(marker):
        if b"-----BEGIN CERTIFICATE-----" in part:
            out.append(part.strip() + b"\n" + marker + b"\n")
    if not out:
        raise ValueError("no certificates found")
    return out
