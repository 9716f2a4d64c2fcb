"""NSEC "black lies" (draft-valsorda-dnsop-black-lies): denial of
existence signed on the fly.

Every negative answer claims that the query name exists and has none of
the asked type: an NSEC owned by the query name, whose next name is the
one right after it (``\\000.<qname>``), with a type bitmap that leaves the
query type out.  An NXDOMAIN thereby becomes a NODATA (NOERROR).  The
bitmaps are CoreDNS's, type for type.
"""

from corednstw.core import dnswire as w
from corednstw.engines import response as rt
from corednstw.engines.dnssec.signer import type_bitmap

_LOC, _CERT, _SSHFP, _TLSA, _HIP, _OPENPGPKEY, _SPF = (
    29, 37, 44, 52, 55, 61, 99)

#: Below the apex, for a name that is not a delegation.
ZONE_BITMAP = (w.A, w.HINFO, w.TXT, w.AAAA, _LOC, w.SRV, _CERT, _SSHFP,
               w.RRSIG, w.NSEC, _TLSA, _HIP, _OPENPGPKEY, _SPF)
#: An unsigned delegation, and DS queries below the apex.
DELEGATION_BITMAP = (w.A, w.NS, w.HINFO, w.TXT, w.AAAA, _LOC, w.SRV, _CERT,
                     _SSHFP, w.RRSIG, w.NSEC, _TLSA, _HIP, _OPENPGPKEY, _SPF)
#: The zone's apex.
APEX_BITMAP = (w.A, w.NS, w.SOA, w.HINFO, w.MX, w.TXT, w.AAAA, _LOC, w.SRV,
               _CERT, _SSHFP, w.RRSIG, w.NSEC, w.DNSKEY, _TLSA, _HIP,
               _OPENPGPKEY, _SPF)


def _filter(qtype, bitmap, mt):
    """``bitmap`` without ``qtype`` for a denial (NODATA or NXDOMAIN) of
    any type but NSEC; the whole bitmap otherwise."""
    if (mt != rt.NODATA and mt != rt.NAMEERROR) or qtype == w.NSEC:
        return bitmap
    return tuple(t for t in bitmap if t != qtype)


def _cached(fn):
    """Bitmaps are few: encode each (types tuple) once."""
    memo: dict[tuple[int, ...], bytes] = {}

    def get(types):
        b = memo.get(types)
        if b is None:
            b = memo[types] = fn(types)
        return b
    return get


_bitmap = _cached(type_bitmap)


def nsec(qname, qtype, apex, mt, ttl):
    """The black-lie NSEC record for query name ``qname`` (as asked, case
    kept), ``apex`` when it is the zone's name, ``mt`` the response type
    (engines.response) of the answer being signed.  None when no such
    record can be written."""
    qwire = w.name_to_wire(qname)
    if qwire == b"\x00":
        next_wire = b"\x01\x00\x00"
    else:
        next_wire = b"\x01\x00" + qwire
    if apex:
        types = _filter(qtype, APEX_BITMAP, mt)
    elif mt == rt.DELEGATION or qtype == w.DS:
        types = DELEGATION_BITMAP
        if mt == rt.DELEGATION:
            # The name right after the cut's own subtree.
            n = qwire[0]
            if n >= 63:
                return None     # no room for the extra octet
            label = qwire[1:1 + n] + b"\x00"
            next_wire = bytes((n + 1,)) + label + qwire[1 + n:]
    else:
        types = _filter(qtype, ZONE_BITMAP, mt)
    return w.RR(qname, w.NSEC, ttl, next_wire + _bitmap(types))
