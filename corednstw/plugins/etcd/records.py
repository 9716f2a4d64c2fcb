"""The SkyDNS message format: what a value under the etcd prefix holds,
and how keys and domain names map onto each other.

A value is a JSON object, CoreDNS's ``msg.Service``::

    {"host": "10.0.0.1", "port": 8080, "priority": 10, "weight": 100,
     "text": "...", "mail": false, "ttl": 60, "targetstrip": 0,
     "group": "g1"}

Every field is optional.  ``host`` is an IPv4 or IPv6 address (A or
AAAA records) or a domain name (a CNAME, or the target of SRV and MX);
``text`` makes a TXT record; ``mail`` makes the entry an MX record whose
preference is ``priority``.

Keys are domain names with the labels reversed under the prefix:
``service.staging.skydns.local.`` lives at
``/skydns/local/skydns/staging/service`` and everything below it.
"""

import json

from corednstw.core import dnswire as w
from corednstw.core.goparse import parse_ip
from corednstw.core.names import fqdn

DEFAULT_PRIORITY = 10
DEFAULT_TTL = 300

#: JSON field -> (attribute, kind); Go's decoder matches names without
#: regard to case, so the table is keyed by the lower-cased name.
_FIELDS = {
    "host": ("host", str),
    "port": ("port", int),
    "priority": ("priority", int),
    "weight": ("weight", int),
    "text": ("text", str),
    "mail": ("mail", bool),
    "ttl": ("ttl", "uint32"),
    "targetstrip": ("target_strip", int),
    "group": ("group", str),
}

_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


class Service:
    """One decoded value; ``key`` is the etcd key it came from and
    ``lease`` the etcd lease attached to it (0: none)."""

    __slots__ = ("host", "port", "priority", "weight", "text", "mail",
                 "ttl", "target_strip", "group", "key", "lease")

    def __init__(self, key="", lease=0):
        self.host = ""
        self.port = 0
        self.priority = 0
        self.weight = 0
        self.text = ""
        self.mail = False
        self.ttl = 0
        self.target_strip = 0
        self.group = ""
        self.key = key
        self.lease = lease

    def copy(self):
        s = Service()
        for a in self.__slots__:
            setattr(s, a, getattr(self, a))
        return s

    def host_type(self):
        """(record type, packed address or None) the host stands for:
        A or AAAA for an address, CNAME for a name, TXT for a name with
        text (CoreDNS's HostType)."""
        ip = parse_ip(self.host)
        if ip is None:
            return (w.TXT if self.text else w.CNAME), None
        if ip.version == 4:
            return w.A, ip.packed
        return w.AAAA, ip.packed


class FormatError(Exception):
    """A value that is not a SkyDNS message."""


def decode(key, value, lease=0):
    """The Service in JSON ``value`` (bytes) stored at ``key``.

    Raises FormatError with the text CoreDNS reports ("KEY: reason"), so
    that a query reading a broken entry gets SERVFAIL, as in CoreDNS.
    """
    try:
        obj = json.loads(value)
    except ValueError as e:
        raise FormatError("%s: %s" % (key, e)) from e
    if not isinstance(obj, dict):
        raise FormatError("%s: json: cannot unmarshal %s into Go value of "
                          "type msg.Service" % (key, _json_kind(obj)))
    s = Service(key, lease)
    for name, v in obj.items():
        field = _FIELDS.get(name.lower())
        if field is None or v is None:
            continue
        attr, kind = field
        if not _fits(v, kind):
            raise FormatError(
                "%s: json: cannot unmarshal %s into Go struct field "
                "Service.%s of type %s" % (key, _json_kind(v), name,
                                           _go_kind(kind)))
        setattr(s, attr, v)
    return s


def _fits(v, kind):
    if kind is bool:
        return isinstance(v, bool)
    if kind is str:
        return isinstance(v, str)
    if isinstance(v, bool) or not isinstance(v, int):
        return False
    if kind == "uint32":
        return 0 <= v <= 0xFFFFFFFF
    return _INT_MIN <= v <= _INT_MAX


def _json_kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _go_kind(kind):
    return {bool: "bool", str: "string", int: "int"}.get(kind, kind)


# -- keys and names -----------------------------------------------------------

def _labels(name):
    """The labels of ``name`` (no empty ones; the root has none)."""
    return [x for x in name.split(".") if x]


def _join_path(prefix, labels):
    """Go's path.Join("/" + prefix + "/", labels...): one slash between
    parts, none at the end."""
    parts = [p for p in prefix.split("/") if p not in ("", ".")]
    parts.extend(x for x in labels if x)
    return "/" + "/".join(parts)


def path(name, prefix):
    """The etcd key of ``name``: ``a.b.c.`` under ``skydns`` is
    ``/skydns/c/b/a``."""
    return _join_path(prefix, _labels(name)[::-1])


def path_with_wildcard(name, prefix):
    """(key, wildcard): like path, but cut before the first ``*`` or
    ``any`` label, whose matches are filtered afterwards."""
    labels = _labels(name)[::-1]
    for i, label in enumerate(labels):
        if label in ("*", "any"):
            return _join_path(prefix, labels[:i]), True
    return _join_path(prefix, labels), False


def domain(key):
    """The domain name of ``key`` (the inverse of path, with a one-label
    prefix): ``/skydns/local/skydns/x1`` is ``x1.skydns.local.``."""
    parts = key.split("/")
    if parts[-1] == "":
        parts = parts[:-1]
    labels = parts[2:][::-1]
    if not labels:
        return "."
    return ".".join(labels) + "."


def target_strip(name, n):
    """``name`` without its ``n`` leftmost labels (unchanged when it has
    no more than ``n``)."""
    labels = _labels(name)
    if n >= len(labels):
        return name
    return ".".join(labels[n:]) + "."


def split255(text):
    """The strings of a TXT record: ``text`` cut every 255 bytes, as
    CoreDNS cuts it (a text of exactly 255 bytes ends in an empty
    string)."""
    b = text.encode("utf-8")
    if len(b) < 255:
        return [b]
    out = []
    p = 0
    while True:
        if p + 255 > len(b):
            out.append(b[p:])
            return out
        out.append(b[p:p + 255])
        p += 255


def group(services):
    """CoreDNS's msg.Group: when the shortest keys agree on a group, keep
    only the services of that group and those without one."""
    if not services:
        return services
    grp = services[0].group
    slashes = services[0].key.count("/")
    lengths = []
    for s in services:
        x = s.key.count("/")
        lengths.append(x)
        if x < slashes:
            if s.group == "":
                break
            slashes = x
            grp = s.group
    if grp == "":
        return services
    out = []
    for i, s in enumerate(services):
        if s.group == "":
            out.append(s)
            continue
        if lengths[i] == slashes and s.group != grp:
            return services
        if s.group == grp:
            out.append(s)
    return out


# -- records ------------------------------------------------------------

def _target(s):
    host = fqdn(s.host)
    if s.target_strip > 0:
        host = target_strip(host, s.target_strip)
    return host


def srv(s, name, weight):
    return w.RR(name, w.SRV, s.ttl, w.srv_rdata(
        s.priority & 0xFFFF, weight, s.port & 0xFFFF, _target(s)))


def srv_target(s):
    return _target(s)


def mx(s, name):
    target = _target(s)
    rdata = (s.priority & 0xFFFF).to_bytes(2, "big") + w.name_to_wire(
        target)
    return w.RR(name, w.MX, s.ttl, rdata), target


def ns(s, name):
    target = _target(s)
    return w.RR(name, w.NS, s.ttl, w.name_to_wire(target)), target


def cname(s, name, target):
    return w.RR(name, w.CNAME, s.ttl, w.name_to_wire(fqdn(target)))


def ptr(s, name, target):
    return w.RR(name, w.PTR, s.ttl, w.name_to_wire(fqdn(target)))


def txt(s, name):
    return w.RR(name, w.TXT, s.ttl, w.txt_rdata(*split255(s.text)))


def address(s, name, packed, rtype):
    return w.RR(name, rtype, s.ttl, packed)


def soa(zone, serial, minttl=30):
    """The SOA CoreDNS makes up for a backend zone."""
    rdata = w.soa_rdata(_join("ns.dns", zone), _join("hostmaster", zone),
                        serial & 0xFFFFFFFF, 7200, 1800, 86400, minttl)
    return w.RR(zone, w.SOA, min(minttl, 300), rdata)


def _join(label, zone):
    return label + "." + (zone if zone != "." else "")
