"""RRSIG records over RRsets of ``dnswire.RR`` (RFC 4034 sections 3 and 6).

The data signed is the RRSIG rdata without its signature, then every
record of the set in canonical form: owner lower-cased, the TTL replaced
by the RRSIG's original TTL, the domain names inside the rdata of the
types RFC 4034 section 6.2 lists (less NSEC and HINFO, RFC 6840 section
5.1) lower-cased, duplicates dropped and the records sorted by rdata.
The wire rdata of an RR is already uncompressed, so all of this is byte
work; dnspython is only asked about the rare types whose names sit behind
strings (NAPTR, and the obsolete SIG, NXT and A6).
"""

import struct

from corednstw.core import dnswire as w

#: The original TTL CoreDNS's dnssec plugin puts in every RRSIG.
ORIG_TTL = 3600

_HEAD = struct.Struct("!HBBIIIH")
_RRHEAD = struct.Struct("!HHIH")

# Types whose whole rdata is one domain name.
_NAME_ONLY = frozenset((w.NS, 3, 4, w.CNAME, 7, 8, 9, w.PTR, w.DNAME))
# Types with a domain name after a fixed-size prefix: prefix length.
_NAME_AFTER = {w.MX: 2, 18: 2, 21: 2, 36: 2, w.SRV: 6}
# Types starting with two domain names (SOA, MINFO, RP), and PX (2 + 2).
_TWO_NAMES = {w.SOA: 0, 14: 0, 17: 0, 26: 2}
# Types left to dnspython's canonical form: NAPTR, SIG, NXT, A6.
_OTHER = frozenset((35, 24, 30, 38))


def _name_end(data, off):
    """Offset just past the uncompressed name at ``off``."""
    while data[off]:
        off += data[off] + 1
    return off + 1


def canonical_rdata(rtype, rdata, rclass=w.CLASS_IN):
    """``rdata`` in RFC 4034 canonical form (names lower-cased)."""
    if rtype in _NAME_ONLY:
        return rdata.lower()
    at = _NAME_AFTER.get(rtype)
    if at is not None:
        return rdata[:at] + rdata[at:].lower()
    at = _TWO_NAMES.get(rtype)
    if at is not None:
        end = _name_end(rdata, _name_end(rdata, at))
        return rdata[:at] + rdata[at:end].lower() + rdata[end:]
    if rtype in _OTHER:
        import dns.rdata
        rd = dns.rdata.from_wire(rclass, rtype, rdata, 0, len(rdata))
        return rd.to_digestable()
    return rdata


def label_count(name):
    """The RRSIG labels field of owner ``name``: its labels, less a
    leading wildcard label."""
    wire = w.name_to_wire(name)
    n = len(w.wire_labels(wire))
    if wire[:2] == b"\x01*":
        n -= 1
    return n


def rrsig_head(rtype, key, labels, orig_ttl, inception, expiration,
               signer):
    """The RRSIG rdata up to (without) the signature."""
    return _HEAD.pack(rtype, key.algorithm, labels, orig_ttl,
                      expiration & 0xFFFFFFFF, inception & 0xFFFFFFFF,
                      key.tag) + w.name_to_wire(signer).lower()


def signed_data(head, rrs, labels, orig_ttl):
    """What is signed for the RRset ``rrs`` (one owner, type and class)
    under RRSIG rdata ``head``."""
    first = rrs[0]
    owner = w.name_to_wire(first.name).lower()
    offs = w.wire_labels(owner)
    if labels < len(offs):
        # A wildcard expansion: the signature is over "*.<closest>".
        owner = b"\x01*" + owner[offs[len(offs) - labels]:]
    rtype, rclass = first.rtype, first.rclass
    rdatas = sorted({canonical_rdata(rtype, rr.rdata, rclass) for rr in rrs})
    parts = [head]
    for rd in rdatas:
        parts.append(owner)
        parts.append(_RRHEAD.pack(rtype, rclass, orig_ttl, len(rd)))
        parts.append(rd)
    return b"".join(parts)


def rrsig(key, rrs, signer, ttl, inception, expiration, orig_ttl=ORIG_TTL):
    """The RRSIG by ``key`` over ``rrs``: owner and class of the set,
    TTL ``ttl``, original TTL ``orig_ttl``."""
    first = rrs[0]
    labels = label_count(first.name)
    head = rrsig_head(first.rtype, key, labels, orig_ttl, inception,
                      expiration, signer)
    sig = key.sign(signed_data(head, rrs, labels, orig_ttl))
    return w.RR(first.name, w.RRSIG, ttl, head + sig, first.rclass)


def sig_times(rdata):
    """(inception, expiration) of an RRSIG rdata, as stored."""
    expiration, inception = struct.unpack_from("!II", rdata, 8)
    return inception, expiration


def covered(rdata):
    """The type an RRSIG rdata covers."""
    return (rdata[0] << 8) | rdata[1]


# -- NSEC type bitmaps (RFC 4034 section 4.1.2) -------------------------------

def type_bitmap(types):
    """The NSEC/NSEC3 type bit maps field for the type numbers ``types``."""
    windows: dict[int, bytearray] = {}
    for t in set(types):
        win, low = t >> 8, t & 0xFF
        bits = windows.setdefault(win, bytearray(32))
        bits[low >> 3] |= 0x80 >> (low & 7)
    out = bytearray()
    for win in sorted(windows):
        bits = windows[win].rstrip(b"\x00")
        out += bytes((win, len(bits))) + bits
    return bytes(out)


def nsec_rdata(next_name, types):
    """NSEC rdata: the next owner (presentation form, case kept) and the
    bitmap of ``types``."""
    return w.name_to_wire(next_name) + type_bitmap(types)
