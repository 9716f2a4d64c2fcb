"""cache's entries: one stored answer (a tuple, or an Item when the
entry keeps state) and the sharded map that holds them (Store), as
CoreDNS's cache and its plugin/pkg/cache lay them out."""

import random
from typing import Any, Optional

from corednstw.core import dnswire as w

SHARDS = 256

_random = random.Random().random


def _below(n):
    """A random integer in [0, n): random() is one C call, randrange a
    few Python ones (this runs for every eviction)."""
    return int(_random() * n)


#: The fields of an entry, a tuple: the body after the question cut at
#: every TTL field; the RA and AD bits of the answer; its rcode; its
#: section counts; the question's length on the wire; the TTL it was
#: stored with and when (Unix seconds).
SEGS, HFLAGS, RCODE, AN, NS, AR, QLEN, TTL, STORED = range(9)


def entry(segs, flags, rcode, an, ns, ar, qlen, now, duration):
    """An entry: an exact tuple of bytes and numbers (``segs`` made a
    tuple too).  The collector stops tracking such a tuple the first
    time it looks at it, so a full cache of them adds nothing to its
    walks (an object per entry, as entries were before, made every full
    collection walk them all)."""
    return (tuple(segs), flags & (w.RA | w.AD), rcode, an, ns, ar, qlen,
            int(duration), now)


class Item(tuple):
    """An entry with the state prefetch, serve_stale and prefer_positive
    keep beside it (their hit counts, refreshes and last known good
    answer): the cache makes these only when one of those is on.
    Read as an entry (the same fields); the state lives in the
    instance's attributes."""

    hits: int
    last: float
    refreshing: bool
    retry_after: Optional[float]
    answering: bool
    lkg: Optional["Item"]

    @classmethod
    def of(cls, fields):
        """An Item holding the fields of the entry ``fields``."""
        item = cls(fields)
        item.hits = 0
        item.last = fields[STORED]
        item.refreshing = False
        item.retry_after = None
        #: prefer_positive: whether this entry answers its question, and
        #: the last answering entry it replaced (last known good).
        item.answering = False
        item.lkg = None
        return item

    @classmethod
    def parsed(cls, p, now, duration):
        """An Item of the parsed answer ``p`` (engines.response)."""
        an, ns, ar = p.counts
        return cls.of(entry(p.segs, p.flags, p.rcode, an, ns, ar, p.qlen,
                            now, duration))

    def answering_item(self):
        """This entry if it answers its question, else its last known
        good one (CoreDNS's answeringItem), or None."""
        if self.answering:
            return self
        lkg = self.lkg
        if lkg is not None and lkg.answering:
            return lkg
        return None

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
        self.shards: list[dict[tuple[Any, ...], Any]] = [
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
