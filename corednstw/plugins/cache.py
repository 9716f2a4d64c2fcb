"""cache: positive and negative answer cache (CoreDNS's cache).

Entries are kept in wire form: the message body after the question, cut at
every TTL field (the OPT record dropped).  A hit joins the pieces with the
one remaining TTL, puts the client's header and question in front and the
client's OPT behind: no decoding, no record objects.  Layout and rules are
CoreDNS's: 256 shards, capacity rounded down to a multiple of 256 (at least
4 per shard), every record of an answer given the same TTL (the smallest
TTL of the message, clamped to [MINTTL, TTL]), AA set on hits, DO and CD
part of the key, truncated answers never stored.
"""

import math
import struct
import time

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core import request as rq
from corednstw.core.durations import parse_duration
from corednstw.core.plugin import Plugin, match, then, zones_from_args
from corednstw.core.request import RawResponse

SHARDS = 256
DEFAULT_CAP = 10000
MAX_TTL = 3600
MIN_TTL = 5
MAX_NTTL = 1800
MIN_NTTL = 5

SUCCESS = "success"
DENIAL = "denial"

# response.Type of CoreDNS
NOERROR, NAMEERROR, SERVERERROR, NODATA, DELEGATION, META, UPDATE, \
    OTHERERROR = range(8)

_HDR = struct.Struct("!HHHHHH")
_TTL = struct.Struct("!I")
_RRHEAD = struct.Struct("!HHIH")
_YEAR68 = 1 << 31

ENTRIES = metrics.gauge(
    "coredns_cache_entries", "The number of elements in the cache.",
    ("server", "type", "zones", "view"))
REQUESTS = metrics.counter(
    "coredns_cache_requests_total", "The count of cache requests.",
    ("server", "zones", "view"))
HITS = metrics.counter(
    "coredns_cache_hits_total", "The count of cache hits.",
    ("server", "type", "zones", "view"))
MISSES = metrics.counter(
    "coredns_cache_misses_total",
    "The count of cache misses. Deprecated, derive misses from cache "
    "hits/requests counters.", ("server", "zones", "view"))
PREFETCHES = metrics.counter(
    "coredns_cache_prefetch_total",
    "The number of times the cache has prefetched a cached item.",
    ("server", "zones", "view"))
DROPS = metrics.counter(
    "coredns_cache_drops_total",
    "The number responses that are not cached, because the reply is "
    "malformed.", ("server", "zones", "view"))
SERVED_STALE = metrics.counter(
    "coredns_cache_served_stale_total",
    "The number of requests served from stale cache entries.",
    ("server", "zones", "view"))
EVICTIONS = metrics.counter(
    "coredns_cache_evictions_total", "The count of cache evictions.",
    ("server", "type", "zones", "view"))


# -- reading a response once, when it is stored ---------------------------------

class Parsed:
    """What the cache needs to know about a response, read from its bytes.

    ``segs``: the body after the question cut around each TTL field (OPT
    left out); the message is ``header + question + ttl.join(segs)``.
    """

    __slots__ = ("flags", "rcode", "opcode", "qname", "qtype", "qclass",
                 "qlen", "counts", "segs", "ttls", "types", "answers",
                 "do", "expired", "ns_types")

    def __init__(self):
        self.expired = False
        self.do = False


def parse(wire, now_unix=None):
    """A Parsed for a response message, or None when it cannot be handled
    in wire form (no single plain question, OPT not last, malformed)."""
    try:
        return _parse(wire, now_unix)
    except (w.FormatError, struct.error, IndexError):
        return None


def _parse(wire, now_unix):
    _, flags, qd, an, ns, ar = _HDR.unpack_from(wire, 0)
    if qd != 1:
        return None
    p = Parsed()
    p.flags = flags
    p.rcode = flags & 0xF
    p.opcode = (flags >> 11) & 0xF
    off = 12
    n = len(wire)
    while True:
        ln = wire[off]
        if ln == 0:
            off += 1
            break
        if ln & 0xC0:
            return None
        off += ln + 1
    if off + 4 > n:
        return None
    p.qname = qname = rq._wire_text(wire[12:off]).lower()
    p.qtype, p.qclass = struct.unpack_from("!HH", wire, off)
    off += 4
    p.qlen = off - 12
    segs = []
    ttls = []
    types = []
    answers = []
    ns_types = []
    last = off
    total = an + ns + ar
    end = None
    counts = [an, ns, ar]
    for i in range(total):
        start = off
        name = None
        if i < an:
            if wire[off] == 0xC0 and wire[off + 1] == 12:
                # A pointer to the question (the usual owner): its name is
                # known, no decoding.
                name = qname
                off += 2
            else:
                name, off = w.read_name(wire, off)
                name = name.lower()
        else:
            off = w.skip_name(wire, off)
        if off + 10 > n:
            return None
        rtype, rclass, ttl, rdlen = _RRHEAD.unpack_from(wire, off)
        rd = off + 10
        if rd + rdlen > n:
            return None
        if rtype == w.OPT:
            if i != total - 1:
                return None
            p.do = bool(ttl & 0x8000)
            counts[2] -= 1
            end = start
            break
        if rtype == w.RRSIG and now_unix is not None and rdlen >= 18:
            exp, inc = struct.unpack_from("!II", wire, rd + 8)
            if not _valid_period(inc, exp, now_unix):
                p.expired = True
        segs.append(wire[last:off + 4])
        last = off + 8
        ttls.append(ttl)
        types.append(rtype)
        if i < an:
            target = None
            if rtype == w.CNAME:
                target = w.read_name(wire, rd)[0]
            answers.append((name, rtype, rclass, target))
        elif i < an + ns:
            ns_types.append(rtype)
        off = rd + rdlen
    segs.append(wire[last:end if end is not None else off])
    p.segs = segs
    p.ttls = ttls
    p.types = types
    p.answers = answers
    p.ns_types = ns_types
    p.counts = tuple(counts)
    return p


def _valid_period(inception, expiration, now):
    modi = (inception - now) // _YEAR68
    mode = (expiration - now) // _YEAR68
    ti = inception + modi * _YEAR68
    te = expiration + mode * _YEAR68
    return ti <= now <= te


def typify(p):
    """CoreDNS's response.Typify on a Parsed response."""
    if p.opcode == 5:
        return UPDATE
    if p.opcode == w.OPCODE_NOTIFY:
        return META
    if p.qtype in (w.AXFR, w.IXFR):
        return META
    if p.do and p.expired:
        return OTHERERROR
    an = p.counts[0]
    rc = p.rcode
    if an and rc == w.NOERROR:
        return NOERROR
    if an and rc == w.NXDOMAIN:
        return OTHERERROR
    soa = w.SOA in p.ns_types
    if soa and rc == w.NOERROR:
        return NODATA
    if rc == w.NXDOMAIN:
        return NAMEERROR
    if rc in (w.SERVFAIL, w.NOTIMP):
        return SERVERERROR
    if rc == w.NOERROR and w.NS in p.ns_types:
        return DELEGATION
    if rc == w.NOERROR:
        return NOERROR
    return OTHERERROR


def answers_question(p):
    """The answer section holds the asked type at the end of the CNAME
    chain that starts at the question name (CoreDNS's answersQuestion)."""
    if p.rcode != w.NOERROR or not p.answers:
        return False
    qclass = p.qclass
    qtype = p.qtype
    ans = [a for a in p.answers
           if qclass == w.CLASS_ANY or a[2] == qclass]
    name = p.qname
    if qtype == w.ANY:
        return any(a[0] == name for a in ans)
    if qtype == w.CNAME:
        t = _cname_target(ans, name)
        return bool(t)
    seen = set()
    while True:
        if name in seen:
            return False
        seen.add(name)
        t = _cname_target(ans, name)
        if t is None:
            return False
        if t == "":
            break
        name = t
    return any(a[1] == qtype and a[0] == name for a in ans)


def _cname_target(ans, owner):
    """'' when ``owner`` has no CNAME, its target, or None when it has
    several different ones."""
    target = ""
    for a in ans:
        if a[1] == w.CNAME and a[0] == owner:
            t = a[3].lower()
            if target and target != t:
                return None
            target = t
    return target


def response_type(p):
    t = typify(p)
    if t == NOERROR and w.SOA in p.ns_types and is_nodata(p):
        return NODATA
    return t


def is_nodata(p):
    return bool(p.answers) and not answers_question(p)


def cacheable(p, mt):
    if p.flags & w.TC:
        return False
    if mt in (OTHERERROR, META, UPDATE):
        return False
    has_soa = w.SOA in p.ns_types
    if mt == NAMEERROR and not has_soa:
        return False
    if mt == NOERROR and not has_soa and is_nodata(p):
        return False
    return True


def minimal_ttl(p, mt, maximum):
    """dnsutil.MinimalTTLWithMaximum on a Parsed response (seconds)."""
    if mt not in (NOERROR, NAMEERROR, NODATA):
        return MIN_TTL
    an, ns, ar = p.counts
    if an + ns == 0 and ar == 0:
        return MIN_TTL
    m = maximum
    for t in p.ttls:
        if t < m:
            m = t
    return m


# -- entries -------------------------------------------------------------------

class Item:
    __slots__ = ("segs", "hflags", "ad", "rcode", "an", "ns", "ar",
                 "orig_ttl", "stored", "hits", "last", "refreshing",
                 "retry_after", "qlen", "answering", "lkg")

    def __init__(self, p, now, duration):
        self.segs = p.segs
        self.hflags = p.flags & w.RA
        self.ad = p.flags & w.AD
        self.rcode = p.rcode
        self.an, self.ns, self.ar = p.counts
        self.qlen = p.qlen
        self.orig_ttl = int(duration)
        self.stored = now
        self.hits = 0
        self.last = now
        self.refreshing = False
        self.retry_after = None
        #: prefer_positive: whether this entry answers its question, and
        #: the last answering entry it replaced (last known good).
        self.answering = False
        self.lkg = None

    def answering_item(self):
        """This entry if it answers its question, else its last known
        good one (CoreDNS's answeringItem), or None."""
        if self.answering:
            return self
        lkg = self.lkg
        if lkg is not None and lkg.answering:
            return lkg
        return None

    def ttl(self, now):
        return self.orig_ttl - int(now - self.stored)

    def update(self, window, now):
        """freq.Update: count hits with no gap of ``window`` or more."""
        if self.last < now - window:
            self.hits = 1
        else:
            self.hits += 1
        self.last = now

    def begin_refresh(self, now, recheck):
        if recheck > 0 and self.retry_after is not None and \
                now < self.retry_after:
            return False
        if self.refreshing:
            return False
        self.refreshing = True
        return True

    def end_refresh(self, now, recheck, refreshed):
        if recheck > 0 and not refreshed:
            self.retry_after = now + recheck
        else:
            self.retry_after = None
        self.refreshing = False


class Store:
    """256 shards of at most ``size // 256`` (>= 4) entries each; a full
    shard drops its oldest entry for a new key."""

    def __init__(self, size):
        self.shard_size = max(size // SHARDS, 4)
        self.shards = [{} for _ in range(SHARDS)]
        self.count = 0

    def get(self, key):
        return self.shards[hash(key) & 0xFF].get(key)

    def add(self, key, item):
        """Store; True when an entry had to be evicted."""
        s = self.shards[hash(key) & 0xFF]
        evicted = False
        if key not in s:
            if len(s) >= self.shard_size:
                del s[next(iter(s))]
                evicted = True
            else:
                self.count += 1
        s[key] = item
        return evicted

    def remove(self, key):
        s = self.shards[hash(key) & 0xFF]
        if s.pop(key, None) is not None:
            self.count -= 1

    def __len__(self):
        return self.count


# -- the plugin ------------------------------------------------------------------

class Cache(Plugin):
    name = "cache"

    def __init__(self):
        self.zones = ["."]
        self.zlabel = "."
        self.pcap = self.ncap = DEFAULT_CAP
        self.pttl = MAX_TTL
        self.minpttl = MIN_TTL
        self.nttl = MAX_NTTL
        self.minnttl = MIN_NTTL
        self.failttl = MIN_NTTL
        self.prefetch = 0
        self.window = 60.0
        self.percentage = 10
        self.stale_up_to = 0.0
        self.verify_stale = False
        self.verify_timeout = 0.0
        self.stale_ttl = 0
        self.stale_recheck = 0.0
        self.pexcept = []
        self.nexcept = []
        self.keepttl = False
        self.prefer_positive = False
        #: The clock (Unix seconds); tests swap it for a fake one.
        self.now = time.time
        self.all_zones = True
        self._opts = {}
        self.pcache = self.ncache = None

    def build(self):
        self.pcache = Store(self.pcap)
        self.ncache = Store(self.ncap)
        self.all_zones = "." in self.zones

    # -- the hit path -----------------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        if not self.all_zones and match(self.zones, qname) is None:
            return self.next.serve(req)
        e = req.edns
        do = e is not None and (e.ttl & 0x8000) != 0
        rflags = req.flags
        key = (qname, req.qtype, req.qclass, do, (rflags & w.CD) != 0)
        labels = (req.server, self.zlabel, req.view)
        REQUESTS.inc(labels)
        now = self.now()
        item = self._lookup(key, now, labels)
        if item is None:
            MISSES.inc(labels)
            # The next plugin is asked with AD set (CoreDNS's
            # authenticatedRefreshState): the stored answer then carries
            # the upstream's AD for every later client, whatever this
            # client asked for.
            ask = req if rflags & w.AD else _refresh_request(req)
            return self._refresh(ask, key, do, labels, None, client=req)
        ttl = item.orig_ttl - int(now - item.stored)
        if ttl <= 0:
            return self._stale(req, key, do, labels, item, now, ttl)
        if self.prefetch and self._should_prefetch(item, now, ttl):
            self._try_prefetch(req, key, do, labels, item, now, False)
        if self.keepttl:
            ttl = item.orig_ttl
        return self._answer(req, item, ttl, do)

    def _lookup(self, key, now, labels):
        stale = self.stale_up_to
        if self.prefer_positive and stale > 0:
            i = self.pcache.get(key)
            if i is not None:
                i = i.answering_item()
                if i is not None:
                    ttl = i.orig_ttl - int(now - i.stored)
                    if ttl > 0 or -ttl < int(stale):
                        HITS.inc((labels[0], SUCCESS) + labels[1:])
                        return i
        i = self.ncache.get(key)
        if i is not None:
            ttl = i.orig_ttl - int(now - i.stored)
            if ttl > 0 or (stale > 0 and -ttl < int(stale)):
                if i.rcode == w.SERVFAIL:
                    p = self.pcache.get(key)
                    if p is not None:
                        pt = p.orig_ttl - int(now - p.stored)
                        if pt > 0 or (stale > 0 and -pt < int(stale)):
                            HITS.inc((labels[0], SUCCESS) + labels[1:])
                            return p
                HITS.inc((labels[0], DENIAL) + labels[1:])
                return i
        i = self.pcache.get(key)
        if i is not None:
            ttl = i.orig_ttl - int(now - i.stored)
            if ttl > 0 or (stale > 0 and -ttl < int(stale)):
                HITS.inc((labels[0], SUCCESS) + labels[1:])
                return i
        return None

    def _answer(self, req, item, ttl, do, aa=True, flags=None):
        """Bytes for ``req`` from ``item`` with every TTL set to ``ttl``."""
        data = req.data
        qend = req.qend
        rflags = req.flags
        if flags is None:
            hf = 0x8400 | item.hflags  # QR, AA, RA as stored
            if item.ad and (do or rflags & w.AD):
                hf |= w.AD
        else:
            hf = w.QR | (flags & 0x07F0)
            if not do and not rflags & w.AD:
                hf &= ~w.AD
        hf |= (rflags & 0x7910) | item.rcode   # opcode, RD, CD
        e = req.edns
        body = _TTL.pack(ttl if ttl > 0 else 0).join(item.segs)
        if qend - 12 != item.qlen:
            return None
        if e is None:
            out = (_HDR.pack(req.id, hf, 1, item.an, item.ns, item.ar)
                   + data[12:qend] + body)
            limit = 512 if req.proto == "udp" else 65535
        else:
            out = (_HDR.pack(req.id, hf, 1, item.an, item.ns, item.ar + 1)
                   + data[12:qend] + body + self._opt(e))
            limit = 65535 if req.proto != "udp" else (
                e.size if e.size > 512 else 512)
        if len(out) > limit:
            # Too big for this client: the structured path truncates.
            resp = rq.parse_response(out)
            resp.plugin = "cache"
            return resp
        return RawResponse.prebuilt(out, "cache", final=True)

    def _opt(self, e):
        opts = e.options
        if opts and rq.SUPPORTED_OPTIONS:
            kept = [o for o in opts if o[0] in rq.SUPPORTED_OPTIONS]
            if kept:
                return w.opt_wire(e.size, e.ttl & 0x8000, kept)
        k = (e.size, e.ttl & 0x8000)
        o = self._opts.get(k)
        if o is None:
            if len(self._opts) > 1024:
                self._opts.clear()
            o = self._opts[k] = w.opt_wire(e.size, e.ttl & 0x8000)
        return o

    # -- misses, prefetch, stale ---------------------------------------------------

    def _refresh(self, req, key, do, labels, prefetch, verify=False,
                 client=None):
        """Ask the next plugin with ``req`` and store what it answers; the
        answer is built for ``client`` (default: ``req``).  ``verify``:
        only a usable NOERROR/NXDOMAIN answer counts (else None)."""
        return then(self.next.serve(req), self._store, client or req, key,
                    do, labels, prefetch, verify)

    def _store(self, resp, req, key, do, labels, prefetch, verify):
        if resp is None:
            return None
        raw = resp.raw
        if raw is None:
            # Encode without the client's size limit: the cache keeps the
            # whole answer (the server truncates what it sends).
            proto, req.proto = req.proto, "tcp"
            try:
                raw = rq.encode(req, resp)
            finally:
                req.proto = proto
        now = self.now()
        p = parse(raw, int(now))
        if p is None:
            return None if verify else resp
        mt = response_type(p)
        matches = (p.qname == req.qname and p.qtype == req.qtype
                   and p.flags & w.QR)
        silent = False
        if verify:
            if p.flags & w.TC or not matches:
                return None
            if self.prefer_positive:
                # Only an answer to the question replaces the stale entry;
                # anything else is stored (when cacheable) but not used.
                silent = not (mt == NOERROR and answers_question(p))
            elif not _refreshable(p, mt):
                return None
        if mt in (NAMEERROR, NODATA):
            dur = min(max(minimal_ttl(p, mt, self.nttl), self.minnttl),
                      self.nttl)
        elif mt == SERVERERROR:
            dur = self.failttl
        else:
            dur = min(max(minimal_ttl(p, mt, self.pttl), self.minpttl),
                      self.pttl)
        dur = int(dur)
        item = Item(p, now, dur)
        if self.prefer_positive:
            item.answering = answers_question(p)
        if dur > 0 and cacheable(p, mt):
            if matches:
                self._set(key, item, mt, p.qname, labels, prefetch)
            else:
                DROPS.inc(labels)
        if silent:
            return None
        if prefetch is not None:
            return resp
        out = self._answer(req, item, dur, do, flags=p.flags)
        if out is None:
            return resp
        out.plugin = resp.plugin
        return out

    def _set(self, key, item, mt, qname, labels, prefetch):
        if mt in (NOERROR, DELEGATION):
            if self.pexcept and match(self.pexcept, qname) is not None:
                return False
            prefer = self.prefer_positive
            if prefer and not item.answering:
                prev = self.pcache.get(key)
                if prev is not None:
                    item.lkg = prev.answering_item()
            if self.pcache.add(key, item):
                EVICTIONS.inc((labels[0], SUCCESS) + labels[1:])
            # The newest positive state replaces a denial; with
            # prefer_positive only when it answers the question.
            if item.answering if prefer else prefetch is not None:
                self.ncache.remove(key)
        elif mt in (NAMEERROR, NODATA, SERVERERROR):
            if self.nexcept and match(self.nexcept, qname) is not None:
                return False
            if self.ncache.add(key, item):
                EVICTIONS.inc((labels[0], DENIAL) + labels[1:])
        else:
            return False
        ENTRIES.set((labels[0], SUCCESS) + labels[1:], len(self.pcache))
        ENTRIES.set((labels[0], DENIAL) + labels[1:], len(self.ncache))
        return True

    def _should_prefetch(self, item, now, ttl):
        item.update(self.window, now)
        threshold = math.ceil(self.percentage / 100 * item.orig_ttl)
        return item.hits >= self.prefetch and ttl <= threshold

    def _try_prefetch(self, req, key, do, labels, item, now, stale):
        recheck = self.stale_recheck if stale else 0.0
        if not item.begin_refresh(self.now(), recheck):
            return
        PREFETCHES.inc(labels)
        preq = _refresh_request(req)
        hits = item.hits

        def done(resp):
            refreshed = resp is not None
            item.end_refresh(self.now(), recheck, refreshed)
            if refreshed:
                new = self.ncache.get(key) or self.pcache.get(key)
                if new is not None and new is not item:
                    new.hits = hits
                    new.last = now
            return None

        def failed(f):
            item.end_refresh(self.now(), recheck, False)
            return None
        r = self._refresh(preq, key, do, labels, item, verify=stale)
        if isinstance(r, defer.Deferred):
            r.addCallbacks(done, failed)
        else:
            done(r)

    def _stale(self, req, key, do, labels, item, now, ttl):
        if self.verify_stale:
            recheck = self.stale_recheck
            if recheck <= 0 or item.begin_refresh(now, recheck):
                return self._verify(req, key, do, labels, item, now)
        else:
            self._try_prefetch(req, key, do, labels, item, now, True)
        return self._serve_stale(req, item, do, labels)

    def _serve_stale(self, req, item, do, labels):
        SERVED_STALE.inc(labels)
        return self._answer(req, item, self.stale_ttl, do)

    def _verify(self, req, key, do, labels, item, now):
        """serve_stale verify: ask the next plugin first; serve the stale
        entry only when no usable answer comes (within the timeout)."""
        recheck = self.stale_recheck
        r = self._refresh(_refresh_request(req), key, do, labels, None,
                          verify=True, client=req)
        if not isinstance(r, defer.Deferred):
            if recheck > 0:
                item.end_refresh(self.now(), recheck, r is not None)
            if r is None:
                return self._serve_stale(req, item, do, labels)
            return self._verified(req, key, do, item, r)
        result = defer.Deferred()
        timer = None

        def got(fresh):
            if recheck > 0:
                item.end_refresh(self.now(), recheck, fresh is not None)
            if timer is not None and timer.active():
                timer.cancel()
            if result.called:
                return
            if fresh is None:
                return result.callback(self._serve_stale(req, item, do,
                                                         labels))
            result.callback(self._verified(req, key, do, item, fresh))
        r.addCallbacks(got, lambda f: got(None))
        if self.verify_timeout > 0 and not result.called:
            timer = self.reactor.callLater(
                self.verify_timeout, lambda: result.called or result.callback(
                    self._serve_stale(req, item, do, labels)))
        return result


    def _verified(self, req, key, do, stale, fresh):
        """The answer to a successful verify.  With a verify timeout
        CoreDNS answers from the entry it just stored (cache reply
        shaping: AA, the entry's TTL); without one, as the upstream did."""
        if self.verify_timeout > 0:
            new = self.ncache.get(key) or self.pcache.get(key)
            if new is not None and new is not stale:
                ttl = new.orig_ttl if self.keepttl else \
                    new.orig_ttl - int(self.now() - new.stored)
                out = self._answer(req, new, ttl, do)
                if out is not None:
                    return out
        return fresh


def _refreshable(p, mt):
    """A refresh that may replace a stale entry (verifyStaleResponseWriter)."""
    if p.flags & w.TC or mt in (OTHERERROR, META, UPDATE):
        return False
    return p.rcode in (w.NOERROR, w.NXDOMAIN)


def _refresh_request(req):
    """A copy of ``req`` with AD set, for prefetches and verifies."""
    return req.with_flags(req.flags | w.AD)


# -- setup --------------------------------------------------------------------------

def _int(c, text):
    try:
        return int(text, 10)
    except ValueError:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax' % text)


def _dur(c, text):
    try:
        return parse_duration(text, strict=True)
    except ValueError as e:
        raise c.error(str(e))


def setup(d, block):
    ca = Cache()
    args = list(d.args)
    if args:
        try:
            ttl = int(args[0], 10)
        except ValueError:
            ttl = None
        if ttl is not None:
            if ttl <= 0:
                raise d.error("cache TTL can not be zero or negative: %d"
                              % ttl)
            ca.pttl = ca.nttl = ttl
            args = args[1:]
    ca.zones = zones_from_args(args, block)
    policy_line = stale_line = None
    for c in d.children:
        a = list(c.args)
        if c.name in (SUCCESS, DENIAL):
            if not a or len(a) > 3:
                raise c.arg_error()
            cap = _int(c, a[0])
            ttl = mn = None
            if len(a) > 1:
                ttl = _int(c, a[1])
                if ttl <= 0:
                    raise c.error("cache TTL can not be zero or negative: "
                                  "%d" % ttl)
            if len(a) > 2:
                mn = _int(c, a[2])
                if mn < 0:
                    raise c.error("cache min TTL can not be negative: %d"
                                  % mn)
            if c.name == SUCCESS:
                ca.pcap = cap
                ca.pttl = ttl if ttl is not None else ca.pttl
                ca.minpttl = mn if mn is not None else ca.minpttl
            else:
                ca.ncap = cap
                ca.nttl = ttl if ttl is not None else ca.nttl
                ca.minnttl = mn if mn is not None else ca.minnttl
        elif c.name == "prefetch":
            if not a or len(a) > 3:
                raise c.arg_error()
            amount = _int(c, a[0])
            if amount < 0:
                raise c.error("prefetch amount should be positive: %d"
                              % amount)
            ca.prefetch = amount
            if len(a) > 1:
                ca.window = _dur(c, a[1])
            if len(a) > 2:
                pct = a[2]
                if not pct.endswith("%"):
                    raise c.error("last character of percentage should be "
                                  "`%%`, but is: %r" % pct[-1:])
                num = _int(c, pct[:-1])
                if num < 10 or num > 90:
                    raise c.error("percentage should fall in range "
                                  "[10, 90]: %d" % num)
                ca.percentage = num
        elif c.name == "serve_stale":
            stale_line = c
            _parse_stale(c, a, ca)
        elif c.name == "serve_stale_policy":
            if policy_line is not None:
                raise c.error("serve_stale_policy can only be specified "
                              "once")
            policy_line = c
            if len(a) != 1:
                raise c.arg_error()
            if a[0].lower() != "prefer_positive":
                raise c.error("invalid serve_stale_policy: %s" % a[0])
            ca.prefer_positive = True
        elif c.name == "servfail":
            if len(a) != 1:
                raise c.arg_error()
            dur = _dur(c, a[0])
            if dur < 0:
                raise c.error("invalid negative ttl for servfail")
            if dur > 300:
                raise c.error("caching SERVFAIL responses over 5 minutes is "
                              "not permitted")
            ca.failttl = dur
        elif c.name == "disable":
            if not a:
                raise c.arg_error()
            zs = []
            for z in a[1:]:
                from corednstw.core import names
                if not names.is_domain_name(z):
                    raise c.error("invalid disabled zone: %s" % z)
                zs.append(names.normalize_name(z))
            zs = zs or ["."]
            if a[0] == DENIAL:
                ca.nexcept = zs
            elif a[0] == SUCCESS:
                ca.pexcept = zs
            else:
                raise c.error('cache type for disable must be "success" or '
                              '"denial"')
        elif c.name == "keepttl":
            if a:
                raise c.arg_error()
            ca.keepttl = True
        else:
            raise c.arg_error()
    if policy_line is not None and stale_line is None:
        raise policy_line.error("serve_stale_policy requires serve_stale")
    ca.zlabel = ",".join(ca.zones)
    ca.build()
    return ca


def _parse_stale(c, a, ca):
    if len(a) > 5:
        raise c.arg_error()
    ca.stale_up_to = 3600.0
    ca.stale_ttl = 0
    ca.stale_recheck = 0.0
    if a:
        dur = _dur(c, a[0])
        if dur < 0:
            raise c.error("invalid negative duration for serve_stale")
        ca.stale_up_to = dur
    ca.verify_stale = False
    ca.verify_timeout = 0.0
    if len(a) > 1:
        mode = a[1].lower()
        if mode not in ("immediate", "verify"):
            raise c.error("invalid value for serve_stale refresh mode: %s"
                          % mode)
        ca.verify_stale = mode == "verify"
    rest = a[2:]
    if ca.verify_stale and rest:
        try:
            t = parse_duration(rest[0], strict=True)
        except ValueError:
            raise c.error("invalid serve_stale verify timeout: %s" % rest[0])
        if t < 0:
            raise c.error("invalid negative timeout for serve_stale verify")
        ca.verify_timeout = t
        rest = rest[1:]
    elif not ca.verify_stale and len(rest) > 2:
        raise c.arg_error()
    if rest:
        try:
            t = parse_duration(rest[0], strict=True)
        except ValueError:
            raise c.error("invalid serve_stale response TTL: %s" % rest[0])
        if t < 0:
            raise c.error("invalid negative response TTL for serve_stale")
        if t != int(t):
            raise c.error("serve_stale response TTL must be a whole number "
                          "of seconds")
        if t > 0xFFFFFFFF:
            raise c.error("serve_stale response TTL exceeds the DNS TTL "
                          "range")
        ca.stale_ttl = int(t)
    if len(rest) > 1:
        try:
            t = parse_duration(rest[1], strict=True)
        except ValueError:
            raise c.error("invalid serve_stale failure recheck: %s" % rest[1])
        if t < 0:
            raise c.error("invalid negative failure recheck for serve_stale")
        if t > 300:
            raise c.error("serve_stale failure recheck cannot exceed 5 "
                          "minutes")
        ca.stale_recheck = t

