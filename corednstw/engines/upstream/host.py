"""One upstream (CoreDNS's proxy.Proxy): its UDP socket, its pools of TCP
and TLS connections (or, for DNS over HTTPS, its HTTP client), and its
health.

A failed exchange starts the health check (``. IN NS`` by default, every
``hc_interval`` until it answers); each failed check counts in
``fails``, and ``down(maxfails)`` tells the plugin to skip the upstream.
The metric families are CoreDNS's ``coredns_proxy_*``, labelled with the
owning plugin's name (``proxy_name``).
"""

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.request import make_query
from corednstw.engines.upstream.conn import (
    StreamConn,
    StreamFactory,
    UDPConn,
)
from corednstw.engines.upstream.errors import UpstreamError
from corednstw.engines.upstream.exchange import exchange
from corednstw.engines.upstream.ids import new_id
from corednstw.engines.upstream.replies import readable

DEFAULT_EXPIRE = 10.0
DEFAULT_READ_TIMEOUT = 2.0
HC_INTERVAL = 0.5
HC_TIMEOUT = 1.0
MIN_DIAL, MAX_DIAL = 1.0, 30.0

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


class Upstream:
    """One upstream: its sockets, connection pool and health."""

    def __init__(self, addr, host, port, transport="dns", name="forward"):
        self.addr = addr            # the metrics label, "IP:port"
        self.host = host
        self.port = port
        self.transport = transport  # "dns", "tls" or "https"
        self.doh_method = "POST"    # DNS over HTTPS: "GET" or "POST"
        self.doh = None             # the DoHClient of an https upstream
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
        self.labels_https = (name, addr, "https")
        self._dur_labels = {}

    def start(self, reactor, clock):
        self.reactor = reactor
        self.clock = clock
        self.stopped = False
        if self.transport == "https":
            # Only https:// upstreams need the HTTP/2 client.
            from corednstw.engines.upstream.https import DoHClient
            self.doh = DoHClient(self, self.doh_method)
            self.doh.start(reactor)

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
        if self.doh is not None:
            doh, self.doh = self.doh, None
            return doh.stop()
        return None

    def down(self, maxfails):
        return maxfails != 0 and self.fails > maxfails

    # -- exchanging -----------------------------------------------------------

    def query(self, wire, proto, waiter, now):
        """Send query ``wire`` (``now``: the clock's time); the outcome is
        ``waiter.reply(data, conn)`` or ``waiter.fail(exc, conn)``."""
        if self.stopped or self.reactor is None:
            return waiter.fail(UpstreamError("transport stopped"), None)
        if self.doh is not None:
            return self._query_https(wire, waiter)
        if self.tls is not None:
            proto = "tcp-tls"
        if proto == "udp":
            return self._query_udp(wire, waiter, now)
        return self._query_stream(wire, proto, waiter)

    def _query_udp(self, wire, waiter, now):
        """A UDP query on a pooled socket (a connection cache hit) or a
        new one (a miss, as CoreDNS counts a query that dials)."""
        u = self.udp
        if u is None:
            u = self.udp = UDPConn(self, now)
        if u.query(wire, self.read_timeout, waiter, now):
            CONN_HITS.inc(self.labels_udp)
        else:
            CONN_MISSES.inc(self.labels_udp)

    def _query_https(self, wire, waiter):
        """One query over DNS over HTTPS, whatever the client's transport
        (CoreDNS's lookupDoH)."""
        doh = self.doh
        d = doh.fetch(wire, self.read_timeout)
        if doh.reused:
            CONN_HITS.inc(self.labels_https)
        else:
            CONN_MISSES.inc(self.labels_https)
        conn = doh.conn
        d.addCallbacks(waiter.reply, lambda f: waiter.fail(f.value, conn),
                       callbackArgs=(conn,))

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
        c = StreamConn(self, proto)
        self.conns.add(c)
        started = now
        dial = self.dial_timeout()
        bind = (self.source, 0) if self.source else None
        fac = StreamFactory(c)
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

    def dial_timeout(self):
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

    # -- health ---------------------------------------------------------------

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
                          msgid=new_id())
        if self.doh is not None:
            # CoreDNS's DoH health check: the same query, always POSTed.
            d = self.doh.fetch(wire, HC_TIMEOUT, "POST")
            d.addCallback(_unpackable)
            self.hc_inflight = d
            d.addCallbacks(self._check_ok, self._check_failed)
            return
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
        return "<Upstream %s>" % self.addr


def start_all(upstreams, reactor, clock):
    """Start every upstream's connections and health checks."""
    for p in upstreams:
        p.start(reactor, clock)


def stop_all(upstreams):
    """Stop every upstream; a Deferred when one closes later, else None
    (a plugin's ``stop`` returns it)."""
    ds = [p.stop() for p in upstreams]
    ds = [d for d in ds if isinstance(d, defer.Deferred)]
    return defer.DeferredList(ds) if ds else None


def _unpackable(data):
    """A health check's answer must be a DNS message (any rcode)."""
    if not readable(data):
        raise UpstreamError("malformed reply")
    return data
