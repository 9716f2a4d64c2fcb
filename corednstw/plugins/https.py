"""https: options of the block's DNS-over-HTTPS listeners.

``https { max_connections N }``: at most N concurrent connections per
listener (default 200, 0 for no limit); the listener stops accepting while
that many are open.  Stored in ``block.settings["https"]``.
"""

from corednstw.core.plugin import Plugin
from corednstw.engines.limits import read_limits

#: Read as quic's (and https3's, grpc_server's) listener options are,
#: with the same words as CoreDNS.
OPTIONS = ("max_connections",)


class HTTPS(Plugin):
    name = "https"
    in_chain = False

    def __init__(self, values):
        self.values = values


def setup(d, block):
    values = read_limits(d, OPTIONS, zero=True)
    block.settings["https"] = values
    return HTTPS(values)
