"""ready: /ready answers 200 OK once every plugin that reports readiness is
ready, 503 with their sorted, comma-joined names until then.

``ready [ADDRESS] { monitor until-ready|continuously }`` (default :8181).
As in CoreDNS a plugin that was ready once is not asked again, unless
``monitor continuously`` (CoreDNS 1.14) asks every plugin on every probe;
during shutdown /ready says 503 "Shutting down".
"""

from zope.interface import implementer

from corednstw.core import logger
from corednstw.core.interfaces import IHTTPEndpointOwner
from corednstw.core.plugin import Plugin
from corednstw.service import httpd

DEFAULT_ADDRESS = ":8181"


@implementer(IHTTPEndpointOwner)
class Ready(Plugin):
    name = "ready"
    in_chain = False

    def __init__(self, address, continuously=False):
        self.address = address
        self.continuously = continuously
        self.done = set()

    def http_endpoints(self):
        return [(self.address, "/ready", httpd.Text(self.status))]

    def status(self):
        app = self.block.server
        if app.lameduck or not app.running:
            return 503, "Shutting down"
        waiting = set()
        for p in app.config.ready_reporters():
            if id(p) in self.done:
                continue
            if app.is_ready(p):
                if not self.continuously:
                    self.done.add(id(p))
            else:
                waiting.add(p.name)
        waiting.update(app.not_ready())
        if not waiting:
            return 200, "OK"
        names = ",".join(sorted(waiting))
        logger.info("ready", "Plugins not ready: %r" % names)
        return 503, names


MONITOR = ("until-ready", "continuously")


def setup(d, block):
    rd = Ready(httpd.address_arg(d, DEFAULT_ADDRESS, children=True))

    def monitor(c):
        kind = c.choice(c.one(), MONITOR,
                        error="monitor type '%s' not supported")
        rd.continuously = kind == "continuously"
    d.read_options({"monitor": monitor})
    return rd
