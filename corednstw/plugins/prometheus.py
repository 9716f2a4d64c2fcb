"""prometheus: counts every query of the block and serves /metrics.

``prometheus [ADDRESS] { runtime_metrics; tls FILE }`` (default
localhost:9153); FILE is a web configuration (corednstw.service.webconfig)
that puts /metrics on TLS.  Middleware: it passes the
query on, then records the answer in the core families
(corednstw.core.metrics).
The metrics endpoint is shared by every block naming the same address.
"""

import time
from collections.abc import Sequence
from typing import Optional

from zope.interface import implementer

from corednstw.core import config as configlib
from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.interfaces import IHTTPEndpointOwner, IZoneAdder
from corednstw.core.plugin import Plugin, is_deferred, match
from corednstw.core.request import Response
from corednstw.service import httpd

DEFAULT_ADDRESS = "localhost:9153"

_registry = None
_collector = metrics.Collector()


def registry():
    """One registry: our collector plus process/platform metrics."""
    global _registry
    if _registry is None:
        # prometheus_client is imported by the first scrape, not at start.
        from prometheus_client import (
            CollectorRegistry,
            PlatformCollector,
            ProcessCollector,
        )
        r = CollectorRegistry(auto_describe=False)
        r.register(_collector)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        _registry = r
    return _registry


class MetricsResource(httpd.Page):
    """/metrics.  Under multisocket the supervisor first gathers its
    workers' counts (``gather_metrics``: a Deferred of summed values) and
    the page shows the sum, as one server would."""

    def __init__(self, owner=None):
        self.owner = owner

    def respond(self, query):
        gathered = self._gather()
        if gathered is None:
            return self._page(None)
        return gathered.addCallback(self._page)

    def _gather(self):
        owner = self.owner
        if owner is None or owner.block is None:
            return None
        return owner.block.server.gather_metrics()

    @staticmethod
    def _page(values):
        # prometheus_client is imported by the first scrape, not at start.
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        reg = registry()
        _collector.values = values
        try:
            body = generate_latest(reg)
        finally:
            _collector.values = None
        return 200, CONTENT_TYPE_LATEST.encode(), body


@implementer(IHTTPEndpointOwner, IZoneAdder)
class Prometheus(Plugin):
    name = "prometheus"
    runs_in = "both"
    passes_answers = True

    def __init__(self, address, web=None):
        self.address = address
        self.extra_zones = []
        #: The web configuration of ``tls FILE`` (webconfig.WebConfig).
        self.web = web
        self.http_tls = web.tls if web is not None else None

    def http_endpoints(self):
        page = MetricsResource(self)
        if self.web is not None:
            page = self.web.guard(page, time.monotonic)
        return [(self.address, "/metrics", page)]

    def add_zone(self, zone):
        """Label queries for ``zone`` with it (plugins that load zones at
        run time, such as auto, call this; CoreDNS's AddZone)."""
        if zone not in self.extra_zones:
            self.extra_zones.append(zone)

    def serve(self, req):
        """Pass the query on and record the answer.  Written out rather
        than with plugin.then: this runs for every query of the block,
        and the extra call was a tenth of the plugin's own time.  A
        Response is ruled out first: Deferred's ABC isinstance costs ten
        times a plain one."""
        resp = self.next.serve(req)
        if not isinstance(resp, Response) and is_deferred(resp):
            return resp.addCallback(self._record, req)
        return self._record(resp, req)

    def _zone(self, req):
        """The zone label: the block key that matched, or a longer zone a
        plugin added (only then is a match computed per query)."""
        if not self.extra_zones:
            return req.zone
        return match(self.block.zones + self.extra_zones, req.qname) or "."

    def _record(self, resp, req):
        if resp is None:
            rcode, plugin, size = w.SERVFAIL, "", 0
        else:
            rcode, plugin = resp.rcode, resp.plugin
            # Response.finish's cache read here (one call less) for the
            # plain Response, whose bytes are often made already.
            wire = resp.wire if type(resp) is Response else None
            size = len(wire if wire is not None else resp.finish(req))
        zone = self._zone(req) if self.extra_zones else req.zone
        metrics.report(req.server, req, zone, req.view, rcode, plugin, size,
                       req.block.server.clock() - req.start)
        return resp

    def start(self):
        """coredns_plugin_enabled for every plugin of the block."""
        block = self.block
        hosts: Sequence[Optional[str]] = block.bind or [None]
        for key in block.keys:
            for host in hosts:
                label = configlib.server_label(key.transport, host, key.port)
                for p in block.plugins:
                    metrics.PLUGIN_ENABLED.set(
                        (label, key.zone, block.view, p.name), 1)


def _runtime_metrics(c):
    """``runtime_metrics`` (1.14): CoreDNS then exports the whole Go
    runtime/metrics set.  There is no Go runtime here; the Python process
    and platform collectors are always exported, so it changes nothing."""
    c.no_args()


def setup(d, block):
    address = httpd.address_arg(d, DEFAULT_ADDRESS, children=True)
    web = None

    def tls(c):
        """``tls FILE``: the exporter toolkit's web configuration file
        (TLS, basic auth, headers, rate limit), read now."""
        nonlocal web
        # Read only for ``tls FILE``: a start without it does without
        # the module (yaml, the TLS settings).
        from corednstw.service import webconfig
        if web is not None:
            raise c.error("tls block already specified")
        path = block.path(c.one())
        try:
            web = webconfig.WebConfig(path)
        except webconfig.WebConfigError as e:
            raise c.error(str(e)) from e

    d.read_options({"runtime_metrics": _runtime_metrics, "tls": tls},
                   unknown="unknown option: %s")
    return Prometheus(address, web)
