"""cache: positive and negative answer cache (CoreDNS's cache).

The package: ``plugin`` (the Cache plugin: hits from prebuilt wire
segments, misses, prefetch, serve_stale), ``store`` (entries and their
sharded map), ``setup`` (the Corefile stanza).  Classifying responses,
cacheability and the minimal TTL are the response engine's
(``corednstw.engines.response``).
"""

from corednstw.plugins.cache.directive import setup
from corednstw.plugins.cache.plugin import (
    DEFAULT_CAP,
    DROPS,
    ENTRIES,
    EVICTIONS,
    HITS,
    MAX_NTTL,
    MAX_TTL,
    MIN_NTTL,
    MIN_TTL,
    MISSES,
    PREFETCHES,
    REQUESTS,
    SERVED_STALE,
    Cache,
)
from corednstw.plugins.cache.store import SHARDS, Item, Store

__all__ = ["Cache", "Item", "Store", "setup", "DEFAULT_CAP", "MAX_TTL",
           "MIN_TTL", "MAX_NTTL", "MIN_NTTL", "SHARDS", "ENTRIES",
           "REQUESTS", "HITS", "MISSES", "PREFETCHES", "DROPS",
           "SERVED_STALE", "EVICTIONS"]
