"""The upstream hosts of a proxy stanza and the policies choosing among
them (CoreDNS 1.4's plugin/pkg/healthcheck).

A host is *down* when it has ``max_fails`` failures counted against it
(``max_fails 0``: never).  Failures come from exchanges (each one forgotten
again after ``fail_timeout``) and from failed HTTP health checks (cleared
by the next good check).  The policies only pick hosts that are up; when
none is, ``spray`` picks any host at random so traffic still flows.
"""

import random

from corednstw.core import logger


class Host:
    """One upstream: its engine connection and what 1.4 counted per host
    (failures, queries in flight, the health-check URL)."""

    __slots__ = ("name", "proxy", "fails", "conns", "check_url",
                 "checking")

    def __init__(self, name, proxy, check_url=""):
        self.name = name            # "IP:port", the metrics' ``to``
        self.proxy = proxy          # the engine's Upstream
        self.fails = 0
        self.conns = 0
        self.check_url = check_url
        self.checking = False

    def __repr__(self):
        return "<Host %s fails=%d>" % (self.name, self.fails)


class Random:
    """Any host that is up, each with the same chance."""

    def select(self, pool, down):
        up = [h for h in pool if not down(h)]
        return random.choice(up) if up else None


class LeastConn:
    """The host with the fewest queries in flight; ties broken at
    random."""

    def select(self, pool, down):
        up = [h for h in pool if not down(h)]
        if not up:
            return None
        least = min(h.conns for h in up)
        return random.choice([h for h in up if h.conns == least])


class RoundRobin:
    """The next host in turn; a host that is down hands its turn to the
    next one up.  As in 1.4 the counter moves before it is read, so the
    first query goes to the second host."""

    def __init__(self):
        self.robin = 0

    def select(self, pool, down):
        n = len(pool)
        self.robin += 1
        start = self.robin % n
        for i in range(n):
            host = pool[(start + i) % n]
            if not down(host):
                return host
        # 1.4 returned the last host tried even when it was down.
        return pool[(start + n - 1) % n]


class First:
    """The first host, in Corefile order, that is up (``sequential``, and
    its older name ``first``)."""

    def select(self, pool, down):
        for host in pool:
            if not down(host):
                return host
        return None


POLICIES = {
    "random": Random,
    "least_conn": LeastConn,
    "round_robin": RoundRobin,
    "sequential": First,
    "first": First,
}


def spray(pool):
    """The last resort when every host is down: one at random, with the
    warning 1.4 logged."""
    host = random.choice(pool)
    logger.warning("", "All hosts reported as down, spraying to target: %s"
                   % host.name)
    return host
