"""quic: options of the block's DNS-over-QUIC listeners.

``quic { max_streams N; worker_pool_size N }``: the streams a client may
have open at once on one connection (default 256) and the streams
answered at once over all connections of the listener (default 512; the
others wait).  Stored in ``block.settings["quic"]`` as a
``core.quic.Settings``; the listener takes its first block's.
"""

from corednstw.core import quic
from corednstw.core.plugin import Plugin

OPTIONS = ("max_streams", "worker_pool_size")


class QUIC(Plugin):
    name = "quic"
    in_chain = False

    def __init__(self, settings):
        self.settings = settings


def _positive(c):
    """The one positive integer argument of an option."""
    if len(c.args) != 1:
        raise c.arg_error()
    try:
        n = int(c.args[0])
    except ValueError as e:
        raise c.error("invalid %s value '%s': strconv.Atoi: parsing \"%s\": "
                      "invalid syntax" % (c.name, c.args[0], c.args[0])
                      ) from e
    if n <= 0:
        raise c.error("%s must be a positive integer: %d" % (c.name, n))
    return n


def setup(d, block):
    if d.args:
        raise d.arg_error()
    values = {}
    for c in d.children:
        if c.name not in OPTIONS:
            raise c.error("unknown property '%s'" % c.name)
        n = _positive(c)
        if c.name in values:
            raise c.error("%s already defined for this server block"
                          % c.name)
        values[c.name] = n
    settings = quic.Settings(**values)
    block.settings["quic"] = settings
    return QUIC(settings)
