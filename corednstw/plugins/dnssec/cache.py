"""The signature cache: RRSIGs by the RRset they sign.

CoreDNS keys its cache on a hash of the records' text (owner as written,
TTL, class, type, rdata), so an RRset that changes in any way, its TTL
included, is signed again.  The key here is the tuple of those fields,
which a dict hashes for us.  Signatures are made valid from three hours
before until eight days after signing; one is served from the cache only
while it would still be valid two days from now, so a cached signature is
replaced after six days, as CoreDNS does.  A full cache drops its oldest
entry (CoreDNS drops a random one).
"""

#: CoreDNS's signature validity: from 3 hours before to 8 days after.
INCEPTION_OFFSET = 3 * 3600
VALIDITY = 8 * 24 * 3600
#: A cached signature must still be valid this far ahead (75% of 8 days).
MARGIN = 2 * 24 * 3600
#: How often expiring entries are swept out.
CLEAN_INTERVAL = 8 * 3600
DEFAULT_CAPACITY = 10000


def validity(now):
    """(inception, expiration) for signatures made at ``now`` (seconds)."""
    now = int(now)
    return now - INCEPTION_OFFSET, now + VALIDITY


def rrset_key(rrs):
    """The cache key of an RRset: every field of every record, in order
    (a one-record set, the usual case, keyed by its record's fields)."""
    if len(rrs) == 1:
        rr = rrs[0]
        return (rr.name, rr.rtype, rr.rclass, rr.ttl, rr.rdata)
    return tuple([(rr.name, rr.rtype, rr.rclass, rr.ttl, rr.rdata)
                  for rr in rrs])


class SignatureCache:
    """Bounded map from an RRset key to (signatures, inception,
    expiration)."""

    def __init__(self, capacity=DEFAULT_CAPACITY):
        self.capacity = capacity
        self.items = {}

    def __len__(self):
        return len(self.items)

    def get(self, key, now):
        """The signatures for ``key`` if they are valid at ``now`` plus
        two days, else None."""
        entry = self.items.get(key)
        if entry is None:
            return None
        sigs, inception, expiration = entry
        ahead = now + MARGIN
        if inception <= ahead <= expiration:
            return sigs
        return None

    def set(self, key, sigs, inception, expiration):
        items = self.items
        if key not in items and len(items) >= self.capacity:
            if self.capacity <= 0:
                return
            del items[next(iter(items))]
        items[key] = (sigs, inception, expiration)

    def clean(self, now):
        """Drop every entry ``get`` would no longer return."""
        ahead = now + MARGIN
        stale = [k for k, (_, i, e) in self.items.items()
                 if not i <= ahead <= e]
        for k in stale:
            del self.items[k]
        return len(stale)
