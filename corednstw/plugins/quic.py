"""quic: options of the block's DNS-over-QUIC listeners.

``quic { max_streams N; worker_pool_size N }``: the streams a client may
have open at once on one connection (default 256) and the streams
answered at once over all connections of the listener (default 1024,
CoreDNS's code, where its README says 512; the others wait).  Stored
in ``block.settings["quic"]`` as a ``dnsserver.doq.Settings``; the listener
takes its first block's.
"""

from corednstw.core.plugin import Plugin
from corednstw.dnsserver import doq

OPTIONS = ("max_streams", "worker_pool_size")


class QUIC(Plugin):
    name = "quic"
    in_chain = False

    def __init__(self, settings):
        self.settings = settings


def integer_option(c, zero=False):
    """The one positive (or, with ``zero``, non-negative) integer
    argument of an option, with CoreDNS's messages."""
    if len(c.args) != 1:
        raise c.arg_error()
    try:
        n = int(c.args[0])
    except ValueError as e:
        raise c.error("invalid %s value '%s': strconv.Atoi: parsing \"%s\": "
                      "invalid syntax" % (c.name, c.args[0], c.args[0])
                      ) from e
    if n < 0 or (n == 0 and not zero):
        raise c.error("%s must be a %s integer: %d" % (
            c.name, "non-negative" if zero else "positive", n))
    return n


def options(d, names, zero=False):
    """{option: value} of the directive's block of integer options."""
    if d.args:
        raise d.arg_error()
    values = {}
    for c in d.children:
        if c.name not in names:
            raise c.error("unknown property '%s'" % c.name)
        n = integer_option(c, zero)
        if c.name in values:
            raise c.error("%s already defined for this server block"
                          % c.name)
        values[c.name] = n
    return values


def setup(d, block):
    settings = doq.Settings(**options(d, OPTIONS))
    block.settings["quic"] = settings
    return QUIC(settings)
