"""Message IDs for queries sent upstream.

Every query leaves with a fresh random ID (the client's ID goes back on
the reply), so an off-path attacker cannot guess it from the client's.
"""

import os
import struct


class IDs:
    """Random 16-bit message IDs drawn from the OS's generator in batches
    (one urandom call per 2048 queries instead of one per query)."""

    __slots__ = ("pool",)
    BATCH = 2048

    def __init__(self):
        self.pool = []

    def next(self):
        pool = self.pool
        if not pool:
            pool.extend(struct.unpack("!%dH" % self.BATCH,
                                      os.urandom(2 * self.BATCH)))
        return pool.pop()


_IDS = IDs()
#: The next ID; one pool for the whole process (every upstream, the
#: health checks).
new_id = _IDS.next
if hasattr(os, "register_at_fork"):
    # A forked child (a multisocket worker) draws its own: the copy of
    # the parent's batch would repeat the parent's next IDs.
    os.register_at_fork(after_in_child=_IDS.pool.clear)
