"""Checks and trims applied to an upstream's reply before it is used."""

import struct

from corednstw.core import dnswire as w

_COUNTS = struct.Struct("!HHHH")


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
