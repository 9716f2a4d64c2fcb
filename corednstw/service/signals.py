"""Signals as CoreDNS handles them.

SIGTERM and SIGINT: graceful shutdown (lameduck honoured by App.stopService),
exit status 0; a second SIGINT quits at once with status 2.  SIGQUIT: stop
at once.  SIGUSR1: reload the Corefile (when
the App supports it).  SIGHUP is ignored, as CoreDNS (caddy) ignores it.
Installed once the reactor runs, replacing twistd's
handlers, which would re-raise the signal and exit with -15.
"""

import os
import signal

from corednstw.core import logger


def install(app):
    reactor = app.reactor

    interrupted = []

    def graceful(signum, _frame):
        if signum == signal.SIGINT:
            if interrupted:     # a second ^C: no waiting for lameduck
                logger.info("", "SIGINT: Force quit")
                logger.flush()
                os._exit(2)
            interrupted.append(True)
            logger.info("", "SIGINT: Shutting down")
        else:
            logger.info("", "SIGTERM: Shutting down servers then terminating")
        reactor.callFromThread(reactor.stop)

    def immediate(signum, _frame):
        logger.info("", "SIGQUIT: Quitting process immediately")
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
