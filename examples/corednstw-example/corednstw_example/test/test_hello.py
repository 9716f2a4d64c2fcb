"""The hello plugin through corednstw's block mux: no sockets, the
Corefile set up as the server does it (``trial corednstw_example``)."""

import dns.message
import dns.rdatatype
from twisted.internet import task
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from corednstw.core import directives
from corednstw.core.errors import CorefileError
from corednstw.core.interfaces import IReadiness
from corednstw.core.request import make_query
from corednstw.service.app import App
from corednstw_example import ANSWERS, Hello


def build(text):
    """A configuration of Corefile ``text`` and its first mux."""
    app = App(None, reactor=task.Clock(), dns_port=0, text=text)
    app.config = app.load()
    mux = next(iter(app.build_muxes(app.config).values()))
    return app, mux


def ask(mux, name, rdtype="TXT"):
    out = []
    wire = make_query(name, dns.rdatatype.from_text(rdtype), msgid=7)
    mux.handle(wire, "127.0.0.1", 5300, "udp", None, out.append)
    return dns.message.from_wire(out[0])


class HelloTest(unittest.TestCase):

    def test_answers_default_name(self):
        _, mux = build("example.org:0 {\n    hello\n}\n")
        m = ask(mux, "Hello.Example.Org")
        self.assertEqual([r.to_text() for r in m.answer],
                         ['Hello.Example.Org. 60 IN TXT '
                          '"hello from corednstw"'])
        self.assertTrue(m.flags & 0x0400)       # AA

    def test_other_questions_go_on(self):
        _, mux = build(".:0 {\n    hello greet.test\n    whoami\n}\n")
        self.assertEqual(len(ask(mux, "greet.test").answer), 1)
        m = ask(mux, "greet.test", "A")         # whoami's answer
        self.assertEqual((m.answer, len(m.additional)), ([], 2))
        m = ask(mux, "other.test")
        self.assertEqual((m.answer, len(m.additional)), ([], 2))

    def test_text_option(self):
        _, mux = build('.:0 {\n    hello a.test {\n        text "hi there"'
                       '\n    }\n}\n')
        self.assertEqual(ask(mux, "a.test").answer[0][0].strings,
                         (b"hi there",))

    def test_unknown_property(self):
        with self.assertRaises(CorefileError) as cm:
            build(".:0 {\n    hello {\n        colour red\n    }\n}\n")
        self.assertIn("Corefile:3 - Error during parsing: plugin/hello: "
                      "unknown property 'colour'", str(cm.exception))

    def test_place_in_chain(self):
        self.assertEqual(directives.names().index("hello") + 1,
                         directives.names().index("hosts"))
        app, _ = build(".:0 {\n    whoami\n    hosts\n    hello\n"
                       "    cache\n}\n")
        self.assertEqual(app.config.blocks[0].directive_names(),
                         ["cache", "hello", "hosts", "whoami"])

    def test_metric(self):
        _, mux = build(".:0 {\n    hello\n}\n")
        label = (mux.label,)
        before = ANSWERS.get(label)
        ask(mux, "hello.")
        ask(mux, "hello.", "A")
        self.assertEqual(ANSWERS.get(label), before + 1)

    def test_ready_once_started(self):
        app, _ = build(".:0 {\n    hello\n}\n")
        plugin = app.config.blocks[0].plugins[0]
        self.assertIsInstance(plugin, Hello)
        verifyObject(IReadiness, plugin)
        self.assertFalse(plugin.ready())
        plugin.start()
        self.assertTrue(plugin.ready())
