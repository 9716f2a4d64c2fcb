"""The table-test support: Case builds the query, check_response passes a
matching reply and fails each kind of mismatch with a message naming the
section and the record."""

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.trial import unittest

from tests.support import util
from tests.support.cases import Case, check_response, parse_record, problems


def reply(case, rcode=0, answer=(), ns=(), extra=(), aa=True):
    """A reply to ``case.msg()`` holding zone-file lines, one record per
    set (so each keeps its TTL)."""
    r = dns.message.make_response(case.msg())
    r.set_rcode(rcode)
    if aa:
        r.flags |= dns.flags.AA
    for section, lines in ((r.answer, answer), (r.authority, ns),
                           (r.additional, extra)):
        for line in lines:
            name, ttl, cls, rtype, rdata = line.split(None, 4)
            section.append(dns.rrset.from_text(name, int(ttl), cls, rtype,
                                               rdata))
    return r


A = "www.example.org. 3600 IN A 127.0.0.1"
A2 = "www.example.org. 3600 IN A 127.0.0.2"
SOA = ("example.org. 300 IN SOA ns.example.org. admin.example.org. 1 2 3 4 "
       "5")
NS = "example.org. 300 IN NS ns.example.org."
GLUE = "ns.example.org. 300 IN A 192.0.2.53"


class CaseTest(unittest.TestCase):

    def test_msg(self):
        q = Case("www.example.org.", "AAAA").msg()
        self.assertEqual(str(q.question[0].name), "www.example.org.")
        self.assertEqual(q.question[0].rdtype, dns.rdatatype.AAAA)
        self.assertTrue(q.flags & dns.flags.RD)
        self.assertEqual(q.edns, -1)

    def test_msg_do(self):
        q = Case("example.org", "DNSKEY", do=True).msg()
        self.assertEqual(str(q.question[0].name), "example.org.")
        self.assertEqual(q.edns, 0)
        self.assertTrue(q.ednsflags & dns.flags.DO)
        self.assertEqual(q.payload, 4096)

    def test_msg_class_payload_cd(self):
        q = Case("version.bind.", "TXT", qclass="CH", payload=1232,
                 cd_query=True).msg()
        self.assertEqual(q.question[0].rdclass, 3)
        self.assertEqual((q.edns, q.payload), (0, 1232))
        self.assertFalse(q.ednsflags & dns.flags.DO)
        self.assertTrue(q.flags & dns.flags.CD)

    def test_unknown_flag_rejected(self):
        self.assertRaises(TypeError, Case, "a.", "A", qr=True)

    def test_str(self):
        self.assertEqual(str(Case("a.", "MX", do=True, desc="signed")),
                         "a./MX +do (signed)")

    def test_record_text_forms(self):
        # The class is optional; rdata is compared in canonical form.
        r = parse_record("a.example.  60  AAAA ::FFFF:10.0.0.2")
        self.assertEqual((r.name, r.ttl, r.rdclass, r.rdata),
                         ("a.example.", 60, 1, "::ffff:10.0.0.2"))
        r = parse_record("version.bind. 0 CH TXT \"v1 x\"")
        self.assertEqual((r.rdclass, r.rdata), (3, '"v1 x"'))
        self.assertIsNone(parse_record("a. * IN A 1.2.3.4").ttl)
        self.assertRaises(ValueError, parse_record, "a. 60")


class CheckTest(unittest.TestCase):

    def assertFails(self, case, r, *fragments):
        """check_response fails, and its message holds every fragment."""
        e = self.assertRaises(self.failureException, check_response, self,
                              case, r)
        for fragment in fragments:
            self.assertIn(fragment, str(e))
        return str(e)

    def test_match_passes(self):
        case = Case("www.example.org.", "A", answer=[A2, A], ns=[NS],
                    extra=[GLUE], aa=True, rd=True, tc=False)
        check_response(self, case, reply(case, answer=[A, A2], ns=[NS],
                                         extra=[GLUE]))

    def test_match_with_edns_passes(self):
        # The OPT record of the reply is not a record of a section.
        case = Case("www.example.org.", "A", answer=[A], do=True)
        r = reply(case, answer=[A])
        r.use_edns(0, dns.flags.DO, 4096)
        check_response(self, case, dns.message.from_wire(r.to_wire()))

    def test_rcode(self):
        case = Case("nope.example.org.", "A", rcode="NXDOMAIN", ns=[SOA])
        self.assertFails(case, reply(case, ns=[SOA]),
                         "nope.example.org./A",
                         "rcode is NOERROR, expected NXDOMAIN")
        case = Case("x.", rcode=dns.rcode.SERVFAIL)
        self.assertFails(case, reply(case),
                         "rcode is NOERROR, expected SERVFAIL")

    def test_missing_record(self):
        case = Case("www.example.org.", "A", answer=[A, A2])
        self.assertFails(case, reply(case, answer=[A]),
                         "answer: missing   " + A2, "got 1 record(s)")

    def test_unexpected_record(self):
        case = Case("www.example.org.", "A", answer=[A])
        self.assertFails(case, reply(case, answer=[A], extra=[GLUE]),
                         "additional: unexpected " + GLUE)

    def test_wrong_section(self):
        case = Case("example.org.", "MX", ns=[SOA])
        msg = self.assertFails(case, reply(case, answer=[SOA]),
                               "answer: unexpected", "authority: missing")
        self.assertNotIn("additional", msg)

    def test_ttl(self):
        case = Case("www.example.org.", "A", answer=[A])
        self.assertFails(case, reply(case, answer=[A.replace("3600",
                                                             "60")]),
                         "answer: TTL of www.example.org. A is 60, "
                         "expected 3600")

    def test_any_ttl(self):
        case = Case("www.example.org.", "A",
                    answer=["www.example.org. * IN A 127.0.0.1"])
        check_response(self, case, reply(case, answer=[A]))

    def test_rdata(self):
        case = Case("www.example.org.", "A", answer=[A])
        self.assertFails(case, reply(case, answer=[A2]),
                         "answer: missing   " + A,
                         "answer: unexpected " + A2)

    def test_any_field(self):
        case = Case("x.", "A", extra=["_udp.x. 0 IN SRV 0 0 * ."])
        check_response(self, case, reply(
            case, extra=["_udp.x. 0 IN SRV 0 0 5353 ."]))
        self.assertFails(case, reply(
            case, extra=["_udp.x. 0 IN SRV 0 1 5353 ."]), "missing")

    def test_owner_case(self):
        case = Case("WWW.example.org.", "A",
                    answer=["WWW.example.org. 3600 IN A 127.0.0.1"])
        self.assertFails(case, reply(case, answer=[A]),
                         "unexpected www.example.org.")

    def test_question_echo(self):
        case = Case("WwW.example.org.", "A")
        r = reply(Case("www.example.org.", "A"))
        self.assertFails(case, r, "question is www.example.org. A, "
                                  "expected WwW.example.org. A")

    def test_flags(self):
        case = Case("www.example.org.", "A", answer=[A], aa=True)
        self.assertFails(case, reply(case, answer=[A], aa=False),
                         "flag AA is clear, expected set")
        case = Case("www.example.org.", "A", answer=[A], aa=False)
        self.assertFails(case, reply(case, answer=[A]),
                         "flag AA is set, expected clear")
        case = Case("www.example.org.", "A", answer=[A], flags="QR RD")
        self.assertFails(case, reply(case, answer=[A]),
                         "flags are 'QR AA RD', expected 'QR RD'")

    def test_unchecked_flags_ignored(self):
        case = Case("www.example.org.", "A", answer=[A])
        check_response(self, case, reply(case, answer=[A], aa=False))

    def test_no_reply(self):
        self.assertEqual(problems(Case("a."), None), ["no reply"])

    def test_fields(self):
        """A caller may compare only some rdata fields (CoreDNS's
        test.Section compares an SOA by its name server)."""
        def ns_only(rdtype, text):
            return text.split()[0] if rdtype == dns.rdatatype.SOA else text
        case = Case("example.org.", "SOA",
                    answer=[SOA.replace(" 1 2", " 9 2")])
        check_response(self, case, reply(case, answer=[SOA]), ns_only)
        self.assertRaises(self.failureException, check_response, self, case,
                          reply(case, answer=[SOA]))


class RunTest(unittest.TestCase):

    def test_direct_table(self):
        from tests.support import cases
        d = util.Direct(self, ".:0 {\n    whoami\n}\n")
        cases.run_direct(self, d, [
            Case("example.org.", "A", aa=True,
                 extra=cases.whoami("example.org.", port=40000)),
            Case("Example.ORG", "TXT", aa=True,
                 extra=cases.whoami("Example.ORG")),
        ])
        self.assertRaises(self.failureException, cases.run_direct, self, d,
                          [Case("example.org.", "A")])
