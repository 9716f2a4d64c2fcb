"""The kubernetes plugin's answers (CoreDNS's handler, parse, kubernetes,
ns and reverse code, and the backend_lookup rules they rely on)."""

import ipaddress
import struct

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.interfaces import (IMetadataProvider, IReadiness,
                                       ITransferer)
from corednstw.core.plugin import Plugin, is_deferred, match
from corednstw.plugins.metadata import set_value
from corednstw.plugins.kubernetes import records as rec
from corednstw.core.request import Response
from corednstw.core.names import is_subdomain

DNS_SCHEMA_VERSION = "1.1.0"
TXT_VERSION = w.txt_rdata(DNS_SCHEMA_VERSION)
MAX_CNAME_CHAIN = 10

# Outcomes of a lookup besides a list of entries.
NAME_ERROR = "nxdomain"

_SRV = struct.Struct("!HHH")


class Request:
    """A parsed query name (CoreDNS's recordRequest)."""

    __slots__ = ("port", "protocol", "endpoint", "cluster", "service",
                 "namespace", "kind", "zone", "prefer")

    def __init__(self):
        self.port = self.protocol = self.endpoint = self.cluster = ""
        self.service = self.namespace = self.kind = self.zone = ""
        self.prefer = False


def parse_request(base, multicluster, zonal):
    """Split the part of the name left of the zone; NAME_ERROR if it
    cannot be a Kubernetes name."""
    r = Request()
    if base == "" or base == "svc" or base == "pod":
        return r
    segs = base.split(".")
    last = len(segs) - 1
    r.kind = segs[last]
    if r.kind != "pod" and r.kind != "svc":
        return NAME_ERROR
    last -= 1
    if last < 0:
        return r
    r.namespace = segs[last]
    last -= 1
    if last < 0:
        return r
    r.service = segs[last]
    last -= 1
    if last < 0:
        return r
    if last == 0:
        r.endpoint = segs[0]
    elif last == 1:
        if (not multicluster or segs[1].startswith("_")
                or segs[0].startswith("_")):
            r.protocol = _strip(segs[1])
            r.port = _strip(segs[0])
        else:
            r.cluster = segs[1]
            r.endpoint = segs[0]
    else:
        if (not zonal or multicluster or segs[last] != "_zone"
                or r.kind != "svc"):
            return NAME_ERROR
        d = segs[last - 1]
        if d == "prefer":
            r.prefer = True
        elif d != "pin":
            return NAME_ERROR
        r.zone = ".".join(segs[:last - 1])
    return r


def _strip(s):
    return s[1:] if s.startswith("_") else s


def _port_ok(r, p):
    return ((not r.port or r.port == p[0])
            and (not r.protocol or r.protocol == p[1]))


def reverse_address(qname):
    """The address of a complete reverse name, or "" (CoreDNS's
    dnsutil.ExtractAddressFromReverse)."""
    if qname.endswith(".in-addr.arpa."):
        labels = qname[:-len(".in-addr.arpa.")].split(".")
        if len(labels) != 4:
            return ""
        text = ".".join(reversed(labels))
    elif qname.endswith(".ip6.arpa."):
        labels = qname[:-len(".ip6.arpa.")].split(".")
        if len(labels) != 32:
            return ""
        nib = "".join(reversed(labels))
        text = ":".join(nib[i:i + 4] for i in range(0, 32, 4))
    else:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return ""


def _is_reverse(name):
    return name.endswith(".in-addr.arpa.") or name.endswith(".ip6.arpa.")


@implementer(IReadiness, ITransferer, IMetadataProvider)
class Kubernetes(Plugin):
    name = "kubernetes"

    def __init__(self, zones):
        self.zones = zones
        self.primary = next(z for z in zones if not _is_reverse(z))
        self.namespaces = set()
        self.pod_mode = "disabled"
        self.podnames = False
        self.ttl = 5
        self.endpoints = True
        self.ignore_empty = False
        self.zonal = False
        self.multicluster = []
        self.fall = None
        self.startup_timeout = 5.0
        self.conn_opts = {}
        self.labels = None
        self.namespace_labels = None
        self.store = None
        self.local_ips = []
        self.watchers = []
        self._soa = {}
        self._fast = ({}, {})       # A, AAAA: qname -> rdata list
        self._fast_version = -1

    # -- readiness ---------------------------------------------------------------

    def ready(self):
        return self.store is not None and self.store.synced

    @property
    def synced(self):
        return self.store is not None and self.store.synced

    # -- serving ------------------------------------------------------------------

    def serve(self, req):
        qtype = req.qtype
        if qtype == w.A or qtype == w.AAAA:
            # Answers of plain service names seen since the store last
            # changed: one dict lookup (filled by the fast path below).
            if self.store.version == self._fast_version:
                rds = self._fast[qtype == w.AAAA].get(req.qname)
                if rds is not None:
                    name = req.name
                    ttl = self.ttl
                    return Response(0, [w.RR(name, qtype, ttl, rd)
                                        for rd in rds], aa=True,
                                    plugin="kubernetes")
            else:
                self._fast = ({}, {})
                self._fast_version = self.store.version
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return self.next.serve(req)
        if qtype == w.AXFR or qtype == w.IXFR:
            return Response(w.REFUSED, plugin=self.name)
        name = req.name
        zcase = name[len(name) - len(zone):] if zone != "." else "."
        base = qname[:-len(zone) - 1] if qname != zone else ""
        if zone == ".":
            base = qname[:-1]
        store = self.store
        # Fast path: A/AAAA of a plain service name.
        if (qtype == w.A or qtype == w.AAAA) and base.endswith(".svc") and \
                base.count(".") == 2 and zone not in self.multicluster:
            svc_name, ns, _ = base.split(".")
            svc = store.services.get((svc_name, ns))
            if (svc is not None and svc.kind != rec.EXTERNAL
                    and not self.ignore_empty and self._exposed(ns)):
                rds = self._addresses(svc, qtype)
                if rds:
                    self._fast[qtype == w.AAAA][qname] = rds
                    ttl = self.ttl
                    return Response(0, [w.RR(name, qtype, ttl, rd)
                                        for rd in rds], aa=True,
                                    plugin=self.name)
        try:
            out = self._answer(req, qtype, zone, zcase, base)
        except Exception as e:
            logger.error(self.name, "%s: %s" % (req.name, e))
            return Response(w.SERVFAIL, plugin=self.name)
        if is_deferred(out):
            return out.addCallback(self._finish, req, zone, zcase)
        return self._finish(out, req, zone, zcase)

    def _addresses(self, svc, qtype):
        """A or AAAA rdata of a service's plain name (cached per service)."""
        cache = self.store.cache
        key = (svc.name, svc.ns)
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = self._build_addresses(svc)
        return entry[0] if qtype == w.A else entry[1]

    def _build_addresses(self, svc):
        if svc.kind == rec.CLUSTER_IP:
            a = [rd for t, rd in ((x[1], x[2]) for x in svc.addrs) if t == w.A]
            aaaa = [rd for t, rd in ((x[1], x[2]) for x in svc.addrs)
                    if t == w.AAAA]
            return a, aaaa
        a, aaaa, seen = [], [], set()
        if self.endpoints:
            for sl in self.store.slices_of(svc.name, svc.ns):
                if not sl.ports:
                    continue
                for e in sl.eps:
                    if (e.ready or svc.pna) and e.ip not in seen:
                        seen.add(e.ip)
                        (a if e.rtype == w.A else aaaa).append(e.rdata)
        return a, aaaa

    def _finish(self, out, req, zone, zcase):
        rcode, answer, extra, tc = out
        if rcode == NAME_ERROR:
            if self.fall is not None and self.fall.through(req.qname):
                return self.next.serve(req)
            rc = w.NXDOMAIN if self.synced else w.SERVFAIL
            return Response(rc, authority=[self._soa_rr(zone, zcase)],
                            aa=True, plugin=self.name)
        if rcode:
            return Response(rcode, plugin=self.name)
        if not answer:
            return Response(0, authority=[self._soa_rr(zone, zcase)],
                            aa=True, plugin=self.name)
        return Response(0, answer, None, extra, aa=True, plugin=self.name,
                        tc=tc)

    def _serial(self, zone):
        """The SOA serial: the Unix time of the last change."""
        store = self.store
        return (store.mc_modified if zone in self.multicluster
                else store.modified) & 0xFFFFFFFF

    def _soa_rr(self, zone, zcase):
        serial = self._serial(zone)
        key = (zcase, serial)
        rr = self._soa.get(key)
        if rr is None:
            if len(self._soa) > 64:
                self._soa.clear()
            rr = self._soa[key] = self.soa(zone, zcase, serial)
        return rr

    def soa(self, zone, zcase, serial):
        return w.RR(zcase, w.SOA, min(self.ttl, 300), w.soa_rdata(
            _join("ns.dns", zcase), _join("hostmaster", zcase), serial,
            7200, 1800, 86400, self.ttl))

    # -- the general path ---------------------------------------------------------

    def _answer(self, req, qtype, zone, zcase, base):
        """(rcode or NAME_ERROR, answer, additional, tc), or a Deferred."""
        name = req.name
        qname = req.qname
        if qtype == w.A or qtype == w.AAAA:
            return self._address(req, qtype, qname, name, zone, zcase, base,
                                 [])
        if qtype == w.TXT:
            if base == "dns-version":
                return 0, [w.RR(name, w.TXT, 28800, TXT_VERSION)], [], False
            found = self._records(qname, zone, zcase, base)
            if found != NAME_ERROR and (found or (
                    self.zonal and self._zonal_name(base, zone))):
                return 0, [], [], False
            return NAME_ERROR, [], [], False
        if qtype == w.SRV:
            return self._srv(req, zone, zcase, base)
        if qtype == w.PTR:
            return self._ptr(req, zone, zcase, base)
        if qtype == w.CNAME:
            found = self._services(qname, zone, zcase, base, qtype)
            if found == NAME_ERROR:
                return NAME_ERROR, [], [], False
            if found and found[0][0] == w.CNAME:
                return 0, [w.RR(name, w.CNAME, self.ttl,
                                w.name_to_wire(found[0][1]))], [], False
            return 0, [], [], False
        if qtype == w.MX:
            found = self._services(qname, zone, zcase, base, qtype)
            return (NAME_ERROR if found == NAME_ERROR else 0), [], [], False
        if qtype == w.SOA:
            if qname == zone:
                return 0, [self._soa_rr(zone, zcase)], [], False
            return 0, [], [], False
        if qtype == w.NS and qname == zone:
            return self._ns(req, zone, zcase)
        # Anything else: a (fake) A lookup tells NODATA from NXDOMAIN.
        if qname == zone:
            return 0, [], [], False
        found = self._services(qname, zone, zcase, base, w.A)
        return (NAME_ERROR if found == NAME_ERROR else 0), [], [], False

    def _zonal_name(self, base, zone):
        r = parse_request(base, zone in self.multicluster, True)
        return r != NAME_ERROR and r.zone != ""

    def _services(self, qname, zone, zcase, base, qtype):
        """CoreDNS's Services(): entries (rtype, host, rdata, port,
        target) or NAME_ERROR."""
        if qname == "ns.dns." + zone:
            want = qtype
            return [(t, host, rd, 0, None)
                    for t, host, rd, _ in self._ns_addrs(zone, zcase)
                    if t == want]
        return self._records(qname, zone, zcase, base)

    def _records(self, qname, zone, zcase, base):
        mc = zone in self.multicluster
        r = parse_request(base, mc, self.zonal)
        if r == NAME_ERROR:
            return NAME_ERROR
        if not r.kind:
            return []
        if _is_reverse(qname):
            return NAME_ERROR
        if not self._exposed(r.namespace):
            return NAME_ERROR
        if r.kind == "pod":
            return self._pods(r)
        return self._find(r, zcase, mc)

    def _exposed(self, ns):
        if self.namespaces and ns not in self.namespaces:
            return False
        return ns in self.store.namespaces

    def _pods(self, r):
        mode = self.pod_mode
        if mode == "disabled":
            return NAME_ERROR
        if not r.service:
            return []
        podname = r.service
        if podname.count("-") == 3 and "--" not in podname:
            text = podname.replace("-", ".")
        else:
            text = podname.replace("-", ":")
        a = rec.address(text)
        if mode == "insecure":
            if a is None:
                return NAME_ERROR
            return [(a[1], text, a[2], 0, None)]
        out = []
        for key in self.store.pods_by_ip.get(text, ()):
            if key[1] == r.namespace and a is not None:
                out.append((a[1], text, a[2], 0, None))
        return out or NAME_ERROR

    def _find(self, r, zcase, mc):
        """CoreDNS's findServices / findMultiClusterServices."""
        if not r.service:
            return []
        store = self.store
        key = (r.service, r.namespace)
        svc = (store.imports if mc else store.services).get(key)
        if svc is None:
            return NAME_ERROR
        slices = None
        if self.endpoints or mc:
            slices = store.slices_of(svc.name, svc.ns, mc)
        if (self.ignore_empty and svc.kind != rec.EXTERNAL
                and not svc.headless):
            if not any(e.ready or svc.pna for sl in slices or ()
                       for e in sl.eps):
                return NAME_ERROR
        if r.zone and not svc.headless:
            return NAME_ERROR
        prefix = "%s.%s.svc." % (svc.name, svc.ns)
        if svc.kind == rec.EXTERNAL:
            if r.endpoint or r.port or r.protocol:
                return NAME_ERROR
            host = svc.external
            if rec.address(host) is not None:
                return NAME_ERROR
            return [(w.CNAME, host, None, 0, None)]
        out = []
        if svc.headless or r.endpoint:
            err = not r.zone
            podnames = self.podnames

            def add(topo):
                n = 0
                for sl in slices or ():
                    if mc and r.endpoint and sl.cluster.lower() != r.cluster:
                        continue
                    pre = (sl.cluster + "." + prefix) if mc else prefix
                    for e in sl.eps:
                        if not (e.ready or svc.pna):
                            continue
                        if topo and e.zone != topo:
                            continue
                        host = e.name(podnames)
                        if r.endpoint and r.endpoint != host.lower():
                            continue
                        target = host + "." + pre + zcase
                        for p in sl.ports:
                            if _port_ok(r, p):
                                out.append((e.rtype, e.ip, e.rdata, p[2],
                                            target))
                                n += 1
                return n
            if add(r.zone) == 0 and r.prefer:
                add("")
            if out or not err:
                return out
            return NAME_ERROR
        target = prefix + zcase
        found = False
        for p in svc.ports:
            if not _port_ok(r, p):
                continue
            found = True
            for t, rd, ip in ((x[1], x[2], x[0]) for x in svc.addrs):
                out.append((t, ip, rd, p[2], target))
        return out if found else NAME_ERROR

    # -- address records, CNAMEs of ExternalName services --------------------------

    def _address(self, req, qtype, qname, name, zone, zcase, base, prev):
        """CoreDNS's plugin.A/AAAA: (rcode, records, [], tc), or a
        Deferred when a CNAME target has to be resolved elsewhere."""
        if qname == zone:
            found = []
        else:
            found = self._services(qname, zone, zcase, base, qtype)
        if found == NAME_ERROR:
            return NAME_ERROR, [], [], False
        records = []
        pending = []
        seen = set()
        for t, host, rd, _, _ in found:
            if t == w.CNAME:
                target = host if host.endswith(".") else host + "."
                tl = target.lower()
                if tl == qname or len(prev) > MAX_CNAME_CHAIN:
                    continue
                cname = w.RR(name, w.CNAME, self.ttl, w.name_to_wire(target))
                if any(c.name.lower() == qname and c.rdata.lower()
                       == cname.rdata.lower() for c in prev):
                    continue
                if is_subdomain(tl, zone):
                    tbase = tl[:-len(zone) - 1] if zone != "." else tl[:-1]
                    sub = self._address(req, qtype, tl, target, zone, zcase,
                                        tbase, prev + [cname])
                    if isinstance(sub, defer.Deferred):
                        pending.append((len(records), cname, sub))
                    elif sub[0] == 0 and sub[1]:
                        records.append(cname)
                        records.extend(sub[1])
                    continue
                pending.append((len(records), cname, target))
                continue
            if t == qtype and host not in seen:
                seen.add(host)
                records.append(w.RR(name, qtype, self.ttl, rd))
        if not pending:
            return 0, records, [], False
        return self._upstream(req, qtype, records, pending)

    def _upstream(self, req, qtype, records, pending):
        """Finish the CNAMEs whose targets lie outside the plugin (through
        the whole server, CoreDNS's upstream) or behind another Deferred."""
        lookup = self.block.config.app.lookup
        ds = []
        for _, cname, target in pending:
            if isinstance(target, defer.Deferred):
                ds.append(target.addCallback(
                    lambda o, c=cname: ([c] + o[1], False)
                    if o[0] == 0 and o[1] else None))
            else:
                ds.append(lookup(target, qtype, parent=req).addCallback(
                    lambda r, c=cname: None if r is None
                    else ([c] + list(r.answer), r.tc)))

        def done(results):
            out = list(records)
            tc = False
            shift = 0
            for (pos, _, _), (ok, got) in zip(pending, results):
                if not ok or got is None:
                    continue
                out[pos + shift:pos + shift] = got[0]
                shift += len(got[0])
                tc = tc or got[1]
            return 0, out, [], tc
        return defer.DeferredList(ds, consumeErrors=True).addCallback(done)

    # -- SRV, PTR, NS ---------------------------------------------------------------

    def _srv(self, req, zone, zcase, base):
        found = self._services(req.qname, zone, zcase, base, w.SRV)
        if found == NAME_ERROR:
            return NAME_ERROR, [], [], False
        found = [f for f in found if f[0] != w.CNAME]
        if not found:
            return 0, [], [], False
        weight = max(1, int(100.0 / (100 * len(found)) * 100))
        answer, extra, dup = [], [], set()
        ttl = self.ttl
        name = req.name
        for t, host, rd, port, target in found:
            if port == -1 or target is None:
                continue
            if (target.lower(), port) not in dup:
                dup.add((target.lower(), port))
                answer.append(w.RR(name, w.SRV, ttl, _SRV.pack(
                    0, weight, port) + w.name_to_wire(target)))
            if (target.lower(), host) not in dup:
                dup.add((target.lower(), host))
                extra.append(w.RR(target, t, ttl, rd))
        return 0, answer, extra, False

    def _ptr(self, req, zone, zcase, base):
        qname = req.qname
        ip = reverse_address(qname)
        if not ip:
            found = self._records(qname, zone, zcase, base)
            return (NAME_ERROR if found == NAME_ERROR else 0), [], [], False
        store = self.store
        names = []
        for key in store.svc_by_ip.get(ip, ()):
            if self.namespaces and not self._exposed(key[1]):
                continue
            names.append("%s.%s.svc.%s" % (key[0], key[1], self.primary))
            break
        if not names:
            for skey in sorted(store.ep_by_ip.get(ip, ())):
                sl = store.slices.get(skey)
                if sl is None:
                    continue
                if self.namespaces and not self._exposed(sl.ns):
                    continue
                svc = store.services.get((sl.service, sl.ns))
                pna = svc is not None and svc.pna
                for e in sl.eps:
                    if e.ip == ip and (e.ready or pna):
                        names.append("%s.%s.%s.svc.%s" % (
                            e.name(self.podnames), sl.service, sl.ns,
                            self.primary))
        if not names:
            return NAME_ERROR, [], [], False
        out, seen = [], set()
        for n in names:
            if n not in seen:
                seen.add(n)
                out.append(w.RR(req.name, w.PTR, self.ttl, w.name_to_wire(n)))
        return 0, out, [], False

    def _ns_addrs(self, zone, zcase):
        """(rtype, name, rdata, ip) of this server's own kube-dns service
        (found by the local addresses among endpoints), else ns.dns.<zone>
        with the local addresses (CoreDNS's nsAddrs)."""
        store = self.store
        out = []
        found = False
        for lip in self.local_ips:
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
                            out.append((e.rtype, e.name(self.podnames) + "."
                                        + sname, e.rdata, e.ip))
                else:
                    for ip, t, rd in svc.addrs:
                        out.append((t, sname, rd, ip))
        if not found:
            for lip in self.local_ips:
                a = rec.address(lip)
                if a is not None:
                    out.append((a[1], "ns.dns." + zcase, a[2], a[0]))
        return out

    def _ns(self, req, zone, zcase):
        answer, extra, seen = [], [], set()
        for t, target, rd, _ in self._ns_addrs(zone, zcase):
            extra.append(w.RR(target, t, self.ttl, rd))
            if target.lower() in seen:
                continue
            seen.add(target.lower())
            answer.append(w.RR(req.name, w.NS, self.ttl,
                               w.name_to_wire(target)))
        return 0, answer, extra, False


    # -- zone transfers (the transfer plugin's interface) --------------------------

    def transfer_records(self, zone, serial):
        """CoreDNS's Transfer: SOA, the NS records and their addresses,
        every exposed service's records (services in name order), SOA.
        An IXFR for the current serial gets the SOA alone."""
        if self.store is None or match(self.zones, zone) is None:
            return None
        soa = self._soa_rr(zone, zone)
        if serial != 0 and serial == self._serial(zone):
            return [[soa]]
        out = [[soa]]
        ttl = self.ttl
        addrs = []
        seen = set()
        for t, host, rd, _ in self._ns_addrs(zone, zone):
            addrs.append(w.RR(host, t, ttl, rd))
            if host not in seen:
                seen.add(host)
                out.append([w.RR(zone, w.NS, ttl, w.name_to_wire(host))])
        out.append(addrs)
        mc = zone in self.multicluster
        store = self.store
        table = store.imports if mc else store.services
        for key in sorted(table):
            svc = table[key]
            if self._exposed(svc.ns):
                self._transfer_service(out, svc, zone, ttl, mc)
        out.append([soa])
        return out

    def _transfer_service(self, out, svc, zone, ttl, mc):
        fqdn = "%s.%s.svc.%s" % (svc.name, svc.ns, zone)
        if svc.kind == rec.EXTERNAL:
            if rec.address(svc.external) is None and svc.external:
                out.append([w.RR(fqdn, w.CNAME, ttl,
                                 w.name_to_wire(_fqdn(svc.external)))])
            return
        if svc.addrs:
            for _, t, rd in svc.addrs:
                out.append([w.RR(fqdn, t, ttl, rd)])
            for pname, proto, port in svc.ports:
                if port < 0:
                    continue
                rd = _SRV.pack(0, 100, port) + w.name_to_wire(fqdn)
                out.append([w.RR(fqdn, w.SRV, ttl, rd)])
                if pname:
                    out.append([w.RR("_%s._%s.%s" % (pname, proto, fqdn),
                                     w.SRV, ttl, rd)])
            return
        for sl in self.store.slices_of(svc.name, svc.ns, mc):
            eps = [e for e in sl.eps if e.ready or svc.pna]
            weight = max(1, 100 // len(eps)) if eps else 100
            for e in eps:
                out.append([w.RR(fqdn, e.rtype, ttl, e.rdata)])
                host = "%s.%s" % (e.name(self.podnames), fqdn)
                out.append([w.RR(host, e.rtype, ttl, e.rdata)])
                target = w.name_to_wire(host)
                for pname, proto, port in sl.ports:
                    if not pname:
                        continue
                    out.append([w.RR("_%s._%s.%s" % (pname, proto, fqdn),
                                     w.SRV, ttl,
                                     _SRV.pack(0, weight, port) + target)])

    # -- metadata (the metadata plugin's interface) -----------------------------

    def metadata(self, req):
        """Publish kubernetes/... for the metadata plugin: the client pod
        (with ``pods verified``) and the parts of the query name."""
        store = self.store
        if store is not None and self.pod_mode == "verified":
            keys = store.pods_by_ip.get(req.client)
            if keys:
                pod = store.pods.get(min(keys))
                if pod is not None:
                    set_value(req, "kubernetes/client-namespace", pod.ns)
                    set_value(req, "kubernetes/client-pod-name", pod.name)
                    for k, v in (pod.labels or {}).items():
                        set_value(req, "kubernetes/client-label/" + k, v)
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return
        mc = match(self.multicluster, req.zone) is not None
        base = qname[:-len(zone) - 1] if qname != zone else ""
        if zone == ".":
            base = qname[:-1]
        r = parse_request(base, mc, self.zonal)
        if r == NAME_ERROR:
            set_value(req, "kubernetes/parse-error", "invalid query name")
            return
        set_value(req, "kubernetes/port-name", r.port)
        set_value(req, "kubernetes/protocol", r.protocol)
        set_value(req, "kubernetes/endpoint", r.endpoint)
        if mc:
            set_value(req, "kubernetes/cluster", r.cluster)
        if self.zonal:
            set_value(req, "kubernetes/zone", r.zone)
        set_value(req, "kubernetes/service", r.service)
        set_value(req, "kubernetes/namespace", r.namespace)
        set_value(req, "kubernetes/kind", r.kind)


def _fqdn(name):
    return name if name.endswith(".") else name + "."


def _join(label, zone):
    return label + "." if zone == "." else label + "." + zone
