"""CoreDNS's backend lookup rules (plugin/backend_lookup.go) over the
services a backend finds for a name.

The functions build answer lists whose items are records, or ``External``
and ``Chain`` placeholders: an external CNAME target or an SRV/MX target
outside the zone is resolved through the server itself, which takes a
Deferred.  ``Query.finish`` waits for those lookups (only when there are
any) and then flattens the lists, so an answer from memory alone stays
synchronous.
"""

from typing import Union

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core.goparse import parse_ip
from corednstw.core.names import fqdn, is_subdomain
from corednstw.plugins.etcd import records as rec

MAX_CNAME_CHAIN = 10


class KeyNotFound(Exception):
    """No key for the name: NXDOMAIN."""


class BackendError(Exception):
    """Data that cannot be answered from: SERVFAIL."""


class External:
    """Records from asking the server for ``name``/``qtype``; ``head``
    (the CNAME pointing there) is kept only when the lookup answered."""

    __slots__ = ("name", "qtype", "head", "skip_cname", "answer")

    def __init__(self, name, qtype, head=None, skip_cname=False):
        self.name = name
        self.qtype = qtype
        self.head = head
        self.skip_cname = skip_cname
        self.answer = None      # list of RRs once answered


class Chain:
    """A CNAME kept only when what it leads to produced records."""

    __slots__ = ("head", "rest")

    def __init__(self, head, rest):
        self.head = head
        self.rest = rest


#: What a section holds until ``flatten``: records, lookups of the
#: server, CNAMEs kept only when what follows them answers.
Entry = Union[w.RR, External, Chain]


class Query:
    """One question against a backend: ``services(name, exact)`` gives
    the grouped services for a lower-case name."""

    def __init__(self, backend, req, zone):
        self.backend = backend
        self.req = req
        self.zone = zone
        self.externals = []

    def services(self, name, exact=False):
        return self.backend.services(name, exact, self.req.qtype)

    def external(self, name, qtype, head=None, skip_cname=False):
        e = External(name, qtype, head, skip_cname)
        self.externals.append(e)
        return e

    def finish(self, sections, build):
        """``build(flat sections)`` now, or once the external lookups
        answered (a Deferred)."""
        if not self.externals:
            return build([flatten(s) for s in sections])
        lookup = self.backend.external_lookup
        ds = [lookup(e.name, e.qtype, self.req).addCallback(
            _store, e) for e in self.externals]
        d = defer.gatherResults(ds, consumeErrors=True)
        return d.addCallback(
            lambda _: build([flatten(s) for s in sections]))


def _store(resp, e):
    if resp is not None:
        e.answer = [rr for rr in resp.answer
                    if not (e.skip_cname and rr.rtype == w.CNAME)]


def flatten(items):
    out = []
    for it in items:
        if isinstance(it, w.RR):
            out.append(it)
        elif isinstance(it, External):
            if it.answer is not None:
                if it.head is not None:
                    out.append(it.head)
                out.extend(it.answer)
        else:
            rest = flatten(it.rest)
            if rest:
                out.append(it.head)
                out.extend(rest)
    return out


# -- the record types ---------------------------------------------------

def check_for_apex(q, name):
    """Services for ``name``; for the zone itself those below
    ``apex.dns.ZONE`` first, the zone's own keys when there are none."""
    if name != q.zone:
        return q.services(name)
    try:
        return q.services(_join("apex.dns", q.zone))
    except KeyNotFound:
        return q.services(name)


def address(q, name, owner, rtype, previous=()):
    """A or AAAA records (``rtype``) for ``name`` (lower case), owned by
    ``owner`` (the name as asked), following CNAMEs."""
    records: list[Entry] = []
    seen = set()
    for serv in check_for_apex(q, name):
        what, packed = serv.host_type()
        if what == w.CNAME:
            _follow(q, name, owner, rtype, serv, previous, records,
                    address)
        elif what == rtype and serv.host not in seen:
            seen.add(serv.host)
            records.append(rec.address(serv, owner, packed, rtype))
    return records


def txt(q, name, owner, previous=()):
    """TXT records for ``name``, following CNAMEs."""
    records: list[Entry] = []
    seen = set()
    for serv in q.services(name):
        what, _ = serv.host_type()
        if what == w.CNAME:
            _follow(q, name, owner, w.TXT, serv, previous, records,
                    lambda q2, n, o, t, p: txt(q2, n, o, p))
        elif what == w.TXT and serv.text not in seen:
            seen.add(serv.text)
            records.append(rec.txt(serv, owner))
    return records


def _follow(q, name, owner, rtype, serv, previous, records, again):
    """The CNAME branch shared by A, AAAA and TXT."""
    target = fqdn(serv.host)
    if is_subdomain(target, name):
        return      # x CNAME x (or below x): a loop
    record = rec.cname(serv, owner, serv.host)
    if len(previous) > MAX_CNAME_CHAIN:
        return
    if any(r.rtype == w.CNAME and r.rdata == record.rdata
           for r in previous):
        return
    if is_subdomain(target, q.zone):
        try:
            more = again(q, target.lower(), target, rtype,
                         tuple(previous) + (record,))
        except (KeyNotFound, BackendError):
            return
        if more:
            records.append(Chain(record, more))
        return
    records.append(q.external(target, rtype, head=record))


def srv(q, name, owner):
    """SRV records for ``name`` and the addresses of their targets."""
    services = q.services(name)
    records: list[Entry] = []
    extra: list[Entry] = []
    dup = set()
    lookups: set[str] = set()
    totals: dict[int, int] = {}
    for serv in services:
        weight = serv.weight or 100
        totals[serv.priority] = totals.get(serv.priority, 0) + weight
    for serv in services:
        if serv.port == -1:
            continue
        w1 = 100.0 / totals[serv.priority]
        w1 *= serv.weight if serv.weight else 100
        weight = int(w1) & 0xFFFF or 1
        what, packed = serv.host_type()
        if what == w.CNAME:
            record = rec.srv(serv, owner, weight)
            records.append(record)
            _target_addresses(q, rec.srv_target(serv), lookups, extra)
        elif what in (w.A, w.AAAA):
            addr = serv.host
            s = serv.copy()
            s.host = rec.domain(serv.key)
            target = rec.srv_target(s)
            if (target, s.port & 0xFFFF, "") not in dup:
                dup.add((target, s.port & 0xFFFF, ""))
                records.append(rec.srv(s, owner, weight))
            if (target, 0, addr) not in dup:
                dup.add((target, 0, addr))
                extra.append(rec.address(s, target, packed, what))
    return records, extra


def mx(q, name, owner):
    """MX records (services with ``mail``) and their targets' addresses."""
    records: list[Entry] = []
    extra: list[Entry] = []
    dup = set()
    lookups: set[str] = set()
    for serv in q.services(name):
        if not serv.mail:
            continue
        what, packed = serv.host_type()
        if what == w.CNAME:
            record, target = rec.mx(serv, owner)
            records.append(record)
            _target_addresses(q, target, lookups, extra)
        elif what in (w.A, w.AAAA):
            addr = serv.host
            s = serv.copy()
            s.host = rec.domain(serv.key)
            record, target = rec.mx(s, owner)
            pref = s.priority & 0xFFFF
            if (target, pref, "") not in dup:
                dup.add((target, pref, ""))
                records.append(record)
            if (s.host, 0, addr) not in dup:
                dup.add((s.host, 0, addr))
                extra.append(rec.address(s, s.host, packed, what))
    return records, extra


def _target_addresses(q, target, lookups, extra):
    """The additional records for an SRV or MX target that is a name:
    asked of the server when outside the zone, looked up in the backend
    (A only, as CoreDNS) when inside."""
    if target in lookups:
        return
    lookups.add(target)
    if not is_subdomain(target, q.zone):
        extra.append(q.external(target, w.A))
        extra.append(q.external(target, w.AAAA, skip_cname=True))
        return
    try:
        extra.extend(address(q, target.lower(), target, w.A))
    except (KeyNotFound, BackendError):
        pass


def cname(q, name, owner):
    services = q.services(name, exact=True)
    if services and parse_ip(services[0].host) is None:
        return [rec.cname(services[0], owner, services[0].host)]
    return []


def ptr(q, name, owner):
    records = []
    seen = set()
    for serv in q.services(name, exact=True):
        if parse_ip(serv.host) is None and serv.host not in seen:
            seen.add(serv.host)
            records.append(rec.ptr(serv, owner, serv.host))
    return records


def ns(q, owner):
    """NS records for the zone from the addresses below ``ns.dns.ZONE``,
    their names made from the keys."""
    records, extra = [], []
    seen = set()
    for serv in q.services(_join("ns.dns", q.zone)):
        what, packed = serv.host_type()
        if what == w.CNAME:
            raise BackendError("NS record must be an IP address: %s"
                               % serv.host)
        if what in (w.A, w.AAAA):
            s = serv.copy()
            s.host = rec.domain(serv.key)
            record, target = rec.ns(s, owner)
            extra.append(rec.address(s, target, packed, what))
            if target in seen:
                continue
            seen.add(target)
            records.append(record)
    return records, extra


def _join(label, zone):
    return label + "." + (zone if zone != "." else "")
