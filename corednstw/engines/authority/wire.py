"""Wire-form name and rdata helpers for zone data.

Zone data keys names by their lower-cased uncompressed wire form, so
these work on bytes: labels, DNSSEC canonical order (RFC 4034 section
6.1), the subdomain test and the type an RRSIG covers.
"""

from corednstw.core import dnswire as w

ROOT = b"\x00"


def labels(wire):
    """The labels of an uncompressed wire name, left to right."""
    out = []
    i = 0
    while wire[i]:
        n = wire[i]
        out.append(wire[i + 1:i + 1 + n])
        i += n + 1
    return out


def canonical_key(wire):
    """Sort key of a lower-cased wire name in DNSSEC canonical order."""
    return tuple(reversed(labels(wire)))


def is_sub(child, parent):
    """True when wire name ``child`` is ``parent`` or below it (both
    lower-cased)."""
    if parent == ROOT or child == parent:
        return True
    if not child.endswith(parent) or len(child) <= len(parent):
        return False
    i = 0
    cut = len(child) - len(parent)
    while i < cut:
        i += child[i] + 1
    return i == cut


def name_end(data, off):
    """Offset just past the uncompressed name at ``off`` of ``data``."""
    while data[off]:
        off += data[off] + 1
    return off + 1


def wire_text(wire):
    return w.read_name(wire, 0)[0]


def covered(rr):
    """The type an RRSIG covers."""
    return (rr.rdata[0] << 8) | rr.rdata[1]
