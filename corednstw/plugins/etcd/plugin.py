"""The etcd plugin object: answers from the in-memory copy of the prefix.

Queries never wait on etcd: ``client.Mirror`` holds every key under the
prefix, fed by a watch, and a query reads that copy (a dict and a sorted
key list) on the reactor thread.  Only external CNAME, SRV and MX targets
are resolved with a Deferred, through the server itself.
"""

import time

from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core.interfaces import IReadiness
from corednstw.core.plugin import Fallthrough, Plugin, match
from corednstw.plugins.etcd import client as cl
from corednstw.plugins.etcd import lookup as lk
from corednstw.plugins.etcd import records as rec

NAME = "etcd"
DEFAULT_PATH = "skydns"
DEFAULT_ENDPOINT = "http://localhost:2379"
DEFAULT_LEASE_MIN_TTL = 30
DEFAULT_LEASE_MAX_TTL = 86400
#: How old (seconds) a lease's remaining time may be before a query that
#: reads it asks etcd again, in the background.
LEASE_REFRESH = 1.0


class Options:
    """What the directive sets."""

    def __init__(self):
        self.zones = []
        self.path = DEFAULT_PATH
        self.endpoints = [DEFAULT_ENDPOINT]
        self.fall = Fallthrough()
        self.tls = None             # a client.TLSPolicy, or None
        self.username = ""
        self.password = ""
        self.min_lease_ttl = DEFAULT_LEASE_MIN_TTL
        self.max_lease_ttl = DEFAULT_LEASE_MAX_TTL


@implementer(IReadiness)
class Etcd(Plugin):
    name = NAME

    def __init__(self, opts):
        self.opts = opts
        self.zones = opts.zones
        self.fall = opts.fall
        self.prefix = opts.path
        self.watched = rec.path(".", opts.path) + "/"
        self.mirror = None
        self.leases = {}        # lease id -> (expiry, fetched at)
        self.fetching = set()

    # -- life cycle ------------------------------------------------------

    def start(self):
        o = self.opts
        client = cl.Client(self.reactor, o.endpoints, o.tls, o.username,
                           o.password)
        self.mirror = cl.Mirror(client, self.watched, self.decode,
                                self.reactor)
        self.mirror.start()

    def stop(self):
        if self.mirror is not None:
            return self.mirror.stop()
        return None

    def ready(self):
        return self.mirror is not None and self.mirror.synced

    # -- data ------------------------------------------------------------

    def decode(self, key, value, lease):
        """A Service with CoreDNS's defaults applied, or the FormatError
        a query reading it reports."""
        try:
            s = rec.decode(key, value, lease)
        except rec.FormatError as e:
            return e
        if s.priority == 0:
            s.priority = rec.DEFAULT_PRIORITY
        if lease == 0:
            s.ttl = s.ttl or rec.DEFAULT_TTL
        elif lease not in self.leases:
            self._fetch_lease(lease)
        return s

    def services(self, name, exact, qtype):
        """The grouped services for ``name`` (CoreDNS's Records and
        Group), from memory."""
        key, star = rec.path_with_wildcard(name, self.prefix)
        kvs = self._get(key, not exact)
        segments = rec.path(name, self.prefix).split("/") if star else ()
        out = []
        for k, entry in kvs:
            if star and not _wildcard_match(k, segments):
                continue
            if isinstance(entry, rec.FormatError):
                raise lk.BackendError(str(entry))
            if entry.lease:
                entry = self._lease_ttl(entry)
            if entry.host or (qtype == w.TXT and entry.text):
                out.append(entry)
        return rec.group(out)

    def _get(self, key, recursive):
        m = self.mirror
        if m is None:
            raise lk.KeyNotFound(key)
        if recursive:
            kvs = m.range(key if key.endswith("/") else key + "/")
            if not kvs:
                kvs = m.get(key[:-1] if key.endswith("/") else key)
        else:
            kvs = m.get(key)
        if not kvs:
            raise lk.KeyNotFound(key)
        return kvs

    def _lease_ttl(self, s):
        """A copy of ``s`` with the TTL CoreDNS gives a leased key: the
        lease's remaining time clamped to [min, max], or the service's
        own TTL when that is smaller."""
        now = time.monotonic()
        info = self.leases.get(s.lease)
        if info is None or now - info[1] >= LEASE_REFRESH:
            self._fetch_lease(s.lease)
        left = int(info[0] - now) if info is not None else 0
        etcd_ttl = 0
        if left > 0:
            etcd_ttl = min(max(left, self.opts.min_lease_ttl),
                           self.opts.max_lease_ttl)
        s = s.copy()
        if etcd_ttl == 0:
            s.ttl = s.ttl or rec.DEFAULT_TTL
        elif s.ttl == 0 or etcd_ttl < s.ttl:
            s.ttl = etcd_ttl
        return s

    def _fetch_lease(self, lease):
        if lease in self.fetching or self.mirror is None:
            return
        self.fetching.add(lease)

        def got(ttl):
            now = time.monotonic()
            self.leases[lease] = (now + max(ttl, 0), now)

        d = self.mirror.client.lease_ttl(lease)
        d.addCallbacks(got, lambda f: None)
        d.addBoth(lambda _: self.fetching.discard(lease))

    def external_lookup(self, name, qtype, req):
        """Ask the server itself (CoreDNS's upstream); None on failure."""
        d = self.block.server.lookup(name, qtype, parent=req)
        return d.addErrback(lambda f: None)

    # -- serving ---------------------------------------------------------

    def serve(self, req):
        zone = match(self.zones, req.qname)
        if zone is None:
            return self.next.serve(req)
        q = lk.Query(self, req, zone)
        try:
            sections = self._sections(q, req, zone)
        except lk.KeyNotFound:
            if self.fall.through(req.qname):
                return self.next.serve(req)
            return self._error(req, zone, w.NXDOMAIN)
        except lk.BackendError as e:
            return self._error(req, zone, w.SERVFAIL, str(e))
        return q.finish(sections, lambda s: self._answer(req, zone, s))

    def _sections(self, q, req, zone):
        """[answer, additional], items possibly still to resolve."""
        qt, name, owner = req.qtype, req.qname, req.name
        if qt in (w.A, w.AAAA):
            return [lk.address(q, name, owner, qt), []]
        if qt == w.TXT:
            return [lk.txt(q, name, owner), []]
        if qt == w.CNAME:
            return [lk.cname(q, name, owner), []]
        if qt == w.PTR:
            return [lk.ptr(q, name, owner), []]
        if qt == w.MX:
            return list(lk.mx(q, name, owner))
        if qt == w.SRV:
            return list(lk.srv(q, name, owner))
        if qt == w.SOA:
            return [[self._soa(zone)], []]
        if qt == w.NS and name == zone:
            return list(lk.ns(q, owner))
        # Any other type: NXDOMAIN or NODATA, as an A lookup would say.
        lk.check_for_apex(q, name)
        return [[], []]

    def _answer(self, req, zone, sections):
        answer, extra = sections
        if not answer:
            return self._error(req, zone, w.NOERROR)
        return self.respond(req, answer=answer, additional=extra)

    def _error(self, req, zone, rcode, text=None):
        resp = self.respond(req, rcode, authority=[self._soa(zone)])
        if text:
            resp.error = text
        return resp

    def _soa(self, zone):
        return rec.soa(zone, int(time.time()))


def _wildcard_match(key, segments):
    """Whether ``key`` fits a name with ``*``/``any`` labels, label by
    label (keys deeper than the name match too)."""
    parts = key.split("/")
    if len(segments) > len(parts):
        return False
    for seg, part in zip(segments, parts):
        if seg not in ("*", "any") and seg != part:
            return False
    return True

