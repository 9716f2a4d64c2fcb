"""Plain counters keyed by label tuples, exported by one collector.

prometheus_client's ``labels()`` costs a lock and a dict walk per call; on
the query path we only bump a dict entry.  Every family registers here once
(at import) and ``Collector`` turns them into prometheus_client families at
scrape time (prometheus_client itself is imported then, by the first
scrape: a server never scraped does not pay for it at start-up).  Names,
labels and buckets are CoreDNS's so dashboards keep working.  The core
DNS families (requests, durations, sizes, rcodes, panics, build info) are
defined at the end.
"""

import bisect
import time

from corednstw import COREDNS_VERSION
from corednstw.core import dnswire as w

_FAMILIES = {}


class Counter:
    """A counter family: ``inc(labels)`` with a tuple of label values.
    ``fn`` makes it computed at scrape time from other families (a total
    that is the sum of counters already kept costs the query path
    nothing)."""

    kind = "counter"

    def __init__(self, name, help, labels=(), fn=None):
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.values = {}
        self.fn = fn
        self.always = not labels and fn is None

    def inc(self, labels=(), n=1):
        v = self.values
        v[labels] = v.get(labels, 0) + n

    def get(self, labels=()):
        return self.current().get(labels, 0)

    def remove(self, labels):
        self.values.pop(labels, None)

    def current(self):
        """The values a scrape shows now (computed ones included)."""
        return self.fn() if self.fn is not None else self.values

    def merge(self, total, values):
        """Add ``values`` (another process's) into ``total``."""
        for k, v in values.items():
            total[k] = total.get(k, 0) + v

    def family(self, values=None):
        """The prometheus_client family of ``values`` (default: ours)."""
        from prometheus_client.core import CounterMetricFamily
        fam = CounterMetricFamily(self.name, self.help, labels=self.labels)
        vals = self.current() if values is None else values
        if self.always and not vals:
            vals = {(): 0}
        for k, v in vals.items():
            fam.add_metric(k, v)
        return fam


class Gauge(Counter):
    """A gauge family; ``set`` as well as ``inc``.  ``fn`` makes it computed
    at scrape time (for values other code owns)."""

    kind = "gauge"

    def __init__(self, name, help, labels=(), fn=None, merge="max"):
        super().__init__(name, help, labels, fn)
        #: How the values of several processes combine: "max" (states
        #: every process holds alike: enabled, version, timestamps) or
        #: "sum" (sizes each holds apart, such as cache entries).
        self.combine = merge

    def set(self, labels, value):
        self.values[labels] = value

    def merge(self, total, values):
        if self.combine == "sum":
            Counter.merge(self, total, values)
            return
        for k, v in values.items():
            old = total.get(k)
            total[k] = v if old is None or v > old else old

    def family(self, values=None):
        from prometheus_client.core import GaugeMetricFamily
        fam = GaugeMetricFamily(self.name, self.help, labels=self.labels)
        vals = self.current() if values is None else values
        if self.always and not vals:
            vals = {(): 0}
        for k, v in vals.items():
            fam.add_metric(k, v)
        return fam


class Histogram:
    """A histogram family; ``observe(labels, value)``.

    Per label tuple we keep a list: one count per bucket (non-cumulative),
    then +Inf, then the sum.  Cells are dropped with ``remove`` (or
    ``reset``), never from ``values`` directly: ``report`` keeps the
    core families' cells.
    """

    kind = "histogram"

    def __init__(self, name, help, labels, buckets):
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.buckets = tuple(float(b) for b in buckets)
        self.values = {}

    def observe(self, labels, value):
        cell = self.values.get(labels)
        if cell is None:
            cell = self.cell(labels)
        cell[bisect.bisect_left(self.buckets, value)] += 1
        cell[-1] += value

    def cell(self, labels):
        """The counts of ``labels``, made on first use."""
        cell = self.values.get(labels)
        if cell is None:
            cell = self.values[labels] = [0] * (len(self.buckets) + 1) + [0.0]
        return cell

    def count(self, labels):
        cell = self.values.get(labels)
        return sum(cell[:-1]) if cell else 0

    def remove(self, labels):
        self.values.pop(labels, None)
        _KEYS.clear()   # report's cells of the core families

    def current(self):
        return self.values

    def merge(self, total, values):
        for k, cell in values.items():
            acc = total.get(k)
            total[k] = list(cell) if acc is None else [
                a + b for a, b in zip(acc, cell)]

    def family(self, values=None):
        from prometheus_client.core import HistogramMetricFamily
        fam = HistogramMetricFamily(self.name, self.help, labels=self.labels)
        vals = self.values if values is None else values
        for k, cell in vals.items():
            acc = 0
            bks = []
            for b, c in zip(self.buckets, cell):
                acc += c
                bks.append((_le(b), acc))
            acc += cell[len(self.buckets)]
            bks.append(("+Inf", acc))
            fam.add_metric(k, bks, cell[-1])
        return fam


def _le(b):
    """Bucket bound as Go's client prints it (1 not 1.0, 0.00025, 16000)."""
    return repr(b) if b != int(b) else str(int(b))


def _register(fam):
    old = _FAMILIES.get(fam.name)
    if old is not None:
        return old
    _FAMILIES[fam.name] = fam
    return fam


def register(fam):
    """Show a family declared but not yet registered (``RELOAD_FAILED``):
    returns the family registered under its name."""
    return _register(fam)


def counter(name, help, labels=(), fn=None):
    """The counter family ``name`` (created once, shared afterwards)."""
    return _register(Counter(name, help, labels, fn))


def gauge(name, help, labels=(), fn=None, merge="max"):
    return _register(Gauge(name, help, labels, fn, merge))


def histogram(name, help, labels, buckets):
    return _register(Histogram(name, help, labels, buckets))


def families():
    return _FAMILIES


class Collector:
    """The one prometheus_client collector for all our families.

    ``values``, when set, replaces what the families hold: a multisocket
    supervisor sets the sum of its workers' snapshots for one scrape."""

    values = None

    def collect(self):
        values = self.values
        for fam in list(_FAMILIES.values()):
            if values is None:
                yield fam.family()
            else:
                yield fam.family(values.get(fam.name, {}))

    def describe(self):
        return []


def snapshot():
    """Every family's values as plain data, {name: {labels: value}}: what
    a multisocket worker sends its supervisor for a scrape."""
    out = {}
    for name, fam in _FAMILIES.items():
        vals = fam.current()
        if vals:
            out[name] = dict(vals)
    return out


def merge(total, snap, gauges=True):
    """Add the snapshot ``snap`` into ``total`` (counters and histograms
    summed, gauges as each family combines them; ``gauges`` False leaves
    them out: what a process that is gone keeps contributing)."""
    for name, vals in snap.items():
        fam = _FAMILIES.get(name)
        if fam is None or (not gauges and fam.kind == "gauge"):
            continue
        fam.merge(total.setdefault(name, {}), vals)
    return total


def reset():
    """Forget every value held (computed gauges stay): a process forked
    from another starts counting from zero, so that its snapshots add to
    its parent's without counting anything twice."""
    for fam in _FAMILIES.values():
        fam.values.clear()
    _KEYS.clear()


def exponential(start, factor, count):
    return [start * factor ** i for i in range(count)]


#: CoreDNS's plugin.TimeBuckets and SlimTimeBuckets.
TIME_BUCKETS = exponential(0.00025, 2, 16)
SLIM_TIME_BUCKETS = exponential(0.00025, 10, 5)
SIZE_BUCKETS = (0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3,
                32e3, 48e3, 64e3)

now = time.monotonic


# The core DNS families (CoreDNS's plugin/metrics/vars) ------------------
#
# ``report`` is called by the prometheus plugin for every answered query and
# by the server for queries no block takes (zone "dropped").

DROPPED = "dropped"


REQUESTS = counter(
    "coredns_dns_requests_total",
    "Counter of DNS requests made per zone, protocol and family.",
    ("server", "zone", "view", "proto", "family", "type"))
DURATION = histogram(
    "coredns_dns_request_duration_seconds",
    "Histogram of the time (in seconds) each request took per zone.",
    ("server", "zone", "view"), TIME_BUCKETS)
REQUEST_SIZE = histogram(
    "coredns_dns_request_size_bytes",
    "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and "
    "protocol.",
    ("server", "zone", "view", "proto"), SIZE_BUCKETS)
DO_REQUESTS = counter(
    "coredns_dns_do_requests_total",
    "Counter of DNS requests with DO bit set per zone.",
    ("server", "zone", "view"))
RESPONSE_SIZE = histogram(
    "coredns_dns_response_size_bytes",
    "Size of the returned response in bytes.",
    ("server", "zone", "view", "proto"), SIZE_BUCKETS)
RESPONSES = counter(
    "coredns_dns_responses_total", "Counter of response status codes.",
    ("server", "zone", "view", "rcode", "plugin"))
PANICS = counter(
    "coredns_panics_total",
    "A metrics that counts the number of panics.")
PLUGIN_ENABLED = gauge(
    "coredns_plugin_enabled",
    "A metric that indicates whether a plugin is enabled on per server and "
    "zone basis.", ("server", "zone", "view", "name"))
BUILD_INFO = gauge(
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



#: What ``report`` updates, by the labels it is made of (the query type
#: as a number): the label tuples of the counters and the histograms'
#: cells, built once per combination.  Bounded (emptied when full: an
#: odd query type each time must not grow it); emptied too when a
#: histogram's cells are dropped (``reset``, ``Histogram.remove``), so
#: that no cell kept here has left its family.
_KEYS = {}
KEYS_KEPT = 4096


def _keys(server, zone, view, proto, family, qtype, rcode, plugin):
    """(requests, responses, server-zone-view) label tuples, then the
    cells of the duration, response size and request size histograms."""
    svz = (server, zone, view)
    pv = svz + (proto,)
    return ((server, zone, view, proto, "2" if family == 2 else "1",
             TYPE_LABEL.get(qtype, "other")),
            (server, zone, view, w.rcode_text(rcode), plugin), svz,
            DURATION.cell(svz), RESPONSE_SIZE.cell(pv),
            REQUEST_SIZE.cell(pv))


def report(server, req, zone, view, rcode, plugin, size, duration):
    """Count one answered query in every core family.

    On every answered query's path: the label tuples and the histograms'
    cells come from a cache (building five tuples and two label texts
    per query was a fifth of this function's time, looking the three
    cells up by their tuples another quarter).
    """
    k = (server, zone, view, req.proto, req.family, req.qtype, rcode,
         plugin)
    keys = _KEYS.get(k)
    if keys is None:
        if len(_KEYS) >= KEYS_KEPT:
            _KEYS.clear()
        keys = _KEYS[k] = _keys(*k)
    rq, rs, svz, cell, rscell, rqcell = keys
    edns = req.edns
    if edns is not None and edns.ttl & 0x8000:
        DO_REQUESTS.inc(svz)
    # Counter.inc and Histogram.observe written out: five calls per
    # query were a third of this function's time.
    v = _REQUESTS_V
    v[rq] = v.get(rq, 0) + 1
    v = _RESPONSES_V
    v[rs] = v.get(rs, 0) + 1
    cell[_bisect(_TIME_BOUNDS, duration)] += 1
    cell[-1] += duration
    rscell[_bisect(_SIZE_BOUNDS, size)] += 1
    rscell[-1] += size
    size = len(req.data)
    rqcell[_bisect(_SIZE_BOUNDS, size)] += 1
    rqcell[-1] += size


# The dicts and bounds ``report`` updates, as module globals (the families'
# ``values`` are never replaced, only updated).
_REQUESTS_V = REQUESTS.values
_RESPONSES_V = RESPONSES.values
_TIME_BOUNDS = DURATION.buckets
# The size buckets as ints (every bound is a whole number): sizes are
# ints, and bisect's int-to-int comparisons cost half its int-to-float
# ones; the bucket found is the same.
_SIZE_BOUNDS = tuple(int(b) for b in RESPONSE_SIZE.buckets)
assert _SIZE_BOUNDS == RESPONSE_SIZE.buckets == REQUEST_SIZE.buckets
_bisect = bisect.bisect_left


#: Failed reloads, counted by the service (SIGUSR1 or the reload plugin);
#: registered, hence shown, once something reloads or a reload plugin is
#: configured, as CoreDNS registers it with the reload plugin.
RELOAD_FAILED = Counter("coredns_reload_failed_total",
                        "Counter of the number of failed reload attempts.")
