"""Helpers of the end-to-end tests that run whole Corefiles: the node's
resolver (a test upstream named by a resolv.conf), waiting for loop's
probes, no lameduck at cleanup."""

import os
import random

from twisted.internet import error, protocol, reactor

from tests.support import upstream as upstreammod
from tests.support import util


class Resolver:
    """The node's resolver for ``/etc/resolv.conf``: a test upstream on
    port 53 of a loopback address of its own (resolv.conf names no
    port).  Where port 53 cannot be bound (no privilege), the upstream
    listens on a free port of 127.0.0.1 and ``target`` is that address
    instead of a resolv.conf file."""

    def __init__(self, testcase, directory):
        self.up = upstreammod.Upstream()
        self.target = None
        rng = random.Random()
        fac = protocol.ServerFactory()
        fac.protocol = lambda: upstreammod._TCP(self.up)
        for _ in range(20):
            host = "127.53.%d.%d" % (rng.randrange(256), rng.randrange(1, 255))
            try:
                udp = reactor.listenUDP(53, upstreammod._UDP(self.up),
                                        interface=host, maxPacketSize=65535)
            except error.CannotListenError as e:
                if isinstance(e.socketError, PermissionError):
                    break
                continue
            try:
                tcp = reactor.listenTCP(53, fac, interface=host)
            except error.CannotListenError:
                udp.stopListening()
                continue
            self.up.udp, self.up.tcp, self.up.port = udp, tcp, 53
            self.host = host
            self.target = os.path.join(directory, "resolv.conf")
            with open(self.target, "w") as fh:
                fh.write("# the node's resolver\nsearch example.test\n"
                         "nameserver %s\noptions ndots:5\n" % host)
            break
        if self.target is None:
            self.up.start()
            self.host = "127.0.0.1"
            self.target = self.up.addr()
        testcase.addCleanup(self.up.stop)

    @property
    def to(self):
        """The upstream as forward's metrics name it."""
        return "%s:%d" % (self.host, self.up.port)


def probes_answered(app):
    """Deferred: every loop plugin's probe came back (none left in flight
    when the test ends)."""
    loops = [p for p in app.config.plugins() if p.name == "loop"]
    return util.wait_for(lambda: all(
        lp.off or any(t.active() for t in lp.timers) for lp in loops))


def no_lameduck(testcase, app):
    """Most tests need no 5s lameduck at cleanup (runs before the stop)."""
    def zero():
        for p in app.config.plugins():
            if p.name == "health":
                p.lameduck = 0.0
    testcase.addCleanup(zero)
