"""One configuration served by several processes: ``multisocket``.

CoreDNS's multisocket opens NUM_SOCKETS SO_REUSEPORT sockets on an
address and serves them from one Go process.  A Python process answers
on one core, so here the number is of processes: a supervisor and N
workers (N the largest multisocket value of the Corefile, or
--multisocket).

The supervisor is the process twistd runs.  It builds the configuration,
binds every address (for plain DNS one SO_REUSEPORT UDP+TCP pair per
worker slot: the kernel spreads queries over them, each worker reads its
own), serves the HTTP endpoints, reloads, and runs the plugins that
watch outside data (``runs_in`` "supervisor" or "both": kubernetes'
watches, health, reload).  Once that data is synced it freezes the
garbage collector's view of the heap and forks the workers, which share
its memory copy-on-write (service/worker.py is the child's side).

Everything else goes over a Unix socket pair per worker (channel.py):

- store changes: each fed store (IFedData) has a tap that pickles every
  feed once and sends it to every worker, so no worker holds a watch;
- scrapes: GET /metrics asks every worker for its values and shows the
  sum (pulled at scrape time: exact, and nothing to do between
  scrapes); a worker that is gone still counts with its last values;
- readiness: a worker says once when its plugins are ready;
- stop: at shutdown (after lameduck), and when a reload replaces the
  workers (the new ones start before the old ones stop).

A worker that dies is forked again.  Its sockets stayed open here, so
the port never closes, and what the kernel queued for its slot is
answered by its successor.
"""

import gc
import itertools
import os
import signal
import socket
import sys
import time
import traceback
from typing import Any, Optional

from twisted.application import service
from twisted.internet import defer

from corednstw.core import config as configlib
from corednstw.core import logger, metrics
from corednstw.core.interfaces import IFedData
from corednstw.dnsserver import listener, sockets
from corednstw.service import channel, stall
from corednstw.service.app import App

#: Environment switch for measurements: every worker reads one shared
#: socket pair instead of a SO_REUSEPORT pair of its own.
SHARED_ENV = "COREDNSTW_MULTISOCKET_SHARED"
#: Seconds a worker has to stop before it is killed.
STOP_GRACE = 10.0
#: Seconds a scrape waits for a worker (then its last values count).
SCRAPE_TIMEOUT = 2.0
#: Seconds to wait for fed stores to apply their queue before a fork.
SETTLE_LIMIT = 5.0
#: A worker that dies sooner than this after its start is forked again
#: only after a delay, doubling up to RESTART_MAX (a crash loop).
RESTART_QUICK = 2.0
RESTART_MAX = 5.0

#: What metrics.snapshot() returns: {family name: {labels: value}}.
Snapshot = dict[str, dict[Any, Any]]

#: Signals held back while forking: the child replaces the supervisor's
#: handlers before any can reach it.
FORK_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1,
                signal.SIGHUP, signal.SIGQUIT)


def count_of(entries, default=None):
    """Workers for one listening address: the multisocket value of the
    first block serving it (as CoreDNS takes it), else ``default``."""
    n = entries[0][1].settings.get("multisocket") if entries else None
    return n or default or 1


def worker_count(cfg, default=None):
    """Worker processes ``cfg`` asks for (1: a single process)."""
    return max((count_of(e, default) for e in cfg.listeners.values()),
               default=default or 1)


#: Listeners on QUIC: a connection is state in one process and its
#: datagrams must all reach it, which SO_REUSEPORT's hash of the address
#: pair does not promise once a client moves (connection migration), so
#: worker 0 alone serves them.
SINGLE_KINDS = ("quic", "https3")


class _NoConnections:
    """The supervisor's listeners hold no connections of their own."""

    @staticmethod
    def close_all():
        return defer.succeed(None)


class SocketSet:
    """One listening address as the supervisor holds it (where a single process
    keeps a dnsserver.listener.Listener): plain DNS gets a bound UDP
    socket and a listening TCP socket per worker slot (or one pair for
    all, in shared mode), which workers adopt; other kinds (DoT, DoH) a
    bound TCP socket that never listens, keeping the port while each
    worker opens its own SO_REUSEPORT listener there; QUIC
    (SINGLE_KINDS) nothing: worker 0 opens it."""

    stream = _NoConnections()

    def __init__(self, lk, host, mux, entries, count, shared):
        self.kind = listener.kind_of(lk[0], entries)[0]
        self.proxied = listener.proxy_policy(entries) is not None
        self.host = host
        self.mux = mux
        self.entries = entries
        self.shared = shared
        self.count = 0
        self.pairs = []
        self.reserved = None
        if self.kind == "dns":
            u, t, self.port = sockets.bind_pair(host, int(lk[2]))
            self.pairs.append((u, t))
        elif self.kind in SINGLE_KINDS:
            self.port = int(lk[2])
        else:
            self.reserved = sockets.reserve_tcp(host, int(lk[2]))
            self.port = self.reserved.getsockname()[1]
        self.resize(count)

    def resize(self, count):
        """Hold sockets for ``count`` workers (one for QUIC)."""
        self.count = 1 if self.kind in SINGLE_KINDS else count
        if self.kind != "dns":
            return
        want = 1 if self.shared else count
        while len(self.pairs) < want:
            u, t, _ = sockets.bind_pair(self.host, self.port)
            self.pairs.append((u, t))
        for u, t in self.pairs[want:]:
            u.close()
            t.close()
        del self.pairs[want:]

    def switch(self, mux, entries):
        """A reload keeps the address: the next workers get ``mux``."""
        self.mux = mux
        self.entries = entries

    def pair(self, slot):
        """The (udp, tcp) sockets worker ``slot`` adopts."""
        return self.pairs[0 if self.shared else slot]

    def close(self):
        for u, t in self.pairs:
            u.close()
            t.close()
        if self.reserved is not None:
            self.reserved.close()

    def stop(self):
        self.close()
        return defer.succeed(None)


class WorkerHandle:
    """The supervisor's side of one worker process."""

    def __init__(self, sup, slot, pid):
        self.sup = sup
        self.slot = slot
        self.pid = pid
        self.started = time.monotonic()
        #: set by the supervisor right after the fork (the channel needs
        #: this handle as its handler), before any request is made
        self.channel: Optional[channel.Channel] = None
        self.ready = False
        self.gone = False
        self.last: Snapshot = {}    # the values it last sent
        #: the values it sent when stopping
        self.final: Optional[Snapshot] = None
        #: scrape number -> Deferred
        self.waiting: dict[int, defer.Deferred[Snapshot]] = {}
        self.exited: defer.Deferred[int] = defer.Deferred()
        self._kill = None

    # -- messages -------------------------------------------------------------

    def received(self, msg):
        op = msg[0]
        if op == "metrics":
            self.last = msg[2]
            d = self.waiting.pop(msg[1], None)
            if d is not None:
                d.callback(msg[2])
        elif op == "ready":
            self.ready = True
        elif op == "bye":
            self.final = msg[1]

    def lost(self):
        """The pipe closed: the worker exited (or is about to)."""
        self.gone = True
        snap = self.final if self.final is not None else self.last
        metrics.merge(self.sup.retired, snap, gauges=False)
        waiting, self.waiting = self.waiting, {}
        for d in waiting.values():
            d.callback({})
        self.sup.gone(self)

    # -- requests -------------------------------------------------------------

    def scrape(self, seq):
        """Deferred: the worker's values (its last ones if it does not
        answer within SCRAPE_TIMEOUT)."""
        if self.gone:
            return defer.succeed({})
        d: defer.Deferred[Snapshot] = defer.Deferred()
        self.waiting[seq] = d
        assert self.channel is not None
        self.channel.send(("scrape", seq))
        reactor = self.sup.reactor
        timer = reactor.callLater(SCRAPE_TIMEOUT, self._late, seq)

        def done(result):
            if timer.active():
                timer.cancel()
            return result
        return d.addBoth(done)

    def _late(self, seq):
        d = self.waiting.pop(seq, None)
        if d is not None:
            d.callback(self.last)

    def stop(self):
        """Ask the worker to finish and exit; kill it after STOP_GRACE."""
        if self.gone or self._kill is not None:
            return
        assert self.channel is not None
        self.channel.send(("stop",))
        self._kill = self.sup.reactor.callLater(STOP_GRACE, self.kill)

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def reaped(self, status):
        if self._kill is not None and self._kill.active():
            self._kill.cancel()
        self.exited.callback(status)


class Supervisor(App):
    """The App of the supervising process (see the module's text)."""

    @classmethod
    def take_over(cls, app):
        """Make the loaded ``app`` a supervisor.  The configuration was
        built for that very object (plugins reach it as
        ``block.server``), so it changes class rather than being
        rebuilt: every directive set up once, as in a single process."""
        app.__class__ = cls
        app.supervise()
        return app

    def supervise(self):
        self.shared = os.environ.get(SHARED_ENV, "") not in ("", "0")
        self.count = worker_count(self.config, self.multisocket)
        #: slot -> WorkerHandle of the current set
        self.slots: dict[int, WorkerHandle] = {}
        #: handles of a replaced set, stopping
        self.leaving: set[WorkerHandle] = set()
        #: counts of workers that are gone
        self.retired: Snapshot = {}
        self.stopping = False
        self._starting = None
        self._seq = itertools.count(1)
        self._tokens = itertools.count(1)
        self._tapped = set()
        self._quick = 0.0        # current restart delay of a crash loop
        self._up = False         # the first workers all said ready
        _register()
        _SUPERVISORS.append(self)

    # -- which plugins run here ----------------------------------------------

    def local_plugins(self, cfg):
        return [p for p in cfg.plugins() if p.runs_in != "worker"]

    def is_ready(self, plugin):
        """Plugins the workers run are ready when every worker said so."""
        if plugin.runs_in != "worker":
            return plugin.ready()
        return (len(self.slots) == self.count
                and all(h.ready for h in self.slots.values()))

    def not_ready(self):
        """Until every worker of the first set has said it is ready, the
        server cannot answer on every socket: "multisocket" is reported
        waiting.  Later restarts do not make /ready fail (the port stays
        open, queries wait for the successor), as a plugin once ready
        stays ready for CoreDNS's ready."""
        if not self._up:
            self._up = (len(self.slots) == self.count
                        and all(h.ready for h in self.slots.values()))
        return () if self._up else ("multisocket",)

    # -- start, reload, stop --------------------------------------------------

    def startService(self):
        service.Service.startService(self)
        if self.stall is None:
            self.stall = stall.start(self.reactor)
        stall.freeze()
        self._open(self.config)
        self._banner(self.config)
        started = self._start_plugins(self.config)
        d = started if started is not None else defer.succeed(None)
        d.addCallback(lambda _: self._new_workers(self.config))
        return d

    def _listen(self, lk, host, mux, entries, sockets=None):
        return SocketSet(lk, host, mux, entries,
                         count_of(entries, self.multisocket), self.shared)

    def _start_plugins(self, cfg):
        self._starting = App._start_plugins(self, cfg)
        return self._starting

    def check_processes(self, cfg):
        """Any count works here (a reload changes the workers' number)."""

    def reload(self):
        """Reload here (a broken Corefile keeps everything as it is);
        then, once the new plugins are up, fork workers with the new
        configuration and stop the old ones."""
        self._starting = None
        if App.reload(self) is False:
            return False
        started = self._starting
        d = started if isinstance(started, defer.Deferred) \
            else defer.succeed(None)
        cfg = self.config
        d.addCallback(lambda _: self._new_workers(cfg))
        return True

    def _shutdown(self):
        """After lameduck: every worker stops (finishing what it is
        answering), then the sockets close and the plugins stop."""
        self.stopping = True
        handles = list(self.slots.values()) + list(self.leaving)
        for h in handles:
            h.stop()
        d = defer.DeferredList([h.exited for h in handles])
        d.addCallback(lambda _: App._shutdown(self))
        return d

    # -- workers --------------------------------------------------------------

    def _new_workers(self, cfg):
        """Fork the workers of ``cfg`` once its fed stores have applied
        what they were given (so the children get it in their copy), then
        stop the previous ones."""
        d = _settled(self.reactor, cfg)
        d.addCallback(lambda _: self._replace(cfg))
        return d

    def _replace(self, cfg: configlib.Config) -> None:
        if self.stopping or cfg is not self.config:
            return              # a newer configuration took over
        self._tap(cfg)
        self.count = worker_count(cfg, self.multisocket)
        for lk, lst in self.listeners.items():
            if isinstance(lst, SocketSet):
                lst.resize(count_of(cfg.listeners[lk], self.multisocket))
        old = list(self.slots.values())
        self.slots = {}
        for slot in range(self.count):
            self._spawn(slot)
        for h in old:
            self.leaving.add(h)
            h.stop()

    def _tap(self, cfg):
        """Send every feed of ``cfg``'s stores on to the workers."""
        for p in cfg.find(IFedData):
            for store in p.fed_stores():
                if getattr(store, "token", None) is None:
                    store.token = next(self._tokens)
                if store.token not in self._tapped:
                    self._tapped.add(store.token)
                    store.taps.append(_Tap(self, store.token))

    def live(self):
        return [h for h in itertools.chain(self.slots.values(),
                                           self.leaving) if not h.gone]

    def _spawn(self, slot):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # What lives now lives long: out of the collector's walks, whose
        # writes to every object header would unshare the pages.
        gc.collect()
        stall.freeze()
        _flush()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORK_SIGNALS)
        try:
            pid = os.fork()
        except OSError as e:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            ours.close()
            theirs.close()
            logger.error("multisocket", "cannot start worker %d: %s"
                         % (slot, e))
            self.reactor.callLater(RESTART_MAX, self._respawn, slot)
            return
        if pid == 0:
            _child(self, slot, ours, theirs, mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        h = WorkerHandle(self, slot, pid)
        h.channel = channel.adopt(self.reactor, ours, h)
        theirs.close()
        self.slots[slot] = h
        logger.info("multisocket", "worker %d started, pid %d" % (slot, pid))

    def gone(self, h):
        """A worker's pipe closed: reap it; fork another for its slot
        unless it was asked to stop."""
        self.leaving.discard(h)
        self._reap(h, 0)

    def _reap(self, h: WorkerHandle, tries: int) -> None:
        try:
            pid, status = os.waitpid(h.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = h.pid, 0
        if pid == 0:
            if tries == int(STOP_GRACE * 100):
                h.kill()        # closed its pipe but lives on
            self.reactor.callLater(0.01, self._reap, h, tries + 1)
            return
        h.reaped(status)
        if self.slots.get(h.slot) is not h:
            return
        del self.slots[h.slot]
        if self.stopping:
            return
        assert RESTARTS is not None     # registered by supervise()
        RESTARTS.inc()
        delay = 0.0
        if time.monotonic() - h.started < RESTART_QUICK:
            self._quick = min(max(self._quick * 2, 0.1), RESTART_MAX)
            delay = self._quick
        else:
            self._quick = 0.0
        logger.error("multisocket", "worker %d (pid %d) %s; starting "
                     "another" % (h.slot, h.pid, _describe(status)))
        self.reactor.callLater(delay, self._respawn, h.slot)

    def _respawn(self, slot):
        if self.stopping or slot in self.slots or slot >= self.count:
            return
        self._tap(self.config)
        self._spawn(slot)

    def forward(self, data):
        for h in self.live():
            h.channel.send_encoded(data)

    # -- metrics --------------------------------------------------------------

    def gather_metrics(self):
        """Deferred: every family summed over this process, the workers
        and the workers that are gone (prometheus' /metrics shows it)."""
        handles = self.live()
        ds = [h.scrape(next(self._seq)) for h in handles]
        d = defer.gatherResults(ds)
        d.addCallback(self._sum, handles)
        return d

    def _sum(self, snaps, handles):
        total = metrics.merge({}, metrics.snapshot())
        metrics.merge(total, self.retired)
        per: dict[tuple[str, str], float] = {}
        for h, snap in zip(handles, snaps):
            if h.gone:
                continue        # its last values are in retired now
            metrics.merge(total, snap)
            for labels, n in snap.get(metrics.REQUESTS.name, {}).items():
                key = (str(h.slot), labels[3])
                per[key] = per.get(key, 0) + n
        assert WORKER_REQUESTS is not None  # registered by supervise()
        total[WORKER_REQUESTS.name] = per
        return total


class _Tap:
    """A store's feed, pickled once and sent to every worker."""

    def __init__(self, sup, token):
        self.sup = sup
        self.token = token

    def __call__(self, op, kind, events):
        if self.sup.stopping:
            return
        if self.sup.live():
            self.sup.forward(channel.encode(("feed", self.token, op, kind,
                                             events)))


def _settled(reactor, cfg):
    """Deferred: the fed stores of ``cfg`` have no queued work (or
    SETTLE_LIMIT passed)."""
    d: defer.Deferred[None] = defer.Deferred()
    deadline = time.monotonic() + SETTLE_LIMIT
    stores = [s for p in cfg.find(IFedData) for s in p.fed_stores()]

    def check():
        if all(not s.pending for s in stores) or \
                time.monotonic() > deadline:
            d.callback(None)
        else:
            reactor.callLater(0.01, check)
    check()
    return d


def _child(sup, slot, ours, theirs, mask):
    """The forked child: become worker ``slot``; never returns."""
    code = 1
    try:
        ours.close()
        from corednstw.service import worker
        code = worker.run(sup, slot, theirs, mask)
    except BaseException:
        traceback.print_exc()
    finally:
        _flush()
        os._exit(code)


def _flush():
    """Nothing buffered is written twice (once by each side of a fork)."""
    logger.flush()
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass


def _describe(status):
    if os.WIFSIGNALED(status):
        return "was killed by signal %d" % os.WTERMSIG(status)
    return "exited with status %d" % os.waitstatus_to_exitcode(status)


# -- metrics of the process group ---------------------------------------------

WORKER_REQUESTS: Optional[metrics.Counter] = None
RESTARTS: Optional[metrics.Counter] = None
WORKERS: Optional[metrics.Gauge] = None


def _workers_up():
    sups = [s for s in _SUPERVISORS if not s.stopping]
    return {(): sum(len(s.slots) for s in sups)} if sups else {}


_SUPERVISORS: list[Supervisor] = []


def _register():
    """The supervisor's own families (registered only when there is one,
    so a single process's /metrics is CoreDNS's)."""
    global WORKER_REQUESTS, RESTARTS, WORKERS
    WORKER_REQUESTS = metrics.counter(
        "coredns_corednstw_worker_requests_total",
        "Requests answered by each multisocket worker process since it "
        "started, per protocol.", ("worker", "proto"))
    RESTARTS = metrics.counter(
        "coredns_corednstw_worker_restarts_total",
        "Multisocket worker processes started again after they died.")
    WORKERS = metrics.gauge(
        "coredns_corednstw_workers",
        "Multisocket worker processes running.", (), fn=_workers_up)
