"""The plugin's view of the cluster, on the reactor thread: the records
of each kind watched, indexed by the host names they answer for.

The watch threads feed it through the engine's ``feed.Feed`` (batches
applied a budget per reactor turn, relists marked and swept, the sync
state); here each kind has its table (key -> record) and its host index
(host -> keys), the EndpointSlices an index by Service.
"""

from corednstw.engines.kubernetes.feed import Feed
from corednstw_k8s_gateway import records as rec

INGRESSES, SERVICES, SLICES, GATEWAYS = (
    "ingresses", "services", "endpointslices", "gateways")
HTTPROUTES, TLSROUTES, GRPCROUTES = "httproutes", "tlsroutes", "grpcroutes"
DNSENDPOINTS, NODES = "dnsendpoints", "nodes"

_GW = "/apis/gateway.networking.k8s.io/"
#: kind -> (API path, or the versions to try in order; parser; optional:
#: an API that may not be installed, its CRD absent)
RESOURCES = {
    INGRESSES: ("/apis/networking.k8s.io/v1/ingresses", rec.ingress, False),
    SERVICES: ("/api/v1/services", rec.service, False),
    SLICES: ("/apis/discovery.k8s.io/v1/endpointslices", rec.endpoint_slice,
             False),
    NODES: ("/api/v1/nodes", rec.node, False),
    GATEWAYS: (_GW + "v1/gateways", rec.gateway, True),
    HTTPROUTES: (_GW + "v1/httproutes", rec.route, True),
    TLSROUTES: ((_GW + "v1/tlsroutes", _GW + "v1alpha2/tlsroutes"),
                rec.route, True),
    GRPCROUTES: (_GW + "v1/grpcroutes", rec.route, True),
    DNSENDPOINTS: ("/apis/externaldns.k8s.io/v1alpha1/dnsendpoints",
                   rec.dns_endpoint, True),
}


def base(kind):
    """The resource of a kind: ``services#1`` (the watch of a second
    label selector) is ``services``."""
    return kind.split("#", 1)[0]


class Store(Feed):
    """Tables and host indexes of the kinds watched."""

    def __init__(self, kinds, later=None):
        super().__init__(kinds, later)
        self.tables = {k: {} for k in self.kinds}     # key -> record
        self.by_host = {k: {} for k in self.kinds}    # host -> {key}
        self.svc_slices = {}        # (service, ns) -> {slice key}

    def _table(self, kind):
        return self.tables[kind]

    def apply(self, kind, events):
        """[(type, record)] of one kind: LIST, ADDED, MODIFIED, DELETED
        (then a ``watch.Key``)."""
        self.version += 1
        gen = self.gen[kind]
        for etype, r in events:
            key = (r.name, r.ns)
            if etype == "DELETED":
                self._delete(kind, key, record=True)
                continue
            r.mark = gen
            old = self.tables[kind].get(key)
            if old is not None:
                self._unindex(kind, key, old)
            self.tables[kind][key] = r
            index = self.by_host[kind]
            for h in r.hosts:
                index.setdefault(h, set()).add(key)
            if kind == SLICES:
                self.svc_slices.setdefault((r.service, r.ns), set()).add(key)

    def _delete(self, kind, key, record):
        old = self.tables[kind].pop(key, None)
        if old is not None:
            self.version += 1
            self._unindex(kind, key, old)

    def _unindex(self, kind, key, old):
        index = self.by_host[kind]
        for h in old.hosts:
            keys = index.get(h)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[h]
        if kind == SLICES:
            skey = (old.service, old.ns)
            keys = self.svc_slices.get(skey)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.svc_slices[skey]

    # -- reads ----------------------------------------------------------------

    def find(self, kind, keys):
        """The records of ``kind`` answering for any of the host names
        ``keys``, each once, in (host, name, namespace) order."""
        index = self.by_host.get(kind)
        table = self.tables.get(kind)
        if not index:
            return []
        out, seen = [], set()
        for k in keys:
            for key in sorted(index.get(k, ())):
                if key not in seen:
                    seen.add(key)
                    out.append(table[key])
        return out

    def get(self, kind, name, ns):
        table = self.tables.get(kind)
        return table.get((name, ns)) if table else None

    def slices_of(self, name, ns):
        """The EndpointSlices of a Service, in name order."""
        table = self.tables.get(SLICES) or {}
        return [table[k] for k in sorted(self.svc_slices.get((name, ns), ()))]
