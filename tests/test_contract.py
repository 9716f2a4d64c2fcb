"""The declared contract, checked: every class a plugin module (or an
engine it uses) says implements a hook of core.interfaces really does
(zope.interface.verify), the running server implements IServer and its
listeners IListener, and ``runs_in`` holds one of the three places."""

import importlib
import inspect
import os
import pkgutil
import typing

from twisted.internet import defer
from twisted.trial import unittest
from zope.interface import Interface, implementedBy
from zope.interface.interface import InterfaceClass
from zope.interface.verify import verifyClass, verifyObject

import corednstw
from corednstw.core import directives, interfaces
from corednstw.core.interfaces import IListener, IServer
from corednstw.core.plugin import Plugin, RunsIn
from corednstw.service.app import App
from tests.support import util

#: Every hook interface the contract declares.
HOOKS = [v for v in vars(interfaces).values()
         if isinstance(v, InterfaceClass) and v is not Interface]


def _modules():
    """The modules of every directive the registry knows (a package's
    submodules too), and the engines."""
    seen = {}
    for name in directives.names():
        spec = directives.load(name)
        if spec is None or not inspect.ismodule(spec):
            continue
        seen[spec.__name__] = spec
        package = spec.__name__.rsplit(".", 1)[0]
        if package != "corednstw.plugins":
            seen.update(_walk(importlib.import_module(package)))
    seen.update(_walk(importlib.import_module("corednstw.engines")))
    return seen


def _walk(package):
    out = {package.__name__: package}
    for info in pkgutil.walk_packages(package.__path__,
                                      package.__name__ + "."):
        try:
            out[info.name] = importlib.import_module(info.name)
        except ImportError:
            continue    # an optional dependency that is not installed
    return out


def _providers():
    """(class, interface) for every hook a class of those modules
    declares."""
    out = []
    for mod in _modules().values():
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if not cls.__module__.startswith("corednstw."):
                continue
            for iface in implementedBy(cls).flattened():
                if iface in HOOKS and (cls, iface) not in out:
                    out.append((cls, iface))
    return out


class HooksTest(unittest.TestCase):

    def test_every_declared_hook_is_implemented(self):
        providers = _providers()
        # The registry's plugins declare hooks; if none were found the
        # walk itself is broken.
        names = {i.__name__ for _, i in providers}
        for expected in ("IReadiness", "ITransferer", "IMetadataProvider",
                         "IHTTPEndpointOwner", "IInheritable"):
            self.assertIn(expected, names)
        for cls, iface in providers:
            self.assertTrue(verifyClass(iface, cls),
                            "%s.%s" % (cls.__module__, cls.__name__))

    def test_plugins_set_up_from_corefiles_verify_as_objects(self):
        """Attributes too (ILameduck.lameduck, IForwarderTap.full): the
        plugins of real Corefiles, set up, verified as objects."""
        corefile = (".:0 {\n    health 127.0.0.1:0 {\n        lameduck 1s\n"
                    "    }\n    ready 127.0.0.1:0\n"
                    "    prometheus 127.0.0.1:0\n    dnstap /tmp/x.sock full\n"
                    "    autopath @kubernetes\n"
                    "    kubernetes cluster.local {\n"
                    "        endpoint http://127.0.0.1:1\n    }\n"
                    "    file db.example.org example.org\n"
                    "    forward . 127.0.0.1:1\n}\n")
        zone = ("@ 3600 IN SOA ns admin 1 7200 3600 1209600 3600\n"
                "@ 3600 IN NS ns\nns 3600 IN A 192.0.2.1\n")
        d = util.write_files(self, {"db.example.org":
                                    "$ORIGIN example.org.\n" + zone})
        path = os.path.join(d, "Corefile")
        with open(path, "w") as f:
            f.write(corefile.replace("db.example.org",
                                     d + "/db.example.org"))
        plugins = list(App(path, dns_port=0).load().plugins())
        checked = 0
        for p in plugins:
            for iface in HOOKS:
                if iface.providedBy(p):
                    self.assertTrue(verifyObject(iface, p), p.name)
                    checked += 1
        self.assertGreaterEqual(checked, 8)

    def test_runs_in_is_one_of_three_places(self):
        allowed = set(typing.get_args(RunsIn))
        for mod in _modules().values():
            for _, cls in inspect.getmembers(mod, inspect.isclass):
                if issubclass(cls, Plugin):
                    self.assertIn(cls.runs_in, allowed, cls)


class ServerFacadeTest(unittest.TestCase):

    @defer.inlineCallbacks
    def test_app_and_listeners_provide_the_facade(self):
        app = yield util.start(self, ".:0 {\n    whoami\n}\n")
        self.assertTrue(verifyObject(IServer, app))
        [(key, lst)] = app.listeners_of()
        self.assertTrue(verifyObject(IListener, lst))
        block = app.config.blocks[0]
        self.assertIs(block.server, app)
        self.assertEqual(app.listeners_of(block), [(key, lst)])

    def test_core_imports_nothing_above_it(self):
        """core/ is the contract alone: no module of it imports the
        listeners, the engines, the plugins or the service."""
        import ast
        core = os.path.join(os.path.dirname(corednstw.__file__), "core")
        for fn in sorted(os.listdir(core)):
            if not fn.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(core, fn)).read())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                for n in names:
                    self.assertFalse(
                        n.startswith(("corednstw.dnsserver",
                                      "corednstw.engines",
                                      "corednstw.plugins",
                                      "corednstw.service")),
                        "%s imports %s" % (fn, n))
