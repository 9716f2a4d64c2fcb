"""Directives found through the entry-point group ``corednstw.plugins``:
corednstw's own and those of installed packages, placed in the chain."""

import configparser
import contextlib
import io
import os
import types
from importlib import metadata

from twisted.trial import unittest

from corednstw import tap
from corednstw.core import corefile, directives, dump
from corednstw.core import dnswire as w
from corednstw.core.directives import PluginEntry
from corednstw.core.errors import CorefileError, PluginError
from corednstw.core.plugin import Plugin
from tests.support import util


class Echo(Plugin):
    """Answers TXT with its own name: which plugin answered."""

    def serve(self, req):
        if req.qtype != w.TXT:
            return self.next.serve(req)
        return self.respond(req, answer=[w.RR(req.name, w.TXT, 0,
                                              w.txt_rdata(self.name))])


def echo_setup(d, block):
    if d.args:
        raise d.arg_error()
    return Echo()


class FakeEntry:
    """An importlib.metadata.EntryPoint stand-in: a package's entry."""

    def __init__(self, name, obj, package="corednstw-fake", version="1.0",
                 value=None):
        self.name = name
        self.obj = obj
        self.value = value or "corednstw_fake:%s" % name.upper()
        self.dist = types.SimpleNamespace(name=package, version=version)

    def load(self):
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


def install(testcase, *fakes, without=()):
    """corednstw's own entry points (but those named in ``without``) plus
    ``fakes``, scanned anew (and the real scan back at cleanup).  Other
    installed packages (the example, contrib/) are left out: their places
    would shift the fakes'."""
    real = [ep for ep in metadata.entry_points(group=directives.GROUP)
            if ep.name not in without and ep.dist.name == "corednstw"]
    testcase.patch(directives, "_entry_points", lambda: real + list(fakes))
    directives.rescan()
    testcase.addCleanup(directives.rescan)


def entry(name, **kw):
    return FakeEntry(name, PluginEntry(name, echo_setup, **kw))


class RegistryTest(unittest.TestCase):

    def test_builtins_are_entry_points(self):
        # Every module of corednstw/plugins is registered in setup.cfg and
        # every registration names a module; the installed metadata is
        # setup.cfg's (else: reinstall, as scripts/test.sh does).
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(util.REPO, "setup.cfg"))
        lines = cfg["options.entry_points"][directives.GROUP].split("\n")
        declared = dict(tuple(p.strip() for p in line.split("="))
                        for line in lines if line.strip())
        modules = set()
        for name in os.listdir(os.path.join(util.REPO, "corednstw",
                                            "plugins")):
            if not name.startswith("_"):
                modules.add(name[:-3] if name.endswith(".py") else name)
        self.assertEqual(set(declared), modules)
        for name, value in declared.items():
            # A module, or the PluginEntry of a directive plugin.cfg lacks.
            self.assertIn(value, ("corednstw.plugins." + name,
                                  "corednstw.plugins.%s:PLUGIN" % name))
            self.assertEqual(value.endswith(":PLUGIN"),
                             name not in directives.ORDER)
        installed = {ep.name: ep.value for ep in metadata.entry_points(
            group=directives.GROUP) if ep.dist.name == "corednstw"}
        self.assertEqual(installed, declared)

    def test_builtin_semantics_kept(self):
        self.assertTrue(directives.supported("whoami"))
        # A directive of plugin.cfg no package provides: known, not built.
        install(self, without=("multisocket",))
        self.assertTrue(directives.known("multisocket"))
        self.assertIsNone(directives.load("multisocket"))
        self.assertFalse(directives.known("nosuch"))
        # plugin.cfg's order, whatever packages are installed.
        self.assertEqual(tuple(n for n in directives.names()
                               if n in directives.ORDER), directives.ORDER)
        self.assertLess(directives.position("cache"),
                        directives.position("forward"))

    def test_builtin_constraints_hold(self):
        pos = {n: i for i, n in enumerate(directives.ORDER)}
        for a, b, why in directives.CONSTRAINTS:
            self.assertLess(pos[a], pos[b], (a, b, why))

    def test_scan_once(self):
        calls = []
        real = directives._entry_points
        self.patch(directives, "_entry_points",
                   lambda: calls.append(1) or real())
        directives.rescan()
        self.addCleanup(directives.rescan)
        for name in ("whoami", "cache", "forward"):
            directives.load(name)
            directives.position(name)
        self.assertEqual(len(calls), 1)

    def test_scan_reads_no_package_metadata(self):
        # A distribution's METADATA is parsed for its name and version
        # only when an error or a listing names the package.
        read = []
        real = metadata.Distribution.metadata
        self.patch(metadata.Distribution, "metadata", property(
            lambda dist: read.append(dist) or real.fget(dist)))
        directives.rescan()
        self.addCleanup(directives.rescan)
        for name in ("whoami", "cache", "forward", "errors"):
            directives.load(name)
            directives.position(name)
        directives.ordering([])
        self.assertEqual(read, [])
        whoami = directives.provider("whoami")
        self.assertEqual(whoami.package, "corednstw")
        got = len(read)         # name and version, each a parse
        self.assertTrue(whoami.version)
        self.assertEqual(directives.provider("cache").package, "corednstw")
        self.assertEqual(len(read), got)


class PlacementTest(unittest.TestCase):

    def test_after_and_before(self):
        install(self, entry("alpha", after="forward"),
                entry("beta", before="cache"))
        order = directives.names()
        i = order.index("forward")
        self.assertEqual(order[i:i + 2], ("forward", "alpha"))
        i = order.index("cache")
        self.assertEqual(order[i - 1:i + 1], ("beta", "cache"))
        self.assertTrue(directives.known("alpha"))
        self.assertTrue(directives.supported("beta"))

    def test_same_anchor_in_name_order(self):
        install(self, entry("zeta", after="forward"),
                entry("eta", after="forward"),
                entry("b2", before="cache"), entry("b1", before="cache"))
        order = directives.names()
        i = order.index("forward")
        self.assertEqual(order[i:i + 3], ("forward", "eta", "zeta"))
        i = order.index("cache")
        self.assertEqual(order[i - 2:i + 1], ("b1", "b2", "cache"))

    def test_anchor_on_another_package(self):
        install(self, entry("aaa", after="zzz"),
                entry("zzz", before="whoami"))
        order = directives.names()
        i = order.index("zzz")
        self.assertEqual(order[i:i + 3], ("zzz", "aaa", "whoami"))

    def test_unknown_anchor_names_package(self):
        install(self, entry("alpha", after="nosuch"))
        with self.assertRaises(PluginError) as cm:
            directives.position("whoami")
        self.assertEqual(str(cm.exception),
                         "Plugin error: plugin package corednstw-fake 1.0 "
                         "(alpha = corednstw_fake:ALPHA): after='nosuch': "
                         "no such directive")
        # The failure is kept: every later use reports it.
        self.assertRaises(PluginError, directives.load, "whoami")

    def test_cycle_is_unknown_anchor(self):
        install(self, entry("a1", after="a2"), entry("a2", after="a1"))
        self.assertRaises(PluginError, directives.names)

    def test_clash_with_builtin(self):
        install(self, FakeEntry("whoami", PluginEntry("whoami",
                                                      echo_setup)))
        with self.assertRaises(PluginError) as cm:
            directives.names()
        self.assertIn("plugin package corednstw-fake 1.0 (whoami = ",
                      str(cm.exception))
        self.assertIn("already provided by corednstw ", str(cm.exception))

    def test_clash_between_packages(self):
        install(self, entry("alpha", after="forward"),
                FakeEntry("alpha", PluginEntry("alpha", echo_setup,
                                               after="cache"),
                          package="corednstw-other", version="2.0"))
        with self.assertRaises(PluginError) as cm:
            directives.names()
        self.assertIn("corednstw-other 2.0", str(cm.exception))
        self.assertIn("already provided by corednstw-fake 1.0",
                      str(cm.exception))

    def test_place_required(self):
        for kw in ({}, {"before": "cache", "after": "forward"}):
            install(self, entry("alpha", **kw))
            with self.assertRaises(PluginError) as cm:
                directives.names()
            self.assertIn("give exactly one of before= and after=",
                          str(cm.exception))

    def test_load_failure_names_package(self):
        install(self, FakeEntry("alpha", ImportError("no module x")))
        with self.assertRaises(PluginError) as cm:
            directives.names()
        self.assertIn("corednstw-fake 1.0 (alpha = corednstw_fake:ALPHA): "
                      "cannot load: no module x", str(cm.exception))

    def test_name_mismatch(self):
        install(self, FakeEntry("alpha", PluginEntry("beta", echo_setup,
                                                     after="cache")))
        with self.assertRaises(PluginError) as cm:
            directives.names()
        self.assertIn("the entry point says 'alpha', the plugin 'beta'",
                      str(cm.exception))

    def test_no_setup(self):
        install(self, FakeEntry("alpha", types.SimpleNamespace(
            after="cache")))
        self.assertRaises(PluginError, directives.names)

    def test_package_implements_coredns_directive(self):
        # A directive of plugin.cfg not built here: a package may provide
        # it, in plugin.cfg's place.
        install(self, FakeEntry("multisocket",
                                PluginEntry("multisocket", echo_setup)),
                without=("multisocket",))
        self.assertTrue(directives.supported("multisocket"))
        order = directives.names()
        i = directives.position("multisocket")
        self.assertEqual(order[i - 1:i + 2],
                         ("timeouts", "multisocket", "reload"))

    def test_coredns_directive_takes_no_place(self):
        install(self, FakeEntry("multisocket", PluginEntry(
            "multisocket", echo_setup, after="cache")),
                without=("multisocket",))
        with self.assertRaises(PluginError) as cm:
            directives.load("multisocket")
        self.assertIn("its place is plugin.cfg's", str(cm.exception))


class UseTest(unittest.TestCase):
    """A package's directive in a Corefile, through the whole server."""

    def test_chain_position(self):
        install(self, entry("alpha", before="whoami"))
        s = util.Direct(self, ".:0 {\n    whoami\n    alpha\n}\n")
        block = s.app.config.blocks[0]
        self.assertEqual(block.directive_names(), ["alpha", "whoami"])
        m = s.query("example.org", "TXT")
        self.assertEqual(util.rrs(m), ['example.org. 0 IN TXT "alpha"'])
        self.assertEqual(s.query("example.org", "A").rcode(), 0)

    def test_setup_error_located(self):
        install(self, entry("alpha", before="whoami"))
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    alpha x\n}\n")
        self.assertIn("Corefile:2 - Error during parsing: plugin/alpha: "
                      "Wrong argument count", str(cm.exception))

    def test_unknown_without_package(self):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    alpha\n}\n")
        self.assertIn("Unknown directive 'alpha'", str(cm.exception))

    def test_dump_shows_package(self):
        install(self, entry("alpha", after="forward"))
        blocks = corefile.parse(".:53 {\n    whoami\n    alpha\n"
                                "    forward . 127.0.0.1\n}\n")
        chain = dump.dump(blocks).split("  chain\n")[1].splitlines()
        self.assertEqual(chain, [
            "    forward . 127.0.0.1 @ Corefile:4",
            "    alpha @ Corefile:3 [corednstw-fake 1.0]",
            "    whoami @ Corefile:2",
        ])

    def test_plugins_lists_package(self):
        install(self, entry("alpha", after="forward"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(tap.list_plugins(), 0)
        lines = out.getvalue().splitlines()
        self.assertIn("alpha (corednstw-fake 1.0)", lines)
        self.assertIn("whoami", lines)

    def test_plugins_reports_broken_package(self):
        install(self, entry("alpha", after="nosuch"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(tap.list_plugins(), 1)
        self.assertIn("Plugin error: plugin package corednstw-fake",
                      out.getvalue())

    def test_broken_package_fails_the_start(self):
        install(self, entry("alpha", after="nosuch"))
        with self.assertRaises(PluginError):
            util.Direct(self, ".:0 {\n    whoami\n}\n")
