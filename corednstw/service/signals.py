"""Signals as CoreDNS handles them.

SIGTERM and SIGINT: graceful shutdown (lameduck honoured by App.stopService),
exit status 0; a second SIGINT quits at once with status 2.  SIGQUIT: stop
at once.  SIGUSR1: reload the Corefile (when
the App supports it).  SIGHUP is ignored, as CoreDNS (caddy) ignores it.
Installed once the reactor runs, replacing twistd's
handlers, which would re-raise the signal and exit with -15.

``at_exit`` registers what must happen however the process ends (the pid
file, node-cache's iptables rules), as caddy's OnProcessExit: run before
an immediate exit here, and by the command after a graceful stop.
"""

import os
import signal
from collections.abc import Callable

from corednstw.core import logger

_exit_hooks: list[Callable[[], object]] = []


def at_exit(fn):
    _exit_hooks.append(fn)


def run_exit_hooks():
    """Each registered hook once, newest first; a failing hook is logged
    and the others still run."""
    while _exit_hooks:
        fn = _exit_hooks.pop()
        try:
            fn()
        except Exception as e:
            logger.error("", "exit: %s" % e)


def install(app):
    reactor = app.reactor

    interrupted: list[bool] = []

    def graceful(signum, _frame):
        if signum == signal.SIGINT:
            if interrupted:     # a second ^C: no waiting for lameduck
                logger.info("", "SIGINT: Force quit")
                run_exit_hooks()
                logger.flush()
                os._exit(2)
            interrupted.append(True)
            logger.info("", "SIGINT: Shutting down")
        else:
            logger.info("", "SIGTERM: Shutting down servers then terminating")
        reactor.callFromThread(reactor.stop)

    def immediate(signum, _frame):
        logger.info("", "SIGQUIT: Quitting process immediately")
        run_exit_hooks()
        logger.flush()
        os._exit(0)

    def reload(signum, _frame):
        fn = getattr(app, "reload", None)
        if fn is not None:
            logger.info("", "SIGUSR1: Reloading")
            reactor.callFromThread(fn)

    signal.signal(signal.SIGTERM, graceful)
    signal.signal(signal.SIGINT, graceful)
    signal.signal(signal.SIGQUIT, immediate)
    signal.signal(signal.SIGUSR1, reload)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
