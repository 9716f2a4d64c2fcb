"""One response policy zone: its triggers and their actions, read from a
zone file or from the records of a zone transfer (the RPZ format of
draft-vixie-dnsop-dns-rpz, as BIND and Unbound read it).

Owner names below the zone's origin are triggers:

* ``example.com`` (QNAME): the name itself; ``*.example.com``: the names
  below it (not the name);
* ``32.1.2.0.192.rpz-ip``: an address in the answer within 192.0.2.1/32
  (IPv6: ``128.1.zz.db8.2001.rpz-ip``, ``zz`` standing for ``::``);
* ``24.0.2.0.192.rpz-client-ip``: a client within 192.0.2.0/24;
* ``ns.example.rpz-nsdname``: an answer whose name servers include
  ``ns.example.`` (``*.example.rpz-nsdname``: any name server below it).

The records at a trigger are its action: ``CNAME .`` NXDOMAIN, ``CNAME
*.`` NODATA, ``CNAME rpz-passthru.`` PASSTHRU (the answer as it is),
``CNAME rpz-drop.`` DROP (no answer), ``CNAME rpz-tcp-only.`` TCP-only
(truncated over UDP); anything else is local data, the answer given.
"""

import ipaddress

import dns.exception
import dns.name
import dns.node
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.zone

NXDOMAIN, NODATA, PASSTHRU, DROP, TCP_ONLY, LOCAL = (
    "nxdomain", "nodata", "passthru", "drop", "tcp-only", "local-data")

_SPECIAL = {".": NXDOMAIN, "*.": NODATA, "rpz-passthru.": PASSTHRU,
            "rpz-drop.": DROP, "rpz-tcp-only.": TCP_ONLY}

#: Trigger kinds, in the order they take precedence within one zone.
CLIENT_IP, QNAME, IP, NSDNAME = "client-ip", "qname", "ip", "nsdname"


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
    and client-address triggers (networks, longest prefix first), exact
    and wildcard name-server-name triggers.  ``serial`` is its SOA
    serial; ``problems`` the triggers left out of a transferred zone
    (a zone file with one is refused instead)."""

    def __init__(self, name):
        self.name = name
        self.exact = {}
        self.wild = {}
        self.ips = []
        self.clients = []
        self.nsdnames = {}
        self.nsdwild = {}
        self.skipped = 0
        self.serial = None
        self.problems = []

    def qname(self, qname):
        """The Hit of ``qname``: an exact trigger, else the wildcard of
        its closest parent."""
        a = _name_match(self.exact, self.wild, qname)
        return Hit(self, QNAME, a) if a is not None else None

    def nsdname(self, servers):
        """The Hit of the first name server (in the order given) that an
        ``rpz-nsdname`` trigger matches."""
        if not self.nsdnames and not self.nsdwild:
            return None
        for ns in servers:
            a = _name_match(self.nsdnames, self.nsdwild, ns)
            if a is not None:
                return Hit(self, NSDNAME, a)
        return None

    @property
    def by_answer(self):
        """True when some trigger needs the chain's answer."""
        return bool(self.ips or self.nsdnames or self.nsdwild)

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


def _name_match(exact, wild, name):
    """The action of ``name``'s exact trigger, else of the wildcard of
    its closest parent, else None."""
    a = exact.get(name)
    if a is not None:
        return a
    if wild:
        while name != ".":
            name = name.split(".", 1)[1] or "."
            a = wild.get(name)
            if a is not None:
                return a
    return None


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
    return _build(name, z.nodes.items(), strict=True)


def from_records(name, rrs):
    """The Zone named ``name`` from the records of a zone transfer (RR
    objects, its SOA first).  A trigger that cannot be used is left out
    and described in ``problems``: one bad record of a feed does not
    stop the rest of it from applying."""
    origin = dns.name.from_text(name)
    nodes = {}
    for rr in rrs:
        owner = dns.name.from_text(rr.name)
        if not owner.is_subdomain(origin):
            continue
        try:
            rd = dns.rdata.from_wire(rr.rclass, rr.rtype, rr.rdata, 0,
                                     len(rr.rdata))
        except dns.exception.DNSException:
            continue
        node = nodes.get(owner)
        if node is None:
            node = nodes[owner] = dns.node.Node()
        node.find_rdataset(rr.rclass, rr.rtype, rd.covers(),
                           create=True).add(rd, rr.ttl)
    return _build(name, nodes.items(), strict=False)


def _build(name, nodes, strict):
    """The Zone of ``nodes`` ((owner, dnspython node) pairs): PolicyError
    for a trigger it cannot use when ``strict``, else the trigger is
    described in the zone's ``problems`` and left out."""
    zone = Zone(name)
    origin = dns.name.from_text(name)
    for owner, node in nodes:
        rel = owner.relativize(origin)
        if rel == dns.name.empty:
            soa = node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.SOA)
            if soa is not None:
                zone.serial = soa[0].serial
            continue            # the zone's own SOA and NS
        labels = [lb.decode("ascii", "replace").lower()
                  for lb in rel.labels]
        action = _action(rel.to_text(), node)
        last = labels[-1]
        try:
            if last in ("rpz-ip", "rpz-client-ip"):
                net = _network(labels[:-1], rel.to_text())
                (zone.ips if last == "rpz-ip" else zone.clients).append(
                    (net, action))
            elif last == "rpz-nsdname":
                _add_name(zone.nsdnames, zone.nsdwild, labels[:-1], action)
            elif last == "rpz-nsip":
                zone.skipped += 1
            else:
                _add_name(zone.exact, zone.wild, labels, action)
        except PolicyError as e:
            if strict:
                raise
            zone.problems.append(str(e))
    for nets in (zone.ips, zone.clients):
        nets.sort(key=lambda na: -na[0].prefixlen)
    return zone


def _add_name(exact, wild, labels, action):
    """A name trigger (QNAME or NSDNAME): ``*`` first makes it a
    wildcard."""
    if labels and labels[0] == "*":
        wild[_fqdn(labels[1:])] = action
    else:
        exact[_fqdn(labels)] = action


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
