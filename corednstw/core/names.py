"""Zone names as CoreDNS spells them in a Corefile.

Server block keys and plugin zone arguments share one normalisation: an
optional transport scheme (``dns://``, ``tls://`` ...), a host, an optional
``:port``.  The host is a domain name (made fully qualified and lowercase) or
a CIDR, which stands for the reverse zones covering it.  Reverse zones only
exist on label boundaries (8 bits for in-addr.arpa, 4 bits for ip6.arpa), so a
prefix between boundaries expands into every zone of the next boundary:
``10.0.0.0/22`` is four /24 zones.  The rules (and error texts) follow
CoreDNS's ``plugin.SplitHostPort`` so that a Corefile CoreDNS accepts is
accepted here, and one it rejects is rejected with the same message.
"""

import ipaddress
import re

# Default port per transport, as CoreDNS's dnsserver assigns them.  "unix"
# has no port; it is parsed so that the config builder can reject it itself.
DEFAULT_PORTS = {
    "dns": "53", "tls": "853", "quic": "853", "grpc": "443",
    "https": "443", "https3": "443", "unix": "",
}
# https3 before https: the longer scheme must win the prefix test.
_SCHEMES = ("tls", "dns", "quic", "grpc", "https3", "https", "unix")

_PORT_RE = re.compile(r"[+-]?[0-9]+\Z")
_CIDR_RE = re.compile(r"[0-9A-Fa-f:.]+/[0-9]+\Z")
_DDD_RE = re.compile(r"[0-9]{3}")


def split_transport(s):
    """Split ``tls://example.org`` into ``('tls', 'example.org')``; no
    scheme means plain DNS."""
    for scheme in _SCHEMES:
        if s.startswith(scheme + "://"):
            return scheme, s[len(scheme) + 3:]
    return "dns", s


def fqdn(name):
    """Append the root dot unless the name already ends in an unescaped one."""
    if name.endswith("."):
        backslashes = len(name[:-1]) - len(name[:-1].rstrip("\\"))
        if backslashes % 2 == 0:
            return name
    return name + "."


def normalize_name(name):
    """Lowercase, fully qualified form of a domain name."""
    return fqdn(name).lower()


def is_domain_name(s):
    """Presentation-format syntax check, as lenient as the DNS library CoreDNS
    uses: any characters, but no empty labels, labels of at most 63 octets and
    at most 255 octets on the wire."""
    if not s:
        return False
    if s == ".":
        return True
    s = fqdn(s)
    label = wire = 0
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 4 if _DDD_RE.match(s, i + 1) else 2
            label += 1
            continue
        if c == ".":
            if label == 0:
                return False          # leading dot or ".."
            if label > 63:
                return False
            wire += 1 + label
            if wire > 256:
                return False
            label = 0
        else:
            label += len(c.encode("utf-8"))
        i += 1
    return True


def parse_cidr(s):
    """An ``ipaddress`` network for a fully written ``address/prefix`` (host
    bits allowed and masked off, as Go's ParseCIDR does), else None."""
    if not _CIDR_RE.match(s):
        return None
    try:
        return ipaddress.ip_network(s, strict=False)
    except ValueError:
        return None


def reverse_zones(network):
    """The reverse zones that together are authoritative for ``network``."""
    step = 8 if network.version == 4 else 4
    prefix = -(-network.prefixlen // step) * step
    nets = ([network] if prefix == network.prefixlen
            else network.subnets(new_prefix=prefix))
    zones = []
    for net in nets:
        if net.version == 4:
            labels = str(net.network_address).split(".")[:prefix // 8]
            suffix = "in-addr.arpa."
        else:
            labels = list(net.network_address.exploded.replace(":", "")
                          [:prefix // 4])
            suffix = "ip6.arpa."
        zones.append(".".join(labels[::-1] + [suffix]))
    return zones


def split_host_port(s):
    """Split a transport-less key into ``(hosts, port)``.

    A trailing ``:<number>`` is the port ('' when absent); a CIDR host
    becomes its reverse zones (several when off a label boundary), any other
    host is returned as written.  Raises ValueError with CoreDNS's message.
    """
    port = ""
    colon = s.rfind(":")
    if colon != -1 and colon == len(s) - 1:
        raise ValueError('expecting data after last colon: "%s"' % s)
    if colon != -1 and _PORT_RE.match(s, colon + 1):
        port = str(int(s[colon + 1:]))
        s = s[:colon]
    if len(s) > 255:
        raise ValueError("specified zone is too long: %d > 255" % len(s))
    if not is_domain_name(s):
        raise ValueError("zone is not a valid domain name: %s" % s)
    network = parse_cidr(s)
    if network is None:
        return [s], port
    if s[0] == ":" or (s[0] == "0" and ":" in s):
        raise ValueError("invalid CIDR %s" % s)
    return reverse_zones(network), port


def normalize(name_or_cidr):
    """Zones named by a plugin argument, like CoreDNS's
    ``plugin.Host(s).NormalizeExact()``: scheme and port stripped, names made
    lowercase FQDNs, CIDRs expanded to reverse zones; [] when invalid.

    A bare IP address is not a CIDR, so (as in CoreDNS) it is treated as a
    name: ``10.0.0.1`` gives ``10.0.0.1.``, not a reverse zone.
    """
    _, rest = split_transport(name_or_cidr)
    try:
        hosts, _ = split_host_port(rest)
    except ValueError:
        return []
    return [normalize_name(h) for h in hosts]


def escaped(name, i):
    """True when ``name[i]`` is escaped: an odd run of backslashes before
    it (``a\\.b`` is one label holding a dot; ``a\\\\.b``, two)."""
    n = i
    while n > 0 and name[n - 1] == "\\":
        n -= 1
    return (i - n) % 2 == 1


def label_end(name, start=0):
    """Index of the first dot at or after ``start`` that ends a label (a
    dot a backslash escapes does not), or -1."""
    i = name.find(".", start)
    while i > 0 and escaped(name, i):
        i = name.find(".", i + 1)
    return i


def in_zone(name, zone):
    """True when ``name`` is ``zone`` or below it, both lower-case FQDNs
    in presentation form.  Labels are compared, as miekg's IsSubDomain
    does: ``a\\.internal.`` (one label) is not below ``internal.``."""
    if zone == "." or name == zone:
        return True
    i = len(name) - len(zone) - 1
    return (i > 0 and name[i] == "." and name.endswith(zone)
            and not ("\\" in name and escaped(name, i)))


def takes(qname, from_, excepted):
    """True when ``qname`` is under ``from_`` and under none of the
    ``excepted`` names (``from_`` itself is always taken): the FROM and
    ``except`` of forward, grpc and proxy, compared by labels."""
    if not in_zone(qname, from_):
        return False
    if qname == from_:
        return True
    for ig in excepted:
        if in_zone(qname, ig):
            return False
    return True


def is_subdomain(child, parent):
    """True when ``child`` equals ``parent`` or lies below it
    (case-insensitive; names need not be fully qualified)."""
    return in_zone(normalize_name(child), normalize_name(parent))


def longest_match(zones, qname):
    """The most specific zone of ``zones`` containing ``qname``, or ''."""
    best = ""
    for zone in zones:
        if len(zone) > len(best) and is_subdomain(qname, zone):
            best = zone
    return best
