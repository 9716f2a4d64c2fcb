"""bufsize: cap the EDNS0 UDP size of queries (default 1232).

A query whose OPT advertises more than SIZE bytes is changed to advertise
SIZE: every later plugin, the answer's size limit and the OPT echoed to the
client, and the bytes an upstream is sent, all see the smaller value.
Queries without OPT are untouched; the size is never raised.
"""

import struct

from corednstw.core import dnswire as w
from corednstw.core.directive import ARG_COUNT
from corednstw.core.plugin import Plugin

DEFAULT = 1232
_H = struct.Struct("!H")


def _opt_class_offset(data, qend):
    """Offset of the OPT record's class field (its UDP size) in a query."""
    an, ns, ar = struct.unpack_from("!HHH", data, 6)
    off = qend
    for _ in range(an + ns):
        off = w.skip_rr(data, off)[0]
    for _ in range(ar):
        start = w.read_name(data, off)[1]
        nxt, rtype = w.skip_rr(data, off)[:2]
        if rtype == w.OPT:
            return start + 2
        off = nxt
    return None


class Bufsize(Plugin):
    name = "bufsize"

    def __init__(self, size):
        self.size = size

    def serve(self, req):
        edns = req.edns
        if edns is not None and edns.size > self.size:
            edns.size = self.size
            off = _opt_class_offset(req.data, req.qend)
            if off is not None:
                data = req.data
                req.data = data[:off] + _H.pack(self.size) + data[off + 2:]
                req._message = None
        return self.next.serve(req)


def setup(d, block):
    """``bufsize [SIZE]``: no block, SIZE from 512 to 4096."""
    d.no_block()
    args = d.between(0, 1)
    if not args:
        return Bufsize(DEFAULT)
    # CoreDNS answers every bad SIZE with its argument-count error.
    return Bufsize(d.integer(args[0], lo=512, hi=4096, error=ARG_COUNT,
                             range_error=ARG_COUNT))
