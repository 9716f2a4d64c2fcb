"""Plain counters keyed by label tuples, exported by one collector.

prometheus_client's ``labels()`` costs a lock and a dict walk per call; on
the query path we only bump a dict entry.  Every family registers here once
(at import) and ``Collector`` turns them into prometheus_client families at
scrape time.  Names, labels and buckets are CoreDNS's so dashboards keep
working.
"""

import bisect
import time

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)

_FAMILIES = {}


class Counter:
    """A counter family: ``inc(labels)`` with a tuple of label values."""

    kind = "counter"

    def __init__(self, name, help, labels=()):
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.values = {}
        self.always = not labels

    def inc(self, labels=(), n=1):
        v = self.values
        v[labels] = v.get(labels, 0) + n

    def get(self, labels=()):
        return self.values.get(labels, 0)

    def remove(self, labels):
        self.values.pop(labels, None)

    def family(self):
        fam = CounterMetricFamily(self.name, self.help, labels=self.labels)
        vals = self.values
        if self.always and not vals:
            vals = {(): 0}
        for k, v in vals.items():
            fam.add_metric(k, v)
        return fam


class Gauge(Counter):
    """A gauge family; ``set`` as well as ``inc``.  ``fn`` makes it computed
    at scrape time (for values other code owns)."""

    kind = "gauge"

    def __init__(self, name, help, labels=(), fn=None):
        super().__init__(name, help, labels)
        self.fn = fn
        self.always = not labels and fn is None

    def set(self, labels, value):
        self.values[labels] = value

    def family(self):
        fam = GaugeMetricFamily(self.name, self.help, labels=self.labels)
        vals = self.fn() if self.fn is not None else self.values
        if self.always and not vals:
            vals = {(): 0}
        for k, v in vals.items():
            fam.add_metric(k, v)
        return fam


class Histogram:
    """A histogram family; ``observe(labels, value)``.

    Per label tuple we keep a list: one count per bucket (non-cumulative),
    then +Inf, then the sum.
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
            cell = self.values[labels] = [0] * (len(self.buckets) + 1) + [0.0]
        cell[bisect.bisect_left(self.buckets, value)] += 1
        cell[-1] += value

    def count(self, labels):
        cell = self.values.get(labels)
        return sum(cell[:-1]) if cell else 0

    def remove(self, labels):
        self.values.pop(labels, None)

    def family(self):
        fam = HistogramMetricFamily(self.name, self.help, labels=self.labels)
        for k, cell in self.values.items():
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


def counter(name, help, labels=()):
    """The counter family ``name`` (created once, shared afterwards)."""
    return _register(Counter(name, help, labels))


def gauge(name, help, labels=(), fn=None):
    return _register(Gauge(name, help, labels, fn))


def histogram(name, help, labels, buckets):
    return _register(Histogram(name, help, labels, buckets))


def families():
    return _FAMILIES


class Collector:
    """The one prometheus_client collector for all our families."""

    def collect(self):
        for fam in list(_FAMILIES.values()):
            yield fam.family()

    def describe(self):
        return []


def exponential(start, factor, count):
    return [start * factor ** i for i in range(count)]


#: CoreDNS's plugin.TimeBuckets and SlimTimeBuckets.
TIME_BUCKETS = exponential(0.00025, 2, 16)
SLIM_TIME_BUCKETS = exponential(0.00025, 10, 5)
SIZE_BUCKETS = (0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3,
                32e3, 48e3, 64e3)

now = time.monotonic
