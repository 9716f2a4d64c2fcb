"""metadata: providers are called for queries in the zones, before the
rest of the chain; values are strings or callables returning strings."""

from twisted.trial import unittest
from zope.interface import implementer

from corednstw.core.errors import CorefileError
from corednstw.core.interfaces import IMetadataProvider
from corednstw.core.plugin import Plugin
from corednstw.plugins import metadata
from tests.support import util


@implementer(IMetadataProvider)
class _Provider(Plugin):
    """A plugin publishing two values (one computed when read)."""

    name = "testprovider"
    in_chain = False

    def __init__(self):
        self.calls = 0
        self.reads = 0

    def metadata(self, req):
        self.calls += 1
        metadata.set_value(req, "test/qname", req.qname)

        def lazy():
            self.reads += 1
            return "lazy-" + req.proto
        req.meta()["test/lazy"] = lazy


class _Recorder(Plugin):
    """Remembers the metadata the next plugins see."""

    name = "recorder"

    def __init__(self, nxt):
        self.next = nxt
        self.seen = []

    def serve(self, req):
        self.seen.append(req.metadata)
        self.values = {k: metadata.value(req, k) for k in
                       metadata.labels(req)}
        return self.next.serve(req)


def _server(testcase, args=""):
    s = util.Direct(testcase, """example.org:0 net:0 {
    metadata%s
    whoami
}
""" % args)
    block = s.app.config.blocks[0]
    provider = _Provider()
    provider.block = block
    block.plugins.append(provider)
    md = block.plugin("metadata")
    rec = _Recorder(md.next)
    md.next = rec
    return s, provider, rec


class MetadataTest(unittest.TestCase):

    def test_providers_called_for_block_zones(self):
        s, provider, rec = _server(self)
        self.assertEqual(s.query("Www.Example.org.").rcode(), 0)
        self.assertEqual(provider.calls, 1)
        self.assertEqual(rec.values, {"test/qname": "www.example.org.",
                                      "test/lazy": "lazy-udp"})
        self.assertEqual(s.query("a.net.", proto="tcp").rcode(), 0)
        self.assertEqual(rec.values["test/lazy"], "lazy-tcp")
        self.assertEqual(provider.calls, 2)

    def test_callable_read_only_on_demand(self):
        s, provider, rec = _server(self)
        rec.serve = lambda req: (rec.seen.append(dict(req.metadata)),
                                 rec.next.serve(req))[1]
        s.query("example.org.")
        self.assertEqual(provider.calls, 1)
        self.assertEqual(provider.reads, 0)
        self.assertTrue(callable(rec.seen[0]["test/lazy"]))

    def test_zones_argument_limits_collection(self):
        s, provider, rec = _server(self, " example.org")
        s.query("example.org.")
        self.assertEqual(provider.calls, 1)
        s.query("a.net.")
        self.assertEqual(provider.calls, 1)
        # A collector still exists for the query, just empty.
        self.assertEqual(rec.seen[-1], {})

    def test_fresh_dict_per_query(self):
        s, provider, rec = _server(self)
        s.query("a.example.org.")
        s.query("b.example.org.")
        self.assertIsNot(rec.seen[0], rec.seen[1])
        self.assertEqual(rec.values["test/qname"], "b.example.org.")

    def test_metadata_plugin_is_not_a_provider(self):
        s, provider, rec = _server(self)
        md = s.app.config.blocks[0].plugin("metadata")
        self.assertEqual(md.providers(), [provider.metadata])


class HelpersTest(unittest.TestCase):

    def test_set_value_without_collector(self):
        from corednstw.core.request import Request, make_query
        req = Request(make_query("example.org.", 1))
        self.assertFalse(metadata.set_value(req, "x/y", "1"))
        self.assertIsNone(metadata.value(req, "x/y"))
        req.metadata = {}
        self.assertTrue(metadata.set_value(req, "x/y", lambda: "v"))
        self.assertEqual(metadata.value(req, "x/y"), "v")
        self.assertIsNone(metadata.value(req, "x/z"))
        self.assertEqual(metadata.labels(req), ["x/y"])

    def test_labels(self):
        for label, ok in (("plugin/LABEL", True), ("p/LABEL", True),
                          ("plugin/L", True), ("PLUGIN/LABEL/SUB", True),
                          ("LABEL", False), ("/LABEL", False),
                          ("LABEL/", False), ("", False)):
            self.assertEqual(metadata.is_label(label), ok, label)


class SetupTest(unittest.TestCase):

    def error(self, corefile):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, corefile)
        return str(cm.exception)

    def test_zones_from_args(self):
        s = util.Direct(self, ".:0 {\n    metadata example.org 10.0.0.0/24\n"
                              "    whoami\n}\n")
        md = s.app.config.blocks[0].plugin("metadata")
        self.assertEqual(md.zones, ["example.org.", "0.0.10.in-addr.arpa."])

    def test_block_keys_by_default(self):
        s = util.Direct(self, "example.org:0 {\n    metadata\n    whoami\n}\n")
        md = s.app.config.blocks[0].plugin("metadata")
        self.assertEqual(md.zones, ["example.org."])

    def test_no_block_allowed(self):
        err = self.error(".:0 {\n    metadata {\n        foo\n    }\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/metadata: "
                      "Wrong argument count or unexpected line ending after "
                      "'foo'", err)

    def test_once_per_block(self):
        err = self.error(".:0 {\n    metadata\n    metadata\n}\n")
        self.assertIn("this plugin can only be used once per Server Block",
                      err)
