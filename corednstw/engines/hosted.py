"""Zones copied from a DNS provider's API (CoreDNS's route53, azure and
clouddns share this shape).

A plugin names provider zones ("hosted zones") and the origin each is
served under; several hosted zones may share an origin (a private and a
public zone), and are then asked in the order given.  The plugin fetches
every hosted zone's records when it starts and again every ``refresh``
seconds, off the query path; each fetch that succeeds replaces that zone's
data at once, a fetch that fails keeps the last data.  A provider that
cannot be reached at start is retried sooner (one second, doubling up to
``refresh``), and readiness stays false until every hosted zone was
fetched once.

Queries are answered from the data with CoreDNS's file rules
(``engines.authority``): the first hosted zone of the origin with an answer
or a NODATA wins, and CoreDNS's cloud plugins' fallthrough and result
handling apply (see ``HostedZones.write``).
"""

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.interfaces import IReadiness
from corednstw.core.plugin import Fallthrough, Plugin, match, then
from corednstw.core.request import Response
from corednstw.engines.authority import (
    DELEGATION,
    NAME_ERROR,
    NO_DATA,
    SERVER_FAILURE,
    ZoneData,
    ZoneError,
)

#: Seconds before the first retry of a zone never fetched (then doubled).
FIRST_RETRY = 1.0

#: What an empty zone answers (CoreDNS's file.NewZone without records).
_EMPTY = (None, None, None, SERVER_FAILURE)


class HostedZone:
    """One provider zone served under ``origin``; ``ref`` is whatever the
    plugin needs to fetch it; ``data`` the last ZoneData (None before the
    first fetch)."""

    def __init__(self, origin, ref):
        self.origin = origin
        self.ref = ref
        self.data = None
        self.loaded = False


def build_zone(origin, rrs, plugin):
    """A ZoneData for ``origin`` holding ``rrs`` (dnswire.RR with text
    owners).  Kept even without an SOA, as CoreDNS keeps an empty zone:
    lookups in it answer SERVFAIL."""
    data = ZoneData(origin)
    for rr in rrs:
        try:
            data.insert(w.name_to_wire(rr.name),
                        w.RR("", rr.rtype, rr.ttl, rr.rdata, rr.rclass))
        except (ZoneError, ValueError) as e:
            logger.warning(plugin, "Failed to process resource record set: "
                           "%s" % e)
    if data.soa is not None:
        data.finish()
    return data


def rr_from_text(name, rtype, ttl, value):
    """An RR from presentation form as a provider lists it; ValueError
    with dns.NewRR's wording when it does not parse."""
    try:
        return w.RR.from_text(name, rtype, int(ttl), value)
    except Exception as e:
        raise ValueError("failed to parse resource record: %s %d IN %s %s: "
                         "%s" % (name, int(ttl), rtype, value, e)) from e


def go_list(items):
    """A list of strings as Go's %v prints a slice."""
    return "[%s]" % " ".join(items)


@implementer(IReadiness)
class HostedZones(Plugin):
    """Base of the provider plugins.  Subclasses set ``name`` and
    implement ``fetch(hz)`` (a Deferred firing with the zone's RRs) and
    ``describe(hz)`` (how errors name the zone)."""

    once = False

    def __init__(self, hosted, refresh=60.0, fall=None):
        self.hosted = {}
        self.origins = []
        for hz in hosted:
            if hz.origin not in self.hosted:
                self.origins.append(hz.origin)
                self.hosted[hz.origin] = []
            self.hosted[hz.origin].append(hz)
        self.zones = list(self.origins)
        self.refresh = refresh
        self.fall = fall if fall is not None else Fallthrough()
        self._timer = None
        self._running = False
        self._retry = FIRST_RETRY

    # -- what subclasses provide -----------------------------------------

    def fetch(self, hz):
        raise NotImplementedError

    def describe(self, hz):
        return "%s:%s" % (hz.origin, hz.ref)

    # -- life cycle -------------------------------------------------------

    def start(self):
        self._running = True
        self.update()

    def stop(self):
        self._running = False
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def ready(self):
        return all(hz.loaded for zs in self.hosted.values() for hz in zs)

    def all_zones(self):
        return [hz for o in self.origins for hz in self.hosted[o]]

    # -- refreshing -------------------------------------------------------

    def update(self):
        """Fetch every hosted zone; the Deferred fires once all are done
        (it never fails: errors are logged)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        ds = [self._fetch_one(hz) for hz in self.all_zones()]
        return defer.gatherResults(ds).addCallback(self._updated)

    def _fetch_one(self, hz):
        d = defer.maybeDeferred(self.fetch, hz)
        d.addCallback(self._install, hz)
        d.addErrback(self._fetch_failed, hz)
        return d

    def _install(self, rrs, hz):
        if self._running:
            hz.data = build_zone(hz.origin, rrs, self.name)
            hz.loaded = True
        return None

    def _fetch_failed(self, failure, hz):
        return "failed to list resource records for %s from %s: %s" % (
            self.describe(hz), self.name, error_text(failure.value))

    def _updated(self, errors):
        errors = [e for e in errors if e]
        if errors:
            logger.error(self.name, "Failed to update zones %s: errors "
                         "updating zones: %s" % (go_list(self.origins),
                                                 go_list(errors)))
        if not self._running:
            return None
        delay = self.refresh
        if not self.ready():
            delay = min(self._retry, self.refresh)
            self._retry = min(self._retry * 2, self.refresh)
        self._timer = self.reactor.callLater(delay, self.update)
        return None

    # -- serving ----------------------------------------------------------

    def serve(self, req):
        origin = match(self.origins, req.qname)
        if origin is None:
            return self.next.serve(req)
        return self._lookup(req, self.hosted[origin], 0)

    def _lookup(self, req, zones, i):
        data = zones[i].data
        out = _EMPTY if data is None else data.lookup(req, self.upstream)
        return then(out, self._looked, req, zones, i)

    def _looked(self, out, req, zones, i):
        answer, _, _, result = out
        if not answer and result != NO_DATA and i + 1 < len(zones):
            return self._lookup(req, zones, i + 1)
        return self.write(req, out)

    def write(self, req, out):
        """CoreDNS's ServeDNS tail of route53, azure and clouddns: fall
        through when nothing was found, SERVFAIL (unwritten) on a server
        failure, no AA on a delegation."""
        answer, ns, extra, result = out
        if not answer and result != NO_DATA and self.fall.through(
                req.qname):
            return self.next.serve(req)
        if result == SERVER_FAILURE:
            return Response(w.SERVFAIL)
        rcode = w.NXDOMAIN if result == NAME_ERROR else w.NOERROR
        return self.respond(req, rcode, answer or [], ns or [], extra or [],
                            aa=result != DELEGATION)

    def upstream(self, name, qtype, req):
        """CNAME targets outside the zone, through the server itself."""
        app = self.block.server if self.block is not None else None
        if app is None:
            return defer.succeed(None)
        return app.lookup(name, qtype, parent=req, do=req.do)


def error_text(e):
    """An exception's message for the log (its class when it has none)."""
    text = str(e)
    return text if text else type(e).__name__
