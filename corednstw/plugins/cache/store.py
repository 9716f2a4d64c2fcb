"""cache's entries: one stored answer (Item) and the sharded map that
holds them (Store), as CoreDNS's cache and its plugin/pkg/cache lay
them out."""

from corednstw.core import dnswire as w

SHARDS = 256


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
