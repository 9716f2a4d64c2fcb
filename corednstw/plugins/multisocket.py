"""multisocket: answer one address from several worker processes.

``multisocket [NUM_SOCKETS]`` (1 to 1024; default: the CPUs this process
may run on, as CoreDNS defaults to GOMAXPROCS).  Stored in
``block.settings["multisocket"]``; the value of a listening address is
that of the first block serving it, as in CoreDNS.  What it starts (a
supervisor holding the sockets and N workers answering on them) lives
in corednstw/service/multiproc.py; docs/plugins/multisocket.md says how.
"""

import os

from corednstw.core.plugin import Plugin

MAX = 1024


class Multisocket(Plugin):
    name = "multisocket"
    in_chain = False

    def __init__(self, count):
        self.count = count


def default_count():
    """The CPUs this process may use (a cpuset or taskset counts, as
    GOMAXPROCS counts them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def setup(d, block):
    if d.children:
        raise d.error("Unexpected token '{', expecting argument")
    args = d.between(0, 1)
    count = _count(d, args[0]) if args else default_count()
    block.settings["multisocket"] = count
    return Multisocket(count)


def _count(d, text):
    """NUM_SOCKETS, 1 to MAX; CoreDNS words the two bounds differently,
    so the upper one is checked here."""
    count = d.integer(text, lo=1, error="invalid num sockets: %s",
                      range_error="num sockets can not be zero or "
                                  "negative: %d")
    if count > MAX:
        raise d.error("num sockets exceeds maximum (%d): %d" % (MAX, count))
    return count
