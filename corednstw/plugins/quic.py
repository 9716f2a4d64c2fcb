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


def options(d, names, zero=False):
    """{option: value} of the directive's block of integer options, each
    given at most once: positive, or with ``zero`` non-negative (the
    https3 and grpc_server limits, where 0 means none)."""
    d.no_args()
    kind = "non-negative" if zero else "positive"
    values = {}

    def option(c):
        text = c.one()
        n = c.integer(text, lo=0 if zero else 1,
                      error="invalid %s value '%s': %%s"
                      % (c.name, text.replace("%", "%%")),
                      range_error="%s must be a %s integer: %%d"
                      % (c.name, kind))
        if c.name in values:
            raise c.error("%s already defined for this server block"
                          % c.name)
        values[c.name] = n

    d.read_options(dict.fromkeys(names, option))
    return values


def setup(d, block):
    settings = doq.Settings(**options(d, OPTIONS))
    block.settings["quic"] = settings
    return QUIC(settings)
