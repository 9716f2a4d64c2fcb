"""The k8s_gateway plugin: answers from the store and the life cycle of
its watches.

A query in the plugin's zones is looked up by index keys: the name
itself and the name without the zone (``myservicea``,
``name.namespace``), then the same with the first label a wildcard
(``*.example.com``).  For each set of keys in that order, the
resources are asked in the order of ``resources``; the first that
knows an address (or, a DNSEndpoint, a TXT text) gives the answer.
Load balancer and Gateway addresses that are host names are resolved
with the system's resolver when asked for, as upstream does.
"""

import socket

from twisted.internet import defer, threads
from zope.interface import implementer

from corednstw import __version__
from corednstw.core import dnswire as w
from corednstw.core import logger, names
from corednstw.core.interfaces import IFedData, IInheritable, IReadiness
from corednstw.core.plugin import Fallthrough, Plugin, match, then
from corednstw.core.request import Response
from corednstw.engines.kubernetes import watch as wt
from corednstw.engines.kubernetes.feed import Watching
from corednstw_k8s_gateway import records as rec
from corednstw_k8s_gateway import store as st

NAME = "k8s_gateway"
USER_AGENT = "corednstw/%s k8s_gateway" % __version__
DEFAULT_RESOURCES = ("Ingress", "Service")
#: The resources and the kinds each watches.
KINDS = {
    "Ingress": (st.INGRESSES,),
    "Service": (st.SERVICES, st.SLICES),
    "HTTPRoute": (st.GATEWAYS, st.HTTPROUTES),
    "TLSRoute": (st.GATEWAYS, st.TLSROUTES),
    "GRPCRoute": (st.GATEWAYS, st.GRPCROUTES),
    "DNSEndpoint": (st.DNSENDPOINTS,),
    "Node": (st.NODES,),
}
#: TTL of the SOA, NS and the server's own address records.
TTL_SOA = 60
SOA_SERIAL = 12345


@implementer(IReadiness, IInheritable, IFedData)
class K8sGateway(Watching, Plugin):
    """The options (set by the directive), the store and its watches,
    and the answers."""

    name = NAME
    # The supervisor watches; workers answer from the store it feeds.
    runs_in = "both"

    def __init__(self, zones):
        self.zones = zones
        self.resources = None       # None: DEFAULT_RESOURCES
        self.ttl = 60
        self.apex = "dns1.kube-system"
        self.hostmaster = "hostmaster"
        self.secondary = ""
        self.conn_opts = {}
        self.fall = Fallthrough()
        self.ingress_classes = []
        self.gateway_classes = []
        self.service_selectors = []
        self.node_address_type = "InternalIP"
        self.store = None
        self.watchers = []
        self._inherited = False

    # -- configuration --------------------------------------------------------

    @property
    def active(self):
        """The resources answering, in the order given (names upstream
        does not know are left out)."""
        given = DEFAULT_RESOURCES if self.resources is None else \
            self.resources
        return [r for r in given if r in KINDS]

    def kinds(self):
        """The kinds to watch: each once; one Service watch per label
        selector (``services``, ``services#1``, ...)."""
        out = []
        for r in self.active:
            for kind in KINDS[r]:
                if kind == st.SERVICES:
                    n = max(1, len(self.service_selectors))
                    watched = [kind] + ["%s#%d" % (kind, i)
                                        for i in range(1, n)]
                else:
                    watched = [kind]
                out.extend(k for k in watched if k not in out)
        return out

    def _service_kinds(self):
        return [k for k in self.store.kinds if st.base(k) == st.SERVICES]

    # -- readiness and life cycle (inherit, fed_stores, worker_init:
    # the engine's Watching) --------------------------------------------------

    def ready(self):
        return self.store is not None and self.store.synced

    def prestart(self):
        """The lists begin while the rest of the server starts."""
        self._watch()

    def start(self):
        if self.resources is None:
            logger.warning(NAME, "No resources specified in config. Using "
                           "defaults: [%s]" % " ".join(DEFAULT_RESOURCES))
        else:
            for r in self.resources:
                if r not in KINDS:
                    logger.warning(NAME, "resource not found in static "
                                   "resources: %s" % r)
        if not self._inherited and self.store is None:
            self._watch()

    def _watch(self):
        """A new store, and a watch thread per kind filling it."""
        call = self.reactor.callFromThread
        self.store = st.Store(self.kinds())
        conn = _Connection(self.conn_opts, call)
        selectors = self.service_selectors or [None]
        self.watchers = []
        for kind in self.store.kinds:
            path, parse, optional = st.RESOURCES[st.base(kind)]
            sel = None
            if st.base(kind) == st.SERVICES:
                sel = selectors[self._service_kinds().index(kind)]
            self.watchers.append(wt.Watcher(
                conn, self.store, kind, call, path, parse, selector=sel,
                optional=optional))
        for wr in self.watchers:
            wr.start()

    def stop(self):
        for wr in self.watchers:
            wr.stop()
        self.watchers = []

    # -- lookups --------------------------------------------------------------

    def lookup(self, resource, keys):
        """(addresses, host names to resolve, TXT texts) ``resource``
        knows for the index ``keys``."""
        return getattr(self, "_" + resource.lower())(keys)

    def _ingress(self, keys):
        ips, hosts = [], []
        classes = self.ingress_classes
        for r in self.store.find(st.INGRESSES, keys):
            if classes and r.cls not in classes:
                continue
            ips.extend(r.ips)
            hosts.extend(r.lookups)
        return ips, hosts, []

    def _service(self, keys):
        """Services of all the selectors' watches, each once: ready
        endpoints when asked for, else the external IPs (which, as
        upstream, end the search), else the load balancer's."""
        ips, hosts, seen = [], [], set()
        for kind in self._service_kinds():
            for r in self.store.find(kind, keys):
                if (r.name, r.ns) in seen:
                    continue
                seen.add((r.name, r.ns))
                if r.endpoints:
                    for s in self.store.slices_of(r.name, r.ns):
                        ips.extend(s.ips)
                    continue
                if r.external:
                    return ips + list(r.external), hosts, []
                ips.extend(r.ips)
                hosts.extend(r.lookups)
        return ips, hosts, []

    def _routes(self, kind, keys):
        """The addresses of the parent Gateways of the routes (of the
        classes given, if any)."""
        ips, hosts = [], []
        classes = self.gateway_classes
        for r in self.store.find(kind, keys):
            for ns, name in r.parents:
                g = self.store.get(st.GATEWAYS, name, ns)
                if g is None or (classes and g.cls not in classes):
                    continue
                ips.extend(g.ips)
                hosts.extend(g.lookups)
        return ips, hosts, []

    def _httproute(self, keys):
        return self._routes(st.HTTPROUTES, keys)

    def _tlsroute(self, keys):
        return self._routes(st.TLSROUTES, keys)

    def _grpcroute(self, keys):
        return self._routes(st.GRPCROUTES, keys)

    def _dnsendpoint(self, keys):
        """The A/AAAA targets and TXT texts of the entries named by the
        keys."""
        ips, texts = [], []
        for r in self.store.find(st.DNSENDPOINTS, keys):
            for k in keys:
                got = r.entries.get(k)
                if got is not None:
                    ips.extend(got[0])
                    texts.extend(got[1])
        return ips, [], texts

    def _node(self, keys):
        want = self.node_address_type
        ips = []
        for r in self.store.find(st.NODES, keys):
            ips.extend(ip for ip in (rec.ip_text(a) for t, a in r.addrs
                                     if t == want) if ip is not None)
        return ips, [], []

    def _first(self, steps, i=0):
        """(addresses, texts) of the first step (resource, keys) with
        any; a Deferred while host names are being resolved."""
        while i < len(steps):
            ips, hosts, texts = self.lookup(*steps[i])
            i += 1
            if hosts:
                def resolved(more, ips=ips, texts=texts, i=i):
                    if ips or more or texts:
                        return ips + more, texts
                    return self._first(steps, i)
                return self._resolve(hosts).addCallback(resolved)
            if ips or texts:
                return ips, texts
        return [], []

    def _all(self, keys):
        """The addresses every resource knows for ``keys`` (the server's
        own: the apex and secondary hosts)."""
        ips, hosts = [], []
        for r in self.active:
            got = self.lookup(r, keys)
            ips.extend(got[0])
            hosts.extend(got[1])
        if not hosts:
            return ips
        return self._resolve(hosts).addCallback(lambda more: ips + more)

    def _resolve(self, hosts):
        """The addresses of host names, by the system's resolver in the
        reactor's thread pool; a name that fails adds none."""
        ds = [threads.deferToThreadPool(
            self.reactor, self.reactor.getThreadPool(), _addresses, n)
            for n in dict.fromkeys(hosts)]

        def done(results):
            return [ip for ok, got in results if ok for ip in got]
        return defer.DeferredList(ds, consumeErrors=True).addCallback(done)

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return self.next.serve(req)
        zcase = req.name[len(req.name) - len(zone):]
        if not self.ready():
            r = Response(w.SERVFAIL, plugin=NAME)
            r.error = "plugin/%s: could not sync required resources" % NAME
            return r
        root = False
        for z in self.zones:
            if qname == z:
                root = True
                break
            sub = _join(self.apex, z)
            if names.in_zone(qname, sub):
                return self._sub_apex(req, zone, zcase)
        steps = [(r, keys) for keys in key_sets(qname, zone)
                 for r in self.active]
        return then(self._first(steps), self._answer, req, zcase, root)

    def _answer(self, found, req, zcase, root):
        ips, texts = found
        if not ips and not texts and self.fall.through(req.qname):
            return self.next.serve(req)
        v4, v6 = _split(ips)
        qtype = req.qtype
        soa = [self.soa(zcase)]
        if qtype in (w.A, w.AAAA):
            mine, other = (v4, v6) if qtype == w.A else (v6, v4)
            if mine:
                return self._reply(0, [w.RR(req.name, qtype, self.ttl, rd)
                                       for rd in mine])
            # NODATA at the apex and for a name with the other family's
            # addresses (RFC 4074 section 3), else NXDOMAIN.
            rcode = 0 if root or other else w.NXDOMAIN
            return self._reply(rcode, authority=soa)
        if qtype == w.TXT:
            if not texts:
                return self._reply(0 if root else w.NXDOMAIN, authority=soa)
            return self._reply(0, [
                w.RR(req.name, w.TXT, self.ttl, w.txt_rdata(t))
                for t in dict.fromkeys(texts)])
        if qtype == w.SOA:
            return self._reply(0, soa)
        if qtype == w.NS and root:
            glue = self._own(zcase, secondary=True)
            return then(glue, lambda extra: self._reply(
                0, self.nameservers(zcase), additional=extra))
        return self._reply(0, authority=soa)

    def _sub_apex(self, req, zone, zcase):
        """Names under ``APEX.ZONE``: ``APEX.ZONE`` has this server's
        addresses (A and AAAA), anything below it does not exist."""
        base = req.qname[:-len(zone)].rstrip(".") if zone != "." else \
            req.qname.rstrip(".")
        soa = [self.soa(zcase)]
        if base != self.apex:
            return self._reply(w.NXDOMAIN, authority=soa)

        def done(own):
            answer = [rr.copy(name=req.name) for rr in own
                      if rr.rtype == req.qtype]
            if not answer:
                return self._reply(0, authority=soa)
            return self._reply(0, answer)
        return then(self._own(zcase, secondary=False), done)

    def _own(self, zcase, secondary):
        """The address records of this server (the Service named by the
        apex) and, for an NS answer, of the secondary's."""
        apexes = [(self.apex, _join(self.apex, zcase))]
        if secondary and self.secondary:
            apexes.append((self.secondary, _join(self.secondary, zcase)))
        found = [self._all([key]) for key, _ in apexes]

        def records(results):
            out = []
            for (_, owner), ips in zip(apexes, results):
                v4, v6 = _split(ips)
                out.extend(w.RR(owner, w.A, TTL_SOA, rd) for rd in v4)
                out.extend(w.RR(owner, w.AAAA, TTL_SOA, rd) for rd in v6)
            return out
        if any(isinstance(f, defer.Deferred) for f in found):
            return defer.gatherResults([
                f if isinstance(f, defer.Deferred) else defer.succeed(f)
                for f in found]).addCallback(records)
        return records(found)

    def _reply(self, rcode, answer=None, authority=None, additional=None):
        return Response(rcode, answer or [], authority or [],
                        additional or [], aa=True, plugin=NAME)

    def soa(self, zcase):
        return w.RR(zcase, w.SOA, TTL_SOA, w.soa_rdata(
            _join(self.apex, zcase), _join(self.hostmaster, self.apex, zcase),
            SOA_SERIAL, 7200, 1800, 86400, TTL_SOA))

    def nameservers(self, zcase):
        out = [w.RR(zcase, w.NS, TTL_SOA,
                    w.name_to_wire(_join(self.apex, zcase)))]
        if self.secondary:
            out.append(w.RR(zcase, w.NS, TTL_SOA,
                            w.name_to_wire(_join(self.secondary, zcase))))
        return out


class _Connection(wt.Connection):
    """The API connection of one k8s_gateway stanza: its log lines and
    its User-Agent name the plugin."""

    name = NAME

    def _build(self):
        client = super()._build()
        client.user_agent = USER_AGENT
        return client


# -- names --------------------------------------------------------------------

def _strip_dot(s):
    return s[:-1] if len(s) > 1 and s.endswith(".") else s


def _keys(qname, zone):
    """The name without its final dot, and without the zone when that
    differs (``a.b`` of ``a.b.example.com.``)."""
    short = _strip_dot(qname[:len(qname) - len(zone)])
    full = _strip_dot(qname)
    return [full, short] if short and short != full else [full]


def key_sets(qname, zone):
    """The keys of the name, then of its wildcard (the first label
    replaced by ``*``; the apex's is ``*.ZONE``)."""
    parts = _strip_dot(qname[:len(qname) - len(zone)]).split(".")
    parts[0] = "*"
    wild = ".".join(parts) + ("." + zone if zone != "." else ".")
    return [_keys(qname, zone), _keys(wild, zone)]


def _join(*labels):
    """dnsutil.Join: labels and a zone into one FQDN."""
    parts = [x.rstrip(".") for x in labels if x not in ("", ".")]
    return ".".join(parts) + "."


def _split(ips):
    """The A and AAAA rdata of addresses, each once, in order."""
    v4, v6 = [], []
    for ip in dict.fromkeys(ips):
        a = w.ip_rdata(ip)
        if a is not None:
            (v4 if a[1] == w.A else v6).append(a[2])
    return v4, v6


def _addresses(name):
    """getaddrinfo's addresses of ``name`` (run in a thread)."""
    out = []
    for _f, _t, _p, _c, addr in socket.getaddrinfo(name, None, 0,
                                                   socket.SOCK_STREAM):
        ip = rec.ip_text(addr[0])
        if ip is not None and ip not in out:
            out.append(ip)
    return out
