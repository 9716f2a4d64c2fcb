"""kubernetes: the options of CoreDNS 1.0 to 1.7 since removed, over the
wire: ``upstream [ADDRESS...]`` (ExternalName targets) and ``transfer
to ADDRESS...`` (AXFR and IXFR of the cluster zone)."""

import re

import dns.flags
import dns.rcode
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core.request import parse_response
from corednstw.plugins.kubernetes import upstream as upstream_option
from tests.support import k8s_apiserver as k8s
from tests.support import upstream as upstreammod
from tests.support import util
from tests.support.k8s_cluster import cluster
from tests.support.util import free_port
from tests.support.xfr import axfr, transferred

EXT = "external.testns.svc.cluster.local."
TO_SERVICE = "external-to-service.testns.svc.cluster.local."
CNAME = EXT + " 5 IN CNAME ext.interwebs.test."


@defer.inlineCallbacks
def zone(port):
    """The records of an AXFR of cluster.local, the SOA serial masked
    (two servers list the same objects in different seconds)."""
    replies = yield util.send_tcp(port, axfr("cluster.local."))
    return [re.sub(r"(SOA \S+ \S+ )\d+", r"\1SERIAL", x)
            for x in transferred(replies)]


class Base(unittest.TestCase):
    """The CoreDNS handler tests' cluster, one kubernetes directive with
    ``options`` (lines separated by ";") and the block's ``extra``."""

    options = ""
    extra = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.log = util.capture_log(self)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        cluster(self.api)
        self.up = upstreammod.Upstream(address="192.0.2.7").start()
        self.addCleanup(self.up.stop)
        self.app = yield util.start(self, self.corefile())
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")

    def corefile(self):
        options = ["endpoint " + self.api.url, "namespaces testns"]
        options += [o.strip() for o in self.fill(self.options).split(";")
                    if o.strip()]
        return ".:0 {\n    kubernetes cluster.local {\n%s    }\n%s}\n" % (
            "".join("        %s\n" % o for o in options),
            self.fill(self.extra))

    def fill(self, text):
        return text.replace("{UP}", self.up.addr())

    def no_self_lookup(self):
        """Fail the test if anything resolves through the server."""
        def lookup(*args, **kw):
            self.fail("resolved through the server: %r" % (args,))
        self.patch(self.app, "lookup", lookup)


class UpstreamAddressTest(Base):
    options = "upstream {UP}"

    @defer.inlineCallbacks
    def test_external_name_through_the_addresses(self):
        self.no_self_lookup()
        m = yield util.query(self.port, EXT, "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertTrue(m.flags & dns.flags.AA)
        # The CNAME first, then the upstream's answer as it came.
        self.assertEqual(util.rrs(m), sorted([
            CNAME, "ext.interwebs.test. 300 IN A 192.0.2.7"]))
        self.assertEqual([str(r.name) for r in m.answer],
                         [EXT, "ext.interwebs.test."])
        self.assertEqual(self.up.count("ext.interwebs.test.", "A"), 1)

    @defer.inlineCallbacks
    def test_upstream_nxdomain_leaves_the_cname(self):
        """1.3 appended whatever answer came back, none for NXDOMAIN."""
        self.up.rcode = dns.rcode.NXDOMAIN
        m = yield util.query(self.port, EXT, "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(util.rrs(m), [CNAME])

    @defer.inlineCallbacks
    def test_truncated_asked_again_over_tcp(self):
        self.up.truncate = True
        m = yield util.query(self.port, EXT, "A", proto="tcp")
        self.assertEqual(util.rrs(m), sorted([
            CNAME, "ext.interwebs.test. 300 IN A 192.0.2.7"]))
        self.assertEqual(self.up.count(proto="udp"), 1)
        self.assertEqual(self.up.count(proto="tcp"), 1)

    @defer.inlineCallbacks
    def test_targets_in_the_zone_not_asked(self):
        self.no_self_lookup()
        m = yield util.query(self.port, TO_SERVICE, "A")
        self.assertEqual(util.rrs(m), sorted([
            TO_SERVICE + " 5 IN CNAME svc1.testns.svc.cluster.local.",
            "svc1.testns.svc.cluster.local. 5 IN A 10.0.0.1"]))
        self.assertEqual(self.up.count(), 0)

    def test_deprecation_notice(self):
        notices = [x for x in self.log.lines
                   if x.startswith("[WARNING] plugin/kubernetes: upstream")]
        self.assertEqual(len(notices), 1)
        self.assertIn("resolved through the server itself; remove it",
                      notices[0])


class InOrder:
    """random.sample that keeps the order: the dead resolver is always
    asked first."""

    @staticmethod
    def sample(seq, k):
        return list(seq)[:k]


class UpstreamFailoverTest(Base):
    """A resolver that does not answer: the next one is asked."""

    options = "upstream {DEAD} {UP}"

    def setUp(self):
        self.dead = "127.0.0.1:%d" % free_port()
        self.patch(upstream_option, "random", InOrder)
        self.patch(upstream_option, "TIMEOUT", 0.2)
        return Base.setUp(self)

    def fill(self, text):
        return Base.fill(self, text).replace("{DEAD}", self.dead)

    @defer.inlineCallbacks
    def test_the_live_one_answers(self):
        m = yield util.query(self.port, EXT, "A")
        self.assertEqual(util.rrs(m), sorted([
            CNAME, "ext.interwebs.test. 300 IN A 192.0.2.7"]))
        self.assertEqual(self.up.count(), 1)

    @defer.inlineCallbacks
    def test_none_answers(self):
        """No answer to append: NODATA, as 1.3 answered then."""
        yield self.up.stop()
        m = yield util.query(self.port, EXT, "A")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertEqual(m.answer, [])
        self.assertEqual(len(m.authority), 1)


class UpstreamSelfTest(Base):
    """``upstream`` without an address: through the server itself (the
    block's forward here), as every CoreDNS since 1.4."""

    options = "upstream"
    extra = "    forward . {UP}\n"

    @defer.inlineCallbacks
    def test_external_name_through_the_server(self):
        asked = []
        lookup = self.app.lookup

        def spy(name, qtype, **kw):
            asked.append(name)
            return lookup(name, qtype, **kw)
        self.patch(self.app, "lookup", spy)
        m = yield util.query(self.port, EXT, "A")
        self.assertEqual(util.rrs(m), sorted([
            CNAME, "ext.interwebs.test. 300 IN A 192.0.2.7"]))
        self.assertEqual(asked, ["ext.interwebs.test."])
        self.assertEqual(self.up.count("ext.interwebs.test.", "A"), 1)


class TransferToTest(Base):
    options = "transfer to 127.0.0.1"

    @defer.inlineCallbacks
    def test_axfr(self):
        replies = yield util.send_tcp(self.port, axfr("cluster.local."))
        got = transferred(replies)
        serial = self.k.serial("cluster.local.")
        soa = ("cluster.local. 5 SOA ns.dns.cluster.local. "
               "hostmaster.cluster.local. %d 7200 1800 86400 5" % serial)
        self.assertEqual((got[0], got[-1]), (soa, soa))
        self.assertIn("svc1.testns.svc.cluster.local. 5 A 10.0.0.1", got)
        self.assertIn(EXT + " 5 CNAME ext.interwebs.test.", got)
        self.assertFalse([x for x in got if "kube-system" in x.split()[0]])
        self.assertIn('Outgoing transfer of %d records of zone '
                      '"cluster.local." to 127.0.0.1' % len(got),
                      self.log.text())

    @defer.inlineCallbacks
    def test_same_as_the_transfer_plugin(self):
        """What ``transfer { to 127.0.0.1 }`` in the block sends."""
        ours = yield zone(self.port)
        text = self.corefile().replace("        transfer to 127.0.0.1\n", "")
        text = text[:text.rindex("}")] + (
            "    transfer {\n        to 127.0.0.1\n    }\n}\n")
        other = yield util.start(self, text)
        theirs = yield zone(other.port())
        self.assertGreater(len(ours), 10)
        self.assertEqual(ours, theirs)

    @defer.inlineCallbacks
    def test_ixfr_current_serial(self):
        serial = self.k.serial("cluster.local.")
        got = transferred((yield util.send_tcp(
            self.port, axfr("cluster.local.", serial))))
        self.assertEqual(len(got), 1)
        self.assertIn(" SOA ", got[0])

    @defer.inlineCallbacks
    def test_udp_refused(self):
        data = yield util.send_udp(self.port, axfr("cluster.local."))
        self.assertEqual(parse_response(data).rcode, dns.rcode.REFUSED)

    @defer.inlineCallbacks
    def test_other_zones_not_ours(self):
        m = yield util.query(self.port, "example.org.", "AXFR", proto="tcp")
        self.assertNotEqual(m.rcode(), dns.rcode.NOERROR)

    def test_deprecation_notice(self):
        notices = [x for x in self.log.lines
                   if x.startswith("[WARNING] plugin/kubernetes: transfer")]
        self.assertEqual(len(notices), 1)
        self.assertIn("use the transfer plugin", notices[0])


class TransferToOthersTest(Base):
    options = "transfer to 192.0.2.1"

    @defer.inlineCallbacks
    def test_refused(self):
        m = yield util.query(self.port, "cluster.local.", "AXFR",
                             proto="tcp")
        self.assertEqual(m.rcode(), dns.rcode.REFUSED)
