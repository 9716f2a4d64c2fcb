"""What the kubernetes plugin tells k8s_external (CoreDNS's external.go),
as functions of the plugin ``k``: the services behind a name of an
external zone, this server's own external addresses, every external
service for a transfer, and the zone's serial.

A service here is a tuple ``(host, port, target, ttl)``: ``host`` an
address or a host name (a load balancer's), ``port`` -1 when the service
has no ports, ``target`` the FQDN its address records live at in the
external zone (the target of its SRV records when ``host`` is an
address), ``ttl`` the kubernetes plugin's TTL.  For a reverse lookup
``host`` is ``service.namespace`` and ``target`` empty.
"""

from typing import Any

from corednstw.core import dnswire as w
from corednstw.core.interfaces import (
    EXTERNAL_ENDPOINT,
    EXTERNAL_PORT_PROTOCOL,
)
from corednstw.plugins.kubernetes.names import reverse_address


def external(k, req, zone, headless):
    """CoreDNS's External: (services, rcode) for ``req`` in ``zone``."""
    qname = req.qname
    if req.qtype == w.PTR:
        ip = reverse_address(qname)
        if ip:
            svcs = reverse(k, ip)
            return svcs, (w.NOERROR if svcs else w.NXDOMAIN)
        # Not an address: NXDOMAIN or NODATA as for any other name.
    base = qname[:-len(zone) - 1] if zone != "." else qname[:-1]
    segs = base.split(".") if base else []
    last = len(segs) - 1
    if last < 0:
        return [], w.SERVFAIL
    namespace = segs[last]
    if not k.exposed(namespace):
        return [], w.NXDOMAIN
    last -= 1
    if last < 0:
        return [], w.NOERROR
    service = segs[last]
    last -= 1
    port = protocol = endpoint = ""
    if last == 0:
        endpoint = _strip(segs[0])
        last -= 1
    elif last == 1:
        protocol, port = _strip(segs[1]), _strip(segs[0])
        last -= 2
    if last != -1:
        return [], w.NXDOMAIN       # too long
    svc = k.store.services.get((service, namespace))
    out = []
    rcode = w.NXDOMAIN
    if svc is not None:
        zone_name = "%s.%s.%s" % (svc.name, svc.ns, zone)
        if headless and not svc.ext and (svc.headless or endpoint):
            for sl in k.store.slices_of(svc.name, svc.ns):
                for e in _ready(svc, sl):
                    host = e.name(k.podnames)
                    if endpoint and endpoint != host.lower():
                        continue
                    for p in sl.ports:
                        if _port_ok(port, protocol, p):
                            rcode = w.NOERROR
                            out.append((e.ip, p[2], host + "." + zone_name,
                                        k.ttl))
        else:
            for ip in svc.ext:
                for p in svc.ports:
                    if _port_ok(port, protocol, p):
                        rcode = w.NOERROR
                        out.append((ip, p[2], zone_name, k.ttl))
    if req.qtype == w.PTR:
        return [], rcode
    return out, rcode


def reverse(k, ip):
    """The services with ``ip`` among their external addresses."""
    out = []
    for name, ns in k.store.svc_by_ext.get(ip, ()):
        if k.namespaces and not k.exposed(ns):
            continue
        out.append(("%s.%s" % (name, ns), 0, "", k.ttl))
    return out


def addresses(k, zone, headless):
    """CoreDNS's nsAddrs(external): the external addresses of the
    services in front of this server (the endpoints of a headless one
    with ``headless``), found through the addresses it is bound to; the
    bound addresses themselves when no endpoint has them."""
    store = k.store
    found = False
    out = []
    for lip in k.local_ips:
        for skey in sorted(store.ep_by_ip.get(lip, ())):
            sl = store.slices.get(skey)
            if sl is None:
                continue
            found = True
            svc = store.services.get((sl.service, sl.ns))
            if svc is None:
                continue
            name = "%s.%s.%s" % (svc.name, svc.ns, zone)
            if headless and svc.headless:
                for e in _ready(svc, sl):
                    out.append(_address_rr(e.name(k.podnames) + "." + name,
                                           e.ip))
            else:
                out.extend(_address_rr(name, ip) for ip in svc.ext)
    if not found:
        out = [_address_rr("ns.dns." + zone, ip) for ip in k.local_ips]
    return [rr for rr in out if rr is not None]


def services(k, zone, headless):
    """CoreDNS's ExternalServices: (services, headless groups).

    Services are (owner, service) pairs: each external address gives one
    per port at ``service.ns.zone`` and one at ``_port._proto.service.
    ns.zone`` (an SRV owner whose target is the service name; unnamed
    ports give ``_._proto``, as in CoreDNS).  With ``headless``, the
    endpoints of headless services without external addresses, grouped
    by (owner, EXTERNAL_ENDPOINT) at the service name and, for named
    ports, by (``_port._proto`` owner, EXTERNAL_PORT_PROTOCOL) with the
    endpoint's name as host."""
    svcs = []
    groups: dict[tuple[str, str], list[Any]] = {}
    store = k.store
    ttl = k.ttl
    for key in sorted(store.services):
        svc = store.services[key]
        name = "%s.%s.%s" % (svc.name, svc.ns, zone)
        if headless and not svc.ext and svc.headless:
            for sl in store.slices_of(svc.name, svc.ns):
                for e in _ready(svc, sl):
                    host = e.name(k.podnames) + "." + name
                    for pname, proto, port in sl.ports:
                        groups.setdefault((name, EXTERNAL_ENDPOINT),
                                          []).append((e.ip, port, host, ttl))
                        if pname:
                            owner = "_%s._%s.%s" % (pname, proto, name)
                            groups.setdefault((owner, EXTERNAL_PORT_PROTOCOL),
                                              []).append(
                                (host, port, host, ttl))
            continue
        for ip in svc.ext:
            for pname, proto, port in svc.ports:
                svcs.append((name, (ip, port, name, ttl)))
                svcs.append(("_%s._%s.%s" % (pname, proto, name),
                             (ip, port, name, ttl)))
    return svcs, groups


def _ready(svc, sl):
    return [e for e in sl.eps if e.ready or svc.pna]


def _port_ok(port, protocol, p):
    """CoreDNS's matchPortAndProtocol: an empty port or protocol asked
    matches any (``p``'s name and protocol are lower-case already)."""
    return (not port or port == p[0]) and (not protocol or protocol == p[1])


def _strip(s):
    return s[1:] if s.startswith("_") else s


def _address_rr(name, ip):
    a = w.ip_rdata(ip)
    if a is None:
        return None
    return w.RR(name, a[1], 0, a[2])
