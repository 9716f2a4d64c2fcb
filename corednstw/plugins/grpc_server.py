"""grpc_server: options of the block's gRPC listeners.

``grpc_server { max_streams N; max_connections N }``: the concurrent
streams of one connection (default 256, 0 for no limit) and the
connections the listener keeps open (default 200, 0 for no limit; new
ones wait in the kernel's queue meanwhile).  Stored in
``block.settings["grpc_server"]``; the listener takes its first block's.
"""

from corednstw.core.plugin import Plugin
from corednstw.engines.limits import read_limits

OPTIONS = ("max_streams", "max_connections")


class GRPCServer(Plugin):
    name = "grpc_server"
    in_chain = False

    def __init__(self, values):
        self.values = values


def setup(d, block):
    values = read_limits(d, OPTIONS, zero=True)
    block.settings["grpc_server"] = values
    return GRPCServer(values)
