"""A reactor stall monitor: a timer that records how late it fires.

Every query, probe and scrape waits while the reactor is busy, so a long
reactor turn (a big batch applied, a long GIL hold by another thread) is
what makes /ready and /health miss their deadlines.  A repeating timer
measures it from the outside: the delay between when it was due and when
it ran is the length of the turn (or GIL wait) that held it up.

The period is 10 ms: a stall shorter than the period can hide between two
ticks, so the period bounds the resolution, and our stall budget is 20 ms;
the cost is about a hundred cheap calls a second (well under 0.1 % of a
core).  The lateness goes into a histogram and into a gauge that holds the
maximum since the last scrape, so a scrape every few seconds still sees a
single 50 ms stall.
"""

import gc
import sys

from corednstw.core import metrics

PERIOD = 0.01
#: The GIL switch interval while the server runs (Python's default: 5 ms).
SWITCH = 0.001

LATENESS = metrics.histogram(
    "coredns_corednstw_reactor_lateness_seconds",
    "How late the reactor's stall-monitor timer fired, in seconds.",
    (), (.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5))


class StallMonitor:
    """Ticks every ``period`` seconds on ``reactor`` and records lateness.

    ``max_lateness`` is the largest lateness since the last ``take_max``
    (the gauge's scrape), ``worst`` the largest since start.
    """

    def __init__(self, reactor, period=PERIOD):
        self.reactor = reactor
        self.period = period
        self.max_lateness = 0.0
        self.worst = 0.0
        self._due = None
        self._call = None

    def start(self):
        if self._call is None:
            self._schedule(self.reactor.seconds())

    def stop(self):
        call, self._call = self._call, None
        if call is not None and call.active():
            call.cancel()

    @property
    def running(self):
        return self._call is not None

    def _schedule(self, now):
        self._due = now + self.period
        self._call = self.reactor.callLater(self.period, self._tick)

    def _tick(self):
        now = self.reactor.seconds()
        self.record(max(0.0, now - self._due))
        self._schedule(now)

    def record(self, late):
        """One observation of lateness (seconds)."""
        LATENESS.observe((), late)
        if late > self.max_lateness:
            self.max_lateness = late
        if late > self.worst:
            self.worst = late

    def take_max(self):
        """The maximum since the previous call; starts a new interval."""
        late, self.max_lateness = self.max_lateness, 0.0
        return late


#: The monitor of the running server (one reactor per process).
_current: list[StallMonitor] = []


def _scrape():
    if not _current:
        return {}
    return {(): _current[-1].take_max()}


MAX_LATENESS = metrics.gauge(
    "coredns_corednstw_reactor_max_lateness_seconds",
    "The largest lateness of the reactor's stall-monitor timer since the "
    "previous scrape, in seconds.", (), fn=_scrape)


def freeze():
    """Move every object alive now out of the garbage collector's reach.

    A full collection walks every tracked object while holding the GIL:
    with the modules, the configuration and a large cluster's records in
    memory that is 50-150 ms during which the reactor cannot run (the
    longest stalls the monitor saw).  What exists after start-up (modules,
    configuration) or after a sync (the records) lives long and holds no
    garbage cycles worth finding, so later collections skip it; freed
    objects are still freed by reference counting.
    """
    gc.freeze()


#: True while ``pause_collector`` holds the collector off.
_paused = False


def pause_collector():
    """Hold the garbage collector off for the start-up.

    Between the commands' first line and the first configuration's
    start (the imports, the Corefile, the first lists of a large
    cluster) the collector runs hundreds of collections over a heap that
    only grows and holds no garbage worth finding: a tenth of the CPU
    time to /ready.  Reference counting still frees what is dropped;
    ``resume_collector`` turns the collector back on."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collector():
    """The start is over (its plugins started, or failed): what it made
    lives long and leaves the collector's walks (``freeze``); the
    collector runs again.  Nothing when ``pause_collector`` did not
    turn it off."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def start(reactor, period=PERIOD):
    """Start a monitor on ``reactor``; it backs the gauge until stopped.

    Also shortens the GIL switch interval: a thread waiting for the GIL
    asks for it only after the interval, and with several busy threads
    (watches decoding a list) the reactor can lose that race a few times
    in a row; at 1 ms a lost race costs 1 ms, not 5.
    """
    sys.setswitchinterval(SWITCH)
    mon = StallMonitor(reactor, period)
    mon.start()
    _current.append(mon)
    return mon


def stop(mon):
    mon.stop()
    if mon in _current:
        _current.remove(mon)
