"""DNSSEC proven by real validators: Debian's unbound (and BIND's delv
when installed) trust our DNSKEY and resolve through our server.

unbound validates with the zone's key as trust anchor and the zone as a
stub zone pointing at corednstw; a positive answer, a black-lie NXDOMAIN
and a NODATA must come back with AD, and a record changed after signing
must come back SERVFAIL.
"""

import base64
import os
import shutil
import tempfile

import dns.flags
import dns.rcode
from twisted.internet import defer, utils
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.plugin import then
from corednstw.engines.dnssec import keys
from tests.support import unbound, util
from tests.support.unbound import ValidatingUnbound

ZONE = """\
$TTL 300
$ORIGIN example.org.
@       IN SOA ns.example.org. hostmaster.example.org. (
                2024010101 7200 3600 1209600 300 )
        IN NS  ns.example.org.
        IN MX  10 mail.example.org.
ns      IN A   192.0.2.53
www     IN A   192.0.2.80
        IN AAAA 2001:db8::80
mail    IN A   192.0.2.25
alias   IN CNAME www
*.wild  IN TXT "wildcard"
tampered IN A  192.0.2.66
"""

DELV = shutil.which("delv")


def make_keys(testcase, *specs):
    """Keys for example.org. written as BIND files: (bases, keys)."""
    d = tempfile.mkdtemp(prefix="corednstw-keys-")
    testcase.addCleanup(shutil.rmtree, d, True)
    ks = [keys.generate("example.org", alg, flags) for alg, flags in specs]
    return [keys.write_files(k, d) for k in ks], ks, d


def tamper(app, qname=b"tampered"):
    """Change the A rdata of answers for names starting with ``qname``
    after dnssec signed them (a man in the middle)."""
    for p in app.config.plugins():
        if p.name == "dnssec":
            break
    else:
        raise AssertionError("no dnssec plugin")
    serve = p.serve

    def changed(resp, req):
        if resp is None or not req.qname.startswith(qname.decode()):
            return resp
        resp.answer = [w.RR(rr.name, rr.rtype, rr.ttl, w.a_rdata(
            "203.0.113.1")) if rr.rtype == w.A else rr for rr in resp.answer]
        resp.wire = None
        return resp
    p.serve = lambda req: then(serve(req), changed, req)


@defer.inlineCallbacks
def ask(port, name, rdtype):
    m = yield util.query(port, name, rdtype, want_dnssec=True)
    return m


class OnTheFlyUnboundTest(unittest.TestCase):
    """dnssec in front of file, checked by unbound."""

    specs = ((keys.ECDSAP256SHA256, keys.ZONE | keys.SEP),)

    @defer.inlineCallbacks
    def setUp(self):
        unbound.require(self)
        bases, self.keys, d = make_keys(self, *self.specs)
        with open(os.path.join(d, "db.example.org"), "w") as f:
            f.write(ZONE)
        text = "example.org:0 {\n dnssec {\n  key file %s\n }\n" \
               " file %s\n}\n" % (" ".join(bases),
                                 os.path.join(d, "db.example.org"))
        self.app = yield util.start(self, text)
        tamper(self.app)
        ksk = [k for k in self.keys if k.is_ksk()][0]
        self.unbound = yield ValidatingUnbound(
            self, ksk, self.app.port()).start()

    def assertSecure(self, m, rcode=dns.rcode.NOERROR):
        self.assertEqual(m.rcode(), rcode, m)
        self.assertTrue(m.flags & dns.flags.AD, "no AD:\n%s\n%s" % (
            m, self.unbound.log()))

    @defer.inlineCallbacks
    def test_positive_answers_validate(self):
        m = yield ask(self.unbound.port, "www.example.org", "A")
        self.assertSecure(m)
        self.assertEqual(util.rrs(m)[0].split()[-1], "192.0.2.80")
        m = yield ask(self.unbound.port, "alias.example.org", "AAAA")
        self.assertSecure(m)
        m = yield ask(self.unbound.port, "a.wild.example.org", "TXT")
        self.assertSecure(m)
        m = yield ask(self.unbound.port, "example.org", "MX")
        self.assertSecure(m)

    @defer.inlineCallbacks
    def test_black_lie_nxdomain_validates(self):
        m = yield ask(self.unbound.port, "nothing-here.example.org", "A")
        self.assertSecure(m)
        self.assertEqual(m.answer, [])

    @defer.inlineCallbacks
    def test_nodata_validates(self):
        m = yield ask(self.unbound.port, "www.example.org", "TXT")
        self.assertSecure(m)
        self.assertEqual(m.answer, [])
        m = yield ask(self.unbound.port, "example.org", "SRV")
        self.assertSecure(m)

    @defer.inlineCallbacks
    def test_tampered_record_fails(self):
        m = yield ask(self.unbound.port, "tampered.example.org", "A")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL, m)
        self.assertIn("tampered.example.org", self.unbound.log())


class SplitKeysUnboundTest(OnTheFlyUnboundTest):
    """A KSK (P-384) and a ZSK (Ed25519)."""

    specs = ((keys.ECDSAP384SHA384, keys.ZONE | keys.SEP),
             (keys.ED25519, keys.ZONE))


class RSAUnboundTest(OnTheFlyUnboundTest):
    specs = ((keys.RSASHA256, keys.ZONE | keys.SEP),)


class DelvTest(unittest.TestCase):
    """BIND's delv validates with the same anchor, straight from our
    server."""

    @defer.inlineCallbacks
    def setUp(self):
        if DELV is None:
            if os.environ.get("CI") == "true":
                self.fail("delv is not installed")
            raise unittest.SkipTest("delv is not installed")
        bases, ks, d = make_keys(self, (keys.ECDSAP256SHA256, 257))
        self.key = ks[0]
        with open(os.path.join(d, "db.example.org"), "w") as f:
            f.write(ZONE)
        self.anchors = os.path.join(d, "anchors.conf")
        with open(self.anchors, "w") as f:
            f.write('trust-anchors {\n  example.org. static-key %d 3 %d '
                    '"%s";\n};\n' % (self.key.flags, self.key.algorithm,
                                     base64.b64encode(self.key.public)
                                     .decode()))
        text = "example.org:0 {\n dnssec {\n  key file %s\n }\n" \
               " file %s\n}\n" % (bases[0], os.path.join(d, "db.example.org"))
        self.app = yield util.start(self, text)
        tamper(self.app)

    def delv(self, name, rdtype):
        args = ["@127.0.0.1", "-p", str(self.app.port()), "-a",
                self.anchors, "+root=example.org", name, rdtype]
        return utils.getProcessOutputAndValue(DELV, args, env=os.environ)

    @defer.inlineCallbacks
    def test_validated(self):
        out, err, code = yield self.delv("www.example.org", "A")
        self.assertIn(b"; fully validated", out + err, out + err)
        out, err, code = yield self.delv("nothing.example.org", "A")
        self.assertIn(b"fully validated", out + err, out + err)
        out, err, code = yield self.delv("www.example.org", "TXT")
        self.assertIn(b"fully validated", out + err, out + err)

    @defer.inlineCallbacks
    def test_tampered(self):
        out, err, code = yield self.delv("tampered.example.org", "A")
        self.assertNotIn(b"fully validated", out + err, out + err)
        self.assertIn(b"failed", out + err, out + err)
