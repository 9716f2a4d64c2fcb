"""health: /health answers 200 OK while the process lives.

``health [ADDRESS] { lameduck DURATION }`` (default :8080).  On shutdown the
server keeps answering (and /health keeps saying OK) for the lameduck
duration before it stops, so load balancers drain it first.

While running, the plugin asks its own /health once a second (CoreDNS's
"overloaded" self-check) and records how long the answer took in
coredns_health_request_duration_seconds; failed checks are counted in
coredns_health_request_failures_total.  The request goes through the
reactor like any client's, so a slow answer means a busy reactor.
"""

from types import SimpleNamespace

from twisted.internet import task
from zope.interface import implementer

from corednstw.core import logger, metrics
from corednstw.core.durations import format_duration
from corednstw.core.interfaces import IHTTPEndpointOwner, ILameduck
from corednstw.core.plugin import Plugin
from corednstw.service import httpd

DEFAULT_ADDRESS = ":8080"

#: Seconds between two self-checks, and how long one may take.
INTERVAL = 1.0
TIMEOUT = 3.0

DURATION = metrics.histogram(
    "coredns_health_request_duration_seconds",
    "Histogram of the time (in seconds) each request took.", (),
    metrics.SLIM_TIME_BUCKETS)
FAILURES = metrics.counter(
    "coredns_health_request_failures_total",
    "The number of times the health check failed.")


@implementer(ILameduck, IHTTPEndpointOwner)
class Health(Plugin):
    name = "health"
    in_chain = False
    runs_in = "supervisor"

    def __init__(self, address, lameduck):
        self.address = address
        self.lameduck = lameduck
        self._loop = None
        self._agent = None      # the client (probe.Prober)
        self._target = None     # (host, port) polled
        self._busy = False
        self._checking = None
        self.url_text = None

    def http_endpoints(self):
        return [(self.address, "/health", httpd.Text(_ok))]

    # -- the self-check -------------------------------------------------------

    def url(self):
        """The URL polled: the bound port, and a loopback address when the
        endpoint listens on every interface (CoreDNS polls localhost)."""
        host, port = self.target()
        if ":" in host:
            host = "[%s]" % host
        return "http://%s:%d/health" % (host, port)

    def target(self):
        """(host, port) of the URL."""
        host, _ = httpd.split_address(self.address, 8080)
        port = self.block.server.http_port(self.address)
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return host, port

    def start(self):
        app = self.block.server
        for p in self.block.config.plugins():
            if isinstance(p, Health) and p.address == self.address:
                if p is not self:
                    return  # one self-check per endpoint, not per block
                break
        try:
            self._target = self.target()
        except KeyError:
            return          # no HTTP listener (a configuration being checked)
        # The HTTP client (health.probe) is made at the first check, one
        # interval from now.
        self.url_text = self.url()
        self._loop = task.LoopingCall(self.check)
        self._loop.clock = app.reactor
        # The first check one interval from now, as CoreDNS's ticker.
        self._loop.start(INTERVAL, now=False)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if self._checking is not None:
            # A check still connecting or waiting: cancelled, so no
            # connection attempt or timeout outlives the plugin.
            self._checking.cancel()
        if self._agent is not None:
            agent, self._agent = self._agent, None
            return agent.close()

    def check(self):
        """One self-check (skipped while the previous one is unanswered)."""
        if self._busy or self._target is None:
            return
        self._busy = True
        app = self.block.server
        if self._agent is None:
            from corednstw.plugins.health.probe import Prober
            host, port = self._target
            self._agent = Prober(app.reactor, host, port, b"/health",
                                 TIMEOUT)
        clock = app.clock
        start = clock()
        d = self._agent.get()
        self._checking = d
        timer = app.reactor.callLater(TIMEOUT, d.cancel)

        def ok(_):
            elapsed = clock() - start
            DURATION.observe((), elapsed)
            if elapsed > 1.0:
                logger.warning("health", 'Local health request to "%s" took '
                            "more than 1s: %s" % (self.url_text,
                                                  format_duration(elapsed)))

        def failed(f):
            DURATION.observe((), clock() - start)
            FAILURES.inc()
            logger.warning("health", 'Local health request to "%s" failed: %s'
                        % (self.url_text, f.getErrorMessage()))

        def done(_):
            self._busy = False
            self._checking = None
            if timer.active():
                timer.cancel()
        d.addCallbacks(ok, failed)
        d.addBoth(done)
        return d


def _ok():
    return 200, "OK"


def _lameduck(d, c):
    """How long a stopping server keeps answering (a bare number counts
    as seconds).  A bad value is reported at the ``health`` line, as its
    unknown properties are."""
    return d.duration(c.one(), strict=False, error="unable to parse "
                      "lameduck duration value: '{text}'")


def setup(d, block):
    address = httpd.address_arg(d, DEFAULT_ADDRESS, children=True)
    o = SimpleNamespace(lameduck=0.0)
    d.read_options({
        "lameduck": lambda c: setattr(o, "lameduck", _lameduck(d, c)),
    }, unknown_here=True)
    return Health(address, o.lameduck)
