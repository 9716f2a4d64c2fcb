"""Answers off the address path, as functions of the plugin ``k``: PTR
(reverse lookups of services and endpoints), NS with the addresses of
this server (CoreDNS's ns.go) and the records of a zone transfer."""

import struct

from corednstw.core import dnswire as w
from corednstw.core.plugin import match
from corednstw.plugins.kubernetes import records as rec
from corednstw.plugins.kubernetes.names import NAME_ERROR, reverse_address

#: Priority, weight and port: the fixed start of SRV rdata.
SRV_HEADER = struct.Struct("!HHH")


def ptr(k, req, zone, zcase, base):
    """PTR answers (CoreDNS's Reverse): the service with the reversed
    address as cluster IP, else the endpoints with it; a name that is no
    complete reverse address is looked up as any other name."""
    qname = req.qname
    ip = reverse_address(qname)
    if not ip:
        found = k.entries(qname, zone, zcase, base)
        return (NAME_ERROR if found == NAME_ERROR else 0), [], [], False
    store = k.store
    names = []
    for key in store.svc_by_ip.get(ip, ()):
        if k.namespaces and not k.exposed(key[1]):
            continue
        names.append("%s.%s.svc.%s" % (key[0], key[1], k.primary))
        break
    if not names:
        for skey in sorted(store.ep_by_ip.get(ip, ())):
            sl = store.slices.get(skey)
            if sl is None:
                continue
            if k.namespaces and not k.exposed(sl.ns):
                continue
            svc = store.services.get((sl.service, sl.ns))
            pna = svc is not None and svc.pna
            for e in sl.eps:
                if e.ip == ip and (e.ready or pna):
                    names.append("%s.%s.%s.svc.%s" % (
                        e.name(k.podnames), sl.service, sl.ns,
                        k.primary))
    if not names:
        return NAME_ERROR, [], [], False
    out, seen = [], set()
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(w.RR(req.name, w.PTR, k.ttl, w.name_to_wire(n)))
    return 0, out, [], False


def ns_addrs(k, zone, zcase):
    """(rtype, name, rdata, ip) of this server's own kube-dns service
    (found by the local addresses among endpoints), else ns.dns.<zone>
    with the local addresses (CoreDNS's nsAddrs)."""
    store = k.store
    out = []
    found = False
    for lip in k.local_ips:
        for skey in sorted(store.ep_by_ip.get(lip, ())):
            sl = store.slices.get(skey)
            if sl is None:
                continue
            found = True
            svc = store.services.get((sl.service, sl.ns))
            if svc is None:
                continue
            sname = "%s.%s.svc.%s" % (svc.name, svc.ns, zcase)
            if svc.headless:
                for e in sl.eps:
                    if e.ready or svc.pna:
                        out.append((e.rtype, e.name(k.podnames) + "."
                                    + sname, e.rdata, e.ip))
            else:
                for ip, t, rd in svc.addrs:
                    out.append((t, sname, rd, ip))
    if not found:
        for lip in k.local_ips:
            a = w.ip_rdata(lip)
            if a is not None:
                out.append((a[1], "ns.dns." + zcase, a[2], a[0]))
    return out


def ns(k, req, zone, zcase):
    """NS at the apex: this server's names, their addresses as extra."""
    answer, extra, seen = [], [], set()
    for t, target, rd, _ in ns_addrs(k, zone, zcase):
        extra.append(w.RR(target, t, k.ttl, rd))
        if target.lower() in seen:
            continue
        seen.add(target.lower())
        answer.append(w.RR(req.name, w.NS, k.ttl,
                           w.name_to_wire(target)))
    return 0, answer, extra, False


def transfer(k, zone, serial):
    """CoreDNS's Transfer: SOA, the NS records and their addresses,
    every exposed service's records (services in name order), SOA.
    An IXFR for the current serial gets the SOA alone."""
    if k.store is None or match(k.zones, zone) is None:
        return None
    soa = k.soa_rr(zone, zone)
    if serial != 0 and serial == k.serial(zone):
        return [[soa]]
    out = [[soa]]
    ttl = k.ttl
    addrs = []
    seen = set()
    for t, host, rd, _ in ns_addrs(k, zone, zone):
        addrs.append(w.RR(host, t, ttl, rd))
        if host not in seen:
            seen.add(host)
            out.append([w.RR(zone, w.NS, ttl, w.name_to_wire(host))])
    out.append(addrs)
    mc = zone in k.multicluster
    store = k.store
    table = store.imports if mc else store.services
    for key in sorted(table):
        svc = table[key]
        if k.exposed(svc.ns):
            _transfer_service(k, out, svc, zone, ttl, mc)
    out.append([soa])
    return out


def _transfer_service(k, out, svc, zone, ttl, mc):
    fqdn = "%s.%s.svc.%s" % (svc.name, svc.ns, zone)
    if svc.kind == rec.EXTERNAL:
        if w.ip_rdata(svc.external) is None and svc.external:
            out.append([w.RR(fqdn, w.CNAME, ttl,
                             w.name_to_wire(_fqdn(svc.external)))])
        return
    if svc.addrs:
        for _, t, rd in svc.addrs:
            out.append([w.RR(fqdn, t, ttl, rd)])
        for pname, proto, port in svc.ports:
            if port < 0:
                continue
            rd = SRV_HEADER.pack(0, 100, port) + w.name_to_wire(fqdn)
            out.append([w.RR(fqdn, w.SRV, ttl, rd)])
            if pname:
                out.append([w.RR("_%s._%s.%s" % (pname, proto, fqdn),
                                 w.SRV, ttl, rd)])
        return
    for sl in k.store.slices_of(svc.name, svc.ns, mc):
        eps = [e for e in sl.eps if e.ready or svc.pna]
        weight = max(1, 100 // len(eps)) if eps else 100
        for e in eps:
            out.append([w.RR(fqdn, e.rtype, ttl, e.rdata)])
            host = "%s.%s" % (e.name(k.podnames), fqdn)
            out.append([w.RR(host, e.rtype, ttl, e.rdata)])
            target = w.name_to_wire(host)
            for pname, proto, port in sl.ports:
                if not pname:
                    continue
                out.append([w.RR("_%s._%s.%s" % (pname, proto, fqdn),
                                 w.SRV, ttl,
                                 SRV_HEADER.pack(0, weight, port) + target)])


def _fqdn(name):
    return name if name.endswith(".") else name + "."
