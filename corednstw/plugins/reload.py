"""reload: watch the Corefile and switch to a changed one without a restart.

``reload [INTERVAL] [JITTER]`` (30s and 15s by default; interval at least
2s; jitter 0 or at least 1s, and at most half the interval).  Every interval
the Corefile is parsed again (imports expanded; the grammar only, as
Caddy's parser) and the SHA512 of its parsed form compared with the running
one's; on a change the App builds the whole new configuration and switches
to it (App.reload), or keeps the old one when anything fails: an unknown
directive, a bad argument, a port in use.  A failure is logged as
"Corefile changed but reload failed" and counted in
coredns_reload_failed_total; a Corefile that does not even read is only
logged ("Corefile parse failed"), as in CoreDNS.
"""

import random

from corednstw.core import logger, metrics
from corednstw.core.dump import digest
from corednstw.core.errors import CorefileError
from corednstw.core.plugin import Plugin

MIN_INTERVAL = 2.0
MIN_JITTER = 1.0
DEFAULT_INTERVAL = 30.0
DEFAULT_JITTER = 15.0

# The service counts failed reloads (a SIGUSR1 reload fails the same way);
# as in CoreDNS, the family is shown once a reload plugin is configured.
metrics.register(metrics.RELOAD_FAILED)
VERSION_INFO = metrics.gauge(
    "coredns_reload_version_info",
    "A metric with a constant '1' value labeled by hash, and value which "
    "type of hash generated.", ("hash", "value"))


class Reload(Plugin):
    name = "reload"
    in_chain = False
    runs_in = "supervisor"
    once = True

    def __init__(self, interval):
        self.interval = interval
        self.call = None
        self.running_digest = None

    def start(self):
        server = self.block.server
        # One watcher per process, however many blocks say reload.
        if server.config is not None and server.config.blocks:
            first = _first_reload(server.config)
            if first is not None and first is not self:
                return
        self.running_digest = digest(self.block.config.sources)
        logger.info("reload", "Running configuration SHA512 = %s"
                 % self.running_digest)
        self._schedule()

    def _schedule(self):
        self.call = self.reactor.callLater(self.interval, self._tick)

    def _tick(self):
        self.call = None
        server = self.block.server
        try:
            # The grammar only: a Corefile that reads but names an unknown
            # directive or a bad key is a change, and a failed reload.
            blocks = server.parse(strict=False)
        except (CorefileError, OSError) as e:
            logger.warning("reload", "Corefile parse failed: %s" % e)
            self._schedule()
            return
        new = digest(blocks)
        if new == self.running_digest:
            self._schedule()
            return
        VERSION_INFO.values.clear()
        if server.reload() is False:
            # Kept the old configuration: look again next interval, and do
            # not retry the same broken file every tick.
            self.running_digest = new
            VERSION_INFO.set(("sha512", new), 1)
            self._schedule()
            return
        VERSION_INFO.set(("sha512", new), 1)

    def stop(self):
        if self.call is not None and self.call.active():
            self.call.cancel()
        self.call = None


def _first_reload(cfg):
    for p in cfg.plugins():
        if isinstance(p, Reload):
            return p
    return None


def setup(d, block):
    """``reload [INTERVAL] [JITTER]``: the interval, jittered once here so
    that servers started together do not all read their files at once."""
    args = d.between(0, 2)
    interval = d.duration(args[0], strict=False) if args else \
        DEFAULT_INTERVAL
    jitter = d.duration(args[1], strict=False) if len(args) > 1 else \
        DEFAULT_JITTER
    if interval < MIN_INTERVAL:
        raise d.error("interval value must be greater or equal to 2s")
    if jitter != 0 and jitter < MIN_JITTER:
        raise d.error("jitter value must be 0 or greater or equal to 1s")
    if jitter > interval / 2:
        jitter = interval / 2
    if jitter > 0:
        interval += random.uniform(-jitter / 2, jitter / 2)
    return Reload(interval)
