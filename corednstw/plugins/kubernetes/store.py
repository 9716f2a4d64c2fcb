"""The plugin's view of the cluster, on the reactor thread.

Watch threads hand over pages and event batches through the engine's
``feed.Feed`` (the queue drained a budget per reactor turn, relists
marked and swept, the sync state); here the records are indexed for the
answers: services by name and address, slices by service, pods by
address.  ``RESOURCES`` says where each kind is listed and how its JSON
becomes a record.
"""

import datetime
import time
from typing import Any

from corednstw.core import logger, metrics
from corednstw.engines.kubernetes.feed import Feed
from corednstw.plugins.kubernetes import records as rec

PROGRAMMING = metrics.histogram(
    "coredns_kubernetes_dns_programming_duration_seconds",
    "Histogram of the time (in seconds) it took to program a dns instance.",
    ("service_kind",), metrics.exponential(0.001, 2, 20))

SERVICES, SLICES, NAMESPACES, PODS, IMPORTS, MC_SLICES = (
    "services", "endpointslices", "namespaces", "pods", "serviceimports",
    "mcendpointslices")

#: kind -> (API path, record parser)
RESOURCES = {
    SERVICES: ("/api/v1/services", rec.service),
    SLICES: ("/apis/discovery.k8s.io/v1/endpointslices",
             rec.endpoint_slice),
    NAMESPACES: ("/api/v1/namespaces", rec.namespace),
    PODS: ("/api/v1/pods", rec.pod),
    IMPORTS: ("/apis/multicluster.x-k8s.io/v1alpha1/serviceimports",
              rec.service_import),
    MC_SLICES: ("/apis/discovery.k8s.io/v1/endpointslices",
                lambda o: rec.endpoint_slice(o, multicluster=True)),
}

#: kind -> the keys its parser reads (records.SERVICE_KEYS...)
KEYS = {SERVICES: rec.SERVICE_KEYS, SLICES: rec.SLICE_KEYS,
        NAMESPACES: rec.NAMESPACE_KEYS, PODS: rec.POD_KEYS,
        IMPORTS: rec.IMPORT_KEYS, MC_SLICES: rec.SLICE_KEYS}



def typed(kind, zonal=False):
    """For a Watcher's ``typed``: the item Struct and parser of ``kind``
    (typed.py), imported in the watch thread; None without msgspec."""
    try:
        from corednstw.plugins.kubernetes import typed as ty
    except ImportError:
        return None
    return ty.parser(kind, zonal)


#: A record's (name, namespace).
Key = tuple[str, str]


class Store(Feed):
    """Services, slices, namespaces, pods and ServiceImports, indexed."""

    def __init__(self, kinds=(SERVICES, SLICES, NAMESPACES), clock=time.time,
                 later=None):
        super().__init__(kinds, later)
        self.clock = clock
        self.modified = 0
        self.mc_modified = 0
        self.ext_modified = 0       # services' external addresses
        # Keys are (name, namespace) pairs.
        self.namespaces: dict[str, rec.Namespace] = {}
        self.services: dict[Key, rec.Service] = {}
        self.svc_by_ip: dict[str, list[Key]] = {}
        # external address -> services
        self.svc_by_ext: dict[str, list[Key]] = {}
        self.slices: dict[Key, rec.Slice] = {}
        # (svc name, ns) -> {slice name: Slice}
        self.svc_slices: dict[Key, dict[str, rec.Slice]] = {}
        # ip -> {(slice name, ns)}
        self.ep_by_ip: dict[str, set[Key]] = {}
        self.pods: dict[Key, rec.Pod] = {}
        self.pods_by_ip: dict[str, set[Key]] = {}
        # ServiceImports, and their slices
        self.imports: dict[Key, rec.Service] = {}
        self.mc_slices: dict[Key, rec.Slice] = {}
        self.mc_svc_slices: dict[Key, dict[str, rec.Slice]] = {}
        # (svc name, ns) -> answer cache
        self.cache: dict[Key, Any] = {}
        self.listeners = []         # callables(kind) after each change
        # kind -> its table (keys and values differ by kind)
        self._tables: dict[str, dict[Any, Any]] = {
            SERVICES: self.services, SLICES: self.slices,
            NAMESPACES: self.namespaces, PODS: self.pods,
            IMPORTS: self.imports, MC_SLICES: self.mc_slices}

    def _table(self, kind):
        return self._tables[kind]

    # -- changes --------------------------------------------------------------

    def apply(self, kind, events):
        """Apply [(type, record)]: type LIST (a list page item), ADDED,
        MODIFIED or DELETED; records from records.py."""
        self.version += 1
        gen = self.gen[kind]
        changed = False
        upsert = self._upsert
        for etype, r in events:
            if etype == "DELETED":
                self._delete(kind, self._key(kind, r), record=True)
                continue
            r.mark = gen
            changed = upsert(kind, r) or changed
        if changed:
            self._touch(kind)

    @staticmethod
    def _key(kind, r):
        if kind == NAMESPACES:
            return r.name
        return (r.name, r.ns)

    def _touch(self, kind):
        if kind in (IMPORTS, MC_SLICES):
            self.mc_modified = int(self.clock())
        else:
            self.modified = int(self.clock())

    def _upsert(self, kind, r):
        """Add or replace ``r``; True when that changes an answer (the
        caller marks the kind modified, once per batch)."""
        key = self._key(kind, r)
        table = self._tables[kind]
        old = table.get(key)
        if kind == NAMESPACES:
            table[key] = r
            return old is None
        if kind == PODS:
            if old is not None:
                self._unindex(self.pods_by_ip, old.ip, key)
            table[key] = r
            if r.ip:
                self.pods_by_ip.setdefault(r.ip, set()).add(key)
            return old is None or old.ip != r.ip
        same = old is not None and r.same(old)
        if kind == SERVICES:
            by_ip = self.svc_by_ip
            if old is not None:
                for a in old.addrs:
                    self._unindex_list(by_ip, a[0], key)
            table[key] = r
            for a in r.addrs:
                by_ip.setdefault(a[0], []).append(key)
            self._index_ext(key, old, r)
            self.cache.pop(key, None)
        elif kind == IMPORTS:
            table[key] = r
        else:
            self._set_slice(kind, key, old, r)
            if kind == SLICES:
                self._latency(r)
        return not same

    def _set_slice(self, kind, key, old, r):
        by_svc = self.svc_slices if kind == SLICES else self.mc_svc_slices
        if old is not None:
            self._remove_slice(kind, key, old, by_svc)
        self._table(kind)[key] = r
        by_svc.setdefault((r.service, r.ns), {})[r.name] = r
        if kind == SLICES:
            for e in r.eps:
                self.ep_by_ip.setdefault(e.ip, set()).add(key)
            self.cache.pop((r.service, r.ns), None)

    def _remove_slice(self, kind, key, old, by_svc):
        skey = (old.service, old.ns)
        group = by_svc.get(skey)
        if group is not None:
            group.pop(old.name, None)
            if not group:
                del by_svc[skey]
        if kind == SLICES:
            for e in old.eps:
                self._unindex(self.ep_by_ip, e.ip, key)
            self.cache.pop(skey, None)

    def _delete(self, kind, key, record):
        table = self._table(kind)
        old = table.pop(key, None)
        if old is None:
            return
        self._touch(kind)
        if kind == SERVICES:
            for ip in old.ips:
                self._unindex_list(self.svc_by_ip, ip, key)
            self._index_ext(key, old, None)
            self.cache.pop(key, None)
        elif kind == PODS:
            self._unindex(self.pods_by_ip, old.ip, key)
        elif kind in (SLICES, MC_SLICES):
            by_svc = self.svc_slices if kind == SLICES else self.mc_svc_slices
            self._remove_slice(kind, key, old, by_svc)
            if record and kind == SLICES:
                self._latency(old)

    def _index_ext(self, key, old, new):
        """Index a service's external addresses (k8s_external's reverse
        lookups); a change of them is a change of the external zone."""
        before = old.ext if old is not None else ()
        after = new.ext if new is not None else ()
        if before == after:
            return
        for ip in before:
            self._unindex_list(self.svc_by_ext, ip, key)
        for ip in after:
            self.svc_by_ext.setdefault(ip, []).append(key)
        self.ext_modified = int(self.clock())

    @staticmethod
    def _unindex(index, ip, key):
        s = index.get(ip)
        if s is not None:
            s.discard(key)
            if not s:
                del index[ip]

    @staticmethod
    def _unindex_list(index, ip, key):
        s = index.get(ip)
        if s is not None:
            if key in s:
                s.remove(key)
            if not s:
                del index[ip]

    def _latency(self, sl):
        """coredns_kubernetes_dns_programming_duration_seconds: from the
        slice's last-change-trigger-time to now, when exactly one Service
        backs it (so never headless_without_selector, as in CoreDNS)."""
        if not sl.trigger:
            return
        svc = self.services.get((sl.service, sl.ns))
        if svc is None:
            return
        try:
            tt = datetime.datetime.fromisoformat(sl.trigger).timestamp()
        except ValueError:
            logger.warning("kubernetes", "DnsProgrammingLatency cannot be "
                        "calculated for Endpoints '%s/%s'; invalid %r "
                        "annotation RFC3339 value of %r" % (
                            sl.ns, sl.name, rec.TRIGGER_TIME, sl.trigger))
            return
        kind = "headless_with_selector" if svc.headless else "cluster_ip"
        PROGRAMMING.observe((kind,), max(0.0, self.clock() - tt))

    # -- reads ----------------------------------------------------------------

    def slices_of(self, name, ns, mc=False):
        """The slices of a service, in name order (a stable answer order)."""
        group = (self.mc_svc_slices if mc else self.svc_slices).get((name, ns))
        if not group:
            return ()
        if len(group) == 1:
            return tuple(group.values())
        return tuple(group[k] for k in sorted(group))
