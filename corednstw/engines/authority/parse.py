"""Building a ZoneData: from a master file (read with dnspython, which
only runs at load time) or from records received in a zone transfer."""

import os
import re

from corednstw.core import dnswire as w

from .zone import ZoneData, ZoneError

_INCLUDE = re.compile(r"^(\$INCLUDE[ \t]+)(\S+)", re.M | re.I)


def _absolute_includes(text, path):
    """``text`` of the master file ``path`` with every relative ``$INCLUDE``
    path made absolute against that file's directory (miekg/dns's rule, at
    every level of nesting)."""
    base = os.path.dirname(os.path.abspath(path))

    def absolute(m):
        p = m.group(2)
        if p.startswith('"') and p.endswith('"') and len(p) > 1:
            p = p[1:-1]
        if not os.path.isabs(p):
            p = os.path.join(base, p)
        return m.group(1) + p
    return _INCLUDE.sub(absolute, text)


def _open_included(filename, encoding="utf-8", **kw):
    """What dnspython's zone reader opens for ``$INCLUDE``: the file with
    its own relative includes resolved against its directory."""
    import io
    with open(filename, encoding=encoding, errors="surrogateescape") as f:
        return io.StringIO(_absolute_includes(f.read(), filename))


def parse_file(path, origin):
    """Read the master file ``path`` for ``origin`` into a ZoneData.

    Raises ZoneError (unreadable, syntax error, no SOA, NSEC3) and
    OSError (cannot open).  ``$INCLUDE`` paths are taken relative to the
    including file's directory, at every level.
    """
    import dns.exception
    import dns.zone
    import dns.zonefile
    # dnspython opens included files with its module's open(): route that
    # through the resolver of relative include paths.
    dns.zonefile.open = _open_included
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    text = _absolute_includes(text, path)
    try:
        z = dns.zone.from_text(text, origin=origin, relativize=False,
                               check_origin=False, filename=path,
                               allow_include=True)
    except (dns.exception.DNSException, ValueError, OSError) as e:
        raise ZoneError("failed to parse file %s for origin %s with error "
                        "%s" % (go_quote(path), origin, e)) from e
    data = ZoneData(origin)
    for name, node in z.nodes.items():
        owner = name.to_wire()
        for rds in node.rdatasets:
            for rd in rds:
                data.insert(owner, w.RR("", rd.rdtype, rds.ttl, rd.to_wire(),
                                        rd.rdclass))
    if data.soa is None:
        raise ZoneError("file %s has no SOA record for origin %s"
                        % (go_quote(path), origin))
    return data.finish()


def from_records(origin, rrs):
    """A ZoneData from transferred records (RR objects, any order)."""
    data = ZoneData(origin)
    for rr in rrs:
        if rr.rtype == w.SOA and data.soa is not None:
            continue
        data.insert(w.name_to_wire(rr.name),
                    w.RR("", rr.rtype, rr.ttl, rr.rdata, rr.rclass))
    return data.finish()


def go_quote(s):
    """Go's %q for plain strings."""
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
