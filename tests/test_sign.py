"""sign: zone signing (NSEC chain, keys at the apex, serial, resigning
rules), setup errors, and the signed zone served by file and validated
by dnspython, ldns-verify-zone, dnssec-verify and unbound."""

import os
import shutil
import tempfile

import dns.dnssec
import dns.flags
import dns.name
import dns.rcode
import dns.rdatatype
import dns.zone
from twisted.internet import defer, utils
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.engines.dnssec import keys
from corednstw.plugins.sign import signer as sg
from tests.support import unbound, util
from tests.support.unbound import ValidatingUnbound

# CoreDNS's plugin/sign/testdata/db.miek.nl.
ZONE = """\
$TTL    30M
$ORIGIN miek.nl.
@       IN      SOA     linode.atoom.net. miek.miek.nl. (
                        1282630060 4H 1H 7D 4H )
                IN      NS      linode.atoom.net.
                IN      MX      1  aspmx.l.google.com.
                IN      AAAA    2a01:7e00::f03c:91ff:fe79:234c
                IN      DNSKEY  257 3 13 sfzRg5nDVxbeUc51su4MzjgwpOpUwnuu81Sl\
RHqJuXe3SOYOeypR69tZ52XLmE56TAmPHsiB8Rgk+NTpf0o1Cw==

a               IN      AAAA    2a01:7e00::f03c:91ff:fe79:234c
www             IN      CNAME   a
*.wild          IN      TXT     "wildcard"

bla                 IN  NS      ns1.bla.com.
ns3.blaaat.miek.nl. IN  AAAA    ::1 ; non-glue, should be signed.
; in baliwick nameserver that requires glue, should not be signed
bla                 IN  NS      ns2.bla.miek.nl.
ns2.bla.miek.nl.    IN  A       127.0.0.1
""".replace("\\\n", "")

NOW = 1700000000


def setup_keys(testcase, zone="miek.nl", alg=keys.ECDSAP256SHA256,
               flags=keys.ZONE | keys.SEP):
    d = tempfile.mkdtemp(prefix="corednstw-sign-")
    testcase.addCleanup(shutil.rmtree, d, True)
    key = keys.generate(zone, alg, flags)
    base = keys.write_files(key, d)
    with open(os.path.join(d, "db." + zone), "w") as f:
        f.write(ZONE if zone == "miek.nl" else ZONE.replace(
            "miek.nl", zone))
    return d, key, base


def signer_for(testcase, **kw):
    d, key, base = setup_keys(testcase, **kw)
    s = sg.Signer(os.path.join(d, "db.miek.nl"), "miek.nl.", [key], d,
                  rand=lambda: 0.5)
    return s, key, d


def load_signed(path, origin="miek.nl."):
    return dns.zone.from_file(path, origin, relativize=False)


class SignerTest(unittest.TestCase):

    def setUp(self):
        self.signer, self.key, self.dir = signer_for(self)
        signed = self.signer.sign(NOW)
        self.signer.write(signed)
        self.zone = load_signed(self.signer.path)

    def rrset(self, name, rdtype):
        return self.zone.get_rrset(name, rdtype)

    def test_output_name_and_serial(self):
        self.assertEqual(os.path.basename(self.signer.path),
                         "db.miek.nl.signed")
        soa = self.rrset("miek.nl.", "SOA")[0]
        self.assertEqual(soa.serial, NOW)

    def test_keys_at_the_apex(self):
        k = self.key
        dnskeys = self.rrset("miek.nl.", "DNSKEY")
        self.assertEqual(len(dnskeys), 1)     # the input's key is dropped
        self.assertEqual(dnskeys.ttl, 1800)   # the SOA's TTL
        cds = sorted(rd.digest_type for rd in self.rrset("miek.nl.", "CDS"))
        self.assertEqual(cds, [1, 2])
        self.assertEqual(self.rrset("miek.nl.", "CDNSKEY")[0].to_text(),
                         dnskeys[0].to_text())
        self.assertEqual(dnskeys[0].flags, k.flags)

    def test_nsec_chain(self):
        chain = []
        name = dns.name.from_text("miek.nl.")
        while True:
            nsec = self.rrset(name, "NSEC")
            self.assertEqual(nsec.ttl, 14400)      # the SOA's minimum
            chain.append((name.to_text(), sorted(
                dns.rdatatype.to_text(t) for t in _types(nsec[0]))))
            name = nsec[0].next
            if name == dns.name.from_text("miek.nl."):
                break
        self.assertEqual(chain, [
            ("miek.nl.", sorted("NS SOA MX AAAA RRSIG NSEC DNSKEY CDS "
                                "CDNSKEY".split())),
            ("a.miek.nl.", ["AAAA", "NSEC", "RRSIG"]),
            ("bla.miek.nl.", ["NS", "NSEC", "RRSIG"]),
            ("ns3.blaaat.miek.nl.", ["AAAA", "NSEC", "RRSIG"]),
            ("*.wild.miek.nl.", ["NSEC", "RRSIG", "TXT"]),
            ("www.miek.nl.", ["CNAME", "NSEC", "RRSIG"]),
        ])

    def test_signatures(self):
        sigs = {}
        for name, node in self.zone.nodes.items():
            for rds in node.rdatasets:
                if rds.rdtype == dns.rdatatype.RRSIG:
                    for rd in rds:
                        sigs.setdefault(name.to_text(), []).append(
                            dns.rdatatype.to_text(rd.type_covered))
        self.assertNotIn("ns2.bla.miek.nl.", sigs)     # glue
        self.assertEqual(sigs["bla.miek.nl."], ["NSEC"])  # NS not signed
        self.assertEqual(sorted(sigs["miek.nl."]), sorted(
            "SOA NS MX AAAA DNSKEY CDS CDNSKEY NSEC".split()))
        rd = self.zone.get_rdataset("miek.nl.", "RRSIG", covers="SOA")[0]
        inception = NOW - 3 * 3600 - 9 * 3600          # jitter 0.5
        expiration = NOW + 32 * 86400 + int(2.5 * 86400)
        self.assertEqual((rd.inception, rd.expiration),
                         (inception, expiration))
        self.assertEqual(rd.key_tag, self.key.tag)

    def test_every_signature_validates(self):
        keyset = {dns.name.from_text("miek.nl."):
                  self.rrset("miek.nl.", "DNSKEY")}
        count = 0
        for name, node in self.zone.nodes.items():
            for rds in node.rdatasets:
                if rds.rdtype != dns.rdatatype.RRSIG:
                    continue
                for sig in rds:
                    covered = node.get_rdataset(1, sig.type_covered)
                    dns.dnssec.validate_rrsig(
                        (name, covered), sig, keyset, now=NOW)
                    count += 1
        self.assertEqual(count, 17)

    def test_resign_rules(self):
        s = self.signer
        self.assertIsNone(s.why_resign(NOW))
        why = s.why_resign(NOW + 6 * 86400)
        self.assertIn("was more than: 144h0m0s ago", why)
        why = s.why_resign(NOW - 13 * 3600)
        self.assertIn("date is in the future", why)
        os.remove(s.path)
        self.assertEqual(s.why_resign(NOW),
                         "open %s: no such file or directory" % s.path)

    def test_expiring_soon(self):
        short = sg.Signer(self.signer.dbfile, "miek.nl.", [self.key],
                          self.dir, rand=lambda: 0.0)
        text = "\n".join(rr.to_text() for rr in short.sign(NOW).records)
        self.assertIsNone(sg.needs_signing(text, NOW + 86400))
        why = sg.needs_signing(text, NOW + 32 * 86400 - 7 * 86400 + 1)
        self.assertTrue(why.startswith("inception") or "expiration" in why)
        self.assertIn("no SOA RRSIG",
                      sg.needs_signing("a. 1 IN A 127.0.0.1\n", NOW))


def _types(nsec):
    out = []
    for window, bitmap in nsec.windows:
        for i, byte in enumerate(bitmap):
            for bit in range(8):
                if byte & (0x80 >> bit):
                    out.append(window * 256 + i * 8 + bit)
    return out


class ExternalVerifiersTest(unittest.TestCase):
    """ldns-verify-zone and dnssec-verify on what sign writes."""

    @defer.inlineCallbacks
    def run_tool(self, tool, args):
        path = shutil.which(tool)
        if path is None:
            if os.environ.get("CI") == "true":
                self.fail("%s is not installed" % tool)
            raise unittest.SkipTest("%s is not installed" % tool)
        out, err, code = yield utils.getProcessOutputAndValue(
            path, args, env=os.environ)
        return out + err, code

    @defer.inlineCallbacks
    def check_alg(self, alg):
        s, key, d = signer_for(self, alg=alg)
        import time
        s.write(s.sign(time.time()))
        out, code = yield self.run_tool("ldns-verify-zone", [s.path])
        self.assertEqual(code, 0, out)
        out, code = yield self.run_tool(
            "dnssec-verify", ["-z", "-o", "miek.nl", s.path])
        self.assertEqual(code, 0, out)

    def test_ecdsa(self):
        return self.check_alg(keys.ECDSAP256SHA256)

    def test_ed25519(self):
        return self.check_alg(keys.ED25519)

    def test_rsa(self):
        return self.check_alg(keys.RSASHA256)


class SetupTest(unittest.TestCase):

    def load(self, text):
        return util.build_plugins(self, text, "sign")[0]

    def test_signers(self):
        d, key, base = setup_keys(self)
        plugins = self.load(
            "miek.nl example.net {\n sign db.miek.nl {\n  key file %s\n"
            "  directory %s\n }\n}\n" % (base, d))
        signers = plugins[0].signers
        self.assertEqual([s.origin for s in signers],
                         ["miek.nl.", "example.net."])
        self.assertEqual(signers[0].path,
                         os.path.join(d, "db.miek.nl.signed"))
        self.assertEqual(signers[0].keys[0].tag, key.tag)
        plugins = self.load("miek.nl {\n sign db.miek.nl example.org\n}\n")
        self.assertEqual(plugins[0].signers[0].directory, "/var/lib/coredns")
        self.assertEqual(plugins[0].signers[0].origin, "example.org.")

    def test_errors(self):
        d, key, base = setup_keys(self)
        zsk = keys.generate("miek.nl", flags=keys.ZONE)
        zbase = keys.write_files(zsk, d)
        cases = [
            ("sign", 2, "Wrong argument count"),
            ("sign db {\n  directory\n }", 3,
             'can only be one argument after "directory"'),
            ("sign db {\n  directory a b\n }", 3,
             'can only be one argument after "directory"'),
            ("sign db {\n  key directory /etc\n }", 3,
             "directory: not implemented"),
            ("sign db {\n  key file\n }", 3, "Wrong argument count"),
            ("sign db {\n  nope\n }", 3, "unknown property 'nope'"),
            ("sign db {\n  key file %s\n }" % zbase, 3,
             'DNSKEY in "%s.key" is not a CSK/KSK' % zbase),
            ("sign db {\n  key file %s/missing\n }" % d, 3,
             "open %s/missing.key: no such file or directory" % d),
        ]
        for text, line, msg in cases:
            e = self.assertRaises(CorefileError, self.load,
                                  "miek.nl {\n %s\n}\n" % text)
            self.assertIn(":%d - Error during parsing: plugin/sign: %s"
                          % (line, msg), str(e), text)


class ServedTest(unittest.TestCase):
    """sign writes, file serves, unbound validates; a copy with one
    record changed is refused."""

    @defer.inlineCallbacks
    def start_signed(self):
        d, key, base = setup_keys(self, zone="example.org")
        text = ("example.org:0 {\n file db.example.org.signed {\n"
                "  reload 10ms\n }\n sign db.example.org {\n"
                "  key file %s\n  directory .\n }\n root %s\n}\n"
                % (base, d))
        log = util.capture_log(self)
        app = yield util.start(self, text)
        yield util.wait_for(lambda: "Successfully reloaded zone" in
                            log.text())
        return app, key, d, log

    @defer.inlineCallbacks
    def test_signed_zone_served_and_validated(self):
        unbound.require(self)
        app, key, d, log = yield self.start_signed()
        self.assertIn('plugin/sign: Successfully signed zone '
                      '"example.org." in "%s/db.example.org.signed" with '
                      'key tags "%d"' % (d, key.tag), log.text())
        m = yield util.query(app.port(), "a.example.org", "AAAA",
                             want_dnssec=True)
        self.assertEqual(len(m.answer), 2, m)
        ub = yield ValidatingUnbound(self, key, app.port()).start()
        for name, rdtype, rcode in (
                ("a.example.org", "AAAA", dns.rcode.NOERROR),
                ("www.example.org", "AAAA", dns.rcode.NOERROR),
                ("x.wild.example.org", "TXT", dns.rcode.NOERROR),
                ("nothere.example.org", "A", dns.rcode.NXDOMAIN),
                ("a.example.org", "TXT", dns.rcode.NOERROR)):
            m = yield util.query(ub.port, name, rdtype, want_dnssec=True)
            self.assertEqual(m.rcode(), rcode, m)
            self.assertTrue(m.flags & dns.flags.AD, "%s %s\n%s\n%s" % (
                name, m, rdtype, ub.log()))

    @defer.inlineCallbacks
    def test_edited_record_fails(self):
        unbound.require(self)
        app, key, d, log = yield self.start_signed()
        with open(os.path.join(d, "db.example.org.signed")) as f:
            text = f.read()
        edited = text.replace("2a01:7e00::f03c:91ff:fe79:234c",
                              "2001:db8::bad")
        self.assertNotEqual(edited, text)
        with open(os.path.join(d, "db"), "w") as f:
            f.write(edited)
        other = yield util.start(
            self, "example.org:0 {\n file db\n root %s\n}\n" % d)
        ub = yield ValidatingUnbound(self, key, other.port()).start()
        m = yield util.query(ub.port, "a.example.org", "AAAA",
                             want_dnssec=True)
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL, m)
        m = yield util.query(app.port(), "a.example.org", "AAAA")
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)

    def test_no_rrsig_written_twice(self):
        s, key, d = signer_for(self)
        first = s.sign(NOW)
        s.write(first)
        again = sg.Signer(s.path, "miek.nl.", [key], d, rand=lambda: 0.5)
        second = again.sign(NOW)
        self.assertEqual(len(first.records), len(second.records))
        self.assertEqual(
            sum(rr.rtype == w.RRSIG for rr in first.records),
            sum(rr.rtype == w.RRSIG for rr in second.records))
