"""k8s_external: the external addresses of Kubernetes services in a zone
of their own (CoreDNS's k8s_external).

``k8s_external [ZONE...] { apex APEX; ttl TTL; headless; fallthrough
[ZONES...] }``.  ``service.namespace.ZONE`` answers the service's
external IPs and load balancer ingress addresses (a load balancer's host
name is a CNAME, resolved through the server); with ``headless``, a
headless service without external IPs answers its ready endpoints, and
``endpoint.service.namespace.ZONE`` one of them.  SRV records name the
ports, PTR records the services of an external address.  The apex has
an SOA and an NS record for ``ns1.APEX.ZONE``, whose addresses are the
server's own external ones.

The data comes from the block's kubernetes plugin through IExternal.
"""

from typing import Optional

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import names
from corednstw.core.interfaces import (
    EXTERNAL_ENDPOINT,
    IExternal,
    IReadiness,
    ITransferer,
)
from corednstw.core.plugin import Fallthrough, Plugin, match, zones_from_args
from corednstw.core.request import Response

NAME = "k8s_external"


@implementer(ITransferer)
class External(Plugin):
    """The zones, their options and the IExternal provider (found at
    start)."""

    name = NAME

    def __init__(self, zones):
        self.zones = zones
        self.apex = "dns"
        self.hostmaster = "hostmaster"
        self.ttl = 5
        self.headless = False
        self.fall = Fallthrough()
        self.source: Optional[IExternal] = None
        self._readiness = None

    def start(self):
        """Find kubernetes once every plugin exists (CoreDNS's
        OnStartup), with CoreDNS's errors when it cannot serve."""
        k = self.block.plugin("kubernetes")
        if k is None:
            raise ValueError("plugin/k8s_external: kubernetes plugin not "
                             "loaded")
        if not IExternal.providedBy(k):
            raise ValueError("plugin/k8s_external: kubernetes plugin does "
                             "not implement the Externaler interface")
        self.source = IExternal(k)
        self._readiness = k if IReadiness.providedBy(k) else None

    @property
    def _source(self) -> IExternal:
        """The provider ``start`` found (nothing is served before)."""
        assert self.source is not None
        return self.source

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return self.next.serve(req)
        for z in self.zones:
            if qname == z:
                return self._apex(req, zone)
            sub = self.apex + "." + z
            if names.in_zone(qname, sub):
                return self._sub_apex(req, zone)
        svcs, rcode = self._source.external(req, zone, self.headless)
        if not svcs:
            if rcode == w.NXDOMAIN and not self._synced():
                # As kubernetes: nothing is missing before the first lists.
                rcode = w.SERVFAIL
            elif rcode == w.NXDOMAIN and self.fall.through(qname):
                return self.next.serve(req)
            return self._reply(rcode, [], [self.soa(zone)])
        qtype = req.qtype
        if qtype == w.A or qtype == w.AAAA:
            return self._address(req, zone, svcs, qtype)
        if qtype == w.SRV:
            return self._srv(req, zone, svcs)
        if qtype == w.PTR:
            return self._answer(zone, self._ptr(req, svcs))
        return self._reply(0, [], [self.soa(zone)])

    def _synced(self):
        r = self._readiness
        return r is None or r.ready()

    def _reply(self, rcode, answer, authority, additional=None, tc=False):
        return Response(rcode, answer, authority, additional, aa=True,
                        plugin=NAME, tc=tc)

    def _answer(self, zone, answer, additional=None, tc=False):
        """The answer, or NODATA when the names exist without records of
        the asked type."""
        if not answer:
            return self._reply(0, [], [self.soa(zone)], additional, tc)
        return self._reply(0, answer, [], additional, tc)

    # -- the apex and the ``dns`` subdomain -----------------------------------

    def _apex(self, req, zone):
        qtype = req.qtype
        if qtype == w.SOA:
            return self._reply(0, [self.soa(zone)], [])
        if qtype == w.NS:
            ns = _join("ns1", self.apex, req.name)
            extra = [w.RR(ns, rr.rtype, self.ttl, rr.rdata)
                     for rr in self._own(zone)]
            return self._reply(0, [self.ns(zone)], [], extra)
        return self._reply(0, [], [self.soa(zone)])

    def _sub_apex(self, req, zone):
        """Names below ``APEX.ZONE``: ``ns1.APEX.ZONE`` has this server's
        addresses, ``APEX.ZONE`` is an empty non-terminal, anything else
        does not exist."""
        base = req.qname[:-len(zone) - 1] if zone != "." else req.qname[:-1]
        labels = base.split(".")
        if len(labels) == 1:
            return self._reply(0, [], [self.soa(zone)])
        if len(labels) != 2 or labels[0] != "ns1":
            return self._reply(w.NXDOMAIN, [], [self.soa(zone)])
        answer = [w.RR(req.name, rr.rtype, self.ttl, rr.rdata)
                  for rr in self._own(zone) if rr.rtype == req.qtype
                  and req.qtype in (w.A, w.AAAA)]
        return self._answer(zone, answer)

    def _own(self, zone):
        return self._source.external_address(zone, self.headless)

    def soa(self, zone):
        return w.RR(zone, w.SOA, self.ttl, w.soa_rdata(
            _join("ns1", self.apex, zone),
            _join(self.hostmaster, self.apex, zone),
            self._source.external_serial(zone), 7200, 1800, 86400, self.ttl))

    def ns(self, zone):
        return w.RR(zone, w.NS, self.ttl,
                    w.name_to_wire(_join("ns1", self.apex, zone)))

    # -- records of services --------------------------------------------------

    def _address(self, req, zone, svcs, qtype):
        """A or AAAA records; a host name (a load balancer's) is a CNAME
        followed by the target's records, looked up through the server."""
        records = self.addresses(req.name, svcs, qtype)
        lookups = [(i, target) for i, target in enumerate(records)
                   if isinstance(target, str)]
        if not lookups:
            return self._answer(zone, records)
        ds = [self.block.server.lookup(_fqdn(t), qtype, parent=req)
              for _, t in lookups]

        def done(results):
            out, tc = [], False
            for r in records:
                if not isinstance(r, str):
                    out.append(r)
                    continue
                ok, resp = results.pop(0)
                if ok and resp is not None:
                    out.extend(resp.answer)
                    tc = tc or resp.tc
            return self._answer(zone, out, tc=tc)
        return defer.DeferredList(ds, consumeErrors=True).addCallback(done)

    def addresses(self, name, svcs, qtype):
        """CoreDNS's a/aaaa: records at ``name``, deduplicated by host;
        a host name gives its CNAME, then its text as a placeholder for
        the records of its lookup."""
        out, seen = [], set()
        for host, _, _, ttl in svcs:
            a = w.ip_rdata(host)
            if a is None:
                out.append(w.RR(name, w.CNAME, ttl,
                                w.name_to_wire(_fqdn(host))))
                out.append(host)
                continue
            if a[1] == qtype and host not in seen:
                seen.add(host)
                out.append(w.RR(name, qtype, self.ttl, a[2]))
        return out

    def _srv(self, req, zone, svcs):
        answer, extra = self.srv(req.name, svcs)
        lookups = [x for x in extra if isinstance(x, str)]
        if not lookups:
            return self._answer(zone, answer, extra)
        app = self.block.server
        ds = [app.lookup(t, qt, parent=req) for t in lookups
              for qt in (w.A, w.AAAA)]

        def done(results):
            got = iter(results)
            out = []
            for x in extra:
                if not isinstance(x, str):
                    out.append(x)
                    continue
                for _ in (w.A, w.AAAA):
                    ok, resp = next(got)
                    if ok and resp is not None:
                        out.extend(resp.answer)
            return self._answer(zone, answer, out)
        return defer.DeferredList(ds, consumeErrors=True).addCallback(done)

    def srv(self, name, svcs):
        """CoreDNS's srv: (SRV records at ``name``, extra), each weight
        100 / the number of services; the extra holds the targets'
        address records, or a host name to look up."""
        weight = max(1, int(100.0 / (100 * len(svcs)) * 100))
        answer, extra, dup = [], [], set()
        for host, port, target, ttl in svcs:
            if port == -1:
                continue
            a = w.ip_rdata(host)
            if a is None:
                target = _fqdn(host)
            rd = w.srv_rdata(0, weight, port, target)
            key = (target.lower(), port)
            if key not in dup:
                dup.add(key)
                answer.append(w.RR(name, w.SRV, ttl, rd))
            key = (target.lower(), host)
            if key in dup:
                continue
            dup.add(key)
            if a is None:
                extra.append(target)
            else:
                extra.append(w.RR(target, a[1], self.ttl, a[2]))
        return answer, extra

    def _ptr(self, req, svcs):
        out, seen = [], set()
        for host, _, _, _ in svcs:
            if host not in seen:
                seen.add(host)
                out.append(w.RR(req.name, w.PTR, self.ttl, w.name_to_wire(
                    _join(host, self.zones[0]))))
        return out

    # -- zone transfers (the transfer plugin's interface) ---------------------

    def transfer_records(self, zone, serial):
        """CoreDNS's Transfer of an external zone: SOA, NS, the server's
        addresses, the services' records, SOA."""
        if self.source is None or match(self.zones, zone) != zone:
            return None
        soa = self.soa(zone)
        if serial != 0 and serial >= self.source.external_serial(zone):
            return [[soa]]
        ns = _join("ns1", self.apex, zone)
        out = [[soa], [self.ns(zone)]]
        out.extend([w.RR(ns, rr.rtype, self.ttl, rr.rdata)]
                   for rr in self._own(zone))
        svcs, groups = self.source.external_services(zone, self.headless)
        seen: set[str] = set()
        for owner, s in svcs:
            if owner == s[2]:
                for qtype in (w.A, w.AAAA):
                    recs = self._static(self.addresses(owner, [s], qtype))
                    if recs:
                        out.append(recs)
            out.extend([rr] for rr in self.srv(owner, [s])[0]
                       if _first_seen(seen, rr.name))
        for (owner, kind), group in groups.items():
            out.extend(self._headless(owner, kind, group))
        out.append([soa])
        return out

    def _headless(self, owner, kind, group):
        """The batches of one headless group, as CoreDNS sends them (the
        SRV records twice: as a batch and one by one)."""
        if kind != EXTERNAL_ENDPOINT:
            srvs = self.srv(owner, group)[0]
            return [srvs] if srvs else []
        out = []
        for svcs, name in [(group, owner)] + [([s], s[2]) for s in group]:
            for qtype in (w.A, w.AAAA):
                recs = self._static(self.addresses(name, svcs, qtype))
                if recs:
                    out.append(recs)
            srvs = self.srv(name, svcs)[0]
            if srvs:
                out.append(srvs)
                out.extend([rr] for rr in srvs)
        return out

    @staticmethod
    def _static(records):
        """Records without the placeholders of lookups (a transfer does
        not resolve load balancer host names)."""
        return [r for r in records if not isinstance(r, str)]


def _first_seen(seen, name):
    key = name.lower()
    if key in seen:
        return False
    seen.add(key)
    return True


def _join(*labels):
    """dnsutil.Join: labels and a zone into one FQDN."""
    parts = [x.rstrip(".") for x in labels if x not in ("", ".")]
    return ".".join(parts) + "."


def _fqdn(name):
    return name if name.endswith(".") else name + "."


def setup(d, block):
    e = External(zones_from_args(d.args, block))
    d.read_options({
        "ttl": lambda c: setattr(e, "ttl", _ttl(c)),
        "apex": lambda c: setattr(e, "apex", c.between(1)[0]),
        "headless": lambda c: setattr(e, "headless", True),
        "fallthrough": lambda c: setattr(e, "fall",
                                         Fallthrough.parse(c.args)),
    })
    return e


def _ttl(c):
    """``ttl SECONDS``, 0 to 3600.  CoreDNS reads the first argument and
    ignores any after it, so extra ones are no error here either."""
    return c.integer(c.between(1)[0], lo=0, hi=3600,
                     range_error="ttl must be in range [0, 3600]: %d")
