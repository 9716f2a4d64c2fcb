"""Names whose labels hold a dot (``a\\.internal.``, one label): routed
and matched by labels, as CoreDNS's server mux and plugins do, so a
client cannot reach a zone's block or plugin with a name outside it."""

import dns.name
from twisted.internet import defer
from twisted.trial import unittest

from tests.support import util

COREFILE = """internal:0 {
  template IN A {
    answer "{{ .Name }} 60 IN A 192.0.2.1"
  }
}
.:0 {
  template IN A internal {
    answer "{{ .Name }} 60 IN A 192.0.2.2"
    fallthrough
  }
  template IN A {
    answer "{{ .Name }} 60 IN A 192.0.2.3"
  }
}
"""


class EscapedDotTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_label_with_a_dot_is_not_in_the_zone(self):
        app = yield util.start(self, COREFILE)
        got = []
        for text in ("a.internal.", r"a\.internal.", r"a\\.internal."):
            q = util.make_query(dns.name.from_text(text), "A")
            m = yield util.query(app.port(), q)
            got.append([rr.to_text() for rrs in m.answer for rr in rrs])
        self.assertEqual(got, [["192.0.2.1"], ["192.0.2.3"], ["192.0.2.1"]])
