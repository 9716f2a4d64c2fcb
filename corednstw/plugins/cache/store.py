"""cache's entries: one stored answer (Item) and the sharded map that
holds them (Store), as CoreDNS's cache and its plugin/pkg/cache lay
them out."""

import random
from typing import Any

from corednstw.core import dnswire as w

SHARDS = 256

_random = random.Random().random
_new = object.__new__


def _below(n):
    """A random integer in [0, n): random() is one C call, randrange a
    few Python ones (this runs for every eviction)."""
    return int(_random() * n)


class Item:
    __slots__ = ("segs", "hflags", "ad", "rcode", "an", "ns", "ar",
                 "orig_ttl", "stored", "hits", "last", "refreshing",
                 "retry_after", "qlen", "answering", "lkg", "body",
                 "body_ttl")

    def __init__(self, p, now, duration):
        self._fill(p.segs, p.flags, p.rcode, p.counts, p.qlen, now, duration)

    @classmethod
    def plain(cls, segs, flags, an, qlen, now, duration, rcode=w.NOERROR,
              ns=0, ar=0):
        """An entry of ``an`` answer records and ``ar`` additional ones
        (or of ``ns`` authority records: a denial's SOA), built from its
        parts (cache's quick paths for a miss)."""
        # _fill's work written out: this runs for every miss.
        item = _new(cls)
        item.segs = segs
        item.hflags = flags & w.RA
        item.ad = flags & w.AD
        item.rcode = rcode
        item.an, item.ns, item.ar = an, ns, ar
        item.qlen = qlen
        item.orig_ttl = int(duration)
        item.body = None
        item.body_ttl = -1
        item.stored = item.last = now
        item.hits = 0
        item.refreshing = False
        item.retry_after = item.lkg = None
        item.answering = False
        return item

    def _fill(self, segs, flags, rcode, counts, qlen, now, duration):
        self.segs = segs
        self.hflags = flags & w.RA
        self.ad = flags & w.AD
        self.rcode = rcode
        self.an, self.ns, self.ar = counts
        self.qlen = qlen
        self.orig_ttl = int(duration)
        #: The body last sent and its TTL (a hot name is sent many times
        #: a second with the same TTL).
        self.body = None
        self.body_ttl = -1
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
    shard drops a random entry for a new key.

    CoreDNS drops the first key its map iteration yields, and Go starts
    every map iteration at a random place: the victim is random.  That
    matters: with names asked in a cycle a little larger than the cache
    (a service sweep, a client's search list), dropping the oldest misses
    every time while a random victim keeps most of them (about 88% hits
    against 46% for 10,000 names over 9,984 entries).  Each shard keeps
    its keys in a list beside its map: the victim is one random index of
    it, and the new key takes its place there (no walk, no allocation)."""

    def __init__(self, size):
        self.shard_size = max(size // SHARDS, 4)
        self.shards: list[dict[tuple[Any, ...], Item]] = [
            {} for _ in range(SHARDS)]
        #: Each shard's keys, in no particular order.
        self.keys: list[list[tuple[Any, ...]]] = [[] for _ in range(SHARDS)]
        self.count = 0

    def get(self, key):
        return self.shards[hash(key) & 0xFF].get(key)

    def add(self, key, item):
        """Store; True when an entry had to be evicted."""
        h = hash(key) & 0xFF
        s = self.shards[h]
        if key in s:
            s[key] = item
            return False
        keys = self.keys[h]
        n = len(keys)
        if n >= self.shard_size:
            j = _below(n)
            del s[keys[j]]
            keys[j] = key
            s[key] = item
            return True
        keys.append(key)
        s[key] = item
        self.count += 1
        return False

    def remove(self, key):
        """Drop ``key``; True when it was there."""
        h = hash(key) & 0xFF
        if self.shards[h].pop(key, None) is not None:
            self.keys[h].remove(key)
            self.count -= 1
            return True
        return False

    def __len__(self):
        return self.count
