"""https3: options of the block's DNS-over-HTTP/3 listeners.

``https3 { max_streams N; max_connections N }``: the streams a client may
have open at once on one connection (default 256; 0 keeps the QUIC
library's own credit) and the connections the listener keeps (default
200; 0 for no limit; over it a new connection is closed with
H3_EXCESSIVE_LOAD).  Stored in ``block.settings["https3"]`` as a
``dnsserver.doq.Settings``; the listener takes its first block's.
"""

from corednstw.core.plugin import Plugin
from corednstw.dnsserver import doh3, doq
from corednstw.engines.limits import read_limits

OPTIONS = ("max_streams", "max_connections")


class HTTPS3(Plugin):
    name = "https3"
    in_chain = False

    def __init__(self, settings):
        self.settings = settings


def setup(d, block):
    values = read_limits(d, OPTIONS, zero=True)
    settings = doq.Settings(
        values.get("max_streams", doh3.DEFAULT_MAX_STREAMS),
        doq.DEFAULT_WORKER_POOL,
        values.get("max_connections", doh3.DEFAULT_MAX_CONNECTIONS))
    block.settings["https3"] = settings
    return HTTPS3(settings)
