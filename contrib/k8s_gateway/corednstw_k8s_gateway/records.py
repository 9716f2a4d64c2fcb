"""Compact records made from the API server's JSON, one class per kind.

The watch threads turn each object into one of these small slotted
records as it arrives (never the whole JSON); what the answers need is
worked out here, once per change: the host names an object answers
for (``hosts``, lower-cased, the index keys), its addresses in canonical
text, the host names to resolve at query time.

An object carrying the label ``k8s-gateway.dns/ignore: "true"`` becomes
a record without host names: kept (so a change that adds the label
takes the old names away) but never found.
"""

import ipaddress
import re

#: The annotations naming a Service's host names, the first present wins.
HOSTNAME_ANNOTATIONS = ("coredns.io/hostname",
                        "external-dns.alpha.kubernetes.io/hostname")
#: A Service with this annotation "true" answers its ready endpoints.
RESOLVE_ENDPOINTS = "k8s-gateway.dns/resolve-endpoints"
IGNORE_LABEL = "k8s-gateway.dns/ignore"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                      r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Record:
    """What every kind has: its key (name, namespace), the host names it
    answers for, and the relist mark (``feed.Feed``)."""

    __slots__ = ("name", "ns", "hosts", "mark")

    def __init__(self, name, ns, hosts):
        self.name = name
        self.ns = ns
        self.hosts = hosts
        self.mark = 0


class Ingress(Record):
    __slots__ = ("cls", "ips", "lookups")

    def __init__(self, name, ns, hosts, cls, ips, lookups):
        super().__init__(name, ns, hosts)
        self.cls = cls              # spec.ingressClassName, or None
        self.ips = ips
        self.lookups = lookups      # load balancer host names


class Service(Record):
    __slots__ = ("endpoints", "external", "ips", "lookups")

    def __init__(self, name, ns, hosts, endpoints, external, ips, lookups):
        super().__init__(name, ns, hosts)
        self.endpoints = endpoints  # answers its ready endpoints
        self.external = external    # spec.externalIPs (they win)
        self.ips = ips
        self.lookups = lookups


class Slice(Record):
    __slots__ = ("service", "ips")

    def __init__(self, name, ns, service, ips):
        super().__init__(name, ns, ())
        self.service = service
        self.ips = ips              # of the endpoints not unready


class Gateway(Record):
    __slots__ = ("cls", "ips", "lookups")

    def __init__(self, name, ns, cls, ips, lookups):
        super().__init__(name, ns, ())
        self.cls = cls              # spec.gatewayClassName
        self.ips = ips
        self.lookups = lookups      # addresses of type Hostname


class Route(Record):
    """An HTTPRoute, TLSRoute or GRPCRoute."""

    __slots__ = ("parents",)

    def __init__(self, name, ns, hosts, parents):
        super().__init__(name, ns, hosts)
        self.parents = parents      # ((namespace, name), ...)


class Endpoints(Record):
    """A DNSEndpoint (external-dns): its entries by DNS name."""

    __slots__ = ("entries",)

    def __init__(self, name, ns, entries):
        super().__init__(name, ns, tuple(entries))
        self.entries = entries      # dns name -> (addresses, TXT texts)


class Node(Record):
    __slots__ = ("addrs",)

    def __init__(self, name, hosts, addrs):
        super().__init__(name, "", hosts)
        self.addrs = addrs          # ((address type, address), ...)


# -- helpers ------------------------------------------------------------------

def _meta(obj):
    meta = obj.get("metadata") or {}
    ignored = (meta.get("labels") or {}).get(IGNORE_LABEL) == "true"
    return meta.get("name", ""), meta.get("namespace", ""), meta, ignored


def ip_text(text):
    """The canonical text of an address, or None when it is none."""
    try:
        return str(ipaddress.ip_address(text))
    except (ValueError, TypeError):
        return None


def _hosts(names):
    """Index keys: lower-cased, without a final dot, each once."""
    out = []
    for n in names:
        if not isinstance(n, str) or not n:
            continue
        n = n.lower()
        if len(n) > 1:
            n = n.rstrip(".") or n
        if n not in out:
            out.append(n)
    return tuple(out)


def _load_balancer(status):
    """(addresses, host names) of ``status.loadBalancer.ingress``: an
    entry with a host name is looked up (even when it has an IP too)."""
    ips, lookups = [], []
    lb = (status or {}).get("loadBalancer") or {}
    for ing in lb.get("ingress") or ():
        if ing.get("hostname"):
            lookups.append(ing["hostname"])
        elif ing.get("ip"):
            ip = ip_text(ing["ip"])
            if ip is not None:
                ips.append(ip)
    return tuple(ips), tuple(lookups)


def valid_hostname(name):
    """A host name of an annotation: a domain name (labels of at most 63
    octets, 255 in all) in RFC 1123's letters, a leading ``*.`` allowed."""
    labels = name.rstrip(".").split(".")
    if not name or any(not x or len(x) > 63 for x in labels) or \
            len(name.rstrip(".")) > 253:
        return False
    return bool(_DNS1123.match(name[2:] if name.startswith("*.") else name))


# -- parsers (one per kind) ---------------------------------------------------

def ingress(obj):
    name, ns, _, ignored = _meta(obj)
    spec = obj.get("spec") or {}
    hosts = () if ignored else _hosts(
        r.get("host") for r in spec.get("rules") or ())
    ips, lookups = _load_balancer(obj.get("status"))
    return Ingress(name, ns, hosts, spec.get("ingressClassName"), ips,
                   lookups)


def service(obj):
    """A Service answers when it is of type LoadBalancer, or asks for its
    endpoints; for the names of its hostname annotation (comma-separated,
    the valid ones), else ``NAME.NAMESPACE``."""
    name, ns, meta, ignored = _meta(obj)
    spec = obj.get("spec") or {}
    notes = meta.get("annotations") or {}
    endpoints = notes.get(RESOLVE_ENDPOINTS) == "true"
    hosts = ()
    if not ignored and (spec.get("type") == "LoadBalancer" or endpoints):
        given = next((notes[a] for a in HOSTNAME_ANNOTATIONS if a in notes),
                     None)
        if given is None:
            hosts = _hosts([name + "." + ns])
        else:
            hosts = _hosts(h for h in given.lower().replace(" ", "")
                           .split(",") if valid_hostname(h))
    external = tuple(ip for ip in map(ip_text, spec.get("externalIPs") or ())
                     if ip is not None)
    ips, lookups = _load_balancer(obj.get("status"))
    return Service(name, ns, hosts, endpoints, external, ips, lookups)


def endpoint_slice(obj):
    name, ns, meta, _ = _meta(obj)
    svc = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    if not svc:
        return None
    ips = []
    for e in obj.get("endpoints") or ():
        if (e.get("conditions") or {}).get("ready") is False:
            continue
        for a in e.get("addresses") or ():
            ip = ip_text(a)
            if ip is not None and ip not in ips:
                ips.append(ip)
    return Slice(name, ns, svc, tuple(ips))


def gateway(obj):
    name, ns, _, _ = _meta(obj)
    ips, lookups = [], []
    for a in (obj.get("status") or {}).get("addresses") or ():
        kind = a.get("type") or "IPAddress"
        value = a.get("value") or ""
        if kind == "IPAddress":
            ip = ip_text(value)
            if ip is not None:
                ips.append(ip)
        elif kind == "Hostname" and value:
            lookups.append(value)
    return Gateway(name, ns, (obj.get("spec") or {}).get("gatewayClassName"),
                   tuple(ips), tuple(lookups))


def route(obj):
    """An HTTPRoute, TLSRoute or GRPCRoute: its host names, and its
    parents (a parentRef without a namespace is in the route's)."""
    name, ns, _, ignored = _meta(obj)
    spec = obj.get("spec") or {}
    hosts = () if ignored else _hosts(spec.get("hostnames") or ())
    parents = tuple((p.get("namespace") or ns, p.get("name") or "")
                    for p in spec.get("parentRefs") or ())
    return Route(name, ns, hosts, parents)


def dns_endpoint(obj):
    """A DNSEndpoint: per DNS name, the addresses of its A and AAAA
    entries and the texts of its TXT entries (other types are not
    answered)."""
    name, ns, _, ignored = _meta(obj)
    entries = {}
    if not ignored:
        for e in (obj.get("spec") or {}).get("endpoints") or ():
            key = _hosts([e.get("dnsName")])
            if not key:
                continue
            ips, texts = entries.setdefault(key[0], ([], []))
            rtype = e.get("recordType")
            for t in e.get("targets") or ():
                if rtype in ("A", "AAAA"):
                    ip = ip_text(t)
                    if ip is not None:
                        ips.append(ip)
                elif rtype == "TXT":
                    texts.append(t)
    return Endpoints(name, ns, entries)


def node(obj):
    name, _, _, ignored = _meta(obj)
    addrs = tuple((a.get("type"), a.get("address") or "") for a in
                  (obj.get("status") or {}).get("addresses") or ())
    hosts = () if ignored else _hosts(
        a for t, a in addrs if t == "Hostname")
    return Node(name, hosts, addrs)
