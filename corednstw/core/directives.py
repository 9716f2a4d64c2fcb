"""The directives, where their code comes from, and their chain order.

``ORDER`` is CoreDNS 1.14's plugin.cfg (plus ``proxy`` of CoreDNS 1.0-1.4
right after ``forward``, where 1.4 had it).  A request passes the plugins
of its server block in this order, whatever order the Corefile writes them
in.

Code is found in one way for every plugin: the entry points of the group
``corednstw.plugins``.  corednstw registers its own plugins there in
setup.cfg (``whoami = corednstw.plugins.whoami``), and an installed package
adds its own the same way (``hello = corednstw_hello:PLUGIN``).  An entry
point names a module or a ``PluginEntry``: anything with ``setup(d,
block)``.  A name of ``ORDER`` takes its plugin.cfg place; any other name
is placed by its ``PluginEntry`` (``before=`` or ``after=`` a directive).
A known name that no entry point provides is "not supported yet".

ORDER stays the one list of CoreDNS's positions rather than each built-in
entry point naming its predecessor: it reads line by line against
plugin.cfg, it must also place the directives not built yet (so that they
are "not supported yet", not unknown), and a predecessor renamed in one
entry point would silently move a whole tail of the chain.  Packages are
placed relative to it.  See docs/development.md, "Writing a plugin as a
package".

The scan of the entry points runs once per process; modules are imported
when a Corefile first uses their directive.
"""

import dataclasses
import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any, Optional

from corednstw.core.errors import CorefileError, PluginError

#: The entry-point group plugins register in.
GROUP = "corednstw.plugins"

ORDER = (
    "root", "metadata", "geoip", "cancel", "proxyproto", "quic",
    "grpc_server", "https", "https3", "timeouts", "multisocket", "reload",
    "nsid", "bufsize", "bind", "debug", "trace", "ready", "health", "pprof",
    "shed", "prometheus", "errors", "log", "dnstap", "local", "dns64", "any",
    "chaos", "loadbalance", "tsig", "rewrite", "autopath", "acl", "cache",
    "header", "dnssec", "tls", "minimal", "template", "transfer", "hosts",
    "route53", "azure", "clouddns", "k8s_external", "kubernetes", "file",
    "auto", "secondary", "etcd", "loop", "forward", "proxy", "grpc",
    "erratic", "whoami", "on", "sign", "view", "nomad",
)

#: The plugins that answer from their own data or an upstream: what the
#: middleware above them acts on.
BACKENDS = (
    "template", "hosts", "route53", "azure", "clouddns", "k8s_external",
    "kubernetes", "file", "auto", "secondary", "etcd", "forward", "proxy",
    "grpc", "erratic", "whoami", "sign", "nomad",
)

#: Assumptions CoreDNS's plugin documentation makes about the order, as
#: (earlier, later, why): ``order`` in a Corefile may not break them.
CONSTRAINTS = tuple(
    [("root", b, "root sets the directory later plugins read files from")
     for b in ("hosts", "file", "auto", "tls", "tsig", "loadbalance",
               "sign", "dnssec")]
    + [("metadata", b, "metadata fills what later plugins read")
       for b in ("log", "dnstap", "acl", "rewrite", "view", "template")]
    + [(a, b, "%s acts on what the plugins below it answer" % a)
       for a in ("prometheus", "errors", "log", "dnstap", "cache",
                 "rewrite", "acl", "dnssec", "header", "minimal",
                 "loadbalance", "any", "dns64")
       for b in BACKENDS]
    + [("loop", b, "loop's probe must reach the forwarder")
       for b in ("forward", "proxy", "grpc")]
    + [("rewrite", "cache", "rewrite must change a query before cache "
        "looks it up")]
)


@dataclasses.dataclass(frozen=True)
class PluginEntry:
    """What a package's entry point names: a directive and its place.

    ``name`` is the directive (it must equal the entry point's name);
    ``setup(d, block)`` returns the plugin (see docs/development.md);
    exactly one of ``before`` and ``after`` names the directive it sits
    next to in the chain (a plugin.cfg name or another package's).
    ``precedes`` and ``follows`` are the directives that must stay below
    or above it (its assumptions; a Corefile's ``order`` may not break
    them).  A package implementing a directive of plugin.cfg gives no
    place: it takes plugin.cfg's.
    """

    name: str
    setup: Callable[..., Any]
    before: Optional[str] = None
    after: Optional[str] = None
    precedes: tuple[str, ...] = ()
    follows: tuple[str, ...] = ()


def setup_from(target):
    """A ``setup(d, block)`` for a ``PluginEntry`` that imports
    ``"module:function"`` at its first call: every start reads a
    package's entry point to place its directive, and only a Corefile
    naming the directive should pay for the modules behind it."""
    module, _, attr = target.partition(":")
    found: list[Callable[..., Any]] = []

    def setup(d, block):
        if not found:
            found.append(getattr(importlib.import_module(module), attr))
        return found[0](d, block)

    setup.__doc__ = "%s's setup, imported at its first call." % target
    return setup


def names_from(package, module, names):
    """A module ``__getattr__`` for ``package`` giving ``names`` from
    ``module``, imported at the first use of one of them (a package's
    re-exports kept without importing its plugin at every start)."""
    wanted = frozenset(names)

    def __getattr__(name):
        if name in wanted:
            return getattr(importlib.import_module(module), name)
        raise AttributeError("module %r has no attribute %r"
                             % (package, name))

    return __getattr__


@dataclasses.dataclass
class Registered:
    """One entry point of the group: which package provides a directive."""

    name: str
    value: str
    entry: Any
    spec: Any = None        # what the entry point names, once loaded
    #: () -> (package, version): read from the distribution's metadata
    #: at the first use (errors, listings), not at every start's scan.
    about: Callable[[], tuple[str, str]] = lambda: ("?", "?")

    @property
    def package(self):
        return self.about()[0]

    @property
    def version(self):
        return self.about()[1]

    def where(self):
        """The package and entry point, as errors name them."""
        return "plugin package %s %s (%s = %s)" % (
            self.package, self.version, self.name, self.value)

    def error(self, message):
        return PluginError(self.package, "%s: %s" % (
            self.where(), message))

    def builtin(self):
        """True for corednstw's own plugins."""
        return self.package == _SELF


_SELF = "corednstw"


class _Assumption:
    """The reason of a package's constraint, "an assumption of PACKAGE":
    the package's name is read (from its metadata) when an error says
    it."""

    def __init__(self, reg):
        self.reg = reg

    def __str__(self):
        return "an assumption of %s" % self.reg.package


class Registry:
    """The result of one scan: directives, their packages and order."""

    def __init__(self, entries):
        self.entries = {}
        self._dists = {}
        for ep in entries:
            self.add(ep)
        self.order = list(ORDER)
        self.constraints = list(CONSTRAINTS)
        self.owned = []
        self.place([r for r in self.entries.values()
                    if r.name not in _ORDER_SET])
        self.positions = {n: i for i, n in enumerate(self.order)}
        self.check_placed()

    def check_placed(self):
        """A package's own place may not break its assumptions."""
        pos = self.positions
        for (a, b, _), reg in self.owned:
            if a in pos and b in pos and pos[a] > pos[b]:
                raise reg.error("its place puts '%s' after '%s', its "
                                "assumptions want it before" % (a, b))

    def add(self, ep):
        reg = Registered(ep.name, ep.value, ep, about=self._about(ep.dist))
        other = self.entries.get(ep.name)
        if other is not None:
            raise reg.error("directive '%s' is already provided by %s %s"
                            % (ep.name, other.package, other.version))
        self.entries[ep.name] = reg

    def _about(self, dist):
        """() -> (name, version) of a distribution, read once per
        distribution and only when asked: each ``dist.name`` or
        ``dist.version`` parses its METADATA file again, 120 parses and a
        tenth of the start-up for the built-in entry points alone."""
        if dist is None:
            return lambda: ("?", "?")
        got = self._dists.get(id(dist))
        if got is None:
            read: list[tuple[str, str]] = []

            def got():
                if not read:
                    read.append((dist.name, dist.version))
                return read[0]
            self._dists[id(dist)] = got
        return got

    def place(self, pending):
        """Insert the packages' directives next to their anchors; an anchor
        may itself be a package's directive, placed first."""
        anchors = {}
        for reg in pending:
            anchors[reg.name] = self.anchor(reg)
        after_runs = {}
        todo = sorted(pending, key=lambda r: r.name)
        while todo:
            left = []
            for reg in todo:
                where, other = anchors[reg.name]
                if other not in self.order:
                    left.append(reg)
                    continue
                i = self.order.index(other)
                if where == "after":
                    run = after_runs.setdefault(other, [])
                    i += 1 + len(run)
                    run.append(reg.name)
                self.order.insert(i, reg.name)
            if len(left) == len(todo):
                reg = left[0]
                where, other = anchors[reg.name]
                raise reg.error("%s='%s': no such directive" % (where,
                                                                 other))
            todo = left

    def anchor(self, reg):
        """(``before`` or ``after``, directive) of a package's entry, its
        constraints recorded."""
        spec = self.spec(reg)
        before = getattr(spec, "before", None)
        after = getattr(spec, "after", None)
        if (before is None) == (after is None):
            raise reg.error("give exactly one of before= and after=")
        why = _Assumption(reg)
        pairs = ([(reg.name, b, why) for b in getattr(spec, "precedes", ())]
                 + [(a, reg.name, why) for a in getattr(spec, "follows",
                                                        ())])
        self.constraints.extend(pairs)
        self.owned.extend((pair, reg) for pair in pairs)
        return ("before", before) if before else ("after", after)

    def spec(self, reg):
        """The object the entry point names, loaded once."""
        if reg.spec is None:
            try:
                spec = reg.entry.load()
            except ImportError as e:
                if reg.builtin():
                    raise
                raise reg.error("cannot load: %s" % e) from e
            if not callable(getattr(spec, "setup", None)):
                raise reg.error("no setup(d, block) function")
            name = getattr(spec, "name", reg.name)
            if isinstance(name, str) and name != reg.name:
                raise reg.error("the entry point says '%s', the plugin "
                                "'%s'" % (reg.name, name))
            reg.spec = spec
        return reg.spec

    def load(self, name):
        reg = self.entries.get(name)
        if reg is None:
            return None
        spec = self.spec(reg)
        if name in _ORDER_SET and (getattr(spec, "before", None)
                                   or getattr(spec, "after", None)):
            raise reg.error("'%s' is a CoreDNS directive: its place is "
                            "plugin.cfg's, give no before= or after="
                            % name)
        return spec


_ORDER_SET = frozenset(ORDER)
_registry: Optional[Registry] = None
_failure: Optional[Exception] = None


def _entry_points():
    """The group's entry points (a seam for tests)."""
    return metadata.entry_points(group=GROUP)


def registry():
    """The scan of the entry points, made once; a package that cannot be
    placed fails every later call the same way (a PluginError)."""
    global _registry, _failure
    if _registry is None:
        if _failure is not None:
            raise _failure
        try:
            _registry = Registry(_entry_points())
        except CorefileError as e:
            _failure = e
            raise
    return _registry


def rescan():
    """Forget the scan (after installing a package in this process, and
    in tests)."""
    global _registry, _failure
    _registry = _failure = None


def known(name):
    """True when ``name`` is a directive: CoreDNS's (built or not) or an
    installed package's."""
    return name in _ORDER_SET or name in registry().positions


def position(name):
    """Index of ``name`` in the chain order (KeyError for unknown names)."""
    return registry().positions[name]


def names():
    """Every known directive, in chain order."""
    return tuple(registry().order)


def load(name):
    """Return what implements directive ``name`` (a module or a
    PluginEntry: it has ``setup``), or None if nothing provides it yet.
    Import errors inside corednstw's own modules propagate."""
    return registry().load(name)


def provider(name):
    """The ``Registered`` entry providing ``name``, or None."""
    return registry().entries.get(name)


def supported(name):
    """True when the directive is known and something implements it."""
    return known(name) and load(name) is not None



class Ordering:
    """The chain order of one Corefile: the default order with its
    global ``order`` options applied, line by line.

    ``order NAME before|after OTHER`` puts NAME right before or after
    OTHER; ``order NAME first|last`` at either end.  In a server block
    holding both directives of an assumption (``CONSTRAINTS``, a
    package's ``precedes``/``follows``) the result may not break it:
    ``check`` makes that an error at the ``order`` line that moved one of
    them.
    """

    def __init__(self, rules=()):
        reg = registry()
        self.order = list(reg.order)
        self.constraints = reg.constraints
        self.moved = {}
        for i, d in enumerate(rules):
            self.apply(d)
            self.moved[d.args[0]] = (i, d)
        self.positions = {n: i for i, n in enumerate(self.order)}

    def position(self, name):
        """Index of ``name`` in this order (KeyError for unknown names)."""
        return self.positions[name]

    def apply(self, d):
        """Move one directive as the ``order`` line ``d`` says."""
        args = d.args
        if len(args) < 2 or len(args) > 3:
            raise d.arg_error()
        name, where = args[0], args[1]
        if len(args) == 2 and where in ("before", "after"):
            raise d.arg_error()
        places = ("before", "after") if len(args) == 3 else ("first", "last")
        if where not in places:
            raise d.error("expected %s, got '%s'" % (
                " or ".join(places), where))
        for n in args[::2]:
            if n not in self.order:
                raise d.error("unknown directive '%s'" % n)
        if len(args) == 3 and args[2] == name:
            raise d.error("'%s' cannot be placed next to itself" % name)
        self.order.remove(name)
        if where == "first":
            self.order.insert(0, name)
        elif where == "last":
            self.order.append(name)
        else:
            i = self.order.index(args[2])
            self.order.insert(i + (where == "after"), name)

    def check(self, names):
        """Refuse this order for a server block of directives ``names``
        when it puts two of them against an assumption (only a block
        holding both is harmed)."""
        if not self.moved:
            return
        pos = self.positions
        present = set(names)
        for a, b, why in self.constraints:
            if a in present and b in present and pos[a] > pos[b]:
                _, d = max(self.moved[n] for n in (a, b)
                           if n in self.moved)
                raise d.error("'%s' must stay before '%s' (%s)" % (a, b,
                                                                     why))


def ordering(blocks, errors=None):
    """The chain order of a Corefile's blocks (their global ``order``
    options, the same list on every block).  A wrong ``order`` line
    raises, or with an ``errors`` list (--check, --dump) is listed there
    and the default order is used to go on."""
    try:
        return Ordering(blocks[0].options if blocks else ())
    except CorefileError as e:
        if errors is None:
            raise
        errors.append(e)
        return Ordering()
