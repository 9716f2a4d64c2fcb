"""The running server: a configuration, its listeners and HTTP endpoints.

``App`` is a twisted Service.  ``load`` parses and builds a configuration
without touching sockets; ``startService`` opens listeners (one UDP+TCP pair
per (address, port)), binds the HTTP endpoints plugins registered, and
starts the plugins.  ``lookup`` re-enters the whole server for plugins that
need an answer from elsewhere in the configuration (CoreDNS's upstream).
"""

import dataclasses
import time
from typing import Any, Optional

from twisted.application import service
from twisted.internet import defer, task
from zope.interface import implementer

from corednstw.core import config as configlib
from corednstw.core import corefile, logger, metrics
from corednstw.core import dnswire as w
from corednstw.core.durations import format_duration
from corednstw.core.interfaces import IInheritable, ILameduck, IServer
from corednstw.core.plugin import Plugin
from corednstw.core.request import Response, make_query, parse_response
from corednstw.dnsserver import listener, sockets
from corednstw.service import httpd, stall

DEFAULT_COREFILE = ".:%d {\n    whoami\n    log\n}\n"


#: Upstream lookups nest at most this deep (CNAME chains across plugins).
MAX_DEPTH = 8
#: Seconds an internal lookup may take before it counts as unanswered.
LOOKUP_TIMEOUT = 5.0


@implementer(IServer)
class App(service.Service):
    """corednstw as a twisted Service, and the server plugins see
    (core.interfaces.IServer: ``block.server``)."""

    name = "coredns"

    def __init__(self, path, reactor=None, dns_port=53, text=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.path = path
        self.dns_port = dns_port
        self.text = text
        self.config: Optional[configlib.Config] = None
        self.listeners = {}   # (transport, host, port) -> Listener
        self.http = {}        # address -> the httpd listening port
        self.clock = time.monotonic
        self.lameduck = False
        self.muxes = []
        self._retired = []
        self.stall = None
        #: --multisocket: worker processes where no block says multisocket
        self.multisocket = None
        self._prestarted = None

    # -- configuration --------------------------------------------------------

    def parse(self, strict=True):
        """Parse the Corefile (or the default one) into server blocks;
        ``strict=False``: the grammar alone (corefile.parse)."""
        if self.text is not None:
            return corefile.parse(self.text, self.path or "Corefile",
                                  strict=strict)
        if self.path is None:
            return corefile.parse(DEFAULT_COREFILE % self.dns_port,
                                  "Corefile", strict=strict)
        return corefile.load(self.path, strict=strict)

    def load(self, errors=None):
        """Parse and build; raises CorefileError.  Nothing is started.
        ``errors``: collect every directive error there (--check)."""
        blocks = self.parse()
        _default_ports(blocks, self.dns_port)
        return configlib.build(self, self.path or "Corefile", blocks, errors)

    # -- service --------------------------------------------------------------

    def prestart(self):
        """Let the first configuration's plugins begin their long work
        (``Plugin.prestart``) before the rest of the start; once."""
        cfg = self.config
        if cfg is None or self._prestarted is not None:
            return
        self._prestarted = cfg
        for p in cfg.plugins():
            p.prestart()

    def startService(self):
        service.Service.startService(self)
        if self.config is None:
            self.config = self.load()
        self.prestart()
        if self.stall is None:
            self.stall = stall.start(self.reactor)
        stall.freeze()
        try:
            self._open(self.config)
        except BaseException:
            # Nothing is served: leave no timer and no socket behind (a
            # port taken under us must not leave the stall monitor ticking).
            self._close_opened()
            raise
        self._banner(self.config)
        return self._start_plugins(self.config)

    def start_in_process(self):
        """Set the configuration up and start its plugins without opening
        any socket: queries reach the chains only through ``lookup``
        (service.resolver.ChainResolver, corednstw inside a Twisted
        program).  Returns what ``startService`` would."""
        if self.config is None:
            self.config = self.load()
        self.prestart()
        self.running = 1
        self.muxes = list(self.build_muxes(self.config).values())
        return self._start_plugins(self.config)

    def stop_in_process(self):
        """Stop what ``start_in_process`` started."""
        self.running = 0
        self.muxes = []
        cfg, self.config = self.config, None
        if cfg is None:
            return defer.succeed(None)
        return defer.DeferredList([defer.maybeDeferred(p.stop)
                                   for p in self.local_plugins(cfg)])

    def _close_opened(self):
        """Undo a start that failed half way: stop the stall monitor and
        close whatever listeners and HTTP ports were already opened."""
        stall.resume_collector()
        if self.stall is not None:
            stall.stop(self.stall)
            self.stall = None
        for lst in self.listeners.values():
            lst.stop()
        for site in self.http.values():
            site.stopListening()
        self.listeners = {}
        self.http = {}
        self.muxes = []

    def _banner(self, cfg):
        """What CoreDNS prints at start: the server keys, then the version."""
        from corednstw.service.entry import version_lines
        seen = []
        for block in cfg.blocks:
            for key in block.keys:
                text = "%s:%s" % (key.zone, key.port)
                if key.transport != "dns":
                    text = key.transport + "://" + text
                if text not in seen:
                    seen.append(text)
        for text in seen + version_lines():
            if not logger.quiet:
                logger.raw(text)

    def stopService(self):
        """Shut down: lameduck first (health's ``lameduck``: keep serving,
        /health 200, /ready 503), then close listeners and stop plugins."""
        service.Service.stopService(self)
        self.lameduck = True
        duck = self._lameduck()
        if duck > 0:
            logger.info("health", "Going into lameduck mode for %s"
                     % format_duration(duck))
            return task.deferLater(self.reactor, duck, self._shutdown)
        return self._shutdown()

    def _lameduck(self):
        if self.config is None:
            return 0.0
        return max([p.lameduck or 0.0
                    for p in self.config.find(ILameduck)] or [0.0])

    def _shutdown(self):
        if self.stall is not None:
            stall.stop(self.stall)
            self.stall = None
        ds = []
        for lst in self.listeners.values():
            ds.append(defer.maybeDeferred(lst.stop))
            ds.append(lst.stream.close_all())
        for site in self.http.values():
            ds.append(defer.maybeDeferred(site.stopListening))
        if self.config is not None:
            ds.extend(defer.maybeDeferred(p.stop)
                      for p in self.local_plugins(self.config))
        self.listeners = {}
        self.http = {}
        self.muxes = []
        return defer.DeferredList(ds)

    def local_plugins(self, cfg):
        """The plugins this process starts and stops: all of them, but a
        multisocket supervisor and its workers split them (runs_in)."""
        return list(cfg.plugins())

    def is_ready(self, plugin):
        """The readiness ``ready`` reports for ``plugin`` (IReadiness)."""
        return plugin.ready()

    def not_ready(self):
        """Names ``ready`` reports beside the plugins': parts of the
        server itself that cannot answer yet (a multisocket supervisor's
        workers); none in a single process."""
        return ()

    def _start_plugins(self, cfg):
        """Start ``cfg``'s plugins; a DeferredList of those that start
        later (None when all are up).  Once all are up (or one failed)
        the garbage collector paused for the start-up runs again
        (stall.resume_collector), before any worker is forked."""
        ds = []
        for p in self.local_plugins(cfg):
            try:
                d = p.start()
            except Exception as e:
                logger.error(p.name, "start failed: %s" % e)
                stall.resume_collector()
                raise
            if isinstance(d, defer.Deferred):
                ds.append(d)
        if ds:
            return defer.DeferredList(ds).addBoth(_resume_collector)
        stall.resume_collector()
        return None

    def build_muxes(self, cfg):
        """One Mux per listener of ``cfg`` (no sockets yet)."""
        return listener.build_muxes(self, cfg)

    def _open(self, cfg):
        """Open every listener and HTTP endpoint of ``cfg``."""
        default = None
        for lk, mux in self.build_muxes(cfg).items():
            transport, host, port = lk
            bind_host = host
            if bind_host is None:
                if default is None:
                    default = sockets.default_host()
                bind_host = default
            self.listeners[lk] = self._listen(lk, bind_host, mux,
                                              cfg.listeners[lk])
            self.muxes.append(mux)
        for address, paths in cfg.http.items():
            self.http[address] = httpd.serve(self.reactor, address, paths,
                                             cfg.http_tls.get(address))

    def _listen(self, lk, host, mux, entries, sockets=None):
        """Open the sockets of listener ``lk`` on ``host`` (see
        dnsserver.listener.open_listener)."""
        return listener.open_listener(self.reactor, lk, host, mux, entries,
                                      self.clock, sockets)

    # -- reload ---------------------------------------------------------------

    def reload(self):
        """Switch to the Corefile as it is now, or keep the old config.

        The whole new configuration is built first (every plugin set up);
        the switch happens in this one reactor turn: listeners on unchanged
        addresses are kept and get the new mux, new HTTP ports are bound
        before old ones close, new plugins start, and old plugins stop once
        the queries they are answering are done.  Returns False when the
        old configuration was kept.
        """
        from corednstw.core.dump import digest
        logger.info("", "Reloading")
        opened = {}
        try:
            new = self.load()
            self.check_processes(new)
            muxes = self.build_muxes(new)
            # New addresses are bound before anything changes: a port that
            # cannot be had fails the reload, the old configuration stays.
            default = None
            for lk, mux in muxes.items():
                if self._reusable(lk, new):
                    continue
                host = lk[1]
                if host is None:
                    default = default or sockets.default_host()
                    host = default
                opened[lk] = self._listen(lk, host, mux, new.listeners[lk])
            new_http = self._bind_http(new)
        except Exception as e:
            for lst in opened.values():
                lst.stop()
            logger.error("", "Corefile changed but reload failed: %s" % e)
            metrics.register(metrics.RELOAD_FAILED).inc()
            return False
        old = self.config
        kept = self._inherit(old, new)
        self.config = new
        old_listeners = self.listeners
        self.listeners = {}
        self.muxes = []
        for lk, mux in muxes.items():
            lst = old_listeners.pop(lk, None) if lk not in opened else None
            if lst is None:
                lst = opened[lk]
            else:
                old_mux = lst.mux
                lst.switch(mux, new.listeners[lk])
                self._retired.append(old_mux)
            self.listeners[lk] = lst
            self.muxes.append(mux)
        for lst in old_listeners.values():
            lst.stop()
            lst.stream.close_all()
            self._retired.append(lst.mux)
        old_http, self.http = self.http, new_http
        for address, site in old_http.items():
            if address not in new_http:
                site.stopListening()
        self._start_plugins(new)
        self._drain(old, kept)
        logger.info("reload", "Running configuration SHA512 = %s"
                 % digest(new.sources))
        logger.info("", "Reloading complete")
        return True

    def check_processes(self, cfg):
        """A reload cannot turn one process into several: say so."""
        from corednstw.service import multiproc
        if multiproc.worker_count(cfg, self.multisocket) > 1:
            logger.warning("multisocket", "worker processes start with "
                           "the server: restart it to use them")

    def _reusable(self, lk, cfg):
        """True when the open listener ``lk`` can serve ``cfg`` as it is:
        same address and same kind (a tls:// block that gains or loses its
        certificate needs a new listener)."""
        lst = self.listeners.get(lk)
        entries = cfg.listeners[lk]
        if lst is None:
            return False
        policy = listener.proxy_policy(entries)
        return (lst.kind == listener.kind_of(lk[0], entries)[0]
                and lst.proxied == (policy is not None))

    def _bind_http(self, cfg):
        """HTTP endpoints of ``cfg``: unchanged addresses keep their port
        and get the new paths; new addresses are bound now (a failure here
        aborts the reload before anything changed)."""
        sites = {}
        opened = []
        try:
            for address, paths in cfg.http.items():
                site = self.http.get(address)
                tls = cfg.http_tls.get(address)
                if site is not None:
                    httpd.update(site, paths, tls)
                else:
                    site = httpd.serve(self.reactor, address, paths, tls)
                    opened.append(site)
                sites[address] = site
        except Exception:
            for site in opened:
                site.stopListening()
            raise
        return sites

    def _inherit(self, old, new):
        """Let new plugins take over unchanged old ones (a kubernetes watch
        and store survive a reload).  Returns the old plugins taken over."""
        kept: set[int] = set()
        if old is None:
            return kept
        olds: dict[tuple[Any, ...], list[Plugin]] = {}
        for p in old.plugins():
            d = getattr(p, "directive", None)
            if d is not None:
                olds.setdefault((p.name, _tree(d), tuple(p.block.zones)),
                                []).append(p)
        for p in new.find(IInheritable):
            d = getattr(p, "directive", None)
            if d is None:
                continue
            cands = olds.get((p.name, _tree(d), tuple(p.block.zones)))
            if cands:
                q = cands.pop(0)
                if p.inherit(q):
                    kept.add(id(q))
        return kept

    def _drain(self, old, kept):
        """Stop the old plugins once no query is inside an old chain."""
        if old is None:
            return
        retired = self._retired
        self._retired = []
        deadline = self.clock() + 10.0

        def check():
            if any(m.inflight for m in retired) and self.clock() < deadline:
                self.reactor.callLater(0.02, check)
                return
            for p in self.local_plugins(old):
                if id(p) not in kept:
                    try:
                        p.stop()
                    except Exception as e:
                        logger.error(p.name, "stop failed: %s" % e)
        check()

    # -- helpers for plugins and tests ----------------------------------------

    def port(self, host=None, port=None, transport="dns"):
        """The actual port of a listener (for tests on port 0)."""
        for (t, h, p), lst in self.listeners.items():
            if t == transport and (host is None or h == host) and (
                    port is None or str(p) == str(port)):
                return lst.port
        raise KeyError((transport, host, port))

    def listeners_of(self, block=None):
        """(key, Listener) of the listeners serving ``block`` (all of
        them for None), for plugins that act on their sockets (shed,
        loop, explain)."""
        out = []
        for lk, lst in self.listeners.items():
            entries = self.config.listeners.get(lk, ()) if self.config else ()
            if block is None or any(b is block for _, b in entries):
                out.append((lk, lst))
        return out

    def gather_metrics(self):
        """None: one process's own counters are all there is (a
        multisocket supervisor sums its workers' instead)."""
        return None

    def http_port(self, address=None):
        for a, site in self.http.items():
            if address is None or a == address:
                return site.getHost().port
        raise KeyError(address)

    def lookup(self, name, qtype, qclass=w.CLASS_IN, parent=None, do=False):
        """Resolve through this server's own blocks (CoreDNS's upstream).

        The query takes the whole server path (mux, chain, encoding), as
        over TCP so nothing is truncated.  Returns a Deferred firing with a
        Response, or None when nothing answered or the loop guard
        (``parent.depth``) stops it.
        """
        depth = parent.depth + 1 if parent is not None else 1
        if depth > MAX_DEPTH or not self.muxes:
            return defer.succeed(None)
        mux = self.muxes[0]
        label = getattr(parent, "server", "")
        for m in self.muxes:
            if m.label == label:
                mux = m
                break
        result: defer.Deferred[Optional[Response]] = defer.Deferred()

        def send(wire):
            if not result.called:
                result.callback(parse_response(wire) if wire else None)

        mux.handle(make_query(name, qtype, qclass, do=do), "127.0.0.1", 0,
                   "tcp", None, send, depth)
        if not result.called:
            # A chain still working calls send later; one that chose to
            # write nothing never will: give up after LOOKUP_TIMEOUT.
            result.addTimeout(LOOKUP_TIMEOUT, self.reactor,
                              onTimeoutCancel=lambda r, t: None)
        return result


def _tree(d):
    """A directive as comparable data (name, args, children; no lines)."""
    return (d.name, tuple(d.args), tuple(_tree(c) for c in d.children))


def _default_ports(blocks, dns_port):
    """Keys that name no port take --dns-port (CoreDNS's -dns.port)."""
    from corednstw.core import names
    for sb in blocks:
        keys = []
        for key in sb.keys:
            if key.transport == "dns":
                rest = names.split_transport(key.key)[1]
                if not names.split_host_port(rest)[1]:
                    key = dataclasses.replace(key, port=str(dns_port))
            keys.append(key)
        sb.keys = keys


def _resume_collector(result):
    """A callback passing ``result`` on: stall.resume_collector."""
    stall.resume_collector()
    return result
