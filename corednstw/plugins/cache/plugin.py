"""cache's plugin: the hit path and the miss, prefetch and serve_stale
paths (CoreDNS's cache).

Entries are kept in wire form: the message body after the question, cut at
every TTL field (the OPT record dropped).  A hit joins the pieces with the
one remaining TTL, puts the client's header and question in front and the
client's OPT behind: no decoding, no record objects.  Layout and rules are
CoreDNS's: 256 shards, capacity rounded down to a multiple of 256 (at least
4 per shard), every record of an answer given the same TTL (the smallest
TTL of the message, clamped to [MINTTL, TTL]), AA set on hits, DO and CD
part of the key, truncated answers never stored.  What a response is and
whether it may be stored is decided by the response engine.
"""

import math
import struct
import time
from typing import Any, Optional

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core import request as rq
from corednstw.core.interfaces import IKeptAnswers
from corednstw.core.plugin import Plugin, match, then
from corednstw.core.request import NoReply, RawResponse, Response
from corednstw.engines.response import (
    DELEGATION,
    DENIAL,
    META,
    NAMEERROR,
    NODATA,
    NOERROR,
    OTHERERROR,
    SERVERERROR,
    SUCCESS,
    UPDATE,
    answers_question,
    cacheable,
    minimal_ttl,
    parse,
    parse_reply,
    relayed_pieces,
    response_type,
)
from corednstw.plugins.cache.store import (
    RCODE,
    STORED,
    TTL,
    Item,
    Store,
    entry,
)

DEFAULT_CAP = 10000
MAX_TTL = 3600
MIN_TTL = 5
MAX_NTTL = 1800
MIN_NTTL = 5

_HDR = struct.Struct("!HHHHHH")
_TTL = struct.Struct("!I")
_RA_AD = w.RA | w.AD
#: Question types whose answers the quick miss path leaves to the general
#: one: signatures (checked for expiry) and the meta types.
_NOT_PLAIN = frozenset((w.RRSIG, w.ANY, w.AXFR, w.IXFR, w.OPT))

ENTRIES = metrics.gauge(
    "coredns_cache_entries", "The number of elements in the cache.",
    ("server", "type", "zones", "view"), merge="sum")
HITS = metrics.counter(
    "coredns_cache_hits_total", "The count of cache hits.",
    ("server", "type", "zones", "view"))
MISSES = metrics.counter(
    "coredns_cache_misses_total",
    "The count of cache misses. Deprecated, derive misses from cache "
    "hits/requests counters.", ("server", "zones", "view"))


def _requests():
    """Every request the cache sees is counted once, as a hit (of a
    type) or as a miss: the requests counter is their sum, worked out
    when it is scraped rather than counted again per query."""
    out = dict(MISSES.values)
    for (server, _, zones, view), n in HITS.values.items():
        k = (server, zones, view)
        out[k] = out.get(k, 0) + n
    return out


REQUESTS = metrics.counter(
    "coredns_cache_requests_total", "The count of cache requests.",
    ("server", "zones", "view"), fn=_requests)
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


# -- the plugin ---------------------------------------------------------------

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
        self._types = {}
        self._last_types = ((), ((), ()))
        self._label_sets = {}
        #: The next plugin, and the same when it provides IKeptAnswers.
        self._kept_of = None
        self._kept = None

    #: The positive and the denial store, made by ``build`` once the
    #: options (their capacities) are read.
    pcache: Store
    ncache: Store

    def build(self):
        self.pcache = Store(self.pcap)
        self.ncache = Store(self.ncap)
        self.all_zones = "." in self.zones
        #: Whether entries keep state (Items): prefetch counts hits,
        #: serve_stale refreshes, prefer_positive keeps the last good
        #: answer.  Without them an entry is a plain tuple.
        self.stateful = bool(self.prefetch or self.stale_up_to > 0
                             or self.verify_stale or self.prefer_positive)

    # -- the hit path ---------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        if not self.all_zones and match(self.zones, qname) is None:
            return self.next.serve(req)
        e = req.edns
        do = e is not None and (e.ttl & 0x8000) != 0
        rflags = req.flags
        key = (qname, req.qtype, req.qclass, do, (rflags & w.CD) != 0)
        view = req.view
        labels = self._label_sets.get((req.server, view) if view
                                      else req.server)
        if labels is None:
            labels = self._labels(req)
        now = self.now()
        item = self._lookup(key, now, labels)
        if item is None:
            MISSES.inc(labels)
            nxt = self.next
            if nxt is not self._kept_of:
                self._kept_of = nxt
                self._kept = nxt if IKeptAnswers.providedBy(nxt) else None
            kept = self._kept
            if kept is not None and (rflags & 0x7800 or
                                     req.qtype in _NOT_PLAIN):
                kept = None
            if kept is not None:
                # The next plugin keeps this answer, or works it out now,
                # already cut at its TTLs (kubernetes): stored and sent
                # as it is.  Else it may have answered in full.
                p = kept.kept_answer(req)
                if p is not None:
                    if p.__class__ is tuple:    # request.Pieces
                        return self._keep(p, req, key, do, labels, now)
                    return then(p, self._store, req, key, do, labels,
                                None, False, False)
            # The next plugin is asked with AD set (CoreDNS's
            # authenticatedRefreshState): the stored answer then carries
            # the upstream's AD for every later client, whatever this
            # client asked for.
            ask = req if rflags & w.AD else _refresh_request(req)
            resp = nxt.serve(ask)
            if resp.__class__ is Response and resp.raw is None:
                # An answer made of records, here and now (kubernetes,
                # file, hosts): the quick path stores it from them, and
                # hands the cut back to the plugin that keeps it.
                p = self._cut(resp, req)
                if p is not None:
                    if kept is not None and resp.plugin == nxt.name:
                        kept.keep_answer(req, p)
                    return self._keep(p, req, key, do, labels, self.now())
            return then(resp, self._store, req, key, do, labels, None,
                        False, False)
        ttl = item[TTL] - int(now - item[STORED])
        if ttl <= 0:
            return self._stale(req, key, do, labels, item, now, ttl)
        if self.prefetch and self._should_prefetch(item, now, ttl):
            self._try_prefetch(req, key, do, labels, item, now, False)
        if self.keepttl:
            ttl = item[TTL]
        return self._answer(req, item, ttl, do)

    def _typed(self, labels):
        """``labels`` with the success and the denial type put in (the
        label sets of the typed counters), made once per label set."""
        last = self._last_types
        if last[0] is labels:
            return last[1]
        t = self._types.get(labels)
        if t is None:
            if len(self._types) > 256:
                self._types.clear()
            t = self._types[labels] = (
                (labels[0], SUCCESS) + labels[1:],
                (labels[0], DENIAL) + labels[1:])
        self._last_types = (labels, t)
        return t

    def _labels(self, req):
        """The counters' label set of ``req``: one tuple per server and
        view, the same object each time (so _typed knows it at once)."""
        view = req.view
        k = (req.server, view) if view else req.server
        labels = self._label_sets.get(k)
        if labels is None:
            if len(self._label_sets) > 256:
                self._label_sets.clear()
            labels = self._label_sets[k] = (req.server, self.zlabel,
                                            req.view)
        return labels

    def _lookup(self, key, now, labels):
        stale = self.stale_up_to
        if self.prefer_positive and stale > 0:
            i = self.pcache.get(key)
            if i is not None:
                i = i.answering_item()
                if i is not None:
                    ttl = i[TTL] - int(now - i[STORED])
                    if ttl > 0 or -ttl < int(stale):
                        HITS.inc(self._typed(labels)[0])
                        return i
        # An empty denial cache (answers that all exist) is not asked.
        # Both stores shard alike: the key's shard is found once, and
        # read without Store.get's call.
        h = hash(key) & 0xFF
        nc = self.ncache
        i = nc.shards[h].get(key) if nc.count else None
        if i is not None:
            ttl = i[TTL] - int(now - i[STORED])
            if ttl > 0 or (stale > 0 and -ttl < int(stale)):
                if i[RCODE] == w.SERVFAIL:
                    p = self.pcache.get(key)
                    if p is not None:
                        pt = p[TTL] - int(now - p[STORED])
                        if pt > 0 or (stale > 0 and -pt < int(stale)):
                            HITS.inc(self._typed(labels)[0])
                            return p
                HITS.inc(self._typed(labels)[1])
                return i
        i = self.pcache.shards[h].get(key)
        if i is not None:
            ttl = i[TTL] - int(now - i[STORED])
            if ttl > 0 or (stale > 0 and -ttl < int(stale)):
                HITS.inc(self._typed(labels)[0])
                return i
        return None

    def _answer(self, req, item, ttl, do, aa=True, flags=None):
        """Bytes for ``req`` from ``item`` with every TTL set to ``ttl``."""
        qend = req.qend
        segs, hfl, rcode, an, ns, ar, qlen, _, _ = item
        if qend - 12 != qlen:
            return None
        rflags = req.flags
        if flags is None:
            hf = 0x8400 | (hfl & w.RA)  # QR, AA, RA as stored
            if hfl & w.AD and (do or rflags & w.AD):
                hf |= w.AD
            hf |= rflags & 0x7800   # the opcode, and for a QUERY RD
            if not hf & 0x7800:     # and CD: miekg's SetReply (a NOTIFY
                hf |= rflags & (w.RD | w.CD)    # answered has neither)
        else:
            # The answer just received, written through as CoreDNS's
            # cache writes it: its own flags (a NOTIFY's reply has no RD).
            hf = w.QR | (flags & 0x07F0) | (rflags & 0x7800)
            if not do and not rflags & w.AD:
                hf &= ~w.AD
        hf |= rcode
        e = req.edns
        if ttl < 0:
            ttl = 0
        body = _TTL.pack(ttl).join(segs)
        if e is None:
            out = (_HDR.pack(req.id, hf, 1, an, ns, ar)
                   + req.data[12:qend] + body)
        else:
            out = (_HDR.pack(req.id, hf, 1, an, ns, ar + 1)
                   + req.data[12:qend] + body + self._opt(e))
        if rq.too_big(req, len(out)):
            # Too big for this client uncompressed: the structured path
            # compresses and truncates.
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

    # -- misses, prefetch, stale ----------------------------------------------

    def _refresh(self, req, key, do, labels, prefetch, verify=False,
                 client=None):
        """Ask the next plugin with ``req`` and store what it answers; the
        answer is built for ``client`` (default: ``req``).  ``verify``:
        only a usable NOERROR/NXDOMAIN answer counts (else None)."""
        return then(self.next.serve(req), self._store, client or req, key,
                    do, labels, prefetch, verify, True)

    def _store(self, resp, req, key, do, labels, prefetch, verify, quick):
        if resp is None or resp.__class__ is NoReply:
            # Nothing to store, and nothing may be sent.
            return None if verify else resp
        if rq.unwritten(resp):
            # An error the server writes: CoreDNS's cache never sees it.
            return None if verify else resp
        raw = resp.raw
        if not verify and prefetch is None:
            if raw is not None:
                # The usual reply relayed from an upstream: kept as it is
                # cut, without the general path's reading.
                p = None if req.opcode else relayed_pieces(raw, req,
                                                           resp.plugin)
                if p is not None:
                    return self._keep(p, req, key, do, labels, self.now())
            elif quick and resp.__class__ is Response:
                out = self._quick(resp, req, key, do, labels)
                if out is not None:
                    return out
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
        else:
            # Stored uncompressed: hits are sent as CoreDNS writes what
            # fits the client.
            now = self.now()
            p = parse_reply(raw, int(now))
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
        an, ns, ar = p.counts
        item = entry(p.segs, p.flags, p.rcode, an, ns, ar, p.qlen, now, dur)
        if self.stateful:
            item = Item.of(item)
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

    def _quick(self, resp, req, key, do, labels):
        """The quick path of a miss answered by a structured Response: the
        usual answer or denial of an authoritative plugin (kubernetes,
        file, hosts; see request.pieces) is stored and sent from its
        records, with the entry, TTL and bytes that encoding the answer
        and reading it back would give; None when the answer has another
        shape (the general path then handles it)."""
        p = self._cut(resp, req)
        if p is None:
            return None
        return self._keep(p, req, key, do, labels, self.now())

    def _cut(self, resp, req):
        """``resp`` cut for an entry (request.pieces) when the quick path
        takes it, else None."""
        if req.opcode or req.qtype in _NOT_PLAIN:
            return None
        return rq.pieces(req, resp)

    def _keep(self, p, req, key, do, labels, now):
        """Store the answer ``p`` (request.Pieces) for ``key`` and send it
        to ``req`` as _answer sends the answer just received (its own
        flags), without its checks (the entry is made for this
        question): an answer under the positive rules, a denial under
        the negative ones.  The entry shares the pieces."""
        segs, flags, rcode, an, ns, ar, ttl, plugin = p
        rflags = req.flags
        flags |= rflags & (w.RD | w.CD)
        # min(max(ttl, low), high), the denial's ttl capped first
        # (written out: this runs for every miss).
        if an:
            low, high = self.minpttl, self.pttl
        else:
            low, high = self.minnttl, self.nttl
            if ttl > high:
                ttl = high
        if ttl < low:
            ttl = low
        if ttl > high:
            ttl = high
        dur = int(ttl)
        # entry()'s work written out: this runs for every miss.
        item: Any = (segs, flags & _RA_AD, rcode, an, ns, ar,
                     req.qend - 12, dur, now)
        if self.stateful:
            item = Item.of(item)
            # prefer_positive: an answer answers its question here.
            item.answering = an > 0
        if not an:
            if dur > 0:
                self._set(key, item, NAMEERROR if rcode else NODATA,
                          req.qname, labels, None)
        elif self.pexcept or self.prefer_positive:
            if dur > 0:
                self._set(key, item, NOERROR, req.qname, labels, None)
        elif dur > 0:
            # _set's work for this case.
            pc = self.pcache
            if pc.add(key, item):
                EVICTIONS.inc(self._typed(labels)[0])
            else:
                ENTRIES.set(self._typed(labels)[0], len(pc))
        if dur < 0:
            dur = 0
        body = _TTL.pack(dur).join(segs)
        hf = w.QR | (flags & 0x07F0) | (rflags & 0x7800) | rcode
        if not do and not rflags & w.AD:
            hf &= ~w.AD
        e = req.edns
        if e is None:
            out = (_HDR.pack(req.id, hf, 1, an, ns, ar)
                   + req.data[12:req.qend] + body)
        else:
            out = (_HDR.pack(req.id, hf, 1, an, ns, ar + 1)
                   + req.data[12:req.qend] + body + self._opt(e))
        if rq.too_big(req, len(out)):
            resp = rq.parse_response(out)
            resp.plugin = plugin
            return resp
        return RawResponse.prebuilt(out, plugin, final=True)

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
                EVICTIONS.inc(self._typed(labels)[0])
            else:
                ENTRIES.set(self._typed(labels)[0], len(self.pcache))
            # The newest positive state replaces a denial; with
            # prefer_positive only when it answers the question.
            if (item.answering if prefer else prefetch is not None) and \
                    self.ncache.remove(key):
                self._denials(labels)
        elif mt in (NAMEERROR, NODATA, SERVERERROR):
            if self.nexcept and match(self.nexcept, qname) is not None:
                return False
            if self.ncache.add(key, item):
                EVICTIONS.inc(self._typed(labels)[1])
            else:
                self._denials(labels)
        else:
            return False
        return True

    def _denials(self, labels):
        """The denial cache's size changed: its gauge follows."""
        ENTRIES.set(self._typed(labels)[1], len(self.ncache))

    def _should_prefetch(self, item, now, ttl):
        item.update(self.window, now)
        threshold = math.ceil(self.percentage / 100 * item[TTL])
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
        result: defer.Deferred[Optional[Response]] = defer.Deferred()
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
        def expire():
            if not result.called:
                result.callback(self._serve_stale(req, item, do, labels))
        if self.verify_timeout > 0 and not result.called:
            timer = self.reactor.callLater(self.verify_timeout, expire)
        return result

    def _verified(self, req, key, do, stale, fresh):
        """The answer to a successful verify.  With a verify timeout
        CoreDNS answers from the entry it just stored (cache reply
        shaping: AA, the entry's TTL); without one, as the upstream did."""
        if self.verify_timeout > 0:
            new = self.ncache.get(key) or self.pcache.get(key)
            if new is not None and new is not stale:
                ttl = new[TTL] if self.keepttl else \
                    new[TTL] - int(self.now() - new[STORED])
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
