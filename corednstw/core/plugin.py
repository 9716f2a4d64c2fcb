"""The chain contract every plugin implements.

A plugin is a resolver class in an ordered chain (twisted.names' chain idea,
extended).  The server calls ``serve(request)``; a plugin answers with a
``Response``, passes the request on with ``self.next.serve(request)``, or
returns a Deferred that fires with a Response.  Results are synchronous
whenever possible: a Deferred per plugin per query costs more than the whole
per-query budget.  ``None`` means "nothing written": the server then answers
SERVFAIL, as CoreDNS does when no plugin writes.

Plugin modules live in ``corednstw.plugins.<directive>`` and expose
``setup(directive, block) -> Plugin`` (see config.py).  A plugin that only
configures something (bind, root, health, ...) sets ``in_chain = False`` and
is kept out of the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, Union

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core.request import Request, Response, response

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from corednstw.core.config import Block
    from corednstw.core.directive import Directive

#: What ``serve`` returns: an answer now, one later, or nothing written.
Result = Union[Response, "defer.Deferred[Optional[Response]]", None]


def _normalize(name: str) -> list[str]:
    from corednstw.core import names
    return names.normalize(name)


def match(zones: Iterable[str], qname: str) -> Optional[str]:
    """The longest zone of ``zones`` containing ``qname`` (both lower-case
    FQDNs), or None.  CoreDNS's plugin.Zones.Matches."""
    best = None
    plain = "\\" not in qname
    for z in zones:
        if z == "." or qname == z or qname.endswith("." + z) and (
                plain or _in_zone(qname, z)):
            if best is None or len(z) > len(best):
                best = z
    return best


def _in_zone(qname: str, zone: str) -> bool:
    from corednstw.core import names
    return bool(names.in_zone(qname, zone))


def is_deferred(result: object) -> TypeIs[defer.Deferred[Any]]:
    """``isinstance(result, Deferred)``, quick for the usual results (to
    the checker, an isinstance test: a Result is narrowed both ways).

    Deferred's metaclass is ABCMeta, whose isinstance costs ten times a
    plain class's; a Response or None (nearly every result) is ruled out
    first with the cheap checks.
    """
    if result is None or isinstance(result, Response):
        return False
    return isinstance(result, defer.Deferred)


def then(result: Result, fn: Callable[..., Any], *args: Any) -> Any:
    """Apply ``fn(result, *args)`` now, or when the Deferred fires.

    Middleware uses this so the synchronous path stays free of Deferreds.
    """
    if result is None or isinstance(result, Response) or \
            not isinstance(result, defer.Deferred):
        return fn(result, *args)
    return result.addCallback(fn, *args)


def answers_as_made(plugin: Plugin) -> bool:
    """Whether what ``plugin`` answers reaches the server as it is made:
    every link in front of it in its block's chain passes answers on
    unchanged (``Plugin.passes_answers``).  The plugin may then hand back
    an answer whose bytes it has already made (``Response.wire``)."""
    block = plugin.block
    if block is None:
        return False
    p = block.chain
    while p is not plugin:
        if not getattr(p, "passes_answers", False):
            return False    # the chain's end too: a copy, not a link
        p = p.next
    return True


#: Where a plugin's ``start``/``stop`` run under ``multisocket``.
RunsIn = Literal["worker", "supervisor", "both"]


class Plugin:
    """Base class: a link of the chain.

    Attributes: ``name`` (the directive), ``next`` (the following plugin, or
    the chain's end), ``block`` (the server block it belongs to), ``zones``
    (the plugin's own zones: its arguments or the block's keys),
    ``reactor`` (the App's reactor, set with ``block``: timers and threads
    go through it so tests can pass a ``task.Clock``; nothing on a request
    path imports the global reactor).
    """

    name: str = "plugin"
    #: False for configuration-only plugins (not placed in the chain).
    in_chain: ClassVar[bool] = True
    #: True when CoreDNS refuses the directive twice in one server block.
    once: ClassVar[bool] = True
    #: Where ``start``/``stop`` run under ``multisocket``: "worker" (the
    #: processes answering queries), "supervisor" (the one holding the
    #: sockets, HTTP endpoints, reload and data watches) or "both".  A
    #: single process runs every plugin.
    runs_in: ClassVar[RunsIn] = "worker"
    #: True when the plugin hands on what the plugins after it answer
    #: as it came: it may read the answer, encode it or answer a query
    #: itself instead of passing it on, but never edits an answer it got
    #: back (see ``answers_as_made``).
    passes_answers: ClassVar[bool] = False

    # None until config.build links the plugin in, once setup() returned.
    next: Plugin = None  # type: ignore[assignment]
    block: Block = None  # type: ignore[assignment]
    #: The App's reactor, or the task.Clock a test passes.
    reactor: Any = None
    directive: Directive
    zones: Sequence[str] = ()

    def serve(self, req: Request) -> Result:
        return self.next.serve(req)

    # Life cycle -------------------------------------------------------------

    def prestart(self) -> None:
        """Called once, at the server's first start only, as soon as the
        configuration is built (before the listeners open and before
        ``start``): work that takes long and needs no listener may begin
        here, while the rest of the server is set up."""

    def start(self) -> Any:
        """Called when the configuration goes live (may return a Deferred)."""

    def stop(self) -> Any:
        """Called when the configuration is retired (may return a Deferred)."""

    # Helpers for subclasses -------------------------------------------------

    def match_zone(self, qname: str) -> Optional[str]:
        """The longest of the plugin's zones that contains ``qname``."""
        return match(self.zones, qname)

    def respond(self, req: Request, rcode: int = w.NOERROR,
                answer: Optional[list[w.RR]] = None,
                authority: Optional[list[w.RR]] = None,
                additional: Optional[list[w.RR]] = None,
                aa: bool = True) -> Response:
        """A Response written by this plugin."""
        return response(rcode, answer, authority, additional,
                        w.AA if aa else 0, self.name)

    def __repr__(self) -> str:
        return "<%s %s>" % (type(self).__name__, " ".join(self.zones))


class End(Plugin):
    """The end of every chain: nothing was written."""

    name = ""

    def serve(self, req: Request) -> Result:
        return None


END = End()


class Fallthrough:
    """The ``fallthrough [ZONES...]`` option: which NXDOMAIN answers go on
    to the next plugin instead of to the client."""

    __slots__ = ("zones",)

    def __init__(self, zones: Optional[list[str]] = None) -> None:
        self.zones = zones  # None: off; [] or ['.']: everything

    @classmethod
    def parse(cls, args: Sequence[str]) -> Fallthrough:
        if not args:
            return cls(["."])
        out = []
        for a in args:
            out.extend(_normalize(a))
        return cls(out)

    def through(self, qname: str) -> bool:
        """True when an NXDOMAIN for ``qname`` should fall through."""
        z = self.zones
        if z is None:
            return False
        if not z or "." in z:
            return True
        return match(z, qname) is not None

    def __bool__(self) -> bool:
        return self.zones is not None


def zones_from_args(args: Sequence[str], block: Block) -> list[str]:
    """A plugin's zones: its arguments (CIDRs expanded) or the block's keys."""
    if not args:
        return list(block.zones)
    out = []
    for a in args:
        out.extend(_normalize(a))
    return out
