"""The pipe between a multisocket supervisor and one of its workers.

A Unix stream socket pair made before the fork, adopted by each side's
reactor.  Messages are tuples, pickled, each behind a 4-byte length:
both ends are this program, forked from one process, so pickle costs
nothing to agree on and carries the store's records as they are.
"""

import pickle
import socket
from typing import Optional

from twisted.internet import abstract, protocol
from twisted.protocols.basic import Int32StringReceiver

#: A relist page or a scrape of a big configuration is a few megabytes;
#: anything past this is a bug, and drops the pipe.
MAX_MESSAGE = 1 << 30


def encode(msg):
    """One message as it goes on the pipe (made once, sent to many)."""
    return pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)


class Channel(Int32StringReceiver):
    """Hands each message to ``handler.received(msg)``; the end of the
    pipe to ``handler.lost()``."""

    MAX_LENGTH = MAX_MESSAGE
    #: The reactor adopts the pipe's socket (``adopt``): the transport is
    #: a connection on a descriptor, which says whether it is closing.
    transport: Optional[abstract.FileDescriptor]

    def __init__(self, handler):
        self.handler = handler

    def stringReceived(self, data):
        self.handler.received(pickle.loads(data))

    def send(self, msg):
        self.send_encoded(encode(msg))

    def send_encoded(self, data):
        if self.transport is not None and not self.transport.disconnecting:
            self.sendString(data)

    def close(self):
        if self.transport is not None:
            self.transport.loseConnection()

    def connectionLost(self, reason=protocol.connectionDone):
        self.handler.lost()


class _One(protocol.Factory):
    """A factory that builds the one protocol it was given."""

    def __init__(self, proto):
        self.proto = proto

    def buildProtocol(self, addr):
        return self.proto


def adopt(reactor, sock, handler):
    """Serve ``sock`` (one end of the pair) on ``reactor``; the reactor
    holds its own descriptor, ``sock`` is closed here."""
    chan = Channel(handler)
    try:
        reactor.adoptStreamConnection(sock.fileno(), socket.AF_UNIX,
                                      _One(chan))
    finally:
        sock.close()
    return chan
