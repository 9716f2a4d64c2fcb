"""The list items as msgspec Structs, and the records made from them.

``records.py`` makes the records from JSON decoded into dicts (the
watch events, and any list the fast path cannot take); here a list page
is decoded by msgspec straight into Structs that hold only the fields
the parsers read (everything else, managedFields first, is skipped
without an object made for it), about twice as fast as keeping whole
keys in dicts, and the parsers below read those Structs.

Each parser gives what its twin in ``records.py`` gives for the same
JSON, or raises what it raises: a value the twin takes loosely is
``Any`` here and goes through the same code; a nested object is a
Struct (or None for null), so JSON of another shape (an array where an
object belongs) fails to decode and the rest of the list goes to the
dict parsers (``watch.KeptListReader``).  Imported by the watch threads
only, and only when msgspec is installed.
"""

from functools import partial
from typing import Any, Optional

import msgspec

from corednstw.core.request import remember
from corednstw.plugins.kubernetes import records as rec


class _S(msgspec.Struct, gc=False):
    """No cycles: out of the garbage collector's reach."""


class Meta(_S):
    name: Any = ""
    namespace: Any = ""
    resourceVersion: Any = ""


class LabeledMeta(Meta):
    labels: Any = None
    annotations: Any = None
    deletionTimestamp: Any = None


class Port(msgspec.Struct, frozen=True, gc=False):
    """Hashable: a list of them is a key of ``_PORTS``."""
    name: Any = None
    protocol: Any = None
    port: Any = None


class Ingress(_S):
    ip: Any = None
    hostname: Any = None


class LoadBalancer(_S):
    ingress: Optional[list[Ingress]] = None


class ServiceStatus(_S):
    loadBalancer: Optional[LoadBalancer] = None


class ServiceSpec(_S):
    ports: Optional[list[Port]] = None
    clusterIP: Any = None
    clusterIPs: Any = None
    type: Any = None
    externalName: Any = None
    publishNotReadyAddresses: Any = None
    externalIPs: Any = None


class Service(_S):
    metadata: Optional[Meta] = None
    spec: Optional[ServiceSpec] = None
    status: Optional[ServiceStatus] = None


class Conditions(_S):
    ready: Any = None


class TargetRef(_S):
    name: Any = None


class Endpoint(_S):
    addresses: Any = None
    conditions: Optional[Conditions] = None
    hostname: Any = None
    targetRef: Optional[TargetRef] = None
    zone: Any = None


class EndpointSlice(_S):
    metadata: Optional[LabeledMeta] = None
    addressType: Any = None
    endpoints: Optional[list[Endpoint]] = None
    ports: Optional[list[Port]] = None


class PodStatus(_S):
    podIP: Any = None


class Pod(_S):
    metadata: Optional[LabeledMeta] = None
    status: Optional[PodStatus] = None


class Namespace(_S):
    metadata: Optional[Meta] = None


_NO_META = LabeledMeta()
_NO_SPEC = ServiceSpec()
_NO_CONDITIONS = Conditions()
_NO_REF = TargetRef()
_PROTOCOLS = rec._PROTOCOLS
_NO_PORT = rec._NO_PORT
_ip_rdata = rec.w.ip_rdata
_A = rec.w.A
_pton = rec.w.socket.inet_pton
_AF_INET = rec.w.socket.AF_INET
#: tuple(Port, ...) -> records._ports of them (most Services of a
#: cluster share a few port lists); emptied when full.
_PORTS: dict[Any, Any] = {}
PORTS_MAX = 4096


def _addresses(ips):
    """records._addresses, one IPv4 address (the usual case) without
    the general loop."""
    if len(ips) == 1:
        ip = ips[0]
        if ip.__class__ is str and ":" not in ip and ip and ip != "None":
            try:
                return ((ip, _A, _pton(_AF_INET, ip)),)
            except OSError:
                return ()
    return rec._addresses(ips)


def _ports(ports, sentinel=True):
    if not ports:
        return _NO_PORT if sentinel else ()
    try:
        key = tuple(ports)
        got = _PORTS.get(key)
    except TypeError:       # a value that cannot be hashed
        return _make_ports(ports)
    if got is None:
        got = remember(_PORTS, key, _make_ports(ports), PORTS_MAX)
    return got


def _make_ports(ports):
    out = []
    for p in ports:
        port = p.port
        proto = p.protocol
        out.append(((p.name or "").lower(),
                    _PROTOCOLS.get(proto) or (proto or "").lower(),
                    -1 if port is None else int(port)))
    return tuple(out)


def service(obj):
    m = obj.metadata or _NO_META
    spec = obj.spec or _NO_SPEC
    ips = spec.clusterIPs or [spec.clusterIP or ""]
    if spec.type == "ExternalName":
        kind = rec.EXTERNAL
    elif ips[0] == "None":
        kind = rec.HEADLESS
    else:
        kind = rec.CLUSTER_IP
    return rec.Service(m.name, m.namespace, m.resourceVersion, kind,
                       _addresses(ips), _ports(spec.ports),
                       spec.externalName or "",
                       bool(spec.publishNotReadyAddresses),
                       _external(spec, obj.status))


def _external(spec, status):
    """records._external of a Struct."""
    ips = spec.externalIPs
    lb = status.loadBalancer if status is not None else None
    ingress = lb.ingress if lb is not None else None
    if not ips and not ingress:
        return ()
    out = list(ips or ())
    for ing in ingress or ():
        out.append(ing.ip or ing.hostname or "")
    return tuple(out)


def endpoint_slice(obj, multicluster=False, zonal=False):
    m = obj.metadata or _NO_META
    if obj.addressType == "FQDN":
        return None
    labels = m.labels or {}
    eps = []
    for e in obj.endpoints or ():
        ready = (e.conditions or _NO_CONDITIONS).ready
        ready = True if ready is None else bool(ready)
        target = (e.targetRef or _NO_REF).name or ""
        if len(target) >= 64:
            target = ""
        zone = (e.zone or "").lower() if zonal else ""
        hostname = e.hostname or ""
        for ip in e.addresses or ():
            a = _ip_rdata(ip)
            if a is None:
                continue
            eps.append(rec.Endpoint(a[0], a[1], a[2], hostname, target,
                                    zone, ready))
    if multicluster:
        svc = labels.get(rec.MC_SERVICE_NAME_LABEL, "")
        cluster = labels.get(rec.MC_SOURCE_CLUSTER_LABEL, "")
    else:
        svc = labels.get(rec.SERVICE_NAME_LABEL, "")
        cluster = ""
    trigger = (m.annotations or {}).get(rec.TRIGGER_TIME, "")
    return rec.Slice(m.name, m.namespace, m.resourceVersion, svc,
                     _ports(obj.ports), tuple(eps), trigger, cluster)


def pod(obj):
    m = obj.metadata or _NO_META
    if m.deletionTimestamp:
        return None
    ip = (obj.status.podIP if obj.status is not None else None) or ""
    return rec.Pod(m.name, m.namespace, m.resourceVersion, ip,
                   m.labels or None)


def namespace(obj):
    m = obj.metadata or _NO_META
    return rec.Namespace(m.name, m.resourceVersion)


def parser(kind, zonal=False):
    """(the item Struct, its parser) of a kind (store's names), or None
    when it has none here."""
    if kind == "services":
        return Service, service
    if kind == "endpointslices":
        return EndpointSlice, (partial(endpoint_slice, zonal=True) if zonal
                               else endpoint_slice)
    if kind == "mcendpointslices":
        return EndpointSlice, partial(endpoint_slice, multicluster=True)
    if kind == "pods":
        return Pod, pod
    if kind == "namespaces":
        return Namespace, namespace
    return None
