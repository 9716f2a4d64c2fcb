"""autopath: the walk of CoreDNS's autopath_test.go against a stub chain,
its setup cases, and ``autopath @kubernetes`` over the wire with the test
API server (the client, 127.0.0.1, is a pod of namespace podns)."""

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import (
    RawResponse,
    Request,
    Response,
    make_query,
)
from corednstw.plugins import autopath as ap
from corednstw.plugins.kubernetes import plugin as kplugin
from tests.support import k8s_apiserver as k8s
from tests.support import k8s_cluster, util
from tests.support.upstream import Upstream

RESOLV = "nameserver 1.2.3.4\ndomain foo.com\nsearch bar.com baz.com\n" \
    "options ndots:5\n"
SEARCH = "search example.org example.com com\n"


def stub_chain(answers):
    """CoreDNS's nextHandler: NXDOMAIN or one A record per name; any
    other name is not written (None)."""
    def serve(req):
        rcode = answers.get(req.qname)
        if rcode is None:
            return None
        if rcode == w.NXDOMAIN:
            return Response(w.NXDOMAIN, authority=[w.RR.from_text(
                "example.org.", "SOA", 1800, "example.org. example.org. "
                "1502165581 14400 3600 604800 14400")], plugin="stub")
        return Response(0, [w.RR(req.name, w.A, 3600,
                                 w.a_rdata("127.0.0.53"))], plugin="stub")
    return serve


class WalkTest(unittest.TestCase):
    """The walk over a search list read from a file."""

    def setUp(self):
        self.s = util.Direct(self, ".:0 {\n    autopath %s\n}\n"
                             % resolv_file(self, SEARCH))
        self.ap = self.s.app.config.blocks[0].plugin("autopath")
        self.ap.next = util.Stub(stub_chain({
            "b.example.org.": w.NXDOMAIN, "b.com.": 0,
            "a.example.com.": 0}))

    def test_search_list(self):
        self.assertEqual(self.ap.search,
                         ["example.org.", "example.com.", "com.", ""])

    def test_expansion(self):
        before = ap.SUCCESS.get(("dns://:0",))
        m = self.s.query("b.example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        # The CNAME leads the answer, the question is the one asked.
        self.assertEqual([str(r) for r in m.answer], [
            "b.example.org. 3600 IN CNAME b.com.",
            "b.com. 3600 IN A 127.0.0.53"])
        self.assertEqual(str(m.question[0].name), "b.example.org.")
        self.assertEqual(ap.SUCCESS.get(("dns://:0",)), before + 1)

    def test_case_kept(self):
        m = self.s.query("B.Example.ORG.", "A")
        self.assertEqual([str(r) for r in m.answer], [
            "B.Example.ORG. 3600 IN CNAME B.com.",
            "B.com. 3600 IN A 127.0.0.53"])

    def test_not_in_first_domain(self):
        m = self.s.query("a.example.com.", "A")
        self.assertEqual([str(r) for r in m.answer],
                         ["a.example.com. 3600 IN A 127.0.0.53"])

    def test_nothing_written(self):
        # Every try unwritten: the first try's (nothing) is SERVFAIL.
        m = self.s.query("c.example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    def test_all_nxdomain_gives_the_first(self):
        self.ap.next = util.Stub(stub_chain({
            "d.example.org.": w.NXDOMAIN, "d.example.com.": w.NXDOMAIN,
            "d.com.": w.NXDOMAIN, "d.": w.NXDOMAIN}))
        m = self.s.query("d.example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(m.answer, [])
        self.assertEqual(len(m.authority), 1)

    def test_nodata_stops(self):
        asked = []

        def serve(req):
            asked.append(req.qname)
            if req.qname == "e.example.com.":
                return Response(0, plugin="stub")
            return Response(w.NXDOMAIN, plugin="stub")
        self.ap.next = util.Stub(serve)
        m = self.s.query("e.example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.answer, [])
        self.assertEqual(asked, ["e.example.org.", "e.example.com."])

    def test_exact_first_domain(self):
        # CoreDNS cannot trim the domain off itself: SERVFAIL.
        m = self.s.query("example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)

    def test_deferred_chain(self):
        chain = stub_chain({"f.example.org.": w.NXDOMAIN,
                            "f.example.com.": w.NXDOMAIN, "f.com.": 0})
        self.ap.next = util.Stub(lambda req: defer.succeed(chain(req)))
        got = []
        self.s.ask_async(make_query("f.example.org.", w.A)).addCallback(
            got.append)
        m = dns.message.from_wire(got[0])
        self.assertEqual([str(r) for r in m.answer], [
            "f.example.org. 3600 IN CNAME f.com.",
            "f.com. 3600 IN A 127.0.0.53"])

    def test_raw_answer(self):
        """An upstream's bytes are decoded before the CNAME goes in."""
        def serve(req):
            if req.qname != "g.com.":
                return Response(w.NXDOMAIN, plugin="stub")
            q = dns.message.make_query("g.com.", "A")
            r = dns.message.make_response(q)
            r.answer.append(dns.rrset.from_text("g.com.", 60, "IN", "A",
                                                "192.0.2.7"))
            return RawResponse(r.to_wire(), plugin="forward")
        self.ap.next = util.Stub(serve)
        m = self.s.query("g.example.org.", "A")
        self.assertEqual([str(r) for r in m.answer], [
            "g.example.org. 60 IN CNAME g.com.",
            "g.com. 60 IN A 192.0.2.7"])

    def test_outside_zones(self):
        s = util.Direct(self, ".:0 {\n    autopath example.net %s\n}\n"
                        % resolv_file(self, SEARCH))
        a = s.app.config.blocks[0].plugin("autopath")
        self.assertEqual(a.zones, ["example.net."])
        a.next = util.Stub(stub_chain({"b.example.org.": w.NXDOMAIN,
                                       "b.com.": 0}))
        m = s.query("b.example.org.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)


class SetupTest(unittest.TestCase):
    """CoreDNS's TestSetupAutoPath."""

    def build(self, line):
        return util.Direct(self, ".:0 {\n    %s\n}\n" % line)

    def plugin(self, line):
        return self.build(line).app.config.blocks[0].plugin("autopath")

    def test_kubernetes(self):
        a = self.plugin("autopath @kubernetes")
        self.assertEqual((a.source, a.search, a.zones),
                         ("kubernetes", [], ["."]))
        a = self.plugin("autopath example.org @kubernetes")
        self.assertEqual(a.zones, ["example.org."])
        a = self.plugin("autopath 10.0.0.0/8 @kubernetes")
        self.assertEqual(a.zones, ["10.in-addr.arpa."])

    def test_file(self):
        a = self.plugin("autopath " + resolv_file(self, RESOLV))
        self.assertEqual(a.search, ["bar.com.", "baz.com.", ""])

    def test_errors(self):
        for line, text in (
                ("autopath kubernetes", 'failed to parse "kubernetes": '
                 "open kubernetes: no such file or directory"),
                ("autopath", "no resolv-conf specified"),
                ('autopath ""', 'failed to parse ""')):
            with self.assertRaises(CorefileError) as cm:
                self.build(line)
            self.assertIn("Corefile:2 - Error during parsing: "
                          "plugin/autopath: " + text, str(cm.exception),
                          line)

    def test_not_an_autopather(self):
        s = self.build("autopath @whoami\n    whoami")
        a = s.app.config.blocks[0].plugin("autopath")
        with self.assertRaises(ValueError) as cm:
            a.start()
        self.assertEqual(str(cm.exception), "plugin/autopath: whoami does "
                         "not implement the AutoPather interface")

    def test_missing_plugin(self):
        a = self.plugin("autopath @kubernetes")
        a.start()
        self.assertIsNone(a.pather)


class KubernetesTest(unittest.TestCase):
    """``autopath @kubernetes`` in front of kubernetes and forward."""

    @defer.inlineCallbacks
    def setUp(self):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        k8s_cluster.cluster(self.api)
        self.api.add("pods", k8s.pod("client-0", "podns", "127.0.0.1"))
        self.up = Upstream()
        self.up.handler = self.upstream
        self.up.start()
        self.addCleanup(self.up.stop)
        self.app = yield util.start(self, (
            ".:0 {\n    autopath @kubernetes\n"
            "    kubernetes cluster.local {\n        endpoint %s\n"
            "        pods verified\n    }\n"
            "    forward . 127.0.0.1:%d\n}\n") % (self.api.url, self.up.port))
        self.k = self.app.config.blocks[0].plugin("kubernetes")
        yield util.wait_for(lambda: "127.0.0.1" in self.k.store.pods_by_ip)

    def upstream(self, q, proto):
        """example.org. has an address; every other name is NXDOMAIN."""
        r = dns.message.make_response(q)
        name = q.question[0].name
        if str(name).lower() == "example.org.":
            r.answer.append(dns.rrset.from_text(name, 300, "IN", "A",
                                                "192.0.2.1"))
        else:
            r.set_rcode(dns.rcode.NXDOMAIN)
        return r

    def host_search(self):
        return kplugin._host_search()

    def test_search_path(self):
        req = make_req("x.podns.svc.cluster.local.")
        self.assertEqual(self.k.autopath(req), [
            "podns.svc.cluster.local.", "svc.cluster.local.",
            "cluster.local."] + self.host_search() + [""])
        self.assertIsNone(self.k.autopath(make_req("example.org.")))
        self.assertIsNone(self.k.autopath(
            make_req("x.podns.svc.cluster.local.", client="192.0.2.9")))

    @defer.inlineCallbacks
    def test_service_in_another_namespace(self):
        m = yield util.query(self.app.port(),
                             "svc1.testns.podns.svc.cluster.local.", "A")
        self.assertEqual(util.rrs(m), [
            "svc1.testns.podns.svc.cluster.local. 5 IN CNAME "
            "svc1.testns.svc.cluster.local.",
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"])
        self.assertEqual(m.answer[0].rdtype, dns.rdatatype.CNAME)

    @defer.inlineCallbacks
    def test_external_name(self):
        m = yield util.query(self.app.port(),
                             "example.org.podns.svc.cluster.local.", "A")
        self.assertEqual(util.rrs(m), [
            "example.org. 300 IN A 192.0.2.1",
            "example.org.podns.svc.cluster.local. 300 IN CNAME "
            "example.org."])
        self.assertEqual(m.answer[0].rdtype, dns.rdatatype.CNAME)
        # The walk asked the host's search domains, then the name itself.
        asked = [q[1] for q in self.up.queries]
        self.assertEqual(asked, ["example.org." + d
                                 for d in self.host_search()]
                         + ["example.org."])

    @defer.inlineCallbacks
    def test_nodata_stops(self):
        m = yield util.query(self.app.port(),
                             "testns.podns.svc.cluster.local.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.answer, [])
        self.assertEqual(self.up.queries, [])

    @defer.inlineCallbacks
    def test_nothing_found(self):
        m = yield util.query(self.app.port(),
                             "nothere.podns.svc.cluster.local.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.assertEqual(util.rrs(m, "authority")[0].split()[3], "SOA")
        self.assertEqual(str(m.authority[0].name), "cluster.local.")

    @defer.inlineCallbacks
    def test_other_client_is_not_walked(self):
        self.api.delete("pods", "podns", "client-0")
        yield util.wait_for(lambda: not self.k.store.pods_by_ip)
        m = yield util.query(self.app.port(),
                             "svc1.testns.podns.svc.cluster.local.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)


class KubernetesInsecureTest(unittest.TestCase):
    """Without ``pods verified`` kubernetes knows no client: no walk."""

    @defer.inlineCallbacks
    def test_no_walk(self):
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        k8s_cluster.cluster(api)
        app = yield util.start(self, (
            ".:0 {\n    autopath @kubernetes\n"
            "    kubernetes cluster.local {\n        endpoint %s\n"
            "        pods insecure\n    }\n}\n") % api.url)
        k = app.config.blocks[0].plugin("kubernetes")
        self.assertIsNone(k.autopath(make_req("x.podns.svc.cluster.local.")))
        m = yield util.query(app.port(),
                             "svc1.testns.podns.svc.cluster.local.", "A")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)


def resolv_file(testcase, text):
    return util.write_files(testcase, {"resolv.conf": text}) + \
        "/resolv.conf"


def make_req(name, client="127.0.0.1"):
    req = Request(make_query(name, w.A), client)
    req.parse_question(*req.parse_header()[1:])
    return req
