"""The hand-over from the watch threads to the reactor thread.

Watch threads deliver pages and event batches with ``callFromThread``
into ``Feed.feed``; a plugin's store subclasses ``Feed`` and indexes the
records its way, and everything here runs on the reactor, so queries
read plain dicts without locks.  A relist marks what each page brings
and sweeps the rest at the end: one store, no copy.

Work from the watch threads is queued and drained at most ``BUDGET``
records per reactor turn, the rest in the next turn, so a burst (a
relist, a storm of events) never holds the reactor for long.
"""

import collections
from typing import Any

from corednstw.service import stall

#: Records applied per reactor turn (~5 us each: ~1-2 ms a turn).
BUDGET = 250
#: During the first sync, records applied between two gc freezes.
FREEZE_EVERY = 10000


class Feed:
    """The queue, the sync state and the mark-and-sweep of relists.

    A subclass gives ``apply(kind, events)`` (records with a ``mark``
    attribute set to ``gen[kind]``), ``_table(kind)`` (key -> record)
    and ``_delete(kind, key, record)``."""

    def __init__(self, kinds, later=None):
        self.kinds = tuple(kinds)
        self.later = later          # callLater(delay, f) for the next turn
        # (op, kind, events) as fed, waiting to be applied
        self.pending: collections.deque[tuple[str, str, Any]] = \
            collections.deque()
        self._drain_call = None
        self.stopped = False
        self._unfrozen = 0
        self.synced_kinds = set()
        self.gen = dict.fromkeys(self.kinds, 0)
        self.version = 0            # bumped by every change (answer caches)
        # callables(op, kind, events) given every feed as it comes (the
        # multisocket supervisor sends it on to its workers)
        self.taps = []

    # -- the queue from the watch threads ------------------------------------

    def feed(self, op, kind, events=None):
        """Queue ``op`` ("begin", "apply" or "end") for ``kind``; applied in
        order, at most BUDGET records per reactor turn."""
        for tap in self.taps:
            tap(op, kind, events)
        if op == "apply":
            for i in range(0, len(events), BUDGET):
                self.pending.append((op, kind, events[i:i + BUDGET]))
        else:
            self.pending.append((op, kind, events))
        if self._drain_call is None:
            self.drain()

    def drain(self):
        """Apply queued work up to the budget; the rest in a later turn."""
        self._drain_call = None
        done = 0
        pending = self.pending
        while pending and done < BUDGET:
            op, kind, events = pending.popleft()
            if op == "apply":
                self.apply(kind, events)
                done += len(events)
                self._unfrozen += len(events)
            elif op == "begin":
                self.begin_list(kind)
            else:
                self.end_list(kind)
                done += BUDGET // 2     # the sweep walks the whole table
        if self._unfrozen >= FREEZE_EVERY and not self.synced:
            # A first sync of a big cluster: its records live long; keep
            # the collector's full walks from going over them again and
            # again while the store grows (30 ms each at 50,000 services).
            self._unfrozen = 0
            stall.freeze()
        if pending:
            self._drain_call = self._later()(0, self.drain)

    def _later(self):
        if self.later is None:
            from twisted.internet import reactor
            self.later = reactor.callLater
        return self.later

    def after_fork(self):
        """In a forked child: timers and taps were the parent's; queued
        work is applied on this process's reactor from now on."""
        self.taps = []
        self.later = None
        self._drain_call = None
        if self.pending:
            self.drain()

    def stop(self):
        """Drop queued work (the watchers are gone)."""
        self.stopped = True
        call, self._drain_call = self._drain_call, None
        if call is not None and call.active():
            call.cancel()
        self.pending.clear()

    # -- sync state -----------------------------------------------------------

    @property
    def synced(self):
        return len(self.synced_kinds) == len(self.kinds)

    def begin_list(self, kind):
        self.gen[kind] += 1

    def end_list(self, kind):
        """The last page of a (re)list: sweep what it did not bring."""
        gen = self.gen[kind]
        table = self._table(kind)
        self.version += 1
        for key in [k for k, v in table.items() if v.mark != gen]:
            self._delete(kind, key, record=False)
        if not self.synced:
            self.synced_kinds.add(kind)
            if self.synced:
                # The first sync's records live long: out of the
                # collector's walks (once: a freeze also keeps whatever
                # garbage cycles exist at that moment).
                stall.freeze()

    # -- the subclass's part --------------------------------------------------

    def apply(self, kind, events):
        """Apply [(type, record)]: type LIST (a list page item), ADDED,
        MODIFIED, or DELETED (then a ``watch.Key``)."""
        raise NotImplementedError

    def _table(self, kind):
        """The records of ``kind`` by key (what a relist sweeps)."""
        raise NotImplementedError

    def _delete(self, kind, key, record):
        """Remove ``key`` of ``kind`` (``record``: a DELETED event, not a
        relist's sweep)."""
        raise NotImplementedError


class Watching:
    """The life cycle a plugin keeping a ``Feed`` filled by watchers
    shares with every other (IInheritable, IFedData): ``store``,
    ``watchers`` and ``_inherited`` are its attributes."""

    store: Feed | None = None
    watchers: list = []
    _inherited = False

    def inherit(self, old):
        """Take over the watches and the store of ``old``, the same
        directive in an unchanged block before a reload: no relist."""
        if old.store is None or not old.watchers:
            return False
        self.store = old.store
        self.watchers, old.watchers = old.watchers, []
        self._inherited = True
        return True

    def fed_stores(self):
        return [self.store] if self.store is not None else []

    def worker_init(self):
        """A multisocket worker: the store came with the fork, the
        supervisor sends its changes; start() sets up the rest only."""
        self.watchers = []
        self._inherited = self.store is not None
        if self.store is not None:
            self.store.after_fork()
