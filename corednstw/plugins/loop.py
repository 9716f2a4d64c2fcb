"""loop: detects a forwarding loop at start-up (CoreDNS's loop).

At start the plugin sends ``<random>.<random>.<zone> HINFO`` to the
server's own listener, once a second (after failures) for at most 30
seconds.  If the probe comes back through the server three times, queries
are going round in a circle: the plugin logs CoreDNS's FATAL line and ends
the process with exit code 1.  Once a probe is answered (or after 30
seconds) the plugin switches itself off.
"""

import os
import secrets
from collections.abc import Sequence
from typing import Optional

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.plugin import Plugin, match
from corednstw.core.request import Response, make_query

PROBE_FOR = 30.0
RETRY = 1.0
PROBE_TIMEOUT = 2.0


def default_exit(code):
    """Stop the reactor and leave with ``code`` (logger.Fatal's os.Exit)."""
    from twisted.internet import reactor

    def hard():
        os._exit(code)
    try:
        reactor.addSystemEventTrigger("after", "shutdown", hard)
        reactor.stop()
    except Exception:
        hard()


def probe_name(zone):
    a = str(secrets.randbelow(1 << 62))
    b = str(secrets.randbelow(1 << 62))
    return "%s.%s.%s" % (a, b, "" if zone == "." else zone)


class Loop(Plugin):
    name = "loop"

    def __init__(self, zone):
        self.zone = zone
        self.qname = probe_name(zone)
        self.seen = 0
        self.off = False
        self.fatal = False
        self.addr = ""
        #: Called with 1 when a loop is found; tests replace it.
        self.exit = default_exit
        self.reactor = None
        self.timers = []
        self.deadline = 0.0
        self.target = None

    def serve(self, req):
        if req.qtype != w.HINFO or self.off:
            return self.next.serve(req)
        if match((self.zone,), req.qname) is None:
            return self.next.serve(req)
        if req.qname == self.qname:
            self.seen += 1
        if self.seen > 2:
            if not self.fatal:
                self.fatal = True
                logger.fatal("loop", 'Loop (%s -> %s) detected for zone "%s", '
                          'see https://coredns.io/plugins/loop#troubleshooting'
                          '. Query: "HINFO %s"' % (
                              _join(req.client, req.port), self.addr,
                              self.zone, self.qname))
                self.exit(1)
            return Response(w.SERVFAIL)
        return self.next.serve(req)

    # -- the probe ------------------------------------------------------------

    def start(self):
        server = self.block.server
        self.reactor = server.reactor
        host, port, shown = self._listener(server)
        if port is None:
            self.off = True
            return
        self.addr = shown
        self.target = (host, port)
        self.deadline = self.reactor.seconds() + PROBE_FOR
        self._probe()

    def stop(self):
        self.off = True
        for t in self.timers:
            if t.active():
                t.cancel()
        self.timers = []

    def _listener(self, server):
        """(host to probe, port, address as CoreDNS prints it)."""
        key = self.block.keys[0]
        hosts: Sequence[Optional[str]] = self.block.bind or [None]
        lh = hosts[0]
        for (t, h, p), lst in server.listeners_of(self.block):
            if t == key.transport and h == lh and str(p) == str(key.port):
                host = lh or "127.0.0.1"
                if host in ("::", "0.0.0.0"):
                    host = "127.0.0.1"
                return host, lst.port, _join(lh or "", lst.port)
        return None, None, ""

    def _later(self, delay, fn):
        self.timers = [t for t in self.timers if t.active()]
        self.timers.append(self.reactor.callLater(delay, fn))

    def _probe(self):
        if self.off:
            return
        if self.reactor.seconds() >= self.deadline:
            self.off = True
            return
        from corednstw.engines.upstream import exchange
        target = self.target
        assert target is not None       # start() set it before probing
        wire = make_query(self.qname, w.HINFO, msgid=secrets.randbits(16))
        d = exchange(self.reactor, target[0], target[1], wire,
                     "udp", PROBE_TIMEOUT)
        d.addCallbacks(self._answered, self._failed)

    def _answered(self, data):
        # Answered: no loop.  CoreDNS switches the plugin off right after
        # the first answered probe (its delayed switch-off is redundant).
        self._disable()

    def _failed(self, failure):
        self.seen = 0
        self._later(RETRY, self._probe)

    def _disable(self):
        self.off = True


def _join(host, port):
    if ":" in host:
        return "[%s]:%s" % (host, port)
    return "%s:%s" % (host, port)


def setup(d, block):
    d.no_args()
    zone = "."
    if block.keys:
        from corednstw.core import names
        z = names.normalize(block.keys[0].key)
        if z:
            zone = z[0]
    return Loop(zone)
