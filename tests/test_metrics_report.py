"""metrics.report: the core DNS families counted per answered query, with
its kept label tuples and histogram cells, against the families' own
``inc`` and ``observe`` (also across ``reset``, a histogram's ``remove``
and a full cache)."""

import copy
import random

from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.request import Request, make_query

FAMILIES = (metrics.REQUESTS, metrics.RESPONSES, metrics.DO_REQUESTS,
            metrics.DURATION, metrics.RESPONSE_SIZE, metrics.REQUEST_SIZE)


def request(name, qtype, proto, client, do):
    req = Request(make_query(name, qtype, edns=1232 if do else None,
                             do=do), client, 1, proto, None, "x")
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req


def expected(server, req, zone, view, rcode, plugin, size, duration,
             into):
    """What report must add, by the families' own calls on copies."""
    rq, rs, do, dur, rsz, rqz = into
    proto = req.proto
    fam = "2" if req.family == 2 else "1"
    rq.inc((server, zone, view, proto, fam,
            metrics.TYPE_LABEL.get(req.qtype, "other")))
    rs.inc((server, zone, view, w.rcode_text(rcode), plugin))
    if req.do:
        do.inc((server, zone, view))
    dur.observe((server, zone, view), duration)
    rsz.observe((server, zone, view, proto), size)
    rqz.observe((server, zone, view, proto), len(req.data))


class ReportTest(unittest.TestCase):

    def setUp(self):
        # Every family (reset empties them all), as it was.
        saved = {f: copy.deepcopy(f.values)
                 for f in metrics.families().values()}

        def restore():
            for f, v in saved.items():
                f.values.clear()
                f.values.update(v)
            metrics._KEYS.clear()
        self.addCleanup(restore)
        for f in FAMILIES:
            f.values.clear()
        metrics._KEYS.clear()
        self.model = [copy.copy(f) for f in FAMILIES]
        for m in self.model:
            m.values = {}

    def check(self):
        for f, m in zip(FAMILIES, self.model):
            self.assertEqual(f.values, m.values, f.name)

    def test_against_the_families_own_calls(self):
        rnd = random.Random(7)
        reqs = [request(n, t, p, c, do)
                for n in ("a.example.org.", "B.example.org.")
                for t in (w.A, w.AAAA, w.MX, 99, 4242)
                for p in ("udp", "tcp")
                for c in ("127.0.0.1", "::1")
                for do in (False, True)]
        for step in range(3000):
            req = rnd.choice(reqs)
            args = ("dns://:53", req, rnd.choice(["example.org.", "."]),
                    rnd.choice(["", "v"]), rnd.choice([0, 2, 3]),
                    rnd.choice(["file", ""]), rnd.choice([
                        rnd.randrange(0, 70000),
                        int(rnd.choice(metrics.SIZE_BUCKETS))
                        + rnd.choice((-1, 0, 1))]),
                    rnd.random() / 10)
            metrics.report(*args)
            expected(*args, into=self.model)
            if step == 1000:
                metrics.reset()
                for m in self.model:
                    m.values.clear()
            elif step == 2000:
                labels = ("dns://:53", "example.org.", "")
                metrics.DURATION.remove(labels)
                self.model[3].remove(labels)
        self.check()

    def test_cache_full(self):
        self.patch(metrics, "KEYS_KEPT", 5)
        for qtype in range(1, 40):
            req = request("a.example.org.", qtype, "udp", "127.0.0.1",
                          False)
            for _ in range(2):
                metrics.report("dns://:53", req, ".", "", 0, "file", 80,
                               0.001)
                expected("dns://:53", req, ".", "", 0, "file", 80, 0.001,
                         into=self.model)
        self.assertLessEqual(len(metrics._KEYS), 5)
        self.check()
