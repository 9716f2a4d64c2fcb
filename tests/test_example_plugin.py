"""The example plugin package (examples/corednstw-example, installed by
scripts/test.sh): its own tests, and its directive served over the wire
with metrics and readiness, as a user who installed it would see them."""

from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import directives
from tests.support import util

try:
    from corednstw_example.test.test_hello import HelloTest  # noqa: F401
except ImportError:
    INSTALLED = False
else:
    INSTALLED = True

COREFILE = """\
.:0 {
    prometheus 127.0.0.1:0
    ready 127.0.0.1:0
    hello example.org
    whoami
}
"""


class ServedTest(unittest.TestCase):

    if not INSTALLED:
        skip = "pip install ./examples/corednstw-example (scripts/test.sh)"

    def test_registered(self):
        reg = directives.provider("hello")
        self.assertEqual((reg.package, reg.version),
                         ("corednstw-example", "0.1.0"))
        self.assertTrue(directives.supported("hello"))

    @defer.inlineCallbacks
    def test_over_the_wire(self):
        app = yield util.start(self, COREFILE)
        for proto in ("udp", "tcp"):
            m = yield util.query(app.port(), "example.org", "TXT",
                                 proto=proto)
            self.assertEqual(util.rrs(m), [
                'example.org. 60 IN TXT "hello from corednstw"'])
        m = yield util.query(app.port(), "example.org", "A")
        self.assertEqual(len(m.additional), 2)          # whoami's
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/metrics")
        self.assertEqual(status, 200)
        self.assertIn('coredns_hello_answers_total{server="dns://:0"}',
                      body)
        self.assertIn('plugin="hello"', body)

    @defer.inlineCallbacks
    def test_ready(self):
        app = yield util.start(self, COREFILE)
        status, body = yield util.http_get(
            app.http_port("127.0.0.1:0"), "/ready")
        self.assertEqual((status, body), (200, "OK"))
