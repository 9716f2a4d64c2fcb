"""Compact records made from the API server's JSON, and their wire rdata.

The watch threads turn each object into one of these small slotted
records (never the client's model objects, ~14 KB each); everything the
answer path needs in wire form (address rdata, endpoint host names) is
computed here, once per change, not per query.
"""

import ipaddress
import socket

from corednstw.core import dnswire as w

CLUSTER_IP, HEADLESS, EXTERNAL = 0, 1, 2

#: Label of an EndpointSlice naming its Service, and the MCS-API labels.
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MC_SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
MC_SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"




def dashed(ip):
    """The endpoint name made from its address (1-2-3-4, fd00--1)."""
    if "." in ip:
        return ip.replace(".", "-")
    name = ip.replace(":", "-")
    if name.endswith("-"):
        name += "0"
    return name


class Service:
    """A Service (or, for multicluster zones, a ServiceImport)."""

    __slots__ = ("name", "ns", "rv", "kind", "addrs", "ports",
                 "external", "pna", "ext", "mark")

    def __init__(self, name, ns, rv, kind, addrs, ports, external="",
                 pna=False, ext=()):
        self.name = name
        self.ns = ns
        self.rv = rv
        self.kind = kind
        # (text, rtype, rdata) per valid cluster IP, in API order.
        self.addrs = addrs
        self.ports = ports      # ((name lower, proto lower, port), ...)
        self.external = external
        self.pna = pna          # publishNotReadyAddresses
        # The external IPs, then the load balancer ingress addresses (or
        # host names), in API order: the names k8s_external serves.
        self.ext = ext
        self.mark = 0

    @property
    def ips(self):
        """Canonical texts of the cluster IPs (the PTR index's keys)."""
        return tuple(a[0] for a in self.addrs)

    @property
    def headless(self):
        return self.kind == HEADLESS

    def same(self, other):
        """Equal for DNS purposes (no serial bump on no-op updates)."""
        return (other is not None and self.kind == other.kind
                and self.addrs == other.addrs and self.ports == other.ports
                and self.external == other.external
                and self.pna == other.pna)


class Endpoint:
    """One address of an EndpointSlice endpoint."""

    __slots__ = ("ip", "rtype", "rdata", "hostname", "target", "zone",
                 "ready")

    def __init__(self, ip, rtype, rdata, hostname, target, zone, ready):
        self.ip = ip
        self.rtype = rtype
        self.rdata = rdata
        self.hostname = hostname
        self.target = target
        self.zone = zone
        self.ready = ready

    def name(self, podnames):
        """CoreDNS's endpointHostname."""
        if self.hostname:
            return self.hostname
        if podnames and self.target:
            return self.target
        return dashed(self.ip)

    def key(self):
        return (self.ip, self.hostname, self.target, self.zone, self.ready)


class Slice:
    """An EndpointSlice, reduced to what DNS needs."""

    __slots__ = ("name", "ns", "rv", "service", "ports", "eps", "trigger",
                 "cluster", "mark")

    def __init__(self, name, ns, rv, service, ports, eps, trigger="",
                 cluster=""):
        self.name = name
        self.ns = ns
        self.rv = rv
        self.service = service
        self.ports = ports      # ((name lower, proto lower, port), ...)
        self.eps = eps          # (Endpoint, ...)
        self.trigger = trigger
        self.cluster = cluster
        self.mark = 0

    def same(self, other):
        return (other is not None and self.service == other.service
                and self.ports == other.ports and self.cluster == other.cluster
                and [e.key() for e in self.eps]
                == [e.key() for e in other.eps])


class Pod:
    __slots__ = ("name", "ns", "rv", "ip", "labels", "mark")

    def __init__(self, name, ns, rv, ip, labels=None):
        self.name = name
        self.ns = ns
        self.rv = rv
        self.ip = ip
        self.labels = labels    # for the client-label metadata
        self.mark = 0


class Namespace:
    __slots__ = ("name", "rv", "mark")

    def __init__(self, name, rv):
        self.name = name
        self.rv = rv
        self.mark = 0


# -- JSON to records (runs in the watch threads) ------------------------------

#: What the parsers below read of an object (a key: all of its value; a
#: tuple: those keys of it), and nothing else: a list is decoded keeping
#: these alone (watch.KeptListReader).  A parser reading another key
#: must add it here.
META_KEYS = ("name", "namespace", "resourceVersion", "labels",
             "annotations", "deletionTimestamp")
SERVICE_KEYS = {"metadata": META_KEYS, "spec": None, "status": None}
SLICE_KEYS = {"metadata": META_KEYS, "addressType": None,
              "endpoints": None, "ports": None}
POD_KEYS = {"metadata": META_KEYS, "status": None}
NAMESPACE_KEYS = {"metadata": META_KEYS}
IMPORT_KEYS = {"metadata": META_KEYS, "spec": None}


def _meta(obj):
    m = obj.get("metadata") or {}
    return m.get("name", ""), m.get("namespace", ""), m.get(
        "resourceVersion", ""), m


#: The protocols' lower-case names, without a ``lower()`` per port.
_PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
_NO_PORT = (("", "", -1),)


def _ports(ports, sentinel=True):
    if not ports:
        return _NO_PORT if sentinel else ()
    out = []
    for p in ports:
        port = p.get("port")
        proto = p.get("protocol")
        out.append(((p.get("name") or "").lower(),
                    _PROTOCOLS.get(proto) or (proto or "").lower(),
                    -1 if port is None else int(port)))
    return tuple(out)


def _addresses(ips):
    out = []
    for ip in ips:
        if ip and ip != "None":
            a = w.ip_rdata(ip)
            if a is not None:
                out.append(a)
    return tuple(out)


def service(obj):
    name, ns, rv, _ = _meta(obj)
    spec = obj.get("spec") or {}
    ips = spec.get("clusterIPs") or [spec.get("clusterIP") or ""]
    if spec.get("type") == "ExternalName":
        kind = EXTERNAL
    elif ips[0] == "None":
        kind = HEADLESS
    else:
        kind = CLUSTER_IP
    return Service(name, ns, rv, kind, _addresses(ips),
                   _ports(spec.get("ports")),
                   spec.get("externalName") or "",
                   bool(spec.get("publishNotReadyAddresses")),
                   _external(spec, obj.get("status") or {}))


def _external(spec, status):
    """CoreDNS's ExternalIPs of a Service: spec.externalIPs, then each
    load balancer ingress's IP, or its host name when it has no IP."""
    ips = spec.get("externalIPs")
    lb = status.get("loadBalancer")
    ingress = lb.get("ingress") if lb else None
    if not ips and not ingress:
        return ()
    out = list(ips or ())
    for ing in ingress or ():
        out.append(ing.get("ip") or ing.get("hostname") or "")
    return tuple(out)


def service_import(obj):
    name, ns, rv, _ = _meta(obj)
    spec = obj.get("spec") or {}
    kind = HEADLESS if spec.get("type") == "Headless" else CLUSTER_IP
    return Service(name, ns, rv, kind, _addresses(spec.get("ips") or ()),
                   _ports(spec.get("ports"), sentinel=False))


def endpoint_slice(obj, multicluster=False, zonal=False):
    name, ns, rv, meta = _meta(obj)
    if obj.get("addressType") == "FQDN":
        return None
    labels = meta.get("labels") or {}
    eps = []
    for e in obj.get("endpoints") or ():
        ready = (e.get("conditions") or {}).get("ready")
        ready = True if ready is None else bool(ready)
        ref = e.get("targetRef") or {}
        target = ref.get("name") or ""
        if len(target) >= 64:
            target = ""
        zone = (e.get("zone") or "").lower() if zonal else ""
        hostname = e.get("hostname") or ""
        for ip in e.get("addresses") or ():
            a = w.ip_rdata(ip)
            if a is None:
                continue
            eps.append(Endpoint(a[0], a[1], a[2], hostname, target, zone,
                                ready))
    if multicluster:
        svc = labels.get(MC_SERVICE_NAME_LABEL, "")
        cluster = labels.get(MC_SOURCE_CLUSTER_LABEL, "")
    else:
        svc = labels.get(SERVICE_NAME_LABEL, "")
        cluster = ""
    trigger = (meta.get("annotations") or {}).get(TRIGGER_TIME, "")
    return Slice(name, ns, rv, svc, _ports(obj.get("ports")), tuple(eps),
                 trigger, cluster)


def pod(obj):
    name, ns, rv, meta = _meta(obj)
    if meta.get("deletionTimestamp"):
        return None     # terminating: ignored, as CoreDNS does
    ip = (obj.get("status") or {}).get("podIP") or ""
    return Pod(name, ns, rv, ip, meta.get("labels") or None)


def namespace(obj):
    name, _, rv, _ = _meta(obj)
    return Namespace(name, rv)


def local_ips():
    """Non-loopback addresses of this host's interfaces (CoreDNS's
    boundIPs without bind): IPv4 by ioctl, IPv6 from /proc."""
    import fcntl
    import struct
    out = []
    try:
        names = [n for _, n in socket.if_nameindex()]
    except OSError:
        names = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for n in names:
            try:
                r = fcntl.ioctl(s.fileno(), 0x8915,
                                struct.pack("256s", n.encode()[:15]))
            except OSError:
                continue
            ip = socket.inet_ntoa(r[20:24])
            if not ip.startswith("127."):
                out.append(ip)
    finally:
        s.close()
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                h = line.split()[0]
                ip = str(ipaddress.ip_address(bytes.fromhex(h)))
                if ip != "::1":
                    out.append(ip)
    except OSError:
        pass
    return out
