"""Checks and trims applied to an upstream's reply before it is used."""

import struct

from corednstw.core import dnswire as w
from corednstw.core.request import SUPPORTED_OPTIONS, too_big

_COUNTS = struct.Struct("!HHHH")
_HEADER = struct.Struct("!HHHHHH")
_RRHEAD = struct.Struct("!HHIH")
_QR_OPCODE = w.QR
_REPLY_BITS = w.RD | w.CD


def truncated(data):
    """``data`` cut to its header and question, TC set, no records."""
    try:
        qend = w.skip_name(data, 12) + 4 if data[4:6] == b"\x00\x01" \
            else 12
    except w.FormatError:
        qend = 12
    if qend > len(data):
        qend = 12
    qd = b"\x00\x01" if qend > 12 else b"\x00\x00"
    return (data[:2] + bytes((data[2] | 0x02, data[3])) + qd
            + b"\x00\x00\x00\x00\x00\x00" + data[12:qend])


def matches(req, data):
    """CoreDNS's request.Match: a response with one question whose name
    (any case) and type are the query's."""
    if not data[2] & 0x80 or data[4:6] != b"\x00\x01":
        return False
    qw = req.qwire
    end = 12 + len(qw)
    if data[12:end].lower() == qw.lower():
        return data[end:end + 2] == req.data[req.qend - 4:req.qend - 2]
    try:
        name, off = w.read_name(data, 12)
    except w.FormatError:
        return False
    return (name.lower() == req.qname
            and data[off:off + 2] == req.data[req.qend - 4:req.qend - 2])


def readable(data):
    """miekg can unpack the reply: the question and every record it
    counts are there whole (counts that run past the end are lies it
    stops at).  CoreDNS's forward fails an attempt whose reply cannot be
    unpacked, or over UDP relays it truncated (TC, no records)."""
    try:
        qd, an, ns, ar = _COUNTS.unpack_from(data, 4)
        off = 12
        for _ in range(qd):
            off = w.skip_question(data, off)
        end = len(data)
        for _ in range(an + ns + ar):
            if off == end:
                break
            off = w.skip_rr(data, off)[0]
    except (w.FormatError, struct.error, IndexError):
        return False
    return True


def relay(req, data):
    """The bytes the server sends ``req``'s client for the upstream reply
    ``data``, in one walk of it, or None when the reply is not the plain
    case (then the caller takes the general steps: ``readable``,
    ``matches``, and the server's encoding of the raw answer).

    The plain case: a reply (QR) whose one question is the query's name,
    uncompressed, in any case, and type; every record it counts present
    whole, owner pointers pointing back; small enough for the client.
    What comes out is what the server's encoding makes of it: the
    client's ID, flags from both, the client's question bytes, every
    name expanded (CoreDNS writes an answer that fits uncompressed), and
    the OPT as CoreDNS's SizeAndDo leaves it (the client's size and DO
    bit on the upstream's OPT, or the client's OPT added)."""
    try:
        qd, an, ns, ar = _COUNTS.unpack_from(data, 4)
    except struct.error:
        return None
    if qd != 1 or not data[2] & 0x80:
        return None
    qend = req.qend
    qdata = req.data
    qwire = req.qwire
    nend = qend - 4             # past the question's name
    if data.startswith(qwire, 12):
        owner0 = qwire          # what a pointer to the question expands to
    else:
        owner0 = data[12:nend]
        if owner0.lower() != qwire.lower():
            return None
    if data[nend:nend + 2] != qdata[nend:nend + 2]:
        return None
    olen = len(owner0)
    off = qend
    length = len(data)
    if off > length:
        return None
    edns = req.edns
    out = [b"", qdata[12:qend]]
    unpack = _RRHEAD.unpack_from
    pack = _RRHEAD.pack
    expand_name = w.expand_name
    expand_rdata = w.expand_rdata
    names = w.RDATA_NAMES
    first_ar = an + ns
    opt = edns is None
    try:
        for i in range(first_ar + ar):
            # The owner: most often the question's name, by a pointer or
            # written out.
            if data[off] == 0xC0 and data[off + 1] == 12:
                owner = owner0
                off += 2
            elif data.startswith(owner0, off):
                owner = owner0
                off += olen
            else:
                w.skip_name(data, off, off)     # pointers point back
                owner, off = expand_name(data, off)
            if off + 10 > length:
                return None
            rtype, rclass, ttl, rdlen = unpack(data, off)
            start = off + 10
            off = start + rdlen
            if off > length:
                return None
            if rtype in names:
                rdata = expand_rdata(data, start, rdlen, rtype)
            else:
                rdata = data[start:off]
            if rtype == w.OPT and not opt and i >= first_ar:
                # The first OPT of the additional section: the client's
                # size and DO bit, the rest (ext-rcode, version, options)
                # the upstream's, owned by the root.
                opt = True
                out.append(b"\x00")
                out.append(pack(rtype, edns.size,
                                (ttl & 0xFF00FF00) | (edns.ttl & 0x8000),
                                len(rdata)))
            else:
                out.append(owner)
                out.append(pack(rtype, rclass, ttl, len(rdata)))
            out.append(rdata)
    except (w.FormatError, IndexError, struct.error):
        return None
    if not opt:
        out.append(w.opt_wire(edns.size, edns.ttl & 0xFF00,
                              [o for o in edns.options
                               if o[0] in SUPPORTED_OPTIONS]))
        ar += 1
    opcode = req.opcode
    flags = (_QR_OPCODE | (opcode << 11)
             | (req.flags & _REPLY_BITS if opcode == 0 else 0)
             | (((data[2] << 8) | data[3]) & 0x07FF))
    out[0] = _HEADER.pack(req.id, flags, 1, an, ns, ar)
    wire = b"".join(out)
    if too_big(req, len(wire)):
        return None
    return wire
