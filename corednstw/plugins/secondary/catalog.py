"""RFC 9432 catalog zones: the member zones a transferred catalog lists.

A catalog ``C`` (schema version 2) holds, besides its SOA and NS::

    version.C.              TXT "2"
    ID.zones.C.             PTR member.zone.       one PTR per member
    group.ID.zones.C.       TXT "..."              optional properties
    coo.ID.zones.C.         PTR other.catalog.     change of ownership

``parse`` checks what RFC 9432 requires of a catalog (an SOA and NS at the
apex, exactly one version record of "2", one PTR per member ID, no member
zone listed twice) and returns its members, in the order of their IDs.
A catalog that breaks a rule is refused whole: the transfer fails and the
members served so far stay as they are.
"""

from dataclasses import dataclass, field

import dns.name

from corednstw.core import dnswire as w

VERSION = "2"


class CatalogError(ValueError):
    """A catalog zone that does not follow RFC 9432."""


@dataclass
class Member:
    """One member zone: its ID (the label under ``zones``), the zone (a
    lower-case FQDN), its groups and the catalog it moves to (``coo``)."""
    id: str
    zone: str
    groups: list = field(default_factory=list)
    coo: str = ""


def _labels(name):
    """The labels of a presentation name, lower-cased, without the root."""
    return [lb.decode("latin-1").lower()
            for lb in dns.name.from_text(name).labels if lb]


def _fqdn(labels):
    return ".".join(labels) + "." if labels else "."


def _txt(rdata):
    """The strings of a TXT rdata, joined."""
    out, off = [], 0
    while off < len(rdata):
        n = rdata[off]
        out.append(rdata[off + 1:off + 1 + n].decode("utf-8", "replace"))
        off += 1 + n
    return "".join(out)


def parse(origin, rrs):
    """The members of catalog ``origin`` from its records (w.RR); raises
    CatalogError when the catalog breaks RFC 9432."""
    apex = _labels(origin)
    zones = ["zones"] + apex
    has_soa = has_ns = False
    versions = []
    ptrs: dict[str, list[str]] = {}
    groups: dict[str, list[str]] = {}
    coo: dict[str, list[str]] = {}
    for rr in rrs:
        if rr.rclass != w.CLASS_IN:
            raise CatalogError("catalog zone %s contains non-IN record %s"
                               % (origin, rr.to_text()))
        owner = _labels(rr.name)
        if rr.rtype == w.SOA and owner == apex:
            has_soa = True
        elif rr.rtype == w.NS and owner == apex:
            has_ns = True
        elif rr.rtype == w.TXT and owner == ["version"] + apex:
            versions.append(_txt(rr.rdata))
        elif owner[1:] == zones and rr.rtype == w.PTR:
            ptrs.setdefault(owner[0], []).append(
                _fqdn(_labels(w.read_name(rr.rdata, 0)[0])))
        elif owner[2:] == zones and owner[0] == "group" \
                and rr.rtype == w.TXT:
            groups.setdefault(owner[1], []).append(_txt(rr.rdata))
        elif owner[2:] == zones and owner[0] == "coo" and rr.rtype == w.PTR:
            coo.setdefault(owner[1], []).append(
                _fqdn(_labels(w.read_name(rr.rdata, 0)[0])))
    if not has_soa:
        raise CatalogError("catalog zone %s has no SOA record" % origin)
    if not has_ns:
        raise CatalogError("catalog zone %s has no NS record" % origin)
    if len(versions) != 1:
        raise CatalogError("catalog zone %s must have exactly one version "
                           "TXT record" % origin)
    if versions[0] != VERSION:
        raise CatalogError('catalog zone %s has unsupported version "%s"'
                           % (origin, versions[0]))
    members = []
    seen: dict[str, str] = {}
    for mid in sorted(ptrs):
        if len(ptrs[mid]) != 1:
            raise CatalogError("catalog member %s.zones.%s must have "
                               "exactly one PTR record" % (mid, origin))
        zone = ptrs[mid][0]
        if zone in seen:
            raise CatalogError("catalog member zone %s is listed by both "
                               "%s and %s" % (zone, seen[zone], mid))
        seen[zone] = mid
        if len(coo.get(mid, ())) > 1:
            raise CatalogError("catalog member %s has more than one coo PTR "
                               "record" % mid)
        members.append(Member(mid, zone, sorted(groups.get(mid, [])),
                              coo.get(mid, [""])[0]))
    return members
