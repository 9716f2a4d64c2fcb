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
    if len(d.args) > 1:
        raise d.arg_error()
    if not d.args:
        count = default_count()
    else:
        try:
            count = int(d.args[0])
        except ValueError as e:
            raise d.error('invalid num sockets: strconv.Atoi: parsing "%s": '
                          'invalid syntax' % d.args[0]) from e
        if count < 1:
            raise d.error("num sockets can not be zero or negative: %d"
                          % count)
        if count > MAX:
            raise d.error("num sockets exceeds maximum (%d): %d"
                          % (MAX, count))
    block.settings["multisocket"] = count
    return Multisocket(count)
