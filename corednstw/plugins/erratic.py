"""erratic: a fixed answer to everything, dropped, delayed or truncated on
purpose, for testing clients.

A and AAAA get 192.0.2.53 and 2001:db8::53 (TTL 0, AA), AXFR a small zone
named after the query, anything else SERVFAIL.  ``drop N`` leaves every
Nth query unanswered (query numbers counted from 0: the first one is
dropped), ``delay N D`` answers every Nth one after D, ``truncate N`` sets
TC on some (see the doc page: CoreDNS tests the query number with a bitwise
AND, not modulo, and so do we).  It answers every query itself and reports
ready only while its query count is 3 or 4.
"""

import functools

from twisted.internet import task
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core.interfaces import IReadiness
from corednstw.core.plugin import Plugin
from corednstw.core.request import NoReply, Response

_A = w.a_rdata("192.0.2.53")
_AAAA = w.aaaa_rdata("2001:db8::53")
_SOA_TAIL = w.soa_rdata("sns.dns.icann.org.", "noc.dns.icann.org.",
                        2018050825, 7200, 3600, 1209600, 3600)


def transfer_records(name, truncate):
    """The zone an AXFR gets: SOA, NS, NS, AAAA, AAAA and the closing SOA
    (left out when truncating, so the transfer is incomplete)."""
    def sub(label):
        return label + "." + name if name != "." else label + "."
    soa = w.RR(name, w.SOA, 0, _SOA_TAIL)
    rrs = [
        soa,
        w.RR(name, w.NS, 0, w.name_to_wire(sub("b"))),
        w.RR(name, w.NS, 0, w.name_to_wire(sub("a"))),
        w.RR(sub("a"), w.AAAA, 0, w.aaaa_rdata("2001:bd8::53")),
        w.RR(sub("b"), w.AAAA, 0, w.aaaa_rdata("2001:500::54")),
    ]
    if not truncate:
        rrs.append(soa)
    return rrs


@implementer(IReadiness)
class Erratic(Plugin):
    name = "erratic"

    def __init__(self, drop=2, delay=0, truncate=0, duration=0.0,
                 large=False):
        self.q = 0
        self.drop = drop
        self.delay = delay
        self.truncate = truncate
        self.duration = duration
        self.large = large

    def serve(self, req):
        nr = self.q
        self.q = nr + 1
        drop = self.drop > 0 and nr % self.drop == 0
        delay = self.delay > 0 and nr % self.delay == 0
        trunc = self.truncate > 0 and nr & self.truncate == 0
        qtype = req.qtype
        if drop:
            return NoReply()
        if qtype == w.A:
            rr = w.RR(req.name, w.A, 0, _A)
            answer = [rr] * 30 if self.large else [rr]
            resp = Response(w.NOERROR, answer, aa=True, tc=trunc,
                            plugin=self.name)
        elif qtype == w.AAAA:
            resp = Response(w.NOERROR, [w.RR(req.name, w.AAAA, 0, _AAAA)],
                            aa=True, tc=trunc, plugin=self.name)
        elif qtype == w.AXFR:
            resp = Response(w.NOERROR, transfer_records(req.name, trunc),
                            aa=True, plugin=self.name)
        else:
            resp = None     # the server answers SERVFAIL
        if delay:
            return task.deferLater(self.reactor, self.duration,
                                   lambda: resp)
        return resp


    def ready(self):
        return 3 <= self.q < 5

    def autopath(self, req):
        """The search path autopath gets from this plugin (for tests)."""
        return ["a.example.org.", "b.example.org.", ""]


def _amount(c, text):
    """An AMOUNT: Go's 32-bit ParseInt, and not negative."""
    n = c.integer(text, func="ParseInt", bits=32)
    if n < 0:
        raise c.error('illegal amount value given "%s"' % text)
    return n


def _drop(e, c):
    """``drop [AMOUNT]``: one query in AMOUNT goes unanswered."""
    for amount in c.between(0, 1):
        e.drop = _amount(c, amount)


def _delay(e, c):
    """``delay [AMOUNT [DURATION]]``: one query in AMOUNT (2) waits
    DURATION (100ms; a bare number is seconds)."""
    args = c.between(0, 2)
    e.delay, e.duration = 2, 0.1
    if args:
        e.delay = _amount(c, args[0])
    if len(args) > 1:
        # Go's word for every DURATION it cannot read.
        e.duration = c.duration(args[1], strict=False,
                                error='time: invalid duration "{text}"')


def _truncate(e, c):
    """``truncate [AMOUNT]``: one answer in AMOUNT (2) is truncated."""
    e.truncate = 2
    for amount in c.between(0, 1):
        e.truncate = _amount(c, amount)


def _large(e, c):
    """``large``: A answers carry 30 records (any value is ignored)."""
    e.large = True


_OPTIONS = {"drop": _drop, "delay": _delay, "truncate": _truncate,
            "large": _large}


def setup(d, block):
    """``erratic [ARGS] { ... }``: options in Corefile order.  Arguments
    on the ``erratic`` line are ignored, as CoreDNS's setup never reads
    them (``erratic . { drop 0 }`` appears in its own tests)."""
    e = Erratic()
    d.read_options({name: functools.partial(read, e)
                    for name, read in _OPTIONS.items()})
    if (e.delay > 0 or e.truncate > 0) and not any(
            c.name == "drop" and c.args for c in d.children):
        # delay or truncate without a drop AMOUNT: no drops at all.
        e.drop = 0
    return e
