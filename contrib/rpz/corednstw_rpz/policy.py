"""One response policy zone: its triggers and their actions, read from a
zone file (the RPZ format of draft-vixie-dnsop-dns-rpz, as BIND and
Unbound read it).

Owner names below the zone's origin are triggers:

* ``example.com`` (QNAME): the name itself; ``*.example.com``: the names
  below it (not the name);
* ``32.1.2.0.192.rpz-ip``: an address in the answer within 192.0.2.1/32
  (IPv6: ``128.1.zz.db8.2001.rpz-ip``, ``zz`` standing for ``::``);
* ``24.0.2.0.192.rpz-client-ip``: a client within 192.0.2.0/24.

The records at a trigger are its action: ``CNAME .`` NXDOMAIN, ``CNAME
*.`` NODATA, ``CNAME rpz-passthru.`` PASSTHRU (the answer as it is),
``CNAME rpz-drop.`` DROP (no answer), ``CNAME rpz-tcp-only.`` TCP-only
(truncated over UDP); anything else is local data, the answer given.
"""

import ipaddress

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.zone

NXDOMAIN, NODATA, PASSTHRU, DROP, TCP_ONLY, LOCAL = (
    "nxdomain", "nodata", "passthru", "drop", "tcp-only", "local-data")

_SPECIAL = {".": NXDOMAIN, "*.": NODATA, "rpz-passthru.": PASSTHRU,
            "rpz-drop.": DROP, "rpz-tcp-only.": TCP_ONLY}

#: Trigger kinds, in the order they take precedence within one zone.
CLIENT_IP, QNAME, IP = "client-ip", "qname", "ip"


class PolicyError(ValueError):
    """The policy zone cannot be used (the words say why)."""


class Action:
    """What a trigger does: ``kind`` (one of the actions above) and, for
    local data, the records by type (``(type, ttl, [rdata wire...])``)."""

    __slots__ = ("kind", "records", "trigger")

    def __init__(self, kind, trigger, records=None):
        self.kind = kind
        self.trigger = trigger
        self.records = records or {}


class Hit:
    """A trigger that matched: the zone, the kind of trigger, what it
    matched on, and the action."""

    __slots__ = ("zone", "kind", "action")

    def __init__(self, zone, kind, action):
        self.zone = zone
        self.kind = kind
        self.action = action


class Zone:
    """One policy zone: exact and wildcard QNAME triggers, answer-address
    and client-address triggers (networks, longest prefix first)."""

    def __init__(self, name):
        self.name = name
        self.exact = {}
        self.wild = {}
        self.ips = []
        self.clients = []
        self.skipped = 0

    def qname(self, qname):
        """The Hit of ``qname``: an exact trigger, else the wildcard of
        its closest parent."""
        a = self.exact.get(qname)
        if a is not None:
            return Hit(self, QNAME, a)
        if self.wild:
            name = qname
            while name != ".":
                name = name.split(".", 1)[1] or "."
                a = self.wild.get(name)
                if a is not None:
                    return Hit(self, QNAME, a)
        return None

    def client(self, address):
        if not self.clients:
            return None
        a = _longest(self.clients, address)
        return Hit(self, CLIENT_IP, a) if a is not None else None

    def answer(self, addresses):
        """The Hit of the answer's addresses: the longest prefix any of
        them falls in."""
        best = None
        for addr in addresses:
            for net, action in self.ips:
                if best is not None and net.prefixlen <= best[0]:
                    break
                if addr.version == net.version and addr in net:
                    best = (net.prefixlen, action)
                    break
        return Hit(self, IP, best[1]) if best is not None else None


def _longest(nets, address):
    try:
        addr = ipaddress.ip_address(address)
    except ValueError:
        return None
    for net, action in nets:
        if addr.version == net.version and addr in net:
            return action
    return None


def load(name, path):
    """The Zone named ``name`` (its origin, an FQDN) from the file at
    ``path``.  PolicyError when the file cannot be read or has a trigger
    it cannot use."""
    try:
        z = dns.zone.from_file(path, origin=name, relativize=False,
                               check_origin=False)
    except (OSError, dns.exception.DNSException) as e:
        raise PolicyError(str(e)) from e
    zone = Zone(name)
    origin = dns.name.from_text(name)
    for owner, node in z.nodes.items():
        rel = owner.relativize(origin)
        if rel == dns.name.empty:
            continue            # the zone's own SOA and NS
        labels = [lb.decode("ascii").lower() for lb in rel.labels]
        action = _action(rel.to_text(), node)
        last = labels[-1]
        if last in ("rpz-ip", "rpz-client-ip"):
            net = _network(labels[:-1], rel.to_text())
            (zone.ips if last == "rpz-ip" else zone.clients).append(
                (net, action))
        elif last in ("rpz-nsdname", "rpz-nsip"):
            zone.skipped += 1
        elif labels[0] == "*":
            zone.wild[_fqdn(labels[1:])] = action
        else:
            zone.exact[_fqdn(labels)] = action
    for nets in (zone.ips, zone.clients):
        nets.sort(key=lambda na: -na[0].prefixlen)
    return zone


def _fqdn(labels):
    return ".".join(labels) + "." if labels else "."


def _action(trigger, node):
    """The Action of the records at one trigger."""
    cname = node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.CNAME)
    if cname is not None:
        target = cname[0].target.to_text().lower()
        kind = _SPECIAL.get(target)
        if kind is not None:
            return Action(kind, trigger)
    records = {}
    for rds in node.rdatasets:
        records[int(rds.rdtype)] = (rds.ttl, [rd.to_wire() for rd in rds])
    return Action(LOCAL, trigger, records)


def _network(labels, trigger):
    """The network of an rpz-ip or rpz-client-ip trigger's labels
    (prefix length, then the address's labels reversed)."""
    if len(labels) < 2 or not labels[0].isdigit():
        raise PolicyError("bad IP trigger %s" % trigger)
    plen = int(labels[0])
    parts = labels[1:][::-1]
    try:
        if len(parts) == 4 and "zz" not in parts:
            net = ipaddress.IPv4Network("%s/%d" % (".".join(parts), plen),
                                        strict=False)
        else:
            text = ":".join("" if p == "zz" else p for p in parts)
            if text.startswith(":"):
                text = ":" + text
            if text.endswith(":"):
                text += ":"
            net = ipaddress.IPv6Network("%s/%d" % (text, plen),
                                        strict=False)
    except ValueError as e:
        raise PolicyError("bad IP trigger %s: %s" % (trigger, e)) from e
    return net
