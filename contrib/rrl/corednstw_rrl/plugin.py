"""rrl's query path: accounts per client prefix and response category,
credited with time, debited by every response (BIND 9's response rate
limiting, as coredns/rrl computes it).

An account's balance is kept as the time its next response is allowed
(``allow``): the balance is ``now - allow``; one response costs
``interval`` = 1 / per-second allowance.  Times are integer nanoseconds,
as coredns/rrl keeps them, so that a balance that should be zero is.  The
balance is capped at one second of credit and floored at ``-window``, so
a client above its rate is dropped until it has been below it for long
enough (dropped responses debit too, as in BIND).  The account of a
category starts with one second of credit.

The table is a dict bounded by ``max-table-size``: a new account is
added only when there is room or a sweep of the oldest entries finds one
idle long enough to have regained full credit (BIND's and coredns/rrl's
eviction rule); otherwise the response is not limited.  So a spoofed-
source flood cannot grow the table past its size.
"""

import socket

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.plugin import Plugin, is_deferred
from corednstw.core.request import (
    NoReply,
    RawResponse,
    Response,
    unwritten,
)

SECOND = 1000000000

#: Response categories, as BIND names them.
RESPONSE, NODATA, NXDOMAIN, REFERRAL, ERROR = range(5)
CATEGORY_NAMES = ("response", "nodata", "nxdomain", "referral", "error")

#: Entries looked at (from the oldest) for an evictable one when the
#: table is full.
SWEEP = 16
#: Distinct client_ip label values a metric family keeps; more are
#: counted under "other" (a spoofed flood must not grow the metrics).
MAX_LABELS = 10000

RESPONSES_EXCEEDED = metrics.counter(
    "coredns_rrl_responses_exceeded_total",
    "Counter of responses exceeding QPS limit.", ("client_ip",))
REQUESTS_EXCEEDED = metrics.counter(
    "coredns_rrl_requests_exceeded_total",
    "Counter of requests exceeding QPS limit.", ("client_ip",))
RESPONSES_SLIPPED = metrics.counter(
    "coredns_rrl_responses_slipped_total",
    "Counter of responses exceeding QPS limit sent truncated (slipped).",
    ("client_ip",))

_REQ_ERROR = "query rate exceeded the limit"
_RESP_ERROR = "response rate exceeded the limit"


def _count(family, client):
    """Count ``client`` in ``family``, bounded to MAX_LABELS values."""
    v = family.values
    key = (client,)
    if key not in v and len(v) >= MAX_LABELS:
        key = ("other",)
    v[key] = v.get(key, 0) + 1


class RRL(Plugin):
    """One rrl stanza: its zones, allowances (as intervals in seconds per
    response, 0 when not limited) and the account table."""

    name = "rrl"

    def __init__(self):
        self.zones = ["."]
        self.all_zones = True
        self.window = 15 * SECOND
        self.v4_prefix = 24
        self.v6_prefix = 56
        #: nanoseconds per response, by category (0: not limited)
        self.intervals = [0] * 5
        self.requests_interval = 0
        self.slip = 0
        self.max_table = 100000
        self.report_only = False
        self.table = {}
        self.prefixes = {}
        self.clock = None

    def start(self):
        self.clock = self.reactor.seconds

    def now(self):
        """The clock in integer nanoseconds."""
        return int(self.clock() * SECOND)

    # -- accounting -----------------------------------------------------------

    def prefix(self, client):
        """The client's address masked to its prefix length, as an int
        tagged with the family (cached per address)."""
        p = self.prefixes.get(client)
        if p is None:
            try:
                if ":" in client:
                    n = int.from_bytes(socket.inet_pton(
                        socket.AF_INET6, client.split("%", 1)[0]), "big")
                    p = (6, n >> (128 - self.v6_prefix))
                else:
                    n = int.from_bytes(socket.inet_aton(client), "big")
                    p = n >> (32 - self.v4_prefix)
            except OSError:
                p = client      # not an address: the client as it is
            if len(self.prefixes) >= self.max_table:
                self.prefixes.clear()
            self.prefixes[client] = p
        return p

    def debit(self, key, interval, now):
        """Debit one response from the account ``key``: None when it is
        within the limit (or the account is new, or there is no room for
        it), else the account (its balance is negative)."""
        a = self.table.get(key)
        if a is None:
            self.open(key, interval, now)
            return None
        bal = now - a[0] - interval
        if bal >= 0:
            if bal >= SECOND:
                bal = SECOND - interval
                a[1] = 0
            a[0] = now - bal
            return None
        return self.overdrawn(a, bal, now)

    def open(self, key, interval, now):
        """A new account: one second of credit, less this response; not
        opened when the table is full and nothing can be evicted."""
        table = self.table
        if len(table) >= self.max_table and not self._evict(now):
            return
        table[key] = [now - SECOND + interval, 0]

    def overdrawn(self, a, bal, now):
        """Book a negative balance (floored at -window); the account."""
        if bal < -self.window:
            bal = -self.window
        a[0] = now - bal
        return a

    def _evict(self, now):
        """Make room: drop the first of the oldest entries that has been
        idle long enough to be back at full credit; entries looked at and
        kept go to the back, so the sweep moves on."""
        table = self.table
        window = self.window
        for _ in range(min(SWEEP, len(table))):
            key = next(iter(table))
            a = table.pop(key)
            if now - a[0] >= window:
                return True
            table[key] = a
        return False

    def slipped(self, a):
        """Whether a limited response of account ``a`` slips (BIND: the
        first limited response, then every ``slip``-th)."""
        n = a[1]
        a[1] = n + 1 if n + 1 < self.slip else 0
        return n == 0

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        if not self.all_zones and self.match_zone(req.qname) is None:
            return self.next.serve(req)
        now = int(self.clock() * SECOND)
        if self.requests_interval:
            a = self.debit(self.prefix(req.client), self.requests_interval,
                           now)
            if a is not None:
                _count(REQUESTS_EXCEEDED, req.client)
                if not self.report_only:
                    r = NoReply()
                    r.error = _REQ_ERROR
                    return r
        resp = self.next.serve(req)
        if req.proto != "udp":
            return resp
        # The common case inline (debit's steps without its call, the
        # larger part of rrl's cost per query): an answer with records,
        # its account within the limit.
        cls = resp.__class__
        if cls is Response:
            answered = resp.answer
        elif cls is RawResponse:
            raw = resp.raw
            answered = raw[6] or raw[7]
        elif is_deferred(resp):
            return resp.addCallback(self._later, req)
        else:
            return self.account(req, resp, now)
        if not answered:
            return self.account(req, resp, now)
        interval = self.intervals[RESPONSE]
        if not interval:
            return resp
        client = req.client
        p = self.prefixes.get(client)
        if p is None:
            p = self.prefix(client)
        key = (p, RESPONSE, req.qtype,
               _answer_name(req) if req.metadata else req.qname)
        a = self.table.get(key)
        if a is None:
            self.open(key, interval, now)
            return resp
        bal = now - a[0] - interval
        if bal >= 0:
            if bal >= SECOND:
                bal = SECOND - interval
                a[1] = 0
            a[0] = now - bal
            return resp
        return self.limited(req, resp, RESPONSE,
                            self.overdrawn(a, bal, now))

    def _later(self, resp, req):
        if req.proto != "udp":
            return resp
        return self.account(req, resp, self.now())

    def account(self, req, resp, now):
        """Debit the response's account; the response as it goes out
        (itself, truncated, or none at all)."""
        if resp is None or resp.raw is None and (
                isinstance(resp, NoReply) or unwritten(resp)):
            return resp
        cat, name = _categorize(req, resp)
        interval = self.intervals[cat]
        if not interval:
            return resp
        client = req.client
        p = self.prefixes.get(client)
        if p is None:
            p = self.prefix(client)
        if cat == RESPONSE or cat == REFERRAL:
            key = (p, cat, req.qtype, name)
        else:
            key = (p, cat, name)
        a = self.debit(key, interval, now)
        if a is None:
            return resp
        return self.limited(req, resp, cat, a)

    def limited(self, req, resp, cat, a):
        """A response over its limit: counted; dropped, or slipped as a
        truncated answer (an error whole), or (report-only) sent."""
        slip = self.slip and self.slipped(a)
        _count(RESPONSES_EXCEEDED, req.client)
        if slip:
            _count(RESPONSES_SLIPPED, req.client)
        if self.report_only:
            return resp
        if slip:
            if cat == ERROR:
                # An error cannot be truncated: BIND leaks it whole.
                return resp
            # Header and question only, TC set: the client asks again
            # over TCP, which is not limited.
            return Response(resp.rcode, flags=resp.flags | w.TC,
                            plugin=resp.plugin)
        r = NoReply()
        r.error = _RESP_ERROR
        return r


def _categorize(req, resp):
    """(category, name) of a response: the name its account is kept
    under (the qname, or the owner of the first authority record for
    NXDOMAIN and referrals, or none for errors)."""
    raw = resp.raw
    if raw is None:
        if resp.answer:
            return RESPONSE, _answer_name(req)
        rcode = resp.rcode
        auth = resp.authority
        if rcode == w.NXDOMAIN:
            return NXDOMAIN, auth[0].name.lower() if auth else ""
        if rcode == w.NOERROR:
            if auth and auth[0].rtype == w.NS:
                return REFERRAL, auth[0].name.lower()
            return NODATA, _answer_name(req)
        return ERROR, ""
    if raw[6] or raw[7]:
        return RESPONSE, _answer_name(req)
    rcode = raw[3] & 0xF
    if rcode == w.NXDOMAIN:
        return NXDOMAIN, _first_authority(raw, req.qend)[0]
    if rcode == w.NOERROR:
        owner, rtype = _first_authority(raw, req.qend)
        if rtype == w.NS:
            return REFERRAL, owner
        return NODATA, _answer_name(req)
    return ERROR, ""


def _answer_name(req):
    """The qname, or the parent of the wildcard that synthesized the
    answer when a plugin says so (metadata ``zone/wildcard``)."""
    md = req.metadata
    if md:
        wild = md.get("zone/wildcard")
        if wild is not None:
            if callable(wild):
                wild = wild()
            if wild:
                return wild[2:].lower()
    return req.qname


def _first_authority(raw, qend):
    """(owner lower-cased, type) of the first authority record of an
    answer without answer records; ("", 0) when there is none.  ``qend``:
    where the query's question ends (the answer's, as a rule)."""
    if not (raw[8] or raw[9]):
        return "", 0
    try:
        off = qend
        if raw[4:6] != b"\x00\x01" or raw[off - 5] != 0:
            # Not the query's question as it came (forward and cache
            # hand back answers to it): walk it.
            off = 12
            for _ in range((raw[4] << 8) | raw[5]):
                off = w.skip_question(raw, off)
        n = raw[off]
        ptr = ((n & 0x3F) << 8) | raw[off + 1] if n >= 0xC0 else 0
        if 12 <= ptr < qend - 4 and off == qend:
            # A pointer into the question (the usual SOA of a negative
            # answer): the owner is the rest of the question's name.
            wire, end = raw[ptr:qend - 4], off + 2
        else:
            wire, end = _owner_wire(raw, off)
        name = _OWNERS.get(wire)
        if name is None:
            if len(_OWNERS) >= 10000:
                _OWNERS.clear()
            name = _OWNERS[wire] = w.read_name(wire, 0)[0].lower()
        return name, (raw[end] << 8) | raw[end + 1]
    except (w.FormatError, IndexError):
        return "", 0


#: Owner names met in authority sections, wire form to text: the same
#: few zone apexes come back in every NXDOMAIN.
_OWNERS: dict = {}


def _owner_wire(raw, off):
    """The name at ``off`` with its pointers followed, as uncompressed
    wire bytes, and the offset past it where it stands."""
    parts = []
    end = None
    hops = 0
    while True:
        n = raw[off]
        if n == 0:
            parts.append(b"\x00")
            break
        if n >= 0xC0:
            if end is None:
                end = off + 2
            hops += 1
            if hops > 64:
                raise w.FormatError("compression loop")
            off = ((n & 0x3F) << 8) | raw[off + 1]
            continue
        if n > 63:
            raise w.FormatError("bad label type")
        parts.append(raw[off:off + n + 1])
        off += n + 1
    return b"".join(parts), (off + 1 if end is None else end)
