"""The core DNS metric families (CoreDNS's plugin/metrics/vars).

``report`` is called by the prometheus plugin for every answered query and
by the server for queries no block takes (zone "dropped").
"""

from corednstw import COREDNS_VERSION
from corednstw import dnswire as w
from corednstw import metrics

DROPPED = "dropped"

REQUESTS = metrics.counter(
    "coredns_dns_requests_total",
    "Counter of DNS requests made per zone, protocol and family.",
    ("server", "zone", "view", "proto", "family", "type"))
DURATION = metrics.histogram(
    "coredns_dns_request_duration_seconds",
    "Histogram of the time (in seconds) each request took per zone.",
    ("server", "zone", "view"), metrics.TIME_BUCKETS)
REQUEST_SIZE = metrics.histogram(
    "coredns_dns_request_size_bytes",
    "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.",
    ("server", "zone", "view", "proto"), metrics.SIZE_BUCKETS)
DO_REQUESTS = metrics.counter(
    "coredns_dns_do_requests_total",
    "Counter of DNS requests with DO bit set per zone.",
    ("server", "zone", "view"))
RESPONSE_SIZE = metrics.histogram(
    "coredns_dns_response_size_bytes",
    "Size of the returned response in bytes.",
    ("server", "zone", "view", "proto"), metrics.SIZE_BUCKETS)
RESPONSES = metrics.counter(
    "coredns_dns_responses_total", "Counter of response status codes.",
    ("server", "zone", "view", "rcode", "plugin"))
PANICS = metrics.counter(
    "coredns_panics_total",
    "A metrics that counts the number of panics.")
PLUGIN_ENABLED = metrics.gauge(
    "coredns_plugin_enabled",
    "A metric that indicates whether a plugin is enabled on per server and "
    "zone basis.", ("server", "zone", "view", "name"))
BUILD_INFO = metrics.gauge(
    "coredns_build_info",
    "A metric with a constant '1' value labeled by version, revision, and "
    "goversion from which CoreDNS was built.",
    ("version", "revision", "goversion"))
BUILD_INFO.set((COREDNS_VERSION, "corednstw", "python"), 1)

# Types CoreDNS labels by name; everything else is "other".
_MONITORED = frozenset((w.AAAA, w.A, w.CNAME, w.DNSKEY, w.DS, w.MX, w.NSEC3,
                        w.NSEC, w.NS, w.PTR, w.RRSIG, w.SOA, w.SRV, w.TXT,
                        w.HTTPS, w.SVCB, w.IXFR, w.AXFR, w.ANY))
TYPE_LABEL = {t: w.type_text(t) for t in _MONITORED}


def type_label(qtype):
    return TYPE_LABEL.get(qtype, "other")


def report(server, req, zone, view, rcode, plugin, size, duration):
    """Count one answered query in every core family."""
    proto = req.proto
    if req.edns is not None and req.edns.ttl & 0x8000:
        DO_REQUESTS.inc((server, zone, view))
    REQUESTS.inc((server, zone, view, proto, "2" if req.family == 2 else "1",
                  TYPE_LABEL.get(req.qtype, "other")))
    DURATION.observe((server, zone, view), duration)
    pv = (server, zone, view, proto)
    RESPONSE_SIZE.observe(pv, size)
    REQUEST_SIZE.observe(pv, len(req.data))
    RESPONSES.inc((server, zone, view, w.rcode_text(rcode), plugin))
