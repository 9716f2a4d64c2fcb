"""From parsed server blocks to a runnable configuration.

``build`` sets every plugin of every block up (all of it, before anything is
switched: a reload that fails keeps the old configuration) and groups the
blocks into listeners, one per (transport, address, port).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional

from corednstw.core import corefile, directives, logger
from corednstw.core.directive import Directive
from corednstw.core.errors import CorefileError
from corednstw.core.interfaces import IHTTPEndpointOwner, IReadiness, IServer
from corednstw.core.plugin import END, Plugin

if TYPE_CHECKING:
    from zope.interface.interface import InterfaceClass

    from corednstw.core.request import Request

SUPPORTED_TRANSPORTS = ("dns", "tls", "https", "quic", "https3", "grpc")
#: Transports served over TCP alone (no UDP socket).  A ``tls://`` block
#: without a ``tls`` directive has no certificate: CoreDNS then serves it
#: as plain DNS on a TCP listener and opens nothing on UDP.
STREAM_ONLY = ("tls",)


class Block:
    """One server block, set up.

    ``zones``: the zones of its keys (CIDRs expanded); ``plugins``: every
    plugin object in chain order; ``chain``: the first plugin of the request
    path.  Plugins store block-wide settings in ``settings`` (root, timeouts,
    debug, ...) and register HTTP endpoints through ``config``.
    """

    def __init__(self, source: corefile.ServerBlock, config: Config,
                 index: int) -> None:
        self.source = source
        self.config = config
        self.index = index
        self.keys: list[corefile.ZoneAddr] = list(source.keys)
        self.zones: list[str] = []
        for k in self.keys:
            if k.zone not in self.zones:
                self.zones.append(k.zone)
        self.plugins: list[Plugin] = []
        self.chain: Plugin = END
        self.filters: list[Callable[[Request], bool]] = []
        self.view = ""
        # list of addresses, set by the bind plugin
        self.bind: Optional[list[str]] = None
        self.debug = False
        self.settings: dict[str, Any] = {}

    @property
    def server(self) -> IServer:
        """The running server (core.interfaces.IServer): everything a
        plugin may ask of the process goes through it."""
        return self.config.server

    def path(self, name: str) -> str:
        """``name`` resolved against the block's ``root`` directory when it
        is relative (CoreDNS's root plugin); unchanged otherwise."""
        root = self.settings.get("root")
        if root and not os.path.isabs(name):
            return os.path.join(root, name)
        return name

    def accepts(self, req: Request) -> bool:
        for f in self.filters:
            if not f(req):
                return False
        return True

    def plugin(self, name: str) -> Optional[Plugin]:
        """The first plugin of directive ``name`` in this block, or None."""
        for p in self.plugins:
            if p.name == name:
                return p
        return None

    def find(self, interface: InterfaceClass) -> list[Any]:
        """The plugins of this block that provide ``interface`` (one of
        corednstw.core.interfaces), in chain order: plugins find each
        other by interface, never by import or method name."""
        return [p for p in self.plugins if interface.providedBy(p)]

    def directive_names(self) -> list[str]:
        return [p.name for p in self.plugins]

    def __repr__(self) -> str:
        return "<Block %s>" % " ".join(str(k) for k in self.keys)


class Config:
    """A whole configuration: blocks, listeners, HTTP endpoints."""

    def __init__(self, server: IServer, path: str,
                 blocks: list[corefile.ServerBlock]) -> None:
        self.server = server
        self.path = path
        self.sources = blocks
        self.blocks: list[Block] = []
        # (transport, host or None, port) -> [(zone, block)]
        self.listeners: dict[tuple[str, Optional[str], str],
                             list[tuple[str, Block]]] = {}
        # address -> {path: (page or twisted.web resource, directive name)}
        self.http: dict[str, dict[str, tuple[Any, str]]] = {}
        # address -> the TLS its endpoints are served with (see
        # IHTTPEndpointOwner.http_tls); absent: plain HTTP
        self.http_tls: dict[str, Any] = {}
        self.files = [path]
        # the chain order of this Corefile (its global ``order`` options)
        self.order = directives.Ordering()
        # (file, line, text) of the deprecation notices logged
        self.notices: list[tuple[str, int, str]] = []

    def handle_http(self, address: str, path: str, resource: Any,
                    d: Directive, tls: Any = None) -> None:
        """Register an HTTP endpoint for directive ``d``.  Several blocks of
        one directive may share it (``prometheus :9153`` everywhere); two
        different directives on one path clash.  ``tls`` (with a
        ``source``, the file it was read from) puts the whole address on
        TLS: an address is never served both ways, and two different
        sources for one address clash."""
        paths = self.http.setdefault(address, {})
        if path in paths and paths[path][1] != d.name:
            raise d.error("%s already served on %s by %s" % (
                path, address, paths[path][1]))
        if tls is not None:
            have = self.http_tls.get(address)
            if have is not None and have.source != tls.source:
                raise d.error("%s already served with the TLS of %s" % (
                    address, have.source))
            self.http_tls[address] = tls
        if path not in paths:
            paths[path] = (resource, d.name)

    def plugins(self) -> Iterator[Plugin]:
        for b in self.blocks:
            yield from b.plugins

    def find(self, interface: InterfaceClass) -> list[Any]:
        """Every plugin of every block that provides ``interface``."""
        return [p for b in self.blocks for p in b.find(interface)]

    def ready_reporters(self) -> list[Any]:
        """The IReadiness providers, for the ready plugin."""
        return self.find(IReadiness)


def build(server: IServer, path: str, blocks: list[corefile.ServerBlock],
          errors: Optional[list[CorefileError]] = None) -> Config:
    """Set up every block; CorefileError on the first problem.

    With an ``errors`` list (``--check``), every directive error is
    collected there and the build goes on, so all of them are reported.
    """
    cfg = Config(server, path, blocks)
    cfg.order = directives.ordering(blocks, errors)
    for i, sb in enumerate(blocks):
        cfg.blocks.append(_build_block(cfg, sb, i, errors))
        _notify(cfg, sb.directives)
        _warn_proxy_trust(cfg, cfg.blocks[-1])
    if errors:
        raise errors[0]
    _group_listeners(cfg)
    return cfg


#: CoreDNS's errors for a QUIC block without a certificate (the first
#: comes from quic-go, the second from CoreDNS's DoH3 server).
_NO_TLS = {"quic": "quic: tls.Config not set",
           "https3": "DoH3 requires TLS, no TLS config found"}


def _build_block(cfg: Config, sb: corefile.ServerBlock, index: int,
                 errors: Optional[list[CorefileError]] = None
                 ) -> Block:
    block = Block(sb, cfg, index)
    for key in block.keys:
        if _plain_tls(sb, key):
            _warn_no_certificate(cfg, key)
        elif key.transport in ("quic", "https3") and not any(
                d.name == "tls" for d in sb.directives):
            e = CorefileError(
                sb.file, sb.line, "%s: %s (a tls directive is needed)"
                % (key.key, _NO_TLS[key.transport]))
            if errors is None:
                raise e
            errors.append(e)
        elif key.transport not in SUPPORTED_TRANSPORTS:
            e = CorefileError(
                sb.file, sb.line,
                "%s: transport %s:// not supported yet" % (key.key,
                                                           key.transport))
            if errors is None:
                raise e
            errors.append(e)
    try:
        cfg.order.check([d.name for d in sb.directives])
    except CorefileError as e:
        if errors is None:
            raise
        errors.append(e)
    ordered = sorted(sb.directives, key=lambda d: cfg.order.position(d.name))
    seen = set()
    chain = []
    for d in ordered:
        try:
            plugin = _setup(d, block)
            if plugin is not None and IHTTPEndpointOwner.providedBy(plugin):
                tls = getattr(plugin, "http_tls", None)
                for address, path, resource in plugin.http_endpoints():
                    block.config.handle_http(address, path, resource, d,
                                             tls)
        except CorefileError as e:
            if errors is None:
                raise
            errors.append(e)
            continue
        if plugin is None:
            continue
        if getattr(plugin, "once", True) and d.name in seen:
            raise d.error("this plugin can only be used once per Server "
                          "Block")
        seen.add(d.name)
        plugin.name = getattr(plugin, "name", None) or d.name
        if plugin.name == "plugin":
            plugin.name = d.name
        plugin.block = block
        plugin.directive = d
        plugin.reactor = block.server.reactor
        block.plugins.append(plugin)
        if plugin.in_chain:
            chain.append(plugin)
    nxt: Plugin = END
    for p in reversed(chain):
        p.next = nxt
        nxt = p
    block.chain = nxt
    return block


def _plain_tls(sb: corefile.ServerBlock, key: corefile.ZoneAddr) -> bool:
    """A ``tls://`` key of a block with no ``tls`` directive: no
    certificate, so plain DNS over TCP (what CoreDNS does then)."""
    return key.transport == "tls" and not any(
        d.name == "tls" for d in sb.directives)


def _warn_no_certificate(cfg: Config, key: corefile.ZoneAddr) -> None:
    """Say once per key that a tls:// block is not encrypted."""
    text = ("%s has no certificate (no tls directive): serving plain DNS "
            "over TCP only" % key)
    if ("", 0, text) not in cfg.notices:
        cfg.notices.append(("", 0, text))
        logger.warning("tls", text)


def _address_gates(ds: Sequence[Directive]) -> list[str]:
    """The directives of a block that let a client in or out by its
    address: acl, view, and transfer to named peers (``to *`` lets
    everyone transfer, whatever the address)."""
    names = []
    for d in ds:
        if d.name in ("acl", "view") or d.name == "transfer" and any(
                c.name == "to" and any(a != "*" for a in c.args)
                for c in d.children):
            if d.name not in names:
                names.append(d.name)
    return names


def _warn_proxy_trust(cfg: Config, block: Block) -> None:
    """Warn when ``proxyproto`` believes every client's PROXY header (no
    ``allow``, ``default`` not set otherwise: CoreDNS's default, kept)
    in a block whose access depends on the client's address: any client
    can then claim an address acl, view or transfer let in."""
    policy = block.settings.get("proxyproto")
    if policy is None or policy.nets or (policy.default_set and
                                         policy.default != "use"):
        return
    gates = _address_gates(block.source.directives)
    if not gates:
        return
    d = next(d for d in block.source.directives if d.name == "proxyproto")
    text = ("proxyproto has no allow: every client can claim any address "
            "with a PROXY header, and %s decide%s by that address (%s:%d)"
            % (", ".join(gates), "s" if len(gates) == 1 else "",
               d.file, d.line))
    key = (d.file, d.line, text)
    if key not in cfg.notices:
        cfg.notices.append(key)
        logger.warning("proxyproto", text)


def _notify(cfg: Config, ds: Sequence[Directive]) -> None:
    """Log the deprecation notices plugins left on ``ds`` (and on their
    sub-directives), each (file, line, text) once per configuration: a
    snippet imported into several blocks is reported once."""
    for d in ds:
        for msg in d.notices:
            key = (d.file, d.line, msg)
            if key not in cfg.notices:
                cfg.notices.append(key)
                logger.warning(d.plugin, "%s (%s:%d)" % (msg, d.file,
                                                        d.line))
        d.notices = []
        _notify(cfg, d.children)


def _setup(d: Directive, block: Block) -> Optional[Plugin]:
    mod = directives.load(d.name)
    if mod is None:
        raise d.error("not supported yet")
    return mod.setup(d, block)


def _group_listeners(cfg: Config) -> None:
    """One listener per (transport, address, port).  Blocks may share a
    zone on one port only when bind or view filters tell them apart
    (corefile.check_duplicates, CoreDNS's overlap rules)."""
    corefile.check_duplicates(
        cfg.sources, [(tuple(b.bind or ()), bool(b.filters))
                      for b in cfg.blocks])
    for block in cfg.blocks:
        hosts: Sequence[Optional[str]] = block.bind or [None]
        for key in block.keys:
            for host in hosts:
                entries = cfg.listeners.setdefault(
                    (key.transport, host, key.port), [])
                if (key.zone, block) not in entries:
                    entries.append((key.zone, block))


def server_label(transport: str, host: Optional[str], port: Any) -> str:
    """The ``server`` metrics label, as CoreDNS prints its address."""
    if host is None:
        return "%s://:%s" % (transport, port)
    if ":" in host:
        return "%s://[%s]:%s" % (transport, host, port)
    return "%s://%s:%s" % (transport, host, port)
