"""shed: a bounded stack of answers per UDP socket; queries shed while it
is full.

CoreDNS's shed keeps Go's per-socket write lock from piling up waiters.
The reactor has one thread and sends without blocking, so here the stack
holds the answers the kernel has no room for (sendto said EAGAIN or
ENOBUFS, which otherwise loses them): at most DEPTH, the oldest evicted by
a newer one, written newest first as soon as the socket takes them again.
While a socket's stack is full, the queries arriving on it are dropped
before any plugin runs (their answers would only evict fresher ones).
Every dropped query and answer is counted.

Under overload the first queue to fill in this server is the socket's
receive queue, which the stack never sees.  So shed also ages it: where
the listener reads in batches (recvmmsg), the kernel stamps each
datagram's arrival, and queries that waited longer than STALE are
dropped unread, the oldest first, instead of being answered after their
clients gave up (counted as dropped queries).  Without shed nothing is
stamped and every query is answered.

The stack is installed on the listener's UDP protocol when the plugin
starts (DNSDatagramProtocol.set_writer): a listener without shed sends as
before, and an answer written while the stack is empty goes straight to
the socket.
"""

import errno
from collections import deque
from functools import partial
from typing import Any

from corednstw.core import metrics
from corednstw.core.plugin import Plugin
from corednstw.core.request import NoReply

#: Answers held per socket: a burst budget, not a setting (CoreDNS's).
DEPTH = 1024
#: Seconds between two tries while the kernel keeps saying "no room".
RETRY = 0.001

#: Seconds a query may wait in a UDP socket's receive queue: older ones
#: are dropped unread (a fixed budget, like DEPTH, not a setting).
STALE = 1.0

#: sendto's answers that mean "no room now, try again".
_AGAIN = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS))

DROPPED = metrics.counter(
    "coredns_shed_dropped_total",
    "Counter of queries and responses dropped, per server, by reason.",
    ("server", "reason"))


def _stale(server, count):
    """Count queries dropped unread because they waited too long."""
    DROPPED.inc((server, "query"), count)


class Stack:
    """One UDP socket's answers waiting for room in the kernel."""

    def __init__(self, reactor, sendto, server, owner, depth=DEPTH):
        self.reactor = reactor
        self.sendto = sendto
        self.server = server
        self.owner = owner
        self.depth = depth
        #: (wire, address) pairs, the newest last
        self.items: deque[tuple[bytes, Any]] = deque()
        self.closed = False
        self._retry = None

    def full(self):
        return len(self.items) >= self.depth

    def write(self, wire, addr):
        """Send now when nothing waits, else stack it (newest on top)."""
        if self.closed:
            DROPPED.inc((self.server, "response"))
            return
        items = self.items
        if not items:
            try:
                self.sendto(wire, addr)
                return
            except OSError as e:
                if e.errno not in _AGAIN:
                    raise
        if len(items) >= self.depth:
            items.popleft()
            DROPPED.inc((self.server, "response"))
        items.append((wire, addr))
        self._schedule(0.0)

    def _schedule(self, delay):
        if self._retry is None and not self.closed:
            self._retry = self.reactor.callLater(delay, self.drain)

    def drain(self):
        """Write the stacked answers, newest first, until the kernel says
        it has no room (then try again shortly)."""
        self._retry = None
        items = self.items
        while items:
            wire, addr = items[-1]
            try:
                self.sendto(wire, addr)
            except OSError as e:
                if e.errno in _AGAIN:
                    self._schedule(RETRY)
                    return
                DROPPED.inc((self.server, "response"))
            items.pop()

    def close(self):
        """Write what the socket takes now; the rest is counted dropped."""
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        try:
            self.drain()
        except Exception:
            pass
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        self.closed = True
        if self.items:
            DROPPED.inc((self.server, "response"), len(self.items))
            self.items.clear()


class Shed(Plugin):
    name = "shed"

    def __init__(self):
        self.stacks = {}        # the UDP socket's local (host, port) -> Stack
        self.installed = []     # (protocol, Stack) this plugin installed
        self.aged = []          # protocols dropping stale queries for it

    def _protocols(self):
        """The UDP protocols of the listeners this block is served on."""
        for _, lst in self.block.server.listeners_of(self.block):
            if lst.udp_protocol is not None:
                yield lst.udp_protocol

    def start(self):
        for proto in self._protocols():
            stack = proto.writer
            if not isinstance(stack, Stack) or stack.closed or \
                    stack.owner.block.config is not self.block.config:
                stack = Stack(self.reactor, proto.transport.socket.sendto,
                              proto.mux.label, self)
                proto.set_writer(stack)
                self.installed.append((proto, stack))
            self.stacks[proto.local] = stack
            server = proto.mux.label
            if proto.set_stale(STALE, partial(_stale, server)):
                proto.stale_owner = self
                self.aged.append(proto)

    def stop(self):
        for proto in self.aged:
            if proto.stale_owner is self:   # not a newer configuration's
                proto.set_stale(None)
                proto.stale_owner = None
        self.aged = []
        for proto, stack in self.installed:
            if proto.writer is stack:
                proto.set_writer(None)
            stack.close()
        self.installed = []
        self.stacks = {}

    def serve(self, req):
        if req.proto == "udp":
            stack = self.stacks.get(req.local)
            if stack is not None and len(stack.items) >= stack.depth:
                DROPPED.inc((stack.server, "query"))
                return NoReply()
        return self.next.serve(req)


def setup(d, block):
    """``shed`` takes nothing, and serves only plain DNS blocks (the
    stack sits on a UDP socket)."""
    d.no_args()
    if d.children:
        raise d.error("shed takes no options")
    for key in block.keys:
        if key.transport != "dns":
            raise d.error('only plain DNS server blocks are supported; "%s" '
                          'uses transport "%s"' % (key.key or str(key),
                                                   key.transport))
    return Shed()
