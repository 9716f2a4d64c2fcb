"""proxy's HTTP health check (``health_check PATH:PORT [DURATION]``).

CoreDNS 1.4 checked its upstreams over HTTP, not DNS: a GET of
``http://HOST:PORT/PATH`` for every upstream host, at start and then
every interval.  A status from 200 to 399 clears the host's failures; an
error, a timeout (5 seconds) or another status counts one failure, so a
host is down after ``max_fails`` bad checks in a row.  A host whose check
is still running is not checked again.  Requests go through Twisted's
Agent, so a slow check never blocks the server.
"""

from twisted.internet import task
from twisted.web.client import Agent, HTTPConnectionPool, readBody

from corednstw.core import logger

#: 1.4's HTTP client gave a check this long, connection included.
CHECK_TIMEOUT = 5.0


def check_url(host, port, path):
    """The URL 1.4 checked for an upstream at ``host``: its address with
    the health-check port, then the path."""
    if ":" in host:
        host = "[%s]" % host
    return "http://%s:%s%s" % (host, port, path)


class HealthChecker:
    """Checks every host of a group each ``interval`` seconds until
    stopped."""

    def __init__(self, reactor, hosts, interval):
        self.reactor = reactor
        self.hosts = hosts
        self.interval = interval
        self.loop = None
        self.inflight = set()
        self.pool = HTTPConnectionPool(reactor, persistent=False)
        self.agent = Agent(reactor, connectTimeout=CHECK_TIMEOUT,
                           pool=self.pool)

    def start(self):
        self.loop = task.LoopingCall(self.check_all)
        self.loop.clock = self.reactor
        self.loop.start(self.interval, now=True)

    def stop(self):
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.loop = None
        for d in list(self.inflight):
            d.cancel()
        self.inflight.clear()

    def check_all(self):
        for host in self.hosts:
            self.check(host)

    def check(self, host):
        """One GET of ``host``'s check URL, unless one is running."""
        if not host.check_url or host.checking:
            return
        host.checking = True
        d = self.agent.request(b"GET", host.check_url.encode("ascii"))
        d.addCallback(self._status, host)
        d.addTimeout(CHECK_TIMEOUT, self.reactor)
        d.addCallbacks(self._done, self._failed, callbackArgs=(host,),
                       errbackArgs=(host,))
        self.inflight.add(d)
        d.addBoth(self._forget, d)

    def _status(self, response, host):
        # Read (and drop) the body so the connection ends cleanly.
        return readBody(response).addBoth(lambda _: response.code)

    def _done(self, code, host):
        host.checking = False
        if code < 200 or code >= 400:
            logger.warning("", "Host %s health check returned HTTP code %d"
                           % (host.name, code))
            host.fails += 1
            return
        host.fails = 0

    def _failed(self, failure, host):
        host.checking = False
        if self.loop is None:
            return None     # stopped: the check was cancelled
        logger.warning("", "Host %s health check probe failed: %s"
                       % (host.name, failure.getErrorMessage()))
        host.fails += 1

    def _forget(self, result, d):
        self.inflight.discard(d)
        return result
