"""The kubernetes plugin: answers (CoreDNS's handler, kubernetes, ns and
the backend_lookup rules they rely on) and the life cycle of its watches
(CoreDNS's controller start-up: watch threads, startup wait, reloads
that keep the watches).  Answers off the address path are in
``answers``, query-name parsing in ``names``."""

import functools
from typing import Optional

from twisted.internet import defer
from zope.interface import implementer

from corednstw import __version__
from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.interfaces import (
    IAutoPather,
    IExternal,
    IFedData,
    IInheritable,
    IKeptAnswers,
    IMetadataProvider,
    IReadiness,
    ITransferer,
)
from corednstw.core.names import is_subdomain
from corednstw.core.plugin import Plugin, is_deferred, match
from corednstw.core.request import (
    Response,
    address_pieces,
    pieces,
    remember,
)
from corednstw.engines.kubernetes import watch as wt
from corednstw.engines.kubernetes.feed import Watching
from corednstw.engines.system import read_search
from corednstw.engines.transfer import Outgoing
from corednstw.plugins.kubernetes import answers
from corednstw.plugins.kubernetes import external as ext
from corednstw.plugins.kubernetes import records as rec
from corednstw.plugins.kubernetes import store as st
from corednstw.plugins.kubernetes.answers import SRV_HEADER
from corednstw.plugins.kubernetes.names import (
    NAME_ERROR,
    is_reverse,
    parse_request,
    port_ok,
)
from corednstw.plugins.metadata import set_value

DNS_SCHEMA_VERSION = "1.1.0"
TXT_VERSION = w.txt_rdata(DNS_SCHEMA_VERSION)
MAX_CNAME_CHAIN = 10
RESOLV_CONF = "/etc/resolv.conf"
USER_AGENT = "corednstw/" + __version__
#: Queries held while the first lists come in, at most (past it:
#: SERVFAIL at once, as after the startup timeout).
HOLD_MAX = 10000
#: Outcomes of the general path kept per store version, at most (the
#: whole set starts afresh when full).
ANSWERS_KEPT = 50000


@implementer(IReadiness, ITransferer, IMetadataProvider, IInheritable,
             IAutoPather, IExternal, IFedData, IKeptAnswers)
class Kubernetes(Watching, Plugin):
    """The plugin: its options (set by the directive), its store and
    watches, and the answers from them."""

    name = "kubernetes"
    # The supervisor watches; workers answer from the store it feeds.
    runs_in = "both"

    def __init__(self, zones):
        self.zones = zones
        self.primary = next(z for z in zones if not is_reverse(z))
        # Reverse zones hold no service names: never the fast path.
        self._reverse = frozenset(z for z in zones if is_reverse(z))
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
        self.upstream = None        # None: through the server itself
        self.transfer_to = []       # kubernetes' own ``transfer to``
        self._xfr = None
        #: made by the first start (prestart), or inherited
        self.store: Optional[st.Store] = None
        self.local_ips = []
        self.watchers = []
        self._inherited = False
        self._soa = {}
        # A, AAAA: qname -> rdata list
        self._fast: tuple[dict[str, list[bytes]], dict[str, list[bytes]]] = (
            {}, {})
        self._fast_version = -1
        #: (name as asked, qtype, qclass) -> the general path's outcome
        #: (see serve), for the store's version _fast_version
        self._answers: dict[tuple[str, int, int], tuple] = {}
        #: question bytes -> the answer cut for the cache (kept_answer),
        #: or False when it has no shape the cache takes
        self._pieces: dict[bytes, object] = {}
        self._held = None           # Deferreds of queries waiting for sync
        self.autopath_search = []   # the host's search list (autopath)
        self._search = {}           # (namespace, zone) -> search path

    # -- readiness ------------------------------------------------------------

    def ready(self):
        return self.store is not None and self.store.synced

    @property
    def synced(self):
        return self.store is not None and self.store.synced

    # -- life cycle -----------------------------------------------------------

    def worker_init(self):
        super().worker_init()
        self._timer = None

    def prestart(self):
        """The first start of the server: the lists begin now, so the
        API server's work and the download overlap the rest of the
        start-up (the other plugins, the listeners)."""
        self._watch()

    def start(self):
        self.local_ips = self._bound_ips()
        self.autopath_search = _host_search()
        self._search = {}
        self._xfr = self._outgoing()
        if self._inherited:
            return None
        if self.store is None:
            self._watch()
        return self._wait_synced()

    def _watch(self):
        """A new store, and a watch thread per kind filling it."""
        call = self.reactor.callFromThread
        self.store = self.make_store()
        conn = _Connection(self.conn_opts, call)
        self.watchers = [
            wt.Watcher(conn, self.store, kind, call, **self._watch_args(kind))
            for kind in self.store.kinds]
        for wr in self.watchers:
            wr.start()

    def _outgoing(self):
        """For ``transfer to``: outgoing transfers of the plugin's zones,
        answered from the block's Transferers (this plugin among them)
        as ``transfer`` would answer them."""
        if not self.transfer_to:
            return None
        out = Outgoing()
        out.allow(self.zones, self.transfer_to)
        return out

    def _transferers(self):
        return [] if self.block is None else self.block.find(ITransferer)

    def make_store(self):
        kinds = [st.SERVICES, st.NAMESPACES]
        if self.endpoints:
            kinds.insert(1, st.SLICES)
        if self.pod_mode == "verified":
            kinds.append(st.PODS)
        if self.multicluster:
            kinds += [st.IMPORTS, st.MC_SLICES]
        return st.Store(kinds)

    def _watch_args(self, kind):
        path, parse = st.RESOURCES[kind]
        args = {"path": path, "parse": parse, "keys": st.KEYS[kind],
                "typed": functools.partial(st.typed, kind, self.zonal)}
        if kind in (st.SERVICES, st.SLICES, st.PODS):
            args["selector"] = self.labels
        if kind == st.NAMESPACES:
            args["selector"] = self.namespace_labels
        if kind == st.IMPORTS:
            args["selector"] = self.namespace_labels
        if kind == st.PODS:
            args["field_selector"] = ("status.phase!=Succeeded,"
                                      "status.phase!=Failed,"
                                      "status.phase!=Unknown")
        if kind == st.SLICES and self.zonal:
            args["parse"] = lambda o: rec.endpoint_slice(o, zonal=True)
        if kind == st.MC_SLICES:
            s = rec.MC_SERVICE_NAME_LABEL
            args["selector"] = s + "," + self.labels if self.labels else s
        return args

    def _bound_ips(self):
        """Non-loopback addresses the server listens on (bind), else the
        host's interface addresses (CoreDNS's boundIPs)."""
        hosts = self.block.bind if self.block is not None else None
        ips = []
        if hosts:
            for h in hosts:
                a = w.ip_rdata(h)
                if a is not None:
                    ips.append(a[0])
        else:
            ips = rec.local_ips()
        return [ip for ip in ips
                if not ip.startswith("127.") and ip != "::1"]

    def _wait_synced(self):
        """Fires once synced or after startup_timeout.

        The listeners are open meanwhile (other blocks serve at once);
        a query this plugin would answer NXDOMAIN is held until then and
        asked again (CoreDNS does not listen before the sync, so no
        client gets a negative answer the lists had not yet ruled out).
        After the timeout, unsynced NXDOMAINs become SERVFAIL."""
        d: defer.Deferred[None] = defer.Deferred()
        reactor = self.reactor
        start = reactor.seconds()
        state = {"log": start + 0.5}
        self._held = []

        def check():
            if d.called:
                return
            store = self.store
            assert store is not None    # start() watches before waiting
            if store.synced:
                self._release()
                d.callback(None)
                return
            now = reactor.seconds()
            if now - start >= self.startup_timeout:
                logger.warning(self.name,
                            "starting server with unsynced Kubernetes API")
                self._release()
                d.callback(None)
                return
            if now >= state["log"]:
                state["log"] = now + 0.5
                logger.info(self.name, "waiting for Kubernetes API before "
                         "starting server")
            self._timer = reactor.callLater(0.01, check)
        check()
        return d

    def _release(self):
        """Ask the held queries again (synced, timed out or stopping)."""
        held, self._held = self._held, None
        for d in held or ():
            d.callback(None)

    def _hold(self, req):
        """A Deferred answer of ``req`` once the first sync is over; None
        when no longer waiting for it (or too many are held)."""
        held = self._held
        if held is None or len(held) >= HOLD_MAX:
            return None
        d: defer.Deferred[None] = defer.Deferred()
        held.append(d)
        return d.addCallback(lambda _: self.serve(req))

    def stop(self):
        t = getattr(self, "_timer", None)
        if t is not None and t.active():
            t.cancel()
        self._release()
        for wr in self.watchers:
            wr.stop()
        self.watchers = []

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        store = self.store
        assert store is not None        # queries come once started
        qtype = req.qtype
        if qtype == w.A or qtype == w.AAAA:
            # Answers of plain service names seen since the store last
            # changed: one dict lookup (filled by the fast path below).
            if store.version == self._fast_version:
                rds = self._fast[qtype == w.AAAA].get(req.qname)
                if rds is not None:
                    name = req.name
                    ttl = self.ttl
                    return Response(0, [w.RR(name, qtype, ttl, rd)
                                        for rd in rds], aa=True,
                                    plugin="kubernetes")
            else:
                self._new_version(store)
        elif store.version != self._fast_version:
            self._new_version(store)
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return self.next.serve(req)
        if qtype == w.AXFR or qtype == w.IXFR:
            # Without ``transfer to``, or what it does not answer: REFUSED.
            resp = None
            if self._xfr is not None:
                resp = self._xfr.answer(req, self._transferers)
            if resp is None:
                resp = Response(w.REFUSED, plugin=self.name)
            return resp
        name = req.name
        zcase = _zone_as_asked(name, zone)
        base = _below(qname, zone)
        # Fast path: A/AAAA of a plain service name.
        if qtype == w.A or qtype == w.AAAA:
            rds = self._plain(qname, qtype, zone, base)
            if rds is not None:
                ttl = self.ttl
                return Response(0, [w.RR(name, qtype, ttl, rd)
                                    for rd in rds], aa=True,
                                plugin=self.name)
        out = self._outcome(req, qtype, zone, zcase, base)
        if out is None:
            return Response(w.SERVFAIL, plugin=self.name)
        if is_deferred(out):
            return out.addCallback(self._finish, req, zone, zcase)
        return self._finish(out, req, zone, zcase)

    def _new_version(self, store):
        """The store changed: what was kept for its last version goes."""
        self._fast = ({}, {})
        self._answers = {}
        self._pieces = {}
        self._fast_version = store.version

    def _outcome(self, req, qtype, zone, zcase, base):
        """The general path's outcome for ``req`` (see ``_answer``), or a
        Deferred; None when working it out failed (logged).

        Kept for this name as written and type until the store changes
        (see ``_outcome_kept``): the records' parts, made into new records
        for each answer (outer plugins may change them)."""
        name = req.name
        key = (name, qtype, req.qclass)
        keep = _outcome_kept(base)
        if keep:
            kept = self._answers.get(key)
            if kept is not None:
                return _unpack(kept)
        try:
            out = self._answer(req, qtype, zone, zcase, base)
        except Exception as e:
            logger.error(self.name, "%s: %s" % (name, e))
            return None
        if keep and not is_deferred(out):
            answers = self._answers
            if len(answers) >= ANSWERS_KEPT:
                answers.clear()
            answers[key] = _pack(out)
        return out

    def _plain(self, qname, qtype, zone, base):
        """The A or AAAA rdata of a plain service name (``base``, the
        name below ``zone``), kept in the fast path's table, or None when
        the name is not one (serve's fast path)."""
        if base.endswith(".svc") and base.count(".") == 2 and \
                zone not in self.multicluster and zone not in self._reverse:
            store = self.store
            assert store is not None        # queries come once started
            svc_name, ns, _ = base.split(".")
            svc = store.services.get((svc_name, ns))
            if (svc is not None and svc.kind != rec.EXTERNAL
                    and not self.ignore_empty and self.exposed(ns)):
                rds = self._addresses(svc, qtype)
                if rds:
                    self._fast[qtype == w.AAAA][qname] = rds
                    return rds
        return None

    def kept_answer(self, req):
        """IKeptAnswers: the answer ``serve`` gives ``req``, cut for the
        cache (and kept until the store changes), when serve gives it
        itself; serve's own answer when it cannot be cut (or comes
        later); None when serve would pass the query on (a fallthrough
        NXDOMAIN, another zone) or hold it (before the first lists).

        A kept cut is one dict lookup.  Otherwise the work is serve's,
        done once here: a plain service's addresses cut as they are
        looked up, the general path's outcome worked out (and kept, as
        serve keeps it) and cut.  The answers do not depend on the
        query's flags."""
        store = self.store
        if store is None:
            return None
        if store.version != self._fast_version:
            self._new_version(store)
        key = req.data[12:req.qend]
        got = self._pieces.get(key)
        if got is not None:
            return got or None
        qtype = req.qtype
        if not self.synced or qtype == w.AXFR or qtype == w.IXFR:
            return None
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return None         # serve passes it on
        base = _below(qname, zone)
        if qtype == w.A or qtype == w.AAAA:
            rds = self._fast[qtype == w.AAAA].get(qname)
            if rds is None:
                rds = self._plain(qname, qtype, zone, base)
            if rds is not None:
                if req.qclass != w.CLASS_IN:
                    return None     # serve's records are of class IN
                return remember(self._pieces, key,
                                address_pieces(req, rds, self.ttl,
                                               self.name), ANSWERS_KEPT)
        zcase = _zone_as_asked(req.name, zone)
        out = self._outcome(req, qtype, zone, zcase, base)
        if out is None:
            return Response(w.SERVFAIL, plugin=self.name)
        if is_deferred(out):
            # CNAMEs followed elsewhere: an answer (rcode 0), never a
            # query passed on.
            return out.addCallback(self._finish, req, zone, zcase)
        if out[0] == NAME_ERROR and self.fall is not None and \
                self.fall.through(qname):
            return None
        resp = self._finish(out, req, zone, zcase)
        got = pieces(req, resp)
        if _outcome_kept(base):
            remember(self._pieces, key, got or False, ANSWERS_KEPT)
        return resp if got is None else got

    def keep_answer(self, req, cut):
        """IKeptAnswers: ``cut``, the answer serve has just given ``req``
        (through the chain), kept for kept_answer when serve keeps that
        answer itself."""
        store = self.store
        if store is not None and store.version == self._fast_version and \
                self._keeps(req):
            remember(self._pieces, req.data[12:req.qend], cut,
                     ANSWERS_KEPT)

    def _keeps(self, req):
        """Whether serve answers ``req`` itself from what it keeps for the
        store's version (it neither works the answer out afresh nor
        passes the query on)."""
        qtype = req.qtype
        if (qtype == w.A or qtype == w.AAAA) and \
                req.qname in self._fast[qtype == w.AAAA]:
            return True
        out = self._answers.get((req.name, qtype, req.qclass))
        if out is None:
            return False
        return out[0] != NAME_ERROR or (
            self.synced and (self.fall is None
                             or not self.fall.through(req.qname)))

    def _addresses(self, svc, qtype):
        """A or AAAA rdata of a service's plain name (cached per service)."""
        store = self.store
        assert store is not None        # queries come once started
        cache = store.cache
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
            store = self.store
            assert store is not None    # queries come once started
            for sl in store.slices_of(svc.name, svc.ns):
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
            if not self.synced:
                # Nothing is known not to exist before the first lists
                # are in: never NXDOMAIN, not even the next plugin's
                # (CoreDNS does not listen until then).
                held = self._hold(req)
                if held is not None:
                    return held
                return Response(w.SERVFAIL,
                                authority=[self.soa_rr(zone, zcase)],
                                aa=True, plugin=self.name)
            if self.fall is not None and self.fall.through(req.qname):
                return self.next.serve(req)
            return Response(w.NXDOMAIN, authority=[self.soa_rr(zone, zcase)],
                            aa=True, plugin=self.name)
        if rcode:
            return Response(rcode, plugin=self.name)
        if not answer:
            return Response(0, authority=[self.soa_rr(zone, zcase)],
                            aa=True, plugin=self.name)
        return Response(0, answer, None, extra, aa=True, plugin=self.name,
                        tc=tc)

    def serial(self, zone):
        """The SOA serial: the Unix time of the last change."""
        store = self.store
        assert store is not None        # asked once started
        return (store.mc_modified if zone in self.multicluster
                else store.modified) & 0xFFFFFFFF

    def soa_rr(self, zone, zcase):
        serial = self.serial(zone)
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

    # -- the general path -----------------------------------------------------

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
            found = self.entries(qname, zone, zcase, base)
            if found != NAME_ERROR and (found or (
                    self.zonal and self._zonal_name(base, zone))):
                return 0, [], [], False
            return NAME_ERROR, [], [], False
        if qtype == w.SRV:
            return self._srv(req, zone, zcase, base)
        if qtype == w.PTR:
            return answers.ptr(self, req, zone, zcase, base)
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
                return 0, [self.soa_rr(zone, zcase)], [], False
            return 0, [], [], False
        if qtype == w.NS and qname == zone:
            return answers.ns(self, req, zone, zcase)
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
                    for t, host, rd, _ in answers.ns_addrs(self, zone, zcase)
                    if t == want]
        return self.entries(qname, zone, zcase, base)

    def entries(self, qname, zone, zcase, base):
        mc = zone in self.multicluster
        r = parse_request(base, mc, self.zonal)
        if r == NAME_ERROR:
            return NAME_ERROR
        if not r.kind:
            return []
        if is_reverse(qname):
            return NAME_ERROR
        if not self.exposed(r.namespace):
            return NAME_ERROR
        if r.kind == "pod":
            return self._pods(r)
        return self._find(r, zcase, mc)

    def exposed(self, ns):
        if self.namespaces and ns not in self.namespaces:
            return False
        store = self.store
        assert store is not None        # queries come once started
        return ns in store.namespaces

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
        a = w.ip_rdata(text)
        if mode == "insecure":
            if a is None:
                return NAME_ERROR
            return [(a[1], text, a[2], 0, None)]
        store = self.store
        assert store is not None        # queries come once started
        out = []
        for key in store.pods_by_ip.get(text, ()):
            if key[1] == r.namespace and a is not None:
                out.append((a[1], text, a[2], 0, None))
        return out or NAME_ERROR

    def _find(self, r, zcase, mc):
        """CoreDNS's findServices / findMultiClusterServices."""
        if not r.service:
            return []
        store = self.store
        assert store is not None        # queries come once started
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
            if w.ip_rdata(host) is not None:
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
                            if port_ok(r, p):
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
            if not port_ok(r, p):
                continue
            found = True
            for t, rd, ip in ((x[1], x[2], x[0]) for x in svc.addrs):
                out.append((t, ip, rd, p[2], target))
        return out if found else NAME_ERROR

    # -- address records, CNAMEs of ExternalName services ---------------------

    def _address(self, req, qtype, qname, name, zone, zcase, base, prev):
        """CoreDNS's plugin.A/AAAA: (rcode, records, [], tc), or a
        Deferred when a CNAME target has to be resolved elsewhere."""
        if qname == zone:
            found = []
        else:
            found = self._services(qname, zone, zcase, base, qtype)
        if found == NAME_ERROR:
            return NAME_ERROR, [], [], False
        records: list[w.RR] = []
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
        the whole server, CoreDNS's upstream, or the ``upstream``
        addresses) or behind another Deferred."""
        lookup = self._lookup
        ds = []
        for _, cname, target in pending:
            if isinstance(target, defer.Deferred):
                ds.append(target.addCallback(_after_cname, cname))
            else:
                ds.append(lookup(target, qtype, parent=req).addCallback(
                    _after_cname_upstream, cname))

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

    def _lookup(self, target, qtype, parent):
        """A Deferred Response for ``target``: from the ``upstream``
        addresses when given, else through the server itself."""
        if self.upstream is not None:
            return self.upstream.lookup(self.reactor, target, qtype)
        return self.block.server.lookup(target, qtype, parent=parent)

    # -- SRV ------------------------------------------------------------------

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
                answer.append(w.RR(name, w.SRV, ttl, SRV_HEADER.pack(
                    0, weight, port) + w.name_to_wire(target)))
            if (target.lower(), host) not in dup:
                dup.add((target.lower(), host))
                extra.append(w.RR(target, t, ttl, rd))
        return 0, answer, extra, False

    # -- zone transfers (the transfer plugin's interface) ---------------------

    def transfer_records(self, zone, serial):
        """CoreDNS's Transfer (see answers.transfer)."""
        return answers.transfer(self, zone, serial)

    # -- autopath (the autopath plugin's interface) ---------------------------

    def autopath(self, req):
        """The search path of the client's pod (CoreDNS's AutoPath): its
        namespace's, the cluster's, then the host's; None when the name
        is outside our zones or the client is no pod we know (which
        needs ``pods verified``)."""
        zone = match(self.zones, req.qname)
        if zone is None or self.pod_mode != "verified":
            return None
        pod = self._client_pod(req.client)
        if pod is None:
            return None
        key = (pod.ns, zone)
        search = self._search.get(key)
        if search is None:
            if len(self._search) > 4096:
                self._search.clear()
            if zone == ".":
                search = [pod.ns + ".svc.", "svc.", "."]
            else:
                search = [pod.ns + ".svc." + zone, "svc." + zone, zone]
            search = self._search[key] = (search + self.autopath_search
                                          + [""])
        return search

    def _client_pod(self, ip):
        store = self.store
        if store is None:
            return None
        keys = store.pods_by_ip.get(ip)
        if not keys:
            return None
        return store.pods.get(min(keys))

    # -- external zones (the k8s_external plugin's interface) -----------------

    def external(self, req, zone, headless):
        """The services behind ``req``'s name in the external ``zone``
        (see kubernetes.external)."""
        return ext.external(self, req, zone, headless)

    def external_address(self, zone, headless):
        return ext.addresses(self, zone, headless)

    def external_services(self, zone, headless):
        return ext.services(self, zone, headless)

    def external_serial(self, zone):
        store = self.store
        assert store is not None        # asked once started
        return store.ext_modified & 0xFFFFFFFF

    # -- metadata (the metadata plugin's interface) ---------------------------

    def metadata(self, req):
        """Publish kubernetes/... for the metadata plugin: the client pod
        (with ``pods verified``) and the parts of the query name."""
        if self.pod_mode == "verified":
            pod = self._client_pod(req.client)
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
        base = _below(qname, zone)
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


class _Connection(wt.Connection):
    """The watches' API client, introducing itself to the API server as
    CoreDNS does with its own name and version."""

    def _build(self):
        client = super()._build()
        client.user_agent = USER_AGENT
        return client


def _host_search():
    """The host's search list, appended to every pod's (CoreDNS reads
    /etc/resolv.conf for it at setup)."""
    try:
        return read_search(RESOLV_CONF)
    except OSError:
        return []


def _below(qname, zone):
    """The part of ``qname`` (lower case) below ``zone``: "" at the
    apex."""
    if zone == ".":
        return qname[:-1]
    return qname[:-len(zone) - 1] if qname != zone else ""


def _zone_as_asked(name, zone):
    """``zone`` as the question wrote it (``name`` in its own case)."""
    return name[len(name) - len(zone):] if zone != "." else "."


def _outcome_kept(base):
    """Whether the general path keeps its outcome for a name ``base``
    below the zone: not the apex or ns.dns, which answer with this
    server's own addresses."""
    return bool(base) and not base.startswith("ns.dns")


def _join(label, zone):
    return label + "." if zone == "." else label + "." + zone


def _pack(out):
    """An outcome of the general path, (rcode, answer, extra, tc), with
    its records as tuples of their parts."""
    rcode, answer, extra, tc = out
    return (rcode,
            tuple((r.name, r.rtype, r.ttl, r.rdata, r.rclass)
                  for r in answer),
            tuple((r.name, r.rtype, r.ttl, r.rdata, r.rclass)
                  for r in extra), tc)


def _unpack(kept):
    """The outcome _pack kept, with new records."""
    rcode, answer, extra, tc = kept
    RR = w.RR
    return (rcode, [RR(n, t, ttl, rd, c) for n, t, ttl, rd, c in answer],
            [RR(n, t, ttl, rd, c) for n, t, ttl, rd, c in extra], tc)


def _after_cname(out, cname):
    """A CNAME followed inside the plugin: its records after ``cname``
    (no truncation), or None when the target had none."""
    return ([cname] + out[1], False) if out[0] == 0 and out[1] else None


def _after_cname_upstream(resp, cname):
    """A CNAME followed through the server or the upstream: its answer
    after ``cname``, and whether it was truncated; None without one."""
    if resp is None:
        return None
    return [cname] + list(resp.answer), resp.tc
