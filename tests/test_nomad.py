"""nomad against a local emulation of Nomad's service API
(tests/support/nomad_api.py): CoreDNS's table of answers, the token, a
filter, several agents, an agent unreachable at start, metrics and setup
errors."""

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.plugins.nomad import plugin as nomadmod
from tests.support import cases, nomad_api, util
from tests.support.cases import Case

SOA = ("%s 30 IN SOA ns1.%s hostmaster.service.nomad. 0 3600 600 86400 "
       "30")


def soa(qname):
    return SOA % (qname, qname)


TABLE = [
    Case("example.default.service.nomad.", "A", aa=True, answer=[
        "example.default.service.nomad. 30 IN A 1.2.3.4"]),
    Case("example.default.service.nomad.", "AAAA", aa=True),
    Case("fakeipv6.default.service.nomad.", "AAAA", answer=[
        "fakeipv6.default.service.nomad. 30 IN AAAA 1:2:3::4"]),
    Case("fakeipv6.default.service.nomad.", "A"),
    Case("multi.default.service.nomad.", "A", answer=[
        "multi.default.service.nomad. 30 IN A 1.2.3.4",
        "multi.default.service.nomad. 30 IN A 1.2.3.5",
        "multi.default.service.nomad. 30 IN A 1.2.3.6"]),
    Case("nonexistent.default.service.nomad.", "A", rcode="NXDOMAIN",
         aa=True, answer=[soa("nonexistent.default.service.nomad.")]),
    Case("example.default.service.nomad.", "SRV", answer=[
        "example.default.service.nomad. 30 IN SRV 10 10 23202 "
        "example.default.service.nomad."], extra=[
        "example.default.service.nomad. 30 IN A 1.2.3.4"]),
    Case("fakeipv6.default.service.nomad.", "SRV", answer=[
        "fakeipv6.default.service.nomad. 30 IN SRV 10 10 8000 "
        "fakeipv6.default.service.nomad."], extra=[
        "fakeipv6.default.service.nomad. 30 IN AAAA 1:2:3::4"]),
    # The owner keeps the client's case; the SRV target is lower-cased.
    Case("Example.Default.Service.Nomad.", "SRV", answer=[
        "Example.Default.Service.Nomad. 30 IN SRV 10 10 23202 "
        "example.default.service.nomad."], extra=[
        "example.default.service.nomad. 30 IN A 1.2.3.4"]),
    # Other types: NXDOMAIN with the SOA, as CoreDNS answers.
    Case("example.default.service.nomad.", "TXT", rcode="NXDOMAIN",
         answer=[soa("example.default.service.nomad.")]),
    # Another namespace; more labels are ignored.
    Case("web.prod.service.nomad.", "A", answer=[
        "web.prod.service.nomad. 30 IN A 10.1.0.1"]),
    Case("x.web.prod.service.nomad.", "A", answer=[
        "x.web.prod.service.nomad. 30 IN A 1.2.3.4"]),
    Case("web.default.service.nomad.", "A", rcode="NXDOMAIN",
         answer=[soa("web.default.service.nomad.")]),
    # A bad address in Nomad: NXDOMAIN with the SOA.
    Case("broken.default.service.nomad.", "A", rcode="NXDOMAIN",
         answer=[soa("broken.default.service.nomad.")]),
    # Too few labels: not for nomad (nothing after it: SERVFAIL).
    Case("example.service.nomad.", "A", rcode="SERVFAIL"),
    Case("service.nomad.", "A", rcode="SERVFAIL"),
]


def populate(api):
    api.register("example", "1.2.3.4", 23202)
    api.register("fakeipv6", "1:2:3::4", 8000)
    for i, port in ((4, 25395), (5, 20888), (6, 26292)):
        api.register("multi", "1.2.3.%d" % i, port)
    api.register("web", "10.1.0.1", 80, namespace="prod")
    api.register("x", "1.2.3.4", 80, namespace="web")
    api.register("broken", "not-an-address", 80)


def nomad_of(app):
    return [p for p in app.config.plugins() if p.name == "nomad"][0]


def default_count(family):
    """A counter's total over every server for namespace default."""
    return sum(v for k, v in family.values.items() if k[1] == "default")


class Base(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def api(self, **kw):
        api = nomad_api.NomadAPI(**kw).start()
        self.addCleanup(api.stop)
        populate(api)
        return api

    @defer.inlineCallbacks
    def start(self, body, zone="service.nomad"):
        app = yield util.start(self, "%s {\n    nomad %s\n}\n" % (zone,
                                                                body))
        return app, nomad_of(app)


class AnswersTest(Base):

    @defer.inlineCallbacks
    def test_table(self):
        api = self.api()
        app, p = yield self.start("{\n address %s\n }" % api.url)
        self.assertTrue(p.ready())
        yield cases.run(self, app.port(), TABLE)
        yield cases.run(self, app.port(), TABLE, proto="tcp")

    @defer.inlineCallbacks
    def test_ttl_zone_and_metrics(self):
        api = self.api()
        app, _ = yield self.start("consul.local {\n address %s\n ttl 5\n }"
                                  % api.url, zone="consul.local")
        ok = default_count(nomadmod.SUCCESS)
        failed = default_count(nomadmod.FAILED)
        yield cases.run(self, app.port(), [
            Case("example.default.consul.local.", "A", answer=[
                "example.default.consul.local. 5 IN A 1.2.3.4"]),
            Case("nope.default.consul.local.", "A", rcode="NXDOMAIN",
                 answer=["nope.default.consul.local. 5 IN SOA "
                         "ns1.nope.default.consul.local. "
                         "hostmaster.consul.local. 0 3600 600 86400 30"])])
        self.assertEqual(default_count(nomadmod.SUCCESS), ok + 1)
        self.assertEqual(default_count(nomadmod.FAILED), failed + 1)
        self.assertTrue(all(k[0].startswith("dns://")
                            for k in nomadmod.SUCCESS.values))

    @defer.inlineCallbacks
    def test_filter_and_token(self):
        api = self.api(token="s3cret")
        app, _ = yield self.start(
            '{\n address %s\n token s3cret\n filter "Tags contains '
            'v1"\n }' % api.url)
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", answer=[
                "example.default.service.nomad. 30 IN A 1.2.3.4"])])
        path, params = api.queries[-1]
        self.assertEqual(path, "/v1/service/example")
        self.assertEqual(params, {"namespace": "default",
                                  "filter": "Tags contains v1"})

    @defer.inlineCallbacks
    def test_refused_token(self):
        """Nomad refuses: logged, an empty NOERROR answer."""
        api = self.api(token="s3cret")
        app, p = yield self.start("{\n address %s\n token wrong\n }"
                                  % api.url)
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", aa=True)])
        self.assertIn("[WARNING] plugin/nomad: Unexpected response code: "
                      "403 (Permission denied)", self.log.text())


class AgentsTest(Base):

    @defer.inlineCallbacks
    def test_first_agent_down(self):
        """The first agent that answers /v1/agent/self is used."""
        down = util.free_port()
        api = self.api()
        app, p = yield self.start("{\n address http://127.0.0.1:%d %s\n }"
                                  % (down, api.url))
        self.assertTrue(p.ready())
        self.assertEqual(p.current, 1)
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", answer=[
                "example.default.service.nomad. 30 IN A 1.2.3.4"])])

    @defer.inlineCallbacks
    def test_unreachable_at_start(self):
        """No agent at start: logged, not ready, empty answers; ready
        once one answers, without a restart."""
        port = util.free_port()
        app, p = yield self.start("{\n address http://127.0.0.1:%d\n }"
                                  % port)
        self.assertFalse(p.ready())
        self.assertIn("[ERROR] plugin/nomad: No Nomad agent reachable at "
                      "[http://127.0.0.1:%d]" % port, self.log.text())
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", aa=True)])
        self.api(port=port)
        yield util.wait_for(p.ready, timeout=30)
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", answer=[
                "example.default.service.nomad. 30 IN A 1.2.3.4"])])

    @defer.inlineCallbacks
    def test_unix_socket(self):
        """unix:// addresses reach the agent's API socket."""
        import os
        import tempfile

        from twisted.internet import reactor
        from twisted.web import proxy, server
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        sock = os.path.join(d, "api.sock")
        api = self.api()
        site = server.Site(proxy.ReverseProxyResource(
            "127.0.0.1", api.port, b""))
        port = reactor.listenUNIX(sock, site)
        self.addCleanup(port.stopListening)
        app, p = yield self.start("{\n address unix://%s\n }" % sock)
        yield util.wait_for(p.ready)
        yield cases.run(self, app.port(), [Case(
            "example.default.service.nomad.", "A", answer=[
                "example.default.service.nomad. 30 IN A 1.2.3.4"])])


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.log = util.capture_log(self)

    def error(self, body):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, "service.nomad {\n    nomad service.nomad "
                        "{\n%s\n    }\n}\n" % body)
        return str(cm.exception)

    def test_errors(self):
        for body, message in [
                ("address", "at least one address is required"),
                ("filter a b", "exactly one filter is required"),
                ("token", "exactly one token is required"),
                ("ttl", "exactly one ttl value is required"),
                ("ttl -1", "ttl must be in range [0, 3600]: -1"),
                ("ttl 3601", "ttl must be in range [0, 3600]: 3601"),
                ("ttl 1m", 'error parsing ttl: strconv.Atoi: parsing '
                           '"1m": invalid syntax'),
                ("invalid_property", "unknown property "
                                     "'invalid_property'")]:
            self.assertIn("Corefile:3 - Error during parsing: plugin/nomad: "
                          + message, self.error(body))

    def test_valid(self):
        plugins, _ = util.build_plugins(self, """service.nomad {
    nomad {
        address http://127.0.0.1:4646 http://127.0.0.2:4646
        FILTER "Tags not contains candidate"
        token test-token
        ttl 60
    }
}
""", "nomad")
        p = plugins[0]
        self.assertEqual(p.zone, "service.nomad.")
        self.assertEqual(p.addresses, ["http://127.0.0.1:4646",
                                       "http://127.0.0.2:4646"])
        self.assertEqual(p.filter, "Tags not contains candidate")
        self.assertEqual((p.token, p.ttl), ("test-token", 60))

    def test_defaults(self):
        import os
        self.patch(os, "environ", {"NOMAD_ADDR": "http://10.0.0.9:4646"})
        plugins, _ = util.build_plugins(self, ". {\n    nomad\n}\n",
                                        "nomad")
        p = plugins[0]
        self.assertEqual(p.zone, "service.nomad.")
        self.assertEqual(p.addresses, ["http://10.0.0.9:4646"])
        self.assertEqual((p.token, p.ttl), ("", 30))
