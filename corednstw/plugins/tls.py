"""tls: the certificate of the block's encrypted listeners.

``tls CERT KEY [CA] { client_auth nocert|request|require|verify_if_given|
require_and_verify; keylog FILE }``.  The files are resolved against
``root`` and read now (a missing or broken one fails the setup at the
directive's line); the result goes to ``block.settings["tls"]``, where the
encrypted listeners of the block take it.  CoreDNS's minimum version, TLS
1.2, applies.  ``keylog`` appends every handshake's secrets to FILE (NSS
key log format), for debugging.

``tls { acme DOMAIN...; email ADDRESS; ca URL; storage DIR; ca_root FILE;
resolver HOST:PORT }`` (no files) obtains the certificate from an ACME CA
instead, when the configuration goes live (never at setup: ``--check``
stays offline), answering the DNS-01 challenges itself: see
corednstw/dnsserver/acme.py.
"""

import os
import weakref

from corednstw.core import logger
from corednstw.core.plugin import Plugin
from corednstw.dnsserver import acme, tlsconfig


class TLS(Plugin):
    name = "tls"
    in_chain = False
    once = False    # a repeat gets CoreDNS's own message, below

    def __init__(self, settings):
        self.settings = settings

    def stop(self):
        """The key log is closed with the configuration that opened it."""
        if self.settings.keylog is not None:
            self.settings.keylog.close()


class ACME(TLS):
    """``tls`` with an ACME certificate: starts (and stops) the
    configuration's ACME runtime, shared by its blocks."""

    def __init__(self, settings, runtime):
        super().__init__(settings)
        self.runtime = runtime

    def start(self):
        self.runtime.start(self.block.config)

    def stop(self):
        self.runtime.stop()


class Runtime:
    """The ACME managers of one configuration (one per distinct set of
    options, as CoreDNS keeps them) and their challenge answers."""

    def __init__(self, reactor):
        self.reactor = reactor
        self.solver = acme.Solver()
        self.managers = {}
        self.owners = {}
        self.started = self.stopped = False

    def add(self, options):
        """The manager of ``options``: the one already there for the same
        options; ACMEError when a domain has other options elsewhere."""
        key = options.key()
        manager = self.managers.get(key)
        if manager is not None:
            return manager
        for domain in options.domains:
            if self.owners.get(domain, key) != key:
                raise acme.ACMEError(
                    "ACME domain %s is configured with conflicting options"
                    % _quote(domain))
        manager = self.managers[key] = acme.Manager(options, self.solver,
                                                    self.reactor)
        for domain in options.domains:
            self.owners[domain] = key
        return manager

    def start(self, cfg):
        if self.started or self.stopped:
            return
        self.started = True
        acme.install_challenges(cfg, self.solver)
        for manager in self.managers.values():
            manager.start()

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        for manager in self.managers.values():
            manager.stop()


#: Each configuration's Runtime (a reload builds a new one).
_RUNTIMES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _acme_options(d, block):
    """The options of ``tls { acme ... }``, validated (CoreDNS's
    words)."""
    root = block.settings.get("root") or "."
    options = acme.Options(
        [], storage=os.path.abspath(os.path.join(root, ".coredns", "acme")))
    seen = set()
    for c in d.children:
        if c.name in seen:
            raise c.error("ACME option %s can only be specified once"
                          % _quote(c.name))
        seen.add(c.name)
        if c.name == "acme":
            options.domains = c.between(1)
        elif c.name == "email":
            options.email = c.one()
        elif c.name == "ca":
            options.ca = c.one()
        elif c.name == "storage":
            options.storage = os.path.abspath(block.path(c.one()))
        elif c.name == "ca_root":
            options.ca_root = os.path.abspath(block.path(c.one()))
        elif c.name == "resolver":
            options.resolver = c.one()
        else:
            raise c.error("unknown ACME option %s" % _quote(c.name))
    try:
        options.validate()
    except acme.ACMEError as e:
        raise d.error(str(e)) from e
    return options


def _setup_acme(d, block):
    options = _acme_options(d, block)
    cfg = block.config
    runtime = _RUNTIMES.get(cfg)
    if runtime is None:
        runtime = _RUNTIMES[cfg] = Runtime(block.server.reactor)
    try:
        manager = runtime.add(options)
    except acme.ACMEError as e:
        raise d.error(str(e)) from e
    block.settings["tls"] = manager.tls
    return ACME(manager.tls, runtime)


def _options(d, block):
    """The client_auth value (default nocert) and the keylog path (or
    None) of the directive's block."""
    auth = "nocert"
    keylog = None

    def client_auth(c):
        nonlocal auth
        auth = c.choice(c.one(), tlsconfig.CLIENT_AUTH,
                        "unknown authentication type '%s'")

    def keylog_file(c):
        nonlocal keylog
        keylog = c, block.path(c.one())

    d.read_options({"client_auth": client_auth, "keylog": keylog_file},
                   unknown="unknown option '%s'")
    return auth, keylog


def _open_keylog(keylog):
    """The key log opened for appending, CoreDNS's warning logged."""
    c, path = keylog
    path = os.path.abspath(path)
    try:
        log = tlsconfig.KeyLog(path)
    except OSError as e:
        raise c.error("unable to write TLS Key Log to %s: %s"
                      % (_quote(path), e.strerror or e)) from e
    logger.warning("tls", "Writing TLS Key Log to %s" % _quote(path))
    return log


def _quote(text):
    """Go's %q of a path (printable ASCII)."""
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def setup(d, block):
    if "tls" in block.settings:
        raise d.error("TLS already configured for this server instance")
    if not d.args:
        return _setup_acme(d, block)
    d.between(2, 3)
    auth, keylog = _options(d, block)
    files = [block.path(a) for a in d.args]
    try:
        settings = tlsconfig.ServerTLS(
            files[0], files[1], files[2] if len(files) > 2 else None,
            client_auth=auth)
    except tlsconfig.TLSError as e:
        raise d.error(str(e)) from e
    if keylog is not None:
        settings.set_keylog(_open_keylog(keylog))
    block.settings["tls"] = settings
    return TLS(settings)
