"""kubernetes: the cluster zone as a zone — transfers through *transfer*
whose SOA serial follows the data, and names of its reverse zones that are
no addresses."""

import re

import dns.rcode
from twisted.internet import defer

from tests.support import k8s_apiserver as k8s
from tests.support import util
from tests.support.xfr import axfr, transferred
from tests.test_kubernetes_interfaces import Base

Z = "cluster.local."
REV = "0.0.10.in-addr.arpa."


class SerialTest(Base):
    extra = "    transfer {\n        to *\n    }\n"

    @defer.inlineCallbacks
    def zone(self, serial=None):
        got = transferred((yield util.send_tcp(self.port, axfr(Z, serial))))
        defer.returnValue(got)

    @staticmethod
    def serial_of(records):
        return int(records[0].split()[5])

    @defer.inlineCallbacks
    def test_serial_follows_changes(self):
        first = yield self.zone()
        serial = self.serial_of(first)
        self.assertEqual(serial, self.k.serial(Z))
        self.assertEqual(first[-1], first[0])
        # A change one second later (the store's clock) moves the serial.
        later = serial + 1
        self.k.store.clock = lambda: later
        self.api.add("services", k8s.service("late", "testns",
                                             ("10.0.0.77",)))
        yield util.wait_for(lambda: ("late", "testns")
                            in self.k.store.services)
        got = yield self.zone()
        self.assertEqual(self.serial_of(got), later)
        self.assertEqual(got[-1], got[0])
        self.assertIn("late.testns.svc.cluster.local. 5 A 10.0.0.77", got)
        self.assertNotIn("late.testns.svc.cluster.local. 5 A 10.0.0.77",
                         first)
        m = yield util.query(self.port, Z, "SOA")
        self.assertEqual(m.answer[0][0].serial, later)
        # IXFR from the old serial: the whole zone; from the new: the SOA.
        self.assertEqual((yield self.zone(serial)), got)
        self.assertEqual((yield self.zone(later)), [got[0]])

    @defer.inlineCallbacks
    def test_same_data_keeps_the_serial(self):
        serial = self.k.serial(Z)
        self.k.store.clock = lambda: serial + 5
        self.api.add("services", k8s.service("svc1", "testns",
                                             ("10.0.0.1",),
                                             labels={"new": "label"}))
        rv = str(self.api.rv)
        yield util.wait_for(lambda: self.k.store.services[
            ("svc1", "testns")].rv == rv)
        self.assertEqual(self.k.serial(Z), serial)
        # A deletion is a change.
        self.api.delete("services", "testns", "svc6")
        yield util.wait_for(lambda: ("svc6", "testns")
                            not in self.k.store.services)
        self.assertEqual(self.serial_of((yield self.zone())), serial + 5)


class ReverseZoneTest(Base):
    """Names of a reverse zone that are no complete address do not exist
    whatever their shape (CoreDNS's Records refuses reverse names), with
    the reverse zone's SOA."""

    def test_not_addresses(self):
        soa = ("%s 5 IN SOA ns.dns.%s hostmaster.%s SERIAL 7200 1800 86400 "
               "5" % (REV, REV, REV))
        cases = []
        for name in ("svc1.testns.svc." + REV, "foo." + REV,
                     "testns.svc." + REV, "x.1." + REV):
            for qtype in ("A", "AAAA", "PTR", "SRV", "TXT"):
                cases.append((name, qtype, "NXDOMAIN", [], [soa], []))
        cases.append(("1." + REV, "PTR", "NOERROR", [
            "1.%s 5 IN PTR svc1.testns.svc.cluster.local." % REV], [], []))
        return self.check(cases)

    @defer.inlineCallbacks
    def check(self, cases):
        for qname, qtype, rcode, answer, ns, extra in cases:
            m = yield util.query(self.port, qname, qtype)
            what = "%s %s" % (qname, qtype)
            self.assertEqual(dns.rcode.to_text(m.rcode()), rcode, what)
            self.assertEqual(lines(m, "answer"), answer, what)
            self.assertEqual(lines(m, "authority"), ns, what)
            self.assertEqual(lines(m, "additional"), extra, what)


def lines(msg, section):
    """A section's records as text, the SOA serial masked (it follows the
    store's clock)."""
    return [re.sub(r"(SOA \S+ \S+ )\d+", r"\1SERIAL", x)
            for x in util.rrs(msg, section)]
