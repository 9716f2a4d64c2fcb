"""The upstream engine: sending DNS queries to upstream servers over UDP,
TCP, DNS-over-TLS and DNS-over-HTTPS (CoreDNS's plugin/pkg/proxy).

Modules:

``ids``
    random message IDs, drawn from the OS in batches (``new_id``).
``conn``
    the connections to one upstream: ``UDPConn`` (a pool of connected
    sockets, ``UDPQuery``, one query in flight on each, at most
    ``MAX_USES`` queries per socket so the source port keeps changing;
    the sockets watched by one epoll set of the upstream's, itself one
    reader of the reactor; one timer for all of an upstream's queries,
    one for the idle sockets' expiry) and ``StreamConn`` (TCP or TLS, one
    query at a time, pooled).
``https``
    ``DoHClient``, the HTTP side of an ``https://`` upstream: twisted.web's
    Agent over a persistent pool (HTTP/1.1 keep-alive), POST or GET,
    answers checked (status, content type, size) and timed out.
``proxy``
    ``Upstream``, one upstream: it picks or opens the connection for a query,
    holds the pools' settings (``expire``, ``max_age``, ``max_idle``), runs
    the health check after a failure and counts failed checks
    (``down(maxfails)``); the ``coredns_proxy_*`` metric families.
``exchange``
    ``exchange()``, one query on a fresh socket returning a Deferred:
    health checks, the loop plugin's probes, tests.
``replies``
    checks on an upstream's reply (``matches``: the question is the
    query's), the TC-only cut of a reply too big for the client
    (``truncated``), and ``relay``: the plain reply checked and made the
    client's answer in one walk.
``addresses``
    the TO addresses of forward and grpc (``split_host_port``, ``is_ip``,
    the nameservers of a resolv.conf named in their place) and the
    ``POLICIES`` ordering the upstreams.
``errors``
    ``UpstreamError`` (an attempt failed), ``CachedClosed`` (a pooled
    connection the peer had closed: retry at no cost) and ``error_text``
    (the error worded as CoreDNS's net package does).

How a plugin uses it: the plugin builds one ``Upstream`` per upstream at
setup (``Upstream(label, host, port, transport, name)``, then its options as
attributes: ``read_timeout``, ``expire``, ``tls``...), calls
``start(reactor, clock)`` and ``stop()`` with its own life cycle, and for
every attempt of a client query calls ``proxy.query(wire, proto, waiter,
now)``.  The waiter is the plugin's per-query object; the connection calls
``waiter.reply(data, conn)`` with the upstream's bytes (carrying our
message ID: the server puts the client's back) or ``waiter.fail(exc,
conn)``.  No Deferred is made per upstream query.  Choosing among
upstreams, retries, failover and the answer to the client stay in the
plugin.

``forward`` is the first user: its ``_Query`` is the waiter, it walks
its upstreams in policy order, skips those ``down``, retries on
``CachedClosed``, calls ``healthcheck()`` after a failure, observes
``REQUEST_DURATION`` and hands the reply bytes on unchanged.  ``proxy``
(the plugin of CoreDNS 1.0-1.4) will use the same ``Upstream`` with its own
policies and health-check settings, under its own ``proxy_name`` label;
``grpc`` will reuse the message IDs, ``replies`` and the error wording
around its own HTTP/2 transport, and ``exchange()`` serves any plugin
that needs a single query.
"""

from corednstw.engines.upstream.conn import (
    StreamConn,
    StreamFactory,
    UDPConn,
    UDPQuery,
    local_end,
)
from corednstw.engines.upstream.errors import (
                                               CachedClosed,
                                               UpstreamError,
                                               error_text,
                                               hostport,
)
from corednstw.engines.upstream.exchange import exchange
from corednstw.engines.upstream.host import (
                                               CONN_HITS,
                                               CONN_MISSES,
                                               DEFAULT_EXPIRE,
                                               DEFAULT_READ_TIMEOUT,
                                               HC_FAILURES,
                                               HC_INTERVAL,
                                               HC_TIMEOUT,
                                               MAX_DIAL,
                                               MIN_DIAL,
                                               REQUEST_DURATION,
                                               Upstream,
    start_all,
    stop_all,
)
from corednstw.engines.upstream.ids import IDs, new_id
from corednstw.engines.upstream.replies import (
                                               matches,
                                               readable,
                                               relay,
                                               truncated,
)

__all__ = [
    "start_all", "stop_all",
    "CONN_HITS", "CONN_MISSES", "CachedClosed", "DEFAULT_EXPIRE",
    "DEFAULT_READ_TIMEOUT", "HC_FAILURES", "HC_INTERVAL", "HC_TIMEOUT",
    "IDs", "MAX_DIAL", "MIN_DIAL", "Upstream", "REQUEST_DURATION",
    "StreamConn", "StreamFactory", "UDPConn", "UDPQuery",
    "UpstreamError", "error_text", "exchange", "hostport",
    "local_end", "matches", "new_id", "readable", "relay", "truncated",
]
