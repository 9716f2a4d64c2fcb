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
from corednstw.engines.limits import read_limits

OPTIONS = ("max_streams", "worker_pool_size")


class QUIC(Plugin):
    name = "quic"
    in_chain = False

    def __init__(self, settings):
        self.settings = settings


def setup(d, block):
    settings = doq.Settings(**read_limits(d, OPTIONS))
    block.settings["quic"] = settings
    return QUIC(settings)
