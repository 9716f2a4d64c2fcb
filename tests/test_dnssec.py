"""dnssec: on-the-fly signing, black lies, the signature cache, key files
and setup errors.  Every signature the tables see is checked with
dnspython's validator against the configured keys."""

import base64
import json
import os
import tempfile

import dns.dnssec
import dns.message
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import (
    RawResponse,
    Request,
    Response,
    encode,
    make_query,
)
from corednstw.engines.dnssec import keys, signer
from corednstw.plugins.dnssec import cache
from corednstw.plugins.dnssec.plugin import Dnssec
from tests.support import util
from tests.support.cases import Case, check_response, parse_reply

ZONE = """\
$TTL    30M
$ORIGIN miek.nl.
@       IN      SOA     linode.atoom.net. miek.miek.nl. (
                             1282630057 ; Serial
                             4H         ; Refresh
                             1H         ; Retry
                             7D         ; Expire
                             4H )       ; Negative Cache TTL
                IN      NS      linode.atoom.net.
                IN      MX      1  aspmx.l.google.com.
                IN      A       139.162.196.78
                IN      AAAA    2a01:7e00::f03c:91ff:fef1:6735
a               IN      A       139.162.196.78
                IN      AAAA    2a01:7e00::f03c:91ff:fef1:6735
www             IN      CNAME   a
*.w             IN      TXT     "wild"
deleg           IN      NS      ns01.deleg
                IN      DS      18512 13 2 (
                    D4E806322598BC97A003EF1ACDFF352E
                    EFF7B42DBB0D41B8224714C36AEF08D9 )
unsigned        IN      NS      ns01.deleg
"""

# CoreDNS's test key for miek.nl. (plugin/dnssec's tests): key tag 18512.
PUB = ("miek.nl. IN DNSKEY 257 3 13 0J8u0XJ9GNGFEBXuAmLu04taHG4BXPP3gwhet"
       "iOUMnGA+x09nqzgF5IY OyjWB7N3rXqQbnOSILhH1hnuyh7mmA==\n")
PRIV = """\
Private-key-format: v1.3
Algorithm: 13 (ECDSAP256SHA256)
PrivateKey: /4BZk8AFvyW5hL3cOLSVxIp1RTqHSAEloWUxj86p3gs=
Created: 20160423195532
Publish: 20160423195532
Activate: 20160423195532
"""


def rrsig(owner, covered, labels, ttl=1800):
    """An RRSIG by CoreDNS's test key; times and signature not compared
    (see ``fields``)."""
    return "%s %d IN RRSIG %s 13 %d 3600 * * 18512 miek.nl." % (
        owner, ttl, covered, labels)


def fields(rdtype, text):
    """What of an rdata the tables compare: RRSIGs without their
    signature, the rest in dnspython's presentation form."""
    rd = dns.rdata.from_text(1, rdtype, text)
    if rdtype == dns.rdatatype.RRSIG:
        return " ".join(rd.to_text().split()[:8])
    return rd.to_text()


def write_pair(testcase, text_pub=PUB, text_priv=PRIV, base="Kmiek.nl"):
    d = tempfile.mkdtemp(prefix="corednstw-keys-")
    testcase.addCleanup(util._rmtree, d)
    path = os.path.join(d, base)
    with open(path + ".key", "w") as f:
        f.write(text_pub)
    with open(path + ".private", "w") as f:
        f.write(text_priv)
    return path


def validate(testcase, reply, dnskeys):
    """Check every RRSIG of ``reply`` with dnspython against
    ``dnskeys`` (dnspython DNSKEY rdatas by zone name)."""
    count = 0
    for section in (reply.answer, reply.authority, reply.additional):
        for sigset in section:
            if sigset.rdtype != dns.rdatatype.RRSIG:
                continue
            for sig in sigset:
                rrset = _covered(reply, sigset.name, sig.type_covered)
                testcase.assertIsNotNone(rrset, "no set for %s" % sig)
                one = dns.rrset.RRset(sigset.name, sigset.rdclass,
                                      sigset.rdtype)
                one.add(sig, sigset.ttl)
                dns.dnssec.validate(rrset, one, dnskeys)
                count += 1
    return count


def _covered(reply, name, rdtype):
    out = None
    for section in (reply.answer, reply.authority, reply.additional):
        for rrset in section:
            if rrset.name == name and rrset.rdtype == rdtype:
                if out is None:
                    out = dns.rrset.RRset(name, rrset.rdclass, rdtype)
                for rd in rrset:
                    out.add(rd, rrset.ttl)
    return out


def dnskey_map(zone, *ks):
    rds = [dns.rdata.from_wire(1, w.DNSKEY, k.rdata(), 0, len(k.rdata()))
           for k in ks]
    return {dns.name.from_text(zone): rds}


class KeyFileTest(unittest.TestCase):

    def test_coredns_test_key(self):
        k = keys.read_pair(write_pair(self))
        self.assertEqual((k.name, k.tag, k.flags, k.algorithm),
                         ("miek.nl.", 18512, 257, 13))
        self.assertTrue(k.is_ksk())
        self.assertFalse(k.is_zsk())
        self.assertEqual(k.ttl, 3600)
        self.assertEqual(
            k.ds(2).hex().upper()[8:],
            "D4E806322598BC97A003EF1ACDFF352EEFF7B42DBB0D41B8224714C36AEF08D9")

    def test_every_algorithm_round_trips(self):
        for alg in (5, 7, 8, 10, 13, 14, 15):
            k = keys.generate("example.org", alg, bits=1024)
            d = tempfile.mkdtemp()
            self.addCleanup(util._rmtree, d)
            base = keys.write_files(k, d)
            self.assertTrue(os.path.basename(base).startswith(
                "Kexample.org.+%03d+" % alg))
            back = keys.read_pair(base)
            self.assertEqual((back.tag, back.public), (k.tag, k.public))
            rrs = [w.RR("www.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))]
            sig = signer.rrsig(back, rrs, "example.org.", 60, 1, 2 ** 31)
            rrset = dns.rrset.from_text("www.example.org.", 60, "IN", "A",
                                        "192.0.2.1")
            sigset = dns.rrset.RRset(rrset.name, 1, w.RRSIG)
            sigset.add(sig.rdata_obj(), 60)
            dns.dnssec.validate(rrset, sigset,
                                dnskey_map("example.org.", k),
                                now=2 ** 30)

    def test_private_key_never_readable_by_others(self):
        """The .private file is created 0600, not created with the umask's
        mode and tightened afterwards (another user could open it in
        between): with umask 0, every mode it is seen with is 0600."""
        old = os.umask(0)
        self.addCleanup(os.umask, old)
        seen = []
        chmod = os.chmod

        def watch(path, mode):
            seen.append(os.stat(path).st_mode & 0o777)
            chmod(path, mode)
        self.patch(keys.os, "chmod", watch)
        d = tempfile.mkdtemp()
        self.addCleanup(util._rmtree, d)
        base = keys.write_files(keys.generate("example.org"), d)
        seen.append(os.stat(base + ".private").st_mode & 0o777)
        self.assertEqual(set(seen), {0o600})
        self.assertEqual(keys.read_pair(base).name, "example.org.")

    def test_ttl_comments_and_parentheses(self):
        pub = ("; This is a key-signing key, keyid 18512, for miek.nl.\n"
               "; Created: 20160423195532\n"
               "miek.nl. 7200 IN DNSKEY 257 3 13 (\n"
               "  0J8u0XJ9GNGFEBXuAmLu04taHG4BXPP3gwhetiOUMnGA+x09nqzgF5IY\n"
               "  OyjWB7N3rXqQbnOSILhH1hnuyh7mmA== ) ; KSK\n")
        k = keys.read_pair(write_pair(self, pub))
        self.assertEqual((k.tag, k.ttl), (18512, 7200))

    def test_base_names(self):
        for arg in ("Kx+013+1", "Kx+013+1.key", "Kx+013+1.private"):
            self.assertEqual(keys.base_name(arg), "Kx+013+1")

    def test_wildcard_signature(self):
        k = keys.read_pair(write_pair(self))
        rrs = [w.RR("*.w.miek.nl.", w.TXT, 60, w.txt_rdata("x"))]
        sig = signer.rrsig(k, rrs, "miek.nl.", 60, 1, 2 ** 31)
        self.assertEqual(sig.rdata[3], 3)        # labels without the '*'
        # Served as a.w.miek.nl., the signature still validates.
        rrset = dns.rrset.from_text("a.w.miek.nl.", 60, "IN", "TXT", '"x"')
        sigset = dns.rrset.RRset(rrset.name, 1, w.RRSIG)
        sigset.add(sig.rdata_obj(), 60)
        dns.dnssec.validate(rrset, sigset, dnskey_map("miek.nl.", k),
                            now=2 ** 30)

    def test_canonical_rdata(self):
        mx = b"\x00\x4d" + w.name_to_wire("MAIL.Example.ORG.")
        self.assertEqual(signer.canonical_rdata(w.MX, mx),
                         b"\x00\x4d" + w.name_to_wire("mail.example.org."))
        txt = w.txt_rdata("KEEP")
        self.assertEqual(signer.canonical_rdata(w.TXT, txt), txt)

    def test_type_bitmap(self):
        self.assertEqual(signer.type_bitmap([w.A, w.MX, w.RRSIG, w.NSEC]),
                         bytes.fromhex("0006400100000003"))


class SetupTest(unittest.TestCase):

    def load(self, text, files=None):
        return util.build_plugins(self, text, "dnssec", files)[0]

    def test_options(self):
        base = write_pair(self)
        plugins = self.load("miek.nl {\n dnssec {\n  key file %s.key\n"
                            "  cache_capacity 100\n }\n}\n" % base)
        p = plugins[0]
        self.assertEqual(p.zones, ["miek.nl."])
        self.assertEqual([k.tag for k in p.keys], [18512])
        self.assertEqual(p.cache.capacity, 100)
        self.assertFalse(p.split)

    def test_zones_and_defaults(self):
        p = self.load("example.org {\n dnssec 10.0.0.0/8 example.net\n}\n")
        self.assertEqual(p[0].zones, ["10.in-addr.arpa.", "example.net."])
        self.assertEqual(p[0].cache.capacity, cache.DEFAULT_CAPACITY)
        p = self.load("example.org {\n dnssec\n}\n")
        self.assertEqual(p[0].zones, ["example.org."])

    def test_split_keys(self):
        ksk = keys.generate("cluster.local")
        zsk = keys.generate("cluster.local", flags=keys.ZONE)
        d = tempfile.mkdtemp()
        self.addCleanup(util._rmtree, d)
        bases = [keys.write_files(k, d) for k in (ksk, zsk)]
        p = self.load("cluster.local {\n dnssec {\n key file %s\n"
                      " key file %s\n }\n}\n" % tuple(bases))[0]
        self.assertTrue(p.split)
        self.assertEqual([k.tag for k in p.key_signers], [ksk.tag])
        self.assertEqual([k.tag for k in p.data_signers], [zsk.tag])

    def test_key_relative_to_root(self):
        base = write_pair(self)
        root, name = os.path.split(base)
        p = self.load("miek.nl {\n root %s\n dnssec {\n key file %s\n"
                      " }\n}\n" % (root, name))
        self.assertEqual(p[0].keys[0].tag, 18512)

    def test_errors(self):
        base = write_pair(self)
        bad_alg = write_pair(self, PUB.replace(" 13 0J8", " 16 0J8"),
                             PRIV.replace("13 (", "16 ("), "Kbad")
        other = write_pair(self, PUB, PRIV.replace("/4BZ", "/4BA"), "Kother")
        cases = [
            ("miek.nl {\n dnssec {\n  key\n }\n}\n", 3,
             "Wrong argument count"),
            ("miek.nl {\n dnssec {\n  key file\n }\n}\n", 3,
             "Wrong argument count"),
            ("miek.nl {\n dnssec {\n  cache_capacity\n }\n}\n", 3,
             "Wrong argument count"),
            ("miek.nl {\n dnssec {\n  cache_capacity x\n }\n}\n", 3,
             'strconv.Atoi: parsing "x": invalid syntax'),
            ("miek.nl {\n dnssec {\n  bogus\n }\n}\n", 3,
             "unknown property 'bogus'"),
            ("miek.nl {\n dnssec\n dnssec\n}\n", 3,
             "this plugin can only be used once per Server Block"),
            ("miek.nl {\n dnssec {\n  key file /nonexistent/K\n }\n}\n", 3,
             "open /nonexistent/K.key: no such file or directory"),
            ("example.org {\n dnssec {\n  key file %s\n }\n}\n" % base, 2,
             "key miek.nl. (keyid: 18512) can not sign any of the zones"),
            ("miek.nl {\n dnssec {\n  key file %s\n }\n}\n" % bad_alg, 3,
             "unsupported algorithm 16 in %s.key" % bad_alg),
            ("miek.nl {\n dnssec {\n  key file %s\n }\n}\n" % other, 3,
             "private key in %s.private does not match the public key"
             % other),
        ]
        for text, line, msg in cases:
            e = self.assertRaises(CorefileError, self.load, text)
            self.assertIn(":%d - Error during parsing: plugin/dnssec: %s"
                          % (line, msg), str(e), text)

    def test_unreadable_private_file(self):
        base = write_pair(self)
        os.remove(base + ".private")
        e = self.assertRaises(
            CorefileError, self.load,
            "miek.nl {\n dnssec {\n  key file %s\n }\n}\n" % base)
        self.assertIn("open %s.private: no such file" % base, str(e))


def direct(testcase, extra="", capacity=""):
    """The chain ``dnssec`` + ``file`` for miek.nl. with CoreDNS's key."""
    base = write_pair(testcase)
    d = os.path.dirname(base)
    with open(os.path.join(d, "db.miek.nl"), "w") as f:
        f.write(ZONE)
    text = ("miek.nl {\n dnssec {\n  key file %s\n%s }\n file %s\n%s}\n"
            % (base, capacity, os.path.join(d, "db.miek.nl"), extra))
    return util.Direct(testcase, text)


SOA = ("miek.nl. 1800 IN SOA linode.atoom.net. miek.miek.nl. 1282630057 "
       "14400 3600 604800 14400")
NS = "miek.nl. 1800 IN NS linode.atoom.net."
APEX_TYPES = ("A NS SOA HINFO MX TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC "
              "DNSKEY TLSA HIP OPENPGPKEY SPF")
ZONE_TYPES = ("A HINFO TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP "
              "OPENPGPKEY SPF")
DELEG_TYPES = ("A NS HINFO TXT AAAA LOC SRV CERT SSHFP RRSIG NSEC TLSA HIP "
               "OPENPGPKEY SPF")
DNSKEY = PUB.replace("miek.nl. IN", "miek.nl. 3600 IN").strip()

TABLE = [
    Case("miek.nl.", "DNSKEY", answer=[DNSKEY], aa=True),
    Case("miek.nl.", "DNSKEY", do=True, aa=True,
         answer=[DNSKEY, rrsig("miek.nl.", "DNSKEY", 2, 3600)]),
    Case("miek.nl.", "MX", ns=[NS],
         answer=["miek.nl. 1800 IN MX 1 aspmx.l.google.com."]),
    Case("miek.nl.", "MX", do=True,
         answer=["miek.nl. 1800 IN MX 1 aspmx.l.google.com.",
                 rrsig("miek.nl.", "MX", 2)],
         ns=[NS, rrsig("miek.nl.", "NS", 2)]),
    Case("www.miek.nl.", "AAAA", do=True,
         answer=["www.miek.nl. 1800 IN CNAME a.miek.nl.",
                 rrsig("www.miek.nl.", "CNAME", 3),
                 "a.miek.nl. 1800 IN AAAA 2a01:7e00::f03c:91ff:fef1:6735",
                 rrsig("a.miek.nl.", "AAAA", 3)],
         ns=[NS, rrsig("miek.nl.", "NS", 2)]),
    Case("x.w.miek.nl.", "TXT", do=True,
         answer=['x.w.miek.nl. 1800 IN TXT "wild"',
                 rrsig("x.w.miek.nl.", "TXT", 4)],
         ns=[NS, rrsig("miek.nl.", "NS", 2)]),
    Case("wwwww.miek.nl.", "AAAA", rcode="NXDOMAIN", ns=[SOA]),
    Case("wwwww.miek.nl.", "AAAA", do=True, desc="NXDOMAIN, black lie",
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "wwwww.miek.nl. 1800 IN NSEC \\000.wwwww.miek.nl. "
             + ZONE_TYPES.replace(" AAAA", ""),
             rrsig("wwwww.miek.nl.", "NSEC", 3)]),
    Case("WwWww.miek.nl.", "A", do=True, desc="0x20 kept in the NSEC",
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "WwWww.miek.nl. 1800 IN NSEC \\000.WwWww.miek.nl. "
             + ZONE_TYPES.replace("A ", "", 1),
             rrsig("WwWww.miek.nl.", "NSEC", 3)]),
    Case("a.miek.nl.", "MX", do=True, desc="NODATA",
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "a.miek.nl. 1800 IN NSEC \\000.a.miek.nl. " + ZONE_TYPES,
             rrsig("a.miek.nl.", "NSEC", 3)]),
    Case("miek.nl.", "HINFO", do=True,
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "miek.nl. 1800 IN NSEC \\000.miek.nl. "
             + APEX_TYPES.replace(" HINFO", ""),
             rrsig("miek.nl.", "NSEC", 2)]),
    Case("miek.nl.", "DS", do=True, desc="DS at the apex",
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "miek.nl. 1800 IN NSEC \\000.miek.nl. " + APEX_TYPES,
             rrsig("miek.nl.", "NSEC", 2)]),
    Case("deleg.miek.nl.", "DS", do=True,
         answer=["deleg.miek.nl. 1800 IN DS 18512 13 2 D4E806322598BC97A003E"
                 "F1ACDFF352EEFF7B42DBB0D41B8224714C36AEF08D9",
                 rrsig("deleg.miek.nl.", "DS", 3)],
         ns=[NS, rrsig("miek.nl.", "NS", 2)]),
    Case("unsigned.miek.nl.", "DS", do=True,
         ns=[SOA, rrsig("miek.nl.", "SOA", 2),
             "unsigned.miek.nl. 1800 IN NSEC \\000.unsigned.miek.nl. "
             + DELEG_TYPES,
             rrsig("unsigned.miek.nl.", "NSEC", 3)]),
    Case("deleg.miek.nl.", "NS", do=True, aa=False,
         ns=["deleg.miek.nl. 1800 IN NS ns01.deleg.miek.nl.",
             "deleg.miek.nl. 1800 IN DS 18512 13 2 D4E806322598BC97A003EF1A"
             "CDFF352EEFF7B42DBB0D41B8224714C36AEF08D9",
             rrsig("deleg.miek.nl.", "DS", 3)]),
    Case("unsigned.miek.nl.", "NS", do=True, aa=False,
         ns=["unsigned.miek.nl. 1800 IN NS ns01.deleg.miek.nl.",
             "unsigned.miek.nl. 1800 IN NSEC unsigned\\000.miek.nl. "
             + DELEG_TYPES,
             rrsig("unsigned.miek.nl.", "NSEC", 3)]),
    Case("nope.miek.nl.", "NSEC", do=True, desc="NSEC moves to the answer",
         answer=["nope.miek.nl. 1800 IN NSEC \\000.nope.miek.nl. "
                 + ZONE_TYPES,
                 rrsig("nope.miek.nl.", "NSEC", 3)]),
    Case("miek.nl.", "NSEC", do=True,
         answer=["miek.nl. 1800 IN NSEC \\000.miek.nl. " + APEX_TYPES,
                 rrsig("miek.nl.", "NSEC", 2)]),
    Case("www.example.org.", "AAAA", do=True, rcode="REFUSED"),
]


class SigningTest(unittest.TestCase):

    def setUp(self):
        self.d = direct(self)
        self.plugin = list(self.d.app.config.plugins())[0]
        self.assertIsInstance(self.plugin, Dnssec)
        self.dnskeys = dnskey_map("miek.nl.", self.plugin.keys[0])

    def ask(self, case):
        return parse_reply(self.d.ask(case.msg().to_wire()))

    def test_table(self):
        for case in TABLE:
            reply = self.ask(case)
            check_response(self, case, reply, fields)
            sigs = validate(self, reply, self.dnskeys)
            self.assertEqual(sigs, sum(
                r.split()[3] == "RRSIG" for r in case.answer + case.ns),
                case)

    def test_signature_times(self):
        self.plugin.now = lambda: 1000000000
        reply = self.ask(Case("a.miek.nl.", "A", do=True))
        sig = [rr for rr in reply.answer
               if rr.rdtype == dns.rdatatype.RRSIG][0][0]
        self.assertEqual(sig.inception, 1000000000 - 3 * 3600)
        self.assertEqual(sig.expiration, 1000000000 + 8 * 86400)
        self.assertEqual(sig.original_ttl, 3600)

    def test_cache_hits_misses_and_refresh(self):
        server = self.d.mux.label
        from corednstw.plugins.dnssec import plugin as mod
        h0 = mod.CACHE_HITS.get((server,))
        m0 = mod.CACHE_MISSES.get((server,))
        now = [1000000000.0]
        self.plugin.now = lambda: now[0]

        def sig_of(reply):
            return [rr for rr in reply.answer
                    if rr.rdtype == dns.rdatatype.RRSIG][0][0]

        case = Case("a.miek.nl.", "A", do=True)
        first = sig_of(self.ask(case))
        self.assertEqual(mod.CACHE_MISSES.get((server,)) - m0, 2)  # A, NS
        now[0] += 5 * 86400                 # five days on: still cached
        self.assertEqual(sig_of(self.ask(case)), first)
        self.assertEqual(mod.CACHE_HITS.get((server,)) - h0, 2)
        now[0] += 86400 + 1                 # six days on: signed anew
        again = sig_of(self.ask(case))
        self.assertEqual(again.inception, int(now[0]) - 3 * 3600)
        self.assertEqual(mod.CACHE_MISSES.get((server,)) - m0, 4)
        self.assertEqual(
            mod.CACHE_SIZE.get((server, "signature")), len(self.plugin.cache))

    def test_periodic_clean(self):
        now = [1000000000.0]
        self.plugin.now = lambda: now[0]
        self.ask(Case("a.miek.nl.", "A", do=True))
        self.assertEqual(len(self.plugin.cache), 2)
        now[0] += 6 * 86400 + 1
        self.plugin.clean()
        self.assertEqual(len(self.plugin.cache), 0)

    def test_no_do_no_signing(self):
        before = len(self.plugin.cache)
        reply = self.ask(Case("a.miek.nl.", "A"))
        self.assertEqual([r.rdtype for r in reply.answer], [w.A])
        self.assertEqual(len(self.plugin.cache), before)


class CapacityTest(unittest.TestCase):

    def test_capacity_bounds_the_cache(self):
        d = direct(self, capacity="  cache_capacity 3\n")
        plugin = list(d.app.config.plugins())[0]
        for i in range(10):
            d.ask(Case("n%d.miek.nl." % i, "A", do=True).msg().to_wire())
        self.assertEqual(len(plugin.cache), 3)

    def test_cache_unit(self):
        c = cache.SignatureCache(2)
        end = 10 * cache.MARGIN
        c.set("a", ["sa"], 0, end)
        c.set("b", ["sb"], 0, end)
        c.set("c", ["sc"], 0, end)
        self.assertIsNone(c.get("a", 0))
        self.assertEqual(c.get("c", 0), ["sc"])
        self.assertIsNone(c.get("c", end - cache.MARGIN + 1))


class SplitKeysTest(unittest.TestCase):

    def test_ksk_signs_dnskey_zsk_the_rest(self):
        ksk = keys.generate("example.org", keys.ECDSAP384SHA384)
        zsk = keys.generate("example.org", keys.ED25519, flags=keys.ZONE)
        d = tempfile.mkdtemp()
        self.addCleanup(util._rmtree, d)
        bases = [keys.write_files(k, d) for k in (ksk, zsk)]
        chain = util.Direct(self, "example.org {\n dnssec {\n key file %s %s"
                            "\n }\n whoami\n}\n" % tuple(bases))
        dnskeys = dnskey_map("example.org.", ksk, zsk)
        reply = chain.query("example.org.", "DNSKEY", want_dnssec=True)
        sigs = [rd for rrset in reply.answer for rd in rrset
                if rrset.rdtype == w.RRSIG]
        self.assertEqual([s.key_tag for s in sigs], [ksk.tag])
        validate(self, reply, dnskeys)
        reply = chain.query("example.org.", "A", want_dnssec=True)
        sigs = [rd for rrset in reply.additional for rd in rrset
                if rrset.rdtype == w.RRSIG]
        self.assertEqual({s.key_tag for s in sigs}, {zsk.tag})
        self.assertEqual(validate(self, reply, dnskeys), 2)


class MiddlewareTest(unittest.TestCase):
    """Answers of any shape from the plugins after dnssec."""

    def plugin(self, answer):
        k = keys.read_pair(write_pair(self))
        p = Dnssec(["miek.nl."], [k], 100)
        p.next = util.Stub(lambda req: answer)
        return p, dnskey_map("miek.nl.", k)

    def request(self, name, qtype):
        req = Request(make_query(name, qtype, edns=1232, do=True))
        req.parse_question(*req.parse_header()[1:])
        return req

    def test_raw_response_is_signed(self):
        a = w.RR("a.miek.nl.", w.A, 60, w.a_rdata("192.0.2.1"))
        req = self.request("a.miek.nl.", w.A)
        raw = encode(req, Response(w.NOERROR, [a], aa=True))
        p, dnskeys = self.plugin(RawResponse(raw, plugin="forward"))
        resp = p.serve(req)
        self.assertEqual([rr.rtype for rr in resp.answer], [w.A, w.RRSIG])
        self.assertEqual(resp.plugin, "forward")
        reply = dns.message.from_wire(resp.finish(req))
        self.assertEqual(validate(self, reply, dnskeys), 1)

    def test_shared_response_left_alone(self):
        a = w.RR("a.miek.nl.", w.A, 60, w.a_rdata("192.0.2.1"))
        shared = Response(w.NOERROR, [a], aa=True, plugin="x")
        p, _ = self.plugin(shared)
        req = self.request("a.miek.nl.", w.A)
        p.serve(req)
        p.serve(req)
        self.assertEqual(shared.answer, [a])

    def test_out_of_zone_cname_target_unsigned(self):
        answer = [w.RR("www.miek.nl.", w.CNAME, 60,
                       w.name_to_wire("www.example.org.")),
                  w.RR("www.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))]
        p, _ = self.plugin(Response(w.NOERROR, answer))
        resp = p.serve(self.request("www.miek.nl.", w.A))
        self.assertEqual([(rr.name, rr.rtype) for rr in resp.answer[2:]],
                         [("www.miek.nl.", w.RRSIG)])

    def test_nothing_written_passes(self):
        p, _ = self.plugin(None)
        self.assertIsNone(p.serve(self.request("a.miek.nl.", w.A)))


class SecretsManagerTest(unittest.TestCase):
    """``key aws_secretsmanager``: keys read from moto's Secrets Manager
    (a real HTTP server speaking the AWS API), with boto3's default
    credentials, region and endpoint from the environment."""

    def setUp(self):
        from tests.support.moto_aws import KEY_ID, SECRET, MotoServer
        util.capture_log(self)
        self.moto = MotoServer().start()
        self.addCleanup(self.moto.stop)
        self.patch(os, "environ", dict(
            os.environ, AWS_ACCESS_KEY_ID=KEY_ID,
            AWS_SECRET_ACCESS_KEY=SECRET, AWS_DEFAULT_REGION="us-east-1",
            AWS_ENDPOINT_URL_SECRETS_MANAGER=self.moto.url))
        import boto3
        self.sm = boto3.client("secretsmanager", endpoint_url=self.moto.url,
                               region_name="us-east-1",
                               aws_access_key_id=KEY_ID,
                               aws_secret_access_key=SECRET)

    def store(self, name, key):
        public = "%s IN DNSKEY %d 3 %d %s" % (
            key.name, key.flags, key.algorithm,
            base64.b64encode(key.public).decode())
        return self.sm.create_secret(Name=name, SecretString=json.dumps(
            {"key": public, "private": keys.private_text(key)}))["ARN"]

    def test_signs_with_keys_from_secrets(self):
        ksk = keys.generate("example.org", keys.ECDSAP256SHA256)
        zsk = keys.generate("example.org", keys.ED25519, flags=keys.ZONE)
        self.store("Kexample.org.+013+%05d" % ksk.tag, ksk)
        arn = self.store("zsk", zsk)
        d = util.Direct(self, "example.org:0 {\n    dnssec {\n"
                        "        key aws_secretsmanager Kexample.org.+013+"
                        "%05d %s\n    }\n    whoami\n}\n" % (ksk.tag, arn))
        q = dns.message.make_query("example.org.", "DNSKEY",
                                   want_dnssec=True)
        m = dns.message.from_wire(d.ask(q.to_wire()))
        dnskeys = m.find_rrset(m.answer, dns.name.from_text("example.org."),
                               dns.rdataclass.IN, dns.rdatatype.DNSKEY)
        self.assertEqual({dns.dnssec.key_id(k) for k in dnskeys},
                         {ksk.tag, zsk.tag})
        # The KSK signs the DNSKEY set: dnspython checks the signature.
        sigs = m.find_rrset(m.answer, dns.name.from_text("example.org."),
                            dns.rdataclass.IN, dns.rdatatype.RRSIG,
                            dns.rdatatype.DNSKEY)
        dns.dnssec.validate(dnskeys, sigs,
                            {dns.name.from_text("example.org."): dnskeys})
        self.assertEqual({s.key_tag for s in sigs}, {ksk.tag})

    def error(self, line):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, "example.org:0 {\n    dnssec {\n        %s\n"
                        "    }\n    whoami\n}\n" % line)
        return str(cm.exception)

    def test_errors(self):
        msg = self.error("key aws_secretsmanager none")
        self.assertIn("Corefile:3 - Error during parsing: plugin/dnssec: key "
                      "aws_secretsmanager none: An error occurred "
                      "(ResourceNotFoundException)", msg)
        self.assertIn("Wrong argument count",
                      self.error("key aws_secretsmanager"))
        self.sm.create_secret(Name="notjson", SecretString="hello")
        self.assertIn("key aws_secretsmanager notjson: the secret is not a "
                      "JSON object with key and private",
                      self.error("key aws_secretsmanager notjson"))
        other = keys.generate("example.net")
        self.store("other", other)
        self.assertIn("key example.net. (keyid: %d) can not sign any of the "
                      "zones" % other.tag,
                      self.error("key aws_secretsmanager other"))
