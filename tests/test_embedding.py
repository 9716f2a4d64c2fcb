"""corednstw inside a Twisted program: a Corefile's chain as a
twisted.names IResolver (service.resolver.ChainResolver.from_corefile),
with its plugins, and no DNS socket of its own."""

import os

from twisted.internet import defer
from twisted.internet.interfaces import IResolver
from twisted.names import dns as tdns
from twisted.names import error
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from corednstw.core.errors import CorefileError
from corednstw.service.resolver import ChainResolver
from tests.support import util

ZONE = """$ORIGIN example.org.
@ 3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 3600
@ 3600 IN NS ns.example.org.
ns 3600 IN A 192.0.2.53
www 300 IN A 192.0.2.1
www 300 IN AAAA 2001:db8::1
"""


class FromCorefileTest(unittest.TestCase):

    def setUp(self):
        util.capture_log(self)
        self.dir = util.write_files(self, {"db.example.org": ZONE})

    @defer.inlineCallbacks
    def resolver(self, body):
        text = body.replace("DB", os.path.join(self.dir, "db.example.org"))
        r = yield ChainResolver.from_corefile(text)
        self.addCleanup(r.stop)
        defer.returnValue(r)

    @defer.inlineCallbacks
    def test_lookup_address_through_file_and_rewrite(self):
        """A few lines give lookups through the chain's plugins: rewrite
        turns the name, file answers, the answer comes back under the
        name asked."""
        r = yield self.resolver(
            "example.org {\n"
            "    rewrite name exact web.example.org www.example.org\n"
            "    file DB\n"
            "}\n")
        self.assertTrue(verifyObject(IResolver, r))
        answers, authority, additional = yield r.lookupAddress(
            "web.example.org")
        self.assertEqual([(a.name.name, a.ttl, a.payload.dottedQuad())
                          for a in answers],
                         [(b"web.example.org", 300, "192.0.2.1")])
        answers, _, _ = yield r.lookupIPV6Address("www.example.org")
        self.assertEqual(len(answers), 1)
        self.assertEqual(answers[0].type, tdns.AAAA)

    @defer.inlineCallbacks
    def test_negative_answers_are_twisted_errors(self):
        r = yield self.resolver("example.org {\n    file DB\n}\n")
        f = yield self.assertFailure(r.lookupAddress("nope.example.org"),
                                     error.DomainError)
        self.assertEqual(f.args[0].rCode, tdns.ENAME)
        yield self.assertFailure(r.lookupAddress("example.net"),
                                 error.DNSQueryRefusedError)

    @defer.inlineCallbacks
    def test_forward_to_a_real_upstream(self):
        """forward in the embedded chain reaches a real server (our own
        instance, listening on port 0)."""
        upstream = yield util.start(
            self, "example.org:0 {\n    file %s\n}\n"
            % os.path.join(self.dir, "db.example.org"))
        port = upstream.port()
        r = yield self.resolver(
            ".:53 {\n    cache 30\n    forward . 127.0.0.1:%d\n}\n" % port)
        answers, _, _ = yield r.lookupAddress("www.example.org")
        self.assertEqual(answers[0].payload.dottedQuad(), "192.0.2.1")

    @defer.inlineCallbacks
    def test_no_socket_is_opened(self):
        r = yield self.resolver(".:53 {\n    whoami\n}\n")
        self.assertEqual(r.server.listeners, {})
        _, _, additional = yield r.lookupAddress("example.org")
        self.assertEqual(additional[0].payload.dottedQuad(), "127.0.0.1")

    def test_broken_corefile_fails_with_its_error(self):
        d = ChainResolver.from_corefile(".:53 {\n    nosuchplugin\n}\n")
        return self.assertFailure(d, CorefileError)
