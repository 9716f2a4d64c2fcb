"""A zone's data and CoreDNS's lookup rules (plugin/file's Zone.Lookup).

A ``ZoneData`` is an immutable snapshot of one zone: the apex records (SOA,
NS and their signatures) kept apart as CoreDNS keeps them, and one ``Node``
per owner name holding wire-form ``dnswire.RR`` lists by type.  Names are
keyed by their lower-cased uncompressed wire form, so a query is looked up
with plain dict accesses on ``req.qwire.lower()``; canonical (RFC 4034
section 6.1) order, needed for NSEC denial and empty non-terminals, is a
sorted list searched with bisect.

``ZoneData.lookup`` follows CoreDNS's Zone.Lookup: delegations, DNAME
substitution, CNAME chains (targets outside the zone through the server's
upstream lookup, which makes the result a Deferred), wildcards with
RFC 4592's closest-encloser rule, NXDOMAIN/NODATA with the SOA, additional
processing for MX/SRV/SVCB/HTTPS and pre-signed DNSSEC data (NSEC only, as
CoreDNS).
"""

import bisect

from corednstw.core import dnswire as w
from corednstw.core.plugin import then

from .serial import soa_serial
from .wire import (
    ROOT,
    canonical_key,
    covered,
    is_sub,
    labels,
    name_end,
    wire_text,
)

# Lookup results (CoreDNS's file.Result).
SUCCESS, NAME_ERROR, DELEGATION, NO_DATA, SERVER_FAILURE = range(5)


class ZoneError(Exception):
    """A zone could not be read or built (message as CoreDNS logs it)."""


_WITH_TARGETS = frozenset((w.MX, w.SRV, w.SVCB, w.HTTPS))


def _target(rr):
    """The wire target of MX, SRV, SVCB and HTTPS rdata (else None)."""
    t = rr.rtype
    if t == w.MX or t == w.SVCB or t == w.HTTPS:
        d = rr.rdata
        return d[2:name_end(d, 2)]
    if t == w.SRV:
        d = rr.rdata
        return d[6:name_end(d, 6)]
    return None


def _lower_rdata(rtype, rdata):
    """Rdata with the names CoreDNS lower-cases on insert lower-cased."""
    if rtype == w.NS or rtype == w.CNAME:
        return rdata.lower()
    if rtype == w.MX or rtype == w.SVCB or rtype == w.HTTPS:
        end = name_end(rdata, 2)
        return rdata[:2] + rdata[2:end].lower() + rdata[end:]
    if rtype == w.SOA:
        end = name_end(rdata, name_end(rdata, 0))
        return rdata[:end].lower() + rdata[end:]
    return rdata


# -- zone data ----------------------------------------------------------------

class Node:
    """The records of one owner name: ``types`` maps a type to its RRs
    (RRSIGs under RRSIG), ``sigs`` maps a covered type to its RRSIGs."""

    __slots__ = ("wire", "name", "types", "sigs", "clear")

    def __init__(self, wire, name):
        self.wire = wire
        self.name = name
        self.types = {}
        self.sigs = {}
        #: No zone cut or DNAME above this name and no NS here: an exact
        #: hit needs no walk from the apex (set by ZoneData.finish).
        self.clear = False

    def get(self, rtype, do=False):
        rrs = self.types.get(rtype)
        if not do:
            return list(rrs) if rrs else []
        out = list(rrs) if rrs else []
        out.extend(self.sigs.get(rtype, ()))
        return out

    def all(self):
        out = []
        for rrs in self.types.values():
            out.extend(rrs)
        return out


class ZoneData:
    """One loaded zone (never changed after ``build``; reloads swap it)."""

    def __init__(self, origin):
        self.origin = origin                    # lower-case FQDN text
        self.owire = w.name_to_wire(origin).lower()
        self.olabels = len(labels(self.owire))
        self.soa = None
        self.sigsoa = []
        self.ns = []
        self.signs = []
        self.nodes = {}
        self.keys = []       # canonical sort keys, sorted
        self.wires = []      # the wire names in the same order
        self.serial = None
        self.mtime = None
        #: Every name that exists (nodes, empty non-terminals, the apex)
        #: -> True when a name below it that does not exist is a plain
        #: NXDOMAIN: no cut, DNAME or wildcard on the way from the apex.
        self.exist = {}

    # -- building -----------------------------------------------------------

    def insert(self, owner, rr):
        """Add ``rr`` (owner: wire name as read) the way CoreDNS's
        Zone.Insert does: apex SOA/NS and their signatures apart, names
        lower-cased except SRV owners, some rdata names lower-cased."""
        t = rr.rtype
        low = owner.lower()
        if t == w.NSEC3 or t == 51:
            raise ZoneError("NSEC3 zone is not supported, dropping RR: %s "
                            "for zone: %s" % (wire_text(owner), self.origin))
        if t != w.SRV:
            rr.name = self._text(low)
        else:
            rr.name = wire_text(owner)
        rr.rdata = _lower_rdata(t, rr.rdata)
        if t == w.NS and low == self.owire:
            self.ns.append(rr)
            return
        if t == w.SOA:
            self.soa = rr
            return
        if t == w.RRSIG:
            cov = covered(rr)
            if cov == w.SOA:
                self.sigsoa.append(rr)
                return
            if cov == w.NS and low == self.owire:
                self.signs.append(rr)
                return
        node = self.nodes.get(low)
        if node is None:
            node = self.nodes[low] = Node(low, self._text(low))
        node.types.setdefault(t, []).append(rr)
        if t == w.RRSIG:
            node.sigs.setdefault(covered(rr), []).append(rr)

    _texts = None

    def _text(self, low):
        if self._texts is None:
            self._texts = {}
        s = self._texts.get(low)
        if s is None:
            s = self._texts[low] = wire_text(low)
        return s

    def finish(self):
        """Index the names; ZoneError when there is no SOA."""
        if self.soa is None:
            raise ZoneError("no SOA")
        self.serial = soa_serial(self.soa)
        pairs = sorted((canonical_key(k), k) for k in self.nodes)
        self.keys = [p[0] for p in pairs]
        self.wires = [p[1] for p in pairs]
        self._texts = None
        self._index_paths()
        return self

    def _index_paths(self):
        """Precompute, per existing name, what the walk from the apex in
        ``lookup`` would find on the way (see Node.clear and exist)."""
        owire = self.owire
        nodes = self.nodes
        names = {owire}
        for wire in nodes:
            if not is_sub(wire, owire):
                continue
            while wire != owire and wire not in names:
                names.add(wire)
                wire = wire[wire[0] + 1:]
        cuts = set()        # names with NS (below the apex) or DNAME
        for wire, node in nodes.items():
            if w.DNAME in node.types or (w.NS in node.types
                                         and wire != owire):
                cuts.add(wire)
        wild_parents = {n[2:] for n in names if n[:2] == b"\x01*"}
        exist = {}
        for name in names:
            above_cut = False
            wild = name in wild_parents
            a = name
            while a != owire:
                a = a[a[0] + 1:]
                if a in cuts:
                    above_cut = True
                if a in wild_parents:
                    wild = True
            node = nodes.get(name)
            if node is not None:
                node.clear = not above_cut and not (
                    w.NS in node.types and name != owire)
            exist[name] = not above_cut and name not in cuts and not wild
        self.exist = exist

    # -- tree operations (CoreDNS's tree.Prev / tree.Next) -------------------

    def prev(self, wire):
        """The node at or before ``wire`` in canonical order (floor)."""
        i = bisect.bisect_right(self.keys, canonical_key(wire)) - 1
        if i < 0:
            return None
        return self.nodes[self.wires[i]]

    def has_descendant(self, wire):
        """A name strictly below ``wire`` exists (and ``wire`` itself does
        not: CoreDNS's hasDescendant uses the ceiling element)."""
        i = bisect.bisect_left(self.keys, canonical_key(wire))
        if i >= len(self.wires):
            return False
        x = self.wires[i]
        return x != wire and is_sub(x, wire)

    # -- apex helpers ---------------------------------------------------------

    def soa_rrs(self, do):
        return [self.soa] + self.sigsoa if do else [self.soa]

    def ns_rrs(self, do):
        return self.ns + self.signs if do else self.ns[:]

    def authority(self, do, result):
        if result == NAME_ERROR or result == NO_DATA:
            return self.soa_rrs(do)
        return self.ns_rrs(do)

    def glue(self, nsrrs, do):
        """A/AAAA (and signatures) of NS targets below the NS owner."""
        out = []
        for rr in nsrrs:
            if rr.rtype != w.NS:
                continue
            owner = w.name_to_wire(rr.name).lower()
            if not is_sub(rr.rdata, owner):
                continue
            node = self.nodes.get(rr.rdata)
            if node is not None:
                out.extend(node.get(w.A, do))
                out.extend(node.get(w.AAAA, do))
        return out

    def additional(self, answer, do):
        """A/AAAA of in-zone MX, SRV, SVCB and HTTPS targets, once each."""
        extra = []
        seen = None
        for rr in answer:
            target = _target(rr)
            if target is None:
                continue
            target = target.lower()
            if not is_sub(target, self.owire):
                continue
            if seen is None:
                seen = set()
            elif target in seen:
                continue
            seen.add(target)
            node = self.nodes.get(target)
            if node is None:
                continue
            extra.extend(node.get(w.A, do))
            extra.extend(node.get(w.AAAA, do))
        return extra

    def _part(self, qwire, offs, i):
        """CoreDNS's nameFromRight: the origin plus ``i`` labels of qname,
        or None when that overshoots the name."""
        n = len(offs) - self.olabels - i
        if i == 0:
            return self.owire
        if n < 0:
            return None
        return qwire[offs[n]:] if n < len(offs) else ROOT

    def _delegation(self, node, qwire, qtype, do):
        ns = node.types.get(w.NS)
        if not ns or (qtype == w.DS and node.wire == qwire):
            return None
        extra = self.glue(ns, do)
        ns = list(ns)
        if do:
            ns.extend(node.get(w.DS, True))
        return ns, extra

    def _find_delegation(self, qwire, qtype, do, exact):
        offs = w.wire_labels(qwire)
        i = 1
        while True:
            name = self._part(qwire, offs, i)
            if name is None:
                return None
            if name == qwire:
                if exact is None:
                    return None
                return self._delegation(exact, qwire, qtype, do)
            node = self.nodes.get(name)
            if node is not None:
                d = self._delegation(node, qwire, qtype, do)
                if d is not None:
                    return d
            i += 1

    def closest_encloser(self, qwire):
        while qwire != self.owire and len(qwire) > 1:
            node = self.nodes.get(qwire)
            if node is not None:
                return node
            qwire = qwire[qwire[0] + 1:]
        return self.nodes.get(self.owire)

    def _closer_ent(self, qwire, wild):
        """An empty non-terminal lies between the wildcard's parent and
        qname (RFC 4592: then that ENT is the closest encloser)."""
        parent = wild[2:]
        name = qwire
        while len(name) > 1:
            name = name[name[0] + 1:]
            if name == parent or not is_sub(name, parent):
                return False
            if self.has_descendant(name):
                return True
        return False

    # -- the lookup -----------------------------------------------------------

    def lookup(self, req, upstream=None):
        """Answer ``req`` from this zone: (answer, authority, additional,
        result), or a Deferred of that when a CNAME leaves the zone."""
        qtype = req.qtype
        do = req.do
        if self.soa is None:
            return None, None, None, SERVER_FAILURE
        qwire = req.qwire.lower()
        if qwire == self.owire:
            if qtype == w.SOA:
                return self.soa_rrs(do), self.ns_rrs(do), [], SUCCESS
            if qtype == w.NS:
                nsrrs = self.ns_rrs(do)
                return nsrrs, [], self.glue(nsrrs, do), SUCCESS
        if not do:
            # The common cases without walking the name from the apex: an
            # exact hit below no cut, and a name that does not exist below
            # an existing one with no cut, DNAME or wildcard on its path.
            node = self.nodes.get(qwire)
            if node is not None:
                if node.clear:
                    return self._found(req, node, qtype, upstream)
            elif qwire not in self.exist:
                exist = self.exist
                owire = self.owire
                name = qwire
                while name != owire and len(name) > 1:
                    name = name[name[0] + 1:]
                    clear = exist.get(name)
                    if clear is not None:
                        if clear:
                            return [], [self.soa], [], NAME_ERROR
                        break
        return self._walk(req, qwire, qtype, do, upstream)

    def _found(self, req, node, qtype, upstream):
        """An exact hit without DNSSEC, no cut above it."""
        types = node.types
        cname = types.get(w.CNAME)
        if cname and qtype != w.CNAME:
            return self._chase(req, node, list(cname), upstream)
        rrs = types.get(qtype)
        if not rrs:
            return [], [self.soa], [], NO_DATA
        if qtype in _WITH_TARGETS:
            return rrs[:], self.ns[:], self.additional(rrs, False), SUCCESS
        return rrs[:], self.ns[:], [], SUCCESS

    def _walk(self, req, qwire, qtype, do, upstream):
        """CoreDNS's Zone.Lookup walk: each name from the apex down to
        qname, for cuts, DNAMEs and wildcards."""
        qname = req.qname
        offs = w.wire_labels(qwire)
        nodes = self.nodes
        node = None
        wild = None
        wildnode = None
        i = 0
        while True:
            part = self._part(qwire, offs, i)
            if part is None:
                break
            node = nodes.get(part)
            if node is None:
                if len(part) > 1:
                    star = b"\x01*" + part[part[0] + 1:]
                    wn = nodes.get(star)
                    if wn is not None:
                        wild, wildnode = star, wn
                    elif self.has_descendant(star):
                        wild, wildnode = star, None
                i += 1
                continue
            dname = node.types.get(w.DNAME)
            if dname:
                out = self._dname(req, node, dname, qwire, qname, qtype, do,
                                  upstream)
                if out is not None:
                    return out
            deleg = self._delegation(node, qwire, qtype, do)
            if deleg is not None:
                return None, deleg[0], deleg[1], DELEGATION
            i += 1

        if node is not None:
            cname = node.types.get(w.CNAME)
            if cname and qtype != w.CNAME:
                return self._chase(req, node, list(cname), upstream)
            rrs = node.types.get(qtype)
            if not rrs:
                ret = self.soa_rrs(do)
                if do:
                    ret.extend(node.get(w.NSEC, True))
                return [], ret, [], NO_DATA
            rrs = list(rrs)
            extra = self.additional(rrs, do)
            if do:
                rrs.extend(node.sigs.get(qtype, ()))
            return rrs, self.ns_rrs(do), extra, SUCCESS

        if wild is not None and not self._closer_ent(qwire, wild):
            if wildnode is None:
                return [], self.soa_rrs(do), [], NO_DATA
            cname = wildnode.types.get(w.CNAME)
            if cname and qtype != w.CNAME:
                return self._chase(req, wildnode, _rename(cname, qname),
                                   upstream)
            rrs = wildnode.types.get(qtype)
            if not rrs:
                ret = self.soa_rrs(do)
                if do:
                    ret.extend(wildnode.get(w.NSEC, True))
                return [], ret, [], NO_DATA
            rrs = _rename(rrs, qname)
            extra = self.additional(rrs, do)
            auth = self.ns_rrs(do)
            if do:
                deny = self.prev(qwire)
                if deny is not None:
                    auth.extend(deny.get(w.NSEC, True))
                rrs.extend(_rename(wildnode.sigs.get(qtype, ()), qname))
            return rrs, auth, extra, SUCCESS

        result = NAME_ERROR
        if self.has_descendant(qwire):
            result = SUCCESS     # an empty non-terminal: NODATA
        ret = self.soa_rrs(do)
        if do:
            deny = self.prev(qwire)
            if deny is not None:
                ret.extend(deny.get(w.NSEC, True))
                if result == NAME_ERROR:
                    ce = self.closest_encloser(qwire)
                    if ce is not None:
                        ss = self.prev(b"\x01*" + ce.wire)
                        if ss is not None and ss.wire != deny.wire:
                            ret.extend(ss.get(w.NSEC, True))
        return [], ret, [], result

    def _dname(self, req, node, dname, qwire, qname, qtype, do, upstream):
        """DNAME substitution (RFC 6672) for a name below the owner."""
        d = dname[0]
        if qwire == node.wire or not is_sub(qwire, node.wire):
            return None
        prefix = qwire[:len(qwire) - len(node.wire)]
        target = prefix + d.rdata
        if len(target) > 255:
            return None
        if target.lower() == qwire:
            return None, None, None, SERVER_FAILURE
        cname = w.RR(qname, w.CNAME, d.ttl, target)
        head = list(dname)
        if do:
            head.extend(node.sigs.get(w.DNAME, ()))
        if qtype == w.CNAME:
            return head + [cname], self.ns_rrs(do), [], SUCCESS
        out = self._chase(req, node, [cname], upstream)
        return then(out, lambda r: (head + r[0], r[1], r[2], r[3]))

    def _chase(self, req, node, rrs, upstream):
        """Follow a CNAME chain inside the zone (CoreDNS's externalLookup);
        a target outside the zone goes to ``upstream``."""
        qtype = req.qtype
        do = req.do
        if do:
            rrs = rrs + list(node.sigs.get(w.CNAME, ()))
        target = rrs[0].rdata.lower()
        hops = 0
        while True:
            elem = self.nodes.get(target)
            deleg = self._find_delegation(target, qtype, do, elem)
            if deleg is not None:
                return rrs, deleg[0], deleg[1], DELEGATION
            if elem is None or qtype == w.NS or (
                    qtype == w.SOA and target == self.owire):
                return self._external(req, target, rrs, upstream)
            cname = elem.types.get(w.CNAME)
            if not cname:
                break
            rrs = rrs + list(cname)
            if do:
                rrs.extend(elem.sigs.get(w.CNAME, ()))
            target = cname[0].rdata.lower()
            hops += 1
            if hops > 8:
                return rrs, self.ns_rrs(do), self.additional(rrs, do), SUCCESS
        targets = elem.types.get(qtype)
        if targets:
            rrs = rrs + list(targets)
            if do:
                rrs.extend(elem.sigs.get(qtype, ()))
        return rrs, self.ns_rrs(do), self.additional(rrs, do), SUCCESS

    def _external(self, req, target, rrs, upstream):
        do = req.do
        if upstream is None:
            return rrs, self.ns_rrs(do), self.additional(rrs, do), SUCCESS
        d = upstream(wire_text(target), req.qtype, req)

        def got(resp):
            if resp is None:
                found, result = [], SERVER_FAILURE
            elif resp.rcode == w.NXDOMAIN:
                found, result = resp.answer, NAME_ERROR
            elif resp.rcode == w.SERVFAIL:
                found, result = resp.answer, SERVER_FAILURE
            elif resp.rcode == w.NOERROR and not resp.answer:
                found, result = [], NO_DATA
            else:
                found, result = resp.answer, SUCCESS
            out = rrs + list(found)
            return (out, self.authority(do, result), self.additional(out, do),
                    result)

        def failed(_):
            return got(None)
        return d.addCallbacks(got, failed)

    # -- transfer -------------------------------------------------------------

    def apex_records(self):
        return [self.soa] + self.sigsoa + self.ns + self.signs

    def transfer(self, serial):
        """RR batches of an outgoing transfer: one SOA when ``serial`` (an
        IXFR's) equals ours, else the whole zone framed by the SOA (an IXFR
        for any other serial, older or newer, falls back to AXFR as in
        CoreDNS)."""
        if serial and serial == self.serial:
            return [[self.soa]]
        out = [self.apex_records()]
        for wire in self.wires:
            out.append(self.nodes[wire].all())
        out.append([self.soa])
        return out

    def count(self):
        return 1 + len(self.sigsoa) + len(self.ns) + len(self.signs) + sum(
            len(rrs) for n in self.nodes.values() for rrs in n.types.values())


def _rename(rrs, name):
    return [w.RR(name, rr.rtype, rr.ttl, rr.rdata, rr.rclass) for rr in rrs]
