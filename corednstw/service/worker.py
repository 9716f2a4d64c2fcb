"""A multisocket worker: the child's side of a fork of the supervisor.

The fork copies the supervisor's whole heap (configuration, plugins, the
kubernetes store) and its reactor, in the middle of one of its calls.
The child first makes the reactor its own: its copies of the parent's
descriptors (HTTP ports and connections, the other workers' pipes, the
wakers) are closed (closing a copy leaves the parent's open), and the
reactor object is initialised again in place with a new epoll set, so
every plugin's reference to it stays good.  Then the App object becomes
a WorkerApp: it adopts its slot's sockets, starts the plugins that run
in workers, and runs the fresh reactor until the supervisor says stop
(or goes away).  It never returns into the parent's call stack: the
process ends with os._exit.

Workers ignore SIGTERM, SIGINT and SIGUSR1: shutdown with its lameduck
and reload are the supervisor's, which tells every worker.
"""

import os
import signal

from twisted.internet import defer

from corednstw.core import logger, metrics
from corednstw.core.interfaces import IFedData
from corednstw.service import channel, multiproc, stall
from corednstw.service.app import App

#: Seconds a stopping worker waits for the answers it owes.
DRAIN_LIMIT = 5.0


def run(sup, slot, sock, mask):
    """Serve as worker ``slot`` on ``sock`` (the pipe); the exit status."""
    _own_signals()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    reactor = sup.reactor
    fresh_reactor(reactor)
    sets = sup.listeners
    del multiproc._SUPERVISORS[:]
    app = sup
    app.__class__ = WorkerApp
    app.become(slot, sock, sets)
    reactor.run(installSignalHandlers=False)
    return app.exit_code


def _own_signals():
    signal.set_wakeup_fd(-1)        # the parent's waker pipe
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1,
                signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, _quit)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def _quit(signum, frame):
    logger.flush()
    os._exit(0)


def fresh_reactor(reactor):
    """Make the copied, running reactor a new one sharing nothing with the
    parent's: no descriptor, timer, trigger or thread of the parent's."""
    internal = set(getattr(reactor, "_internalReaders", ()))
    for sel in set(reactor.getReaders()) | set(reactor.getWriters()):
        if sel in internal:
            continue
        sock = getattr(sel, "socket", None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
    for waker in internal:
        try:
            waker.connectionLost(None)      # closes its pipe
        except Exception:
            pass
    poller = getattr(reactor, "_poller", None)
    if poller is not None:
        poller.close()
    reactor.threadpool = None           # its threads stayed in the parent
    reactor.__dict__.pop("_signals", None)
    reactor.__init__()


class WorkerApp(App):
    """The App as a worker runs it (see the module's text)."""

    def local_plugins(self, cfg):
        return [p for p in cfg.plugins() if p.runs_in != "supervisor"]

    def reload(self):
        return False            # the supervisor reloads, then replaces us

    def become(self, slot, sock, sets):
        self.slot = slot
        self.exit_code = 0
        self.stopping = False
        self.slots, self.leaving = {}, set()
        metrics.reset()
        self.stall = stall.start(self.reactor)
        self.http = {}
        self.listeners = {}
        self.muxes = []
        self.stores = {}
        # forked by a supervisor serving its configuration (_replace)
        assert self.config is not None
        for p in self.config.find(IFedData):
            p.worker_init()
            for store in p.fed_stores():
                token = getattr(store, "token", None)
                if token is not None:
                    self.stores[token] = store
        self.channel = channel.adopt(self.reactor, sock, self)
        for lk, ss in sets.items():
            self.muxes.append(ss.mux)
            try:
                if slot < ss.count:
                    self.listeners[lk] = self._serve(lk, ss, slot)
            finally:
                ss.close()      # our copies of every other socket
        self.reactor.callWhenRunning(self._start)

    def _serve(self, lk, ss, slot):
        """Plain DNS: adopt the slot's pair; DoT and DoH: a listener of
        our own on the port the supervisor holds."""
        if ss.kind == "dns":
            return self._listen(lk, ss.host, ss.mux, ss.entries,
                                sockets=ss.pair(slot))
        return self._listen((lk[0], lk[1], str(ss.port)), ss.host, ss.mux,
                            ss.entries)

    def _start(self):
        try:
            started = self._start_plugins(self.config)
        except Exception:
            self.exit_code = 1
            self.reactor.stop()
            return
        d = started if started is not None else defer.succeed(None)
        d.addCallback(lambda _: self._watch_ready())

    def _watch_ready(self):
        """Tell the supervisor once every plugin here is ready."""
        if self.stopping:
            return
        assert self.config is not None      # a worker never drops it
        if all(p.ready() for p in self.config.ready_reporters()
               if p.runs_in != "supervisor"):
            self.channel.send(("ready",))
            return
        self.reactor.callLater(0.05, self._watch_ready)

    # -- the pipe -------------------------------------------------------------

    def received(self, msg):
        op = msg[0]
        if op == "feed":
            store = self.stores.get(msg[1])
            if store is not None:
                store.feed(msg[2], msg[3], msg[4])
        elif op == "scrape":
            self.channel.send(("metrics", msg[1], metrics.snapshot()))
        elif op == "stop":
            self.stop()

    def lost(self):
        if self.stopping:
            self.reactor.stop()
            return
        # The supervisor is gone: nobody holds the port for us; finish.
        logger.error("multisocket", "worker %d: supervisor gone, stopping"
                     % self.slot)
        self.stopping = True
        d = defer.maybeDeferred(App._shutdown, self)
        d.addBoth(lambda _: self.reactor.stop())

    # -- stopping -------------------------------------------------------------

    def stop(self):
        """Take no new queries, answer those in hand, send the final
        counts, exit."""
        if self.stopping:
            return
        self.stopping = True
        for lst in self.listeners.values():
            for port in (lst.udp, lst.tcp):
                if port is not None:
                    port.stopReading()
        d = self._drained()
        d.addCallback(lambda _: App._shutdown(self))
        d.addBoth(self._bye)

    def _drained(self):
        d: defer.Deferred[None] = defer.Deferred()
        deadline = self.reactor.seconds() + DRAIN_LIMIT

        def check():
            if any(m.inflight for m in self.muxes) and \
                    self.reactor.seconds() < deadline:
                self.reactor.callLater(0.01, check)
            else:
                d.callback(None)
        check()
        return d

    def _bye(self, _):
        self.channel.send(("bye", metrics.snapshot()))
        self.channel.close()
