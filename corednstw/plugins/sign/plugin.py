"""The sign plugin object: keeps signed copies of zone files fresh.

Not on the query path (``file`` or ``auto`` serve what it writes).  When
the configuration goes live every zone whose signed file is missing or
due is signed, in a thread; then every five hours each zone is checked
again.  The log lines are CoreDNS's.
"""

import time

from twisted.internet import defer, task, threads

from corednstw.core import logger
from corednstw.core.plugin import Plugin
from corednstw.engines.authority import go_quote

from .signer import REFRESH, SignError, _fmt


class Sign(Plugin):
    """The signers of one ``sign`` line."""

    name = "sign"
    in_chain = False
    once = False

    def __init__(self, signers):
        self.signers = signers
        #: Wall clock in seconds; tests replace it.
        self.now = time.time
        self._loop = None
        self._busy = set()

    def __repr__(self):
        return "<Sign %s>" % " ".join(s.origin for s in self.signers)

    def start(self):
        for s in self.signers:
            why = s.why_resign(self.now())
            if why is None:
                logger.info(self.name, "Skipping signing zone %s in %s: "
                            "signatures are valid" % (
                                go_quote(s.origin), go_quote(s.path)))
                continue
            self._in_thread(s, why)
        if self.reactor is not None:
            self._loop = task.LoopingCall(self.refresh)
            self._loop.clock = self.reactor
            self._loop.start(REFRESH, now=False)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def refresh(self):
        """One check of every zone; signs the ones that are due."""
        for s in self.signers:
            why = s.why_resign(self.now())
            if why is not None:
                self._in_thread(s, why)

    def _in_thread(self, signer, why):
        if signer in self._busy:
            return None
        self._busy.add(signer)
        pool = getattr(self.reactor, "getThreadPool", None)
        if pool is None:
            d = defer.maybeDeferred(self.sign_and_log, signer, why)
        else:
            d = threads.deferToThreadPool(self.reactor, pool(),
                                          self.sign_and_log, signer, why)
        d.addBoth(self._done, signer)
        return d

    def _done(self, result, signer):
        self._busy.discard(signer)
        return result

    def sign_and_log(self, signer, why):
        """Sign one zone and write it out, logging as CoreDNS does.
        Returns the signed zone, or None on failure."""
        now = self.now()
        started = time.monotonic()
        nxt = _fmt(now + REFRESH)
        try:
            signed = signer.sign(now)
        except (SignError, OSError, ValueError) as e:
            logger.info(self.name, "Signing %s because %s" % (
                go_quote(signer.origin), why))
            logger.warning(self.name, "Error signing %s with key tags %s "
                           "in %s: %s, next: %s" % (
                               go_quote(signer.origin),
                               go_quote(signer.key_tags()),
                               _elapsed(started), e, nxt))
            return None
        logger.info(self.name, "Signing %s because %s" % (
            go_quote(signer.origin), why))
        try:
            signer.write(signed)
        except OSError as e:
            logger.warning(self.name, "Error signing %s: failed to move "
                           "zone file into place: %s" % (
                               go_quote(signer.origin), e))
            return None
        logger.info(self.name, "Successfully signed zone %s in %s with key "
                    "tags %s and %d SOA serial, elapsed %f, next: %s" % (
                        go_quote(signer.origin), go_quote(signer.path),
                        go_quote(signer.key_tags()), signed.serial,
                        time.monotonic() - started, nxt))
        return signed


def _elapsed(started):
    from corednstw.core.durations import format_duration
    return format_duration(time.monotonic() - started)
