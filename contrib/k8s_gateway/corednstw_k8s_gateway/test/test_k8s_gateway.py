"""k8s_gateway's Corefile syntax (upstream's setup cases and error
texts), its records, and its answers from a store fed as the watches
feed it, through corednstw's configuration with no sockets
(``trial corednstw_k8s_gateway``).  The repository's suite serves it
over the wire against a list/watch API server
(tests/test_contrib_k8s_gateway.py)."""

import dns.message
import dns.rdatatype
from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import Request, Response, make_query
from corednstw.engines.kubernetes.watch import Key
from corednstw.service.app import App
from corednstw_k8s_gateway import records as rec
from corednstw_k8s_gateway import store as st
from corednstw_k8s_gateway.plugin import K8sGateway, key_sets

ZONE = "example.com."
SOA = ("example.com. 60 IN SOA dns1.kube-system.example.com. "
       "hostmaster.dns1.kube-system.example.com. 12345 7200 1800 86400 60")


def build(body, keys=".:0"):
    """The configuration of a block holding ``body``."""
    app = App(None, reactor=task.Clock(), dns_port=0,
              text="%s {\n%s\n}\n" % (keys, body))
    app.config = app.load()
    return app


def gateway_of(app):
    return app.config.blocks[0].plugin("k8s_gateway")


# -- objects as the API server sends them ------------------------------------

def meta(name, ns, labels=None, annotations=None):
    m = {"name": name, "namespace": ns}
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    return m


def lb(*entries):
    return {"loadBalancer": {"ingress": [
        {"ip": e} if e[0].isdigit() or ":" in e else {"hostname": e}
        for e in entries]}}


def ingress(name, hosts, *addresses, ns="default", cls=None, labels=None):
    spec = {"rules": [{"host": h} for h in hosts]}
    if cls:
        spec["ingressClassName"] = cls
    return {"metadata": meta(name, ns, labels), "spec": spec,
            "status": lb(*addresses)}


def service(name, *addresses, ns="default", type="LoadBalancer",
            annotations=None, external=(), labels=None):
    spec = {"type": type}
    if external:
        spec["externalIPs"] = list(external)
    return {"metadata": meta(name, ns, labels, annotations), "spec": spec,
            "status": lb(*addresses)}


def endpoint_slice(name, svc, *endpoints, ns="default"):
    return {"metadata": meta(name, ns,
                             {"kubernetes.io/service-name": svc}),
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ok}}
                          for ip, ok in endpoints]}


def gateway(name, *addresses, ns="default", cls="cilium"):
    return {"metadata": meta(name, ns),
            "spec": {"gatewayClassName": cls},
            "status": {"addresses": [{"type": "IPAddress", "value": a}
                                     for a in addresses]}}


def route(name, hosts, *parents, ns="default", labels=None):
    return {"metadata": meta(name, ns, labels), "spec": {
        "hostnames": list(hosts),
        "parentRefs": [{"name": p[1], "namespace": p[0]}
                       if isinstance(p, tuple) else {"name": p}
                       for p in parents]}}


def dns_endpoint(name, *endpoints, ns="default", labels=None):
    return {"metadata": meta(name, ns, labels), "spec": {"endpoints": [
        {"dnsName": n, "recordType": t, "targets": list(ts)}
        for n, t, ts in endpoints]}}


def node(name, *addresses):
    return {"metadata": {"name": name}, "status": {"addresses": [
        {"type": t, "address": a} for t, a in addresses]}}


class Cluster:
    """A store fed the way the watch threads feed it (listed, then
    events), handed to the plugin."""

    def __init__(self, gw, synced=True):
        self.clock = task.Clock()
        self.store = gw.store = st.Store(gw.kinds(),
                                         later=self.clock.callLater)
        if synced:
            for kind in self.store.kinds:
                self.store.feed("begin", kind)
                self.store.feed("end", kind)

    def add(self, kind, *objs):
        parse = st.RESOURCES[st.base(kind)][1]
        self.store.feed("apply", kind, [("ADDED", parse(o)) for o in objs])

    def delete(self, kind, name, ns="default"):
        self.store.feed("apply", kind, [("DELETED", Key(name, ns))])


def request(name, qtype="A"):
    data = make_query(name, dns.rdatatype.from_text(qtype), msgid=7)
    req = Request(data)
    req.parse_question(*req.parse_header()[1:])
    return req


class _Next:
    """The chain below: answers REFUSED, written by "next"."""

    def serve(self, req):
        return Response(w.REFUSED, plugin="next")


def texts(rrs):
    return sorted("%s %d IN %s %s" % (
        rr.name, rr.ttl, w.type_text(rr.rtype), rr.rdata_text())
        for rr in rrs)


# -- setup --------------------------------------------------------------------

class SetupTest(unittest.TestCase):
    """Upstream's setup cases and the words of its refusals."""

    def test_zones(self):
        gw = gateway_of(build("k8s_gateway"))
        self.assertEqual(gw.zones, ["."])
        gw = gateway_of(build("k8s_gateway example.org"))
        self.assertEqual(gw.zones, ["example.org."])
        gw = gateway_of(build("k8s_gateway example.org sub.example.org"))
        self.assertEqual(gw.zones, ["example.org.", "sub.example.org."])
        gw = gateway_of(build("k8s_gateway", keys="example.net:0"))
        self.assertEqual(gw.zones, ["example.net."])

    def test_defaults(self):
        gw = gateway_of(build("k8s_gateway example.org"))
        self.assertIsInstance(gw, K8sGateway)
        self.assertEqual((gw.ttl, gw.apex, gw.secondary, gw.active),
                         (60, "dns1.kube-system", "", ["Ingress", "Service"]))
        self.assertEqual(gw.kinds(), [st.INGRESSES, st.SERVICES, st.SLICES])
        self.assertFalse(gw.fall)

    def test_options(self):
        gw = gateway_of(build(
            "k8s_gateway example.com {\n"
            "    resources HTTPRoute TLSRoute DNSEndpoint Ingress Bogus\n"
            "    ingressClasses nginx internal\n"
            "    gatewayClasses cilium\n"
            '    serviceLabelSelectors "app in (a,b)" tier=web\n'
            "    ttl 30\n    apex exdns-1-k8s-gateway.kube-system\n"
            "    secondary exdns-2-k8s-gateway.kube-system\n"
            "    kubeconfig /.kube/config ctx\n"
            "    fallthrough in-addr.arpa\n"
            "    nodeAddressType ExternalIP\n}"))
        self.assertEqual(gw.active, ["HTTPRoute", "TLSRoute", "DNSEndpoint",
                                     "Ingress"])
        self.assertEqual(gw.kinds(), [
            st.GATEWAYS, st.HTTPROUTES, st.TLSROUTES, st.DNSENDPOINTS,
            st.INGRESSES])
        self.assertEqual(gw.ingress_classes, ["nginx", "internal"])
        self.assertEqual(gw.gateway_classes, ["cilium"])
        self.assertEqual(gw.service_selectors, ["app in (a,b)", "tier=web"])
        self.assertEqual((gw.ttl, gw.apex, gw.secondary),
                         (30, "exdns-1-k8s-gateway.kube-system",
                          "exdns-2-k8s-gateway.kube-system"))
        self.assertEqual(gw.conn_opts, {"kubeconfig": "/.kube/config",
                                        "context": "ctx"})
        self.assertTrue(gw.fall.through("1.0.0.127.in-addr.arpa."))
        self.assertFalse(gw.fall.through("a.example.com."))
        self.assertEqual(gw.node_address_type, "ExternalIP")

    def test_service_watch_per_selector(self):
        gw = gateway_of(build(
            "k8s_gateway example.com {\n    resources Service\n"
            "    serviceLabelSelectors a=1 b=2 c\n}"))
        self.assertEqual(gw.kinds(), [st.SERVICES, "services#1",
                                      "services#2", st.SLICES])

    def test_kubeconfig_context_only_as_second_of_two(self):
        gw = gateway_of(build("k8s_gateway example.com {\n"
                              "    kubeconfig a b c\n}"))
        self.assertEqual(gw.conn_opts, {"kubeconfig": "a"})

    def test_later_resources_line_wins(self):
        gw = gateway_of(build("k8s_gateway example.com {\n"
                              "    resources Ingress\n"
                              "    resources Service\n}"))
        self.assertEqual(gw.active, ["Service"])

    BAD = [
        ("resources", "Incorrectly formatted 'resource' parameter"),
        ("ttl", "Wrong argument count or unexpected line ending after "
         "'ttl'"),
        ("ttl x", 'strconv.Atoi: parsing "x": invalid syntax'),
        ("ttl -1", "ttl must be in range [0, 3600]: -1"),
        ("ttl 3601", "ttl must be in range [0, 3600]: 3601"),
        ("apex", "Wrong argument count"),
        ("secondary", "Wrong argument count"),
        ("kubeconfig", "Wrong argument count"),
        ("ingressClasses", "Incorrectly formatted 'ingressClasses' "
         "parameter"),
        ("gatewayClasses", "Incorrectly formatted 'gatewayClasses' "
         "parameter"),
        ("serviceLabelSelectors", "serviceLabelSelectors requires at least "
         "one argument (a label selector string)"),
        ('serviceLabelSelectors ""', "serviceLabelSelectors does not "
         "accept empty strings"),
        ('serviceLabelSelectors "a in (b"', 'invalid serviceLabelSelectors '
         '"a in (b"'),
        ("nodeAddressType", "Wrong argument count"),
        ("nodeAddressType Hostname", "nodeAddressType must be 'InternalIP' "
         "or 'ExternalIP', got: Hostname"),
        ("bogus", "Unknown property 'bogus'"),
    ]

    def test_refused(self):
        for line, words in self.BAD:
            text = "k8s_gateway example.com {\n    %s\n}" % line
            e = self.assertRaises(CorefileError, build, text)
            self.assertIn("plugin/k8s_gateway: " + words, str(e), line)

    def test_ttl_bounds(self):
        for v in ("0", "3600"):
            gw = gateway_of(build("k8s_gateway example.com {\n    ttl %s\n}"
                                  % v))
            self.assertEqual(gw.ttl, int(v))


# -- records ------------------------------------------------------------------

class RecordsTest(unittest.TestCase):

    def test_ingress(self):
        r = rec.ingress(ingress("a", ["A.example.com", "b.example.com"],
                                "192.0.2.1", "lb.example.net", cls="nginx"))
        self.assertEqual((r.hosts, r.cls, r.ips, r.lookups), (
            ("a.example.com", "b.example.com"), "nginx", ("192.0.2.1",),
            ("lb.example.net",)))

    def test_ignore_label(self):
        ign = {"k8s-gateway.dns/ignore": "true"}
        self.assertEqual(rec.ingress(ingress("a", ["a.example.com"],
                                             labels=ign)).hosts, ())
        self.assertEqual(rec.service(service("s", labels=ign)).hosts, ())
        self.assertEqual(rec.route(route("r", ["r.example.com"], "g",
                                         labels=ign)).hosts, ())
        self.assertEqual(rec.dns_endpoint(dns_endpoint(
            "d", ("d.example.com", "A", ["192.0.2.1"]),
            labels=ign)).hosts, ())
        other = {"k8s-gateway.dns/ignore": "false"}
        self.assertEqual(rec.ingress(ingress("a", ["a.example.com"],
                                             labels=other)).hosts,
                         ("a.example.com",))

    def test_service_names(self):
        self.assertEqual(rec.service(service("web", ns="prod")).hosts,
                         ("web.prod",))
        self.assertEqual(rec.service(service("web", type="ClusterIP")).hosts,
                         ())
        ann = {"coredns.io/hostname": "One.example.com, two.example.com",
               "external-dns.alpha.kubernetes.io/hostname": "x.example.com"}
        self.assertEqual(rec.service(service("web", annotations=ann)).hosts,
                         ("one.example.com", "two.example.com"))
        ann = {"external-dns.alpha.kubernetes.io/hostname":
               "*.apps.example.com,bad_name.example.com,-x.example.com"}
        self.assertEqual(rec.service(service("web", annotations=ann)).hosts,
                         ("*.apps.example.com",))
        ann = {"k8s-gateway.dns/resolve-endpoints": "true"}
        r = rec.service(service("db", type="ClusterIP", annotations=ann))
        self.assertEqual((r.hosts, r.endpoints), (("db.default",), True))

    def test_valid_hostname(self):
        self.assertTrue(rec.valid_hostname("a-b.example.com"))
        self.assertTrue(rec.valid_hostname("*.example.com"))
        self.assertFalse(rec.valid_hostname("a..example.com"))
        self.assertFalse(rec.valid_hostname("x" * 64 + ".example.com"))
        self.assertFalse(rec.valid_hostname("a.*.example.com"))
        self.assertFalse(rec.valid_hostname(""))

    def test_slice_ready_endpoints(self):
        r = rec.endpoint_slice(endpoint_slice(
            "db-1", "db", ("10.0.0.1", True), ("10.0.0.2", False),
            ("10.0.0.3", None)))
        self.assertEqual((r.service, r.ips), ("db", ("10.0.0.1", "10.0.0.3")))
        self.assertIsNone(rec.endpoint_slice({"metadata": {"name": "x"}}))

    def test_gateway_and_route(self):
        g = rec.gateway({"metadata": meta("gw", "infra"), "spec": {
            "gatewayClassName": "cilium"}, "status": {"addresses": [
                {"value": "192.0.2.9"},
                {"type": "IPAddress", "value": "2001:db8:0::9"},
                {"type": "Hostname", "value": "gw.example.net"},
                {"type": "NamedAddress", "value": "pool"}]}})
        self.assertEqual((g.cls, g.ips, g.lookups), (
            "cilium", ("192.0.2.9", "2001:db8::9"), ("gw.example.net",)))
        r = rec.route(route("r", ["r.example.com"], "gw",
                            ("infra", "gw2"), ns="apps"))
        self.assertEqual(r.parents, (("apps", "gw"), ("infra", "gw2")))

    def test_dns_endpoint(self):
        r = rec.dns_endpoint(dns_endpoint(
            "d", ("test.example.com", "CNAME", ["ipv4.example.com"]),
            ("test2.example.dev", "A", ["192.168.30.1", "nonsense"]),
            ("test3.example.dev", "AAAA",
             ["2001:0db8:85a3:0000:0000:8a2e:0370:7334"]),
            ("test3.example.dev", "TXT", ["hello"])))
        self.assertEqual(r.entries, {
            "test.example.com": ([], []),
            "test2.example.dev": (["192.168.30.1"], []),
            "test3.example.dev": (["2001:db8:85a3::8a2e:370:7334"],
                                  ["hello"])})

    def test_key_sets(self):
        self.assertEqual(key_sets("a.b.example.com.", ZONE), [
            ["a.b.example.com", "a.b"], ["*.b.example.com", "*.b"]])
        self.assertEqual(key_sets("example.com.", ZONE), [
            ["example.com"], ["*.example.com", "*"]])
        self.assertEqual(key_sets("a.b.", "."), [["a.b"], ["*.b"]])


# -- answers ------------------------------------------------------------------

class ServeTest(unittest.TestCase):
    """Answers from the store, as upstream's handler gives them."""

    resources = "Ingress Service HTTPRoute TLSRoute GRPCRoute DNSEndpoint"
    options = ""

    def setUp(self):
        self.gw = gateway_of(build(
            "k8s_gateway example.com {\n    resources %s\n%s}"
            % (self.resources, self.options)))
        self.gw.next = _Next()
        self.c = Cluster(self.gw)

    def ask(self, name, qtype="A"):
        r = self.gw.serve(request(name, qtype))
        self.assertIsInstance(r, Response)
        return r

    def answer(self, name, qtype="A"):
        r = self.ask(name, qtype)
        self.assertEqual(r.rcode, w.NOERROR, (name, qtype))
        return texts(r.answer)

    def assertNX(self, name, qtype="A"):
        r = self.ask(name, qtype)
        self.assertEqual((r.rcode, texts(r.answer), texts(r.authority)),
                         (w.NXDOMAIN, [], [SOA]), (name, qtype))

    def assertNoData(self, name, qtype="A"):
        r = self.ask(name, qtype)
        self.assertEqual((r.rcode, texts(r.answer), texts(r.authority)),
                         (w.NOERROR, [], [SOA]), (name, qtype))

    def test_other_zones_go_on(self):
        r = self.ask("a.example.net.")
        self.assertEqual((r.rcode, r.plugin), (w.REFUSED, "next"))

    def test_servfail_before_sync(self):
        Cluster(self.gw, synced=False)
        self.assertFalse(self.gw.ready())
        r = self.ask("a.example.com.")
        self.assertEqual((r.rcode, r.error), (
            w.SERVFAIL, "plugin/k8s_gateway: could not sync required "
            "resources"))

    def test_apex(self):
        """Upstream's apex cases: SOA and NS at the apex (the NS with the
        server's own address as glue), NODATA for the rest; the apex
        name's addresses are the Service named by ``apex``."""
        self.c.add(st.SERVICES, service("dns1", "192.0.2.53", "2001:db8::53",
                                        ns="kube-system"))
        r = self.ask("example.com.", "SOA")
        self.assertEqual((r.rcode, texts(r.answer), r.aa),
                         (w.NOERROR, [SOA], True))
        r = self.ask("example.com.", "NS")
        self.assertEqual(texts(r.answer), [
            "example.com. 60 IN NS dns1.kube-system.example.com."])
        self.assertEqual(texts(r.additional), [
            "dns1.kube-system.example.com. 60 IN A 192.0.2.53",
            "dns1.kube-system.example.com. 60 IN AAAA 2001:db8::53"])
        self.assertNoData("example.com.", "SRV")
        self.assertNoData("example.com.", "A")
        self.assertNoData("example.com.", "TXT")
        self.assertEqual(self.answer("dns1.kube-system.example.com."),
                         ["dns1.kube-system.example.com. 60 IN A "
                          "192.0.2.53"])
        self.assertEqual(self.answer("dns1.kube-system.example.com.",
                                     "AAAA"),
                         ["dns1.kube-system.example.com. 60 IN AAAA "
                          "2001:db8::53"])
        for qtype in ("SRV", "NS", "SOA"):
            self.assertNoData("dns1.kube-system.example.com.", qtype)
        self.assertNX("foo.dns1.kube-system.example.com.")
        self.assertNX("other.kube-system.example.com.")

    def test_ingress(self):
        self.c.add(st.INGRESSES, ingress(
            "a", ["myservicea.example.com", "short"], "192.0.2.1"))
        self.assertEqual(self.answer("myservicea.example.com."), [
            "myservicea.example.com. 60 IN A 192.0.2.1"])
        # A host without the zone answers in it.
        self.assertEqual(self.answer("short.example.com."), [
            "short.example.com. 60 IN A 192.0.2.1"])
        # The other family: NODATA (RFC 4074); other types too.
        self.assertNoData("myservicea.example.com.", "AAAA")
        self.assertNoData("myservicea.example.com.", "MX")
        self.assertNX("myservicea.example.com.", "TXT")
        self.assertNX("nothing.example.com.")
        self.c.delete(st.INGRESSES, "a")
        self.assertNX("myservicea.example.com.")

    def test_query_case_kept(self):
        self.c.add(st.INGRESSES, ingress("a", ["web.example.com"],
                                         "192.0.2.1"))
        self.assertEqual(self.answer("WEB.Example.COM."), [
            "WEB.Example.COM. 60 IN A 192.0.2.1"])
        r = self.ask("Nope.Example.COM.")
        self.assertEqual(r.authority[0].name, "Example.COM.")

    def test_wildcard(self):
        self.c.add(st.INGRESSES, ingress("w", ["*.apps.example.com"],
                                         "192.0.2.7"))
        self.c.add(st.INGRESSES, ingress("x", ["x.apps.example.com"],
                                         "192.0.2.8"))
        self.assertEqual(self.answer("any.apps.example.com."), [
            "any.apps.example.com. 60 IN A 192.0.2.7"])
        # The name itself before its wildcard.
        self.assertEqual(self.answer("x.apps.example.com."), [
            "x.apps.example.com. 60 IN A 192.0.2.8"])
        self.assertNX("a.b.apps.example.com.")

    def test_dual_stack_and_duplicates(self):
        self.c.add(st.INGRESSES, ingress("a", ["a.example.com"], "192.0.2.1",
                                         "2001:db8::1"),
                   ingress("b", ["a.example.com"], "192.0.2.1"))
        self.assertEqual(self.answer("a.example.com."), [
            "a.example.com. 60 IN A 192.0.2.1"])
        self.assertEqual(self.answer("a.example.com.", "AAAA"), [
            "a.example.com. 60 IN AAAA 2001:db8::1"])

    def test_service(self):
        self.c.add(st.SERVICES, service("web", "192.0.2.3", ns="prod"))
        self.assertEqual(self.answer("web.prod.example.com."), [
            "web.prod.example.com. 60 IN A 192.0.2.3"])
        self.c.add(st.SERVICES, service("web", "192.0.2.4", ns="prod",
                                        type="ClusterIP"))
        self.assertNX("web.prod.example.com.")

    def test_service_annotations(self):
        self.c.add(st.SERVICES, service("web", "192.0.2.3", annotations={
            "external-dns.alpha.kubernetes.io/hostname":
                "shop.example.com,www.example.com"}))
        self.assertEqual(self.answer("shop.example.com."), [
            "shop.example.com. 60 IN A 192.0.2.3"])
        self.assertEqual(self.answer("www.example.com."), [
            "www.example.com. 60 IN A 192.0.2.3"])
        # The annotation replaces NAME.NAMESPACE.
        self.assertNX("web.default.example.com.")
        self.c.add(st.SERVICES, service("web", "192.0.2.3", annotations={
            "coredns.io/hostname": "coredns.example.com",
            "external-dns.alpha.kubernetes.io/hostname": "shop.example.com"}))
        self.assertEqual(self.answer("coredns.example.com."), [
            "coredns.example.com. 60 IN A 192.0.2.3"])
        self.assertNX("shop.example.com.")

    def test_service_external_ips_win(self):
        self.c.add(st.SERVICES, service("web", "192.0.2.3",
                                        external=["198.51.100.1"]))
        self.assertEqual(self.answer("web.default.example.com."), [
            "web.default.example.com. 60 IN A 198.51.100.1"])

    def test_service_endpoints(self):
        self.c.add(st.SERVICES, service("db", type="ClusterIP", annotations={
            "k8s-gateway.dns/resolve-endpoints": "true"}))
        self.assertNX("db.default.example.com.")
        self.c.add(st.SLICES, endpoint_slice(
            "db-a", "db", ("10.1.0.1", True), ("10.1.0.2", False)),
            endpoint_slice("db-b", "db", ("fd00::3", True)))
        self.assertEqual(self.answer("db.default.example.com."), [
            "db.default.example.com. 60 IN A 10.1.0.1"])
        self.assertEqual(self.answer("db.default.example.com.", "AAAA"), [
            "db.default.example.com. 60 IN AAAA fd00::3"])
        self.c.delete(st.SLICES, "db-a")
        self.assertNoData("db.default.example.com.")

    def test_routes(self):
        self.c.add(st.GATEWAYS, gateway("gw", "192.0.2.4"),
                   gateway("gw2", "192.0.2.5", ns="infra"))
        for kind in (st.HTTPROUTES, st.TLSROUTES, st.GRPCROUTES):
            host = "%s.gw.example.com" % kind
            self.c.add(kind, route("r", [host], "gw"))
            self.assertEqual(self.answer(host + "."), [
                "%s. 60 IN A 192.0.2.4" % host])
        # Several parents, one in another namespace.
        self.c.add(st.HTTPROUTES, route("d", ["myserviced.gw.example.com"],
                                        "gw", ("infra", "gw2")))
        self.assertEqual(self.answer("myserviced.gw.example.com."), [
            "myserviced.gw.example.com. 60 IN A 192.0.2.4",
            "myserviced.gw.example.com. 60 IN A 192.0.2.5"])
        # The Gateway's addresses change: every route follows.
        self.c.add(st.GATEWAYS, gateway("gw", "192.0.2.40"))
        self.assertEqual(self.answer("httproutes.gw.example.com."), [
            "httproutes.gw.example.com. 60 IN A 192.0.2.40"])
        self.c.delete(st.GATEWAYS, "gw")
        self.assertNX("httproutes.gw.example.com.")
        self.c.add(st.HTTPROUTES, route("orphan", ["o.example.com"], "none"))
        self.assertNX("o.example.com.")

    def test_dns_endpoint(self):
        self.c.add(st.DNSENDPOINTS, dns_endpoint(
            "test", ("test.example.com", "CNAME", ["ipv4.example.com"]),
            ("test2.example.com", "A", ["192.168.30.1"]),
            ("test3.example.com", "AAAA", ["2001:db8::7334"]),
            ("test3.example.com", "TXT", ["v=spf1 -all"])))
        self.assertEqual(self.answer("test2.example.com."), [
            "test2.example.com. 60 IN A 192.168.30.1"])
        # Only the entries of the name asked: test2 has no AAAA.
        self.assertNoData("test2.example.com.", "AAAA")
        self.assertEqual(self.answer("test3.example.com.", "AAAA"), [
            "test3.example.com. 60 IN AAAA 2001:db8::7334"])
        self.assertEqual(self.answer("test3.example.com.", "TXT"), [
            'test3.example.com. 60 IN TXT "v=spf1 -all"'])
        self.assertNX("test.example.com.")

    def test_first_resource_wins(self):
        """Resources are asked in the order of ``resources``; the first
        with an address answers."""
        self.c.add(st.INGRESSES, ingress("i", ["both.example.com"],
                                         "192.0.2.1"))
        self.c.add(st.SERVICES, service("s", "192.0.2.2", annotations={
            "coredns.io/hostname": "both.example.com"}))
        self.assertEqual(self.answer("both.example.com."), [
            "both.example.com. 60 IN A 192.0.2.1"])
        self.c.delete(st.INGRESSES, "i")
        self.assertEqual(self.answer("both.example.com."), [
            "both.example.com. 60 IN A 192.0.2.2"])

    def test_relist_sweeps(self):
        """A relist keeps what it brings and drops the rest."""
        self.c.add(st.INGRESSES, ingress("a", ["a.example.com"], "192.0.2.1"),
                   ingress("b", ["b.example.com"], "192.0.2.2"))
        store = self.c.store
        store.feed("begin", st.INGRESSES)
        store.feed("apply", st.INGRESSES, [("LIST", rec.ingress(ingress(
            "b", ["b.example.com"], "192.0.2.22")))])
        store.feed("end", st.INGRESSES)
        self.assertNX("a.example.com.")
        self.assertEqual(self.answer("b.example.com."), [
            "b.example.com. 60 IN A 192.0.2.22"])


class OptionsServeTest(unittest.TestCase):
    """Answers that depend on options."""

    def build(self, options, resources="Ingress Service HTTPRoute"):
        gw = gateway_of(build("k8s_gateway example.com {\n    resources %s\n"
                              "%s\n}" % (resources, options)))
        gw.next = _Next()
        return gw, Cluster(gw)

    def serve(self, gw, name, qtype="A"):
        r = gw.serve(request(name, qtype))
        return r.rcode, r.plugin, texts(r.answer)

    def test_ttl(self):
        gw, c = self.build("ttl 30")
        c.add(st.INGRESSES, ingress("a", ["a.example.com"], "192.0.2.1"))
        self.assertEqual(self.serve(gw, "a.example.com."), (
            0, "k8s_gateway", ["a.example.com. 30 IN A 192.0.2.1"]))

    def test_fallthrough(self):
        gw, c = self.build("fallthrough")
        c.add(st.INGRESSES, ingress("a", ["a.example.com"], "192.0.2.1"))
        self.assertEqual(self.serve(gw, "b.example.com."),
                         (w.REFUSED, "next", []))
        self.assertEqual(self.serve(gw, "a.example.com.")[0], 0)
        # Any name without a record goes on, the apex too.
        self.assertEqual(self.serve(gw, "example.com.", "SOA")[1], "next")

    def test_ingress_classes(self):
        gw, c = self.build("ingressClasses nginx")
        c.add(st.INGRESSES, ingress("a", ["a.example.com"], "192.0.2.1",
                                    cls="nginx"),
              ingress("b", ["b.example.com"], "192.0.2.2", cls="traefik"),
              ingress("c", ["c.example.com"], "192.0.2.3"))
        self.assertEqual(self.serve(gw, "a.example.com.")[2],
                         ["a.example.com. 60 IN A 192.0.2.1"])
        self.assertEqual(self.serve(gw, "b.example.com.")[0], w.NXDOMAIN)
        self.assertEqual(self.serve(gw, "c.example.com.")[0], w.NXDOMAIN)

    def test_gateway_classes(self):
        gw, c = self.build("gatewayClasses cilium")
        c.add(st.GATEWAYS, gateway("gw", "192.0.2.4"),
              gateway("other", "192.0.2.5", cls="nginx"))
        c.add(st.HTTPROUTES, route("r", ["r.example.com"], "gw", "other"))
        self.assertEqual(self.serve(gw, "r.example.com.")[2],
                         ["r.example.com. 60 IN A 192.0.2.4"])

    def test_secondary(self):
        gw, c = self.build("apex exdns-1.kube-system\n"
                           "    secondary exdns-2.kube-system")
        c.add(st.SERVICES, service("exdns-1", "192.0.2.1", ns="kube-system"),
              service("exdns-2", "192.0.2.2", ns="kube-system"))
        r = gw.serve(request("example.com.", "NS"))
        self.assertEqual(texts(r.answer), [
            "example.com. 60 IN NS exdns-1.kube-system.example.com.",
            "example.com. 60 IN NS exdns-2.kube-system.example.com."])
        self.assertEqual(texts(r.additional), [
            "exdns-1.kube-system.example.com. 60 IN A 192.0.2.1",
            "exdns-2.kube-system.example.com. 60 IN A 192.0.2.2"])
        r = gw.serve(request("example.com.", "SOA"))
        self.assertEqual(texts(r.answer), [
            "example.com. 60 IN SOA exdns-1.kube-system.example.com. "
            "hostmaster.exdns-1.kube-system.example.com. 12345 7200 1800 "
            "86400 60"])
        # The secondary's own name is not this server's to answer.
        self.assertEqual(self.serve(gw, "exdns-1.kube-system.example.com."),
                         (0, "k8s_gateway", [
                             "exdns-1.kube-system.example.com. 60 IN A "
                             "192.0.2.1"]))

    def test_nodes(self):
        gw, c = self.build("nodeAddressType ExternalIP", resources="Node")
        c.add(st.NODES, node("n1", ("Hostname", "n1.example.com"),
                             ("InternalIP", "10.0.0.1"),
                             ("ExternalIP", "203.0.113.1")))
        self.assertEqual(self.serve(gw, "n1.example.com.")[2],
                         ["n1.example.com. 60 IN A 203.0.113.1"])
