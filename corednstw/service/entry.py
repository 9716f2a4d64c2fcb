"""What the commands share: ``twistd coredns``, ``coredns`` and
``node-cache`` all load, check, describe and run the server through these
functions, so the three behave alike whatever the command line looks like.
"""

import os
import platform
import sys

from corednstw.core import directives, logger
from corednstw.core.errors import CorefileError

#: platform.machine() names as Go's GOARCH spells them (CoreDNS's
#: ``-version`` says linux/amd64, not linux/x86_64).
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64",
           "arm64": "arm64", "i386": "386", "i686": "386", "armv7l": "arm",
           "armv6l": "arm", "ppc64le": "ppc64le", "s390x": "s390x",
           "riscv64": "riscv64", "mips64": "mips64"}


def version_lines():
    """CoreDNS's two version lines, ``CoreDNS-<version>`` and ``<os>/<arch>,
    <runtime>, <commit>``, with this server's runtime and identity in the
    second (printed by ``-version`` and at every start)."""
    from corednstw import COREDNS_VERSION, __version__
    machine = platform.machine()
    return ["CoreDNS-%s" % COREDNS_VERSION,
            "%s/%s, python%s, corednstw-%s" % (
                sys.platform, _GOARCH.get(machine.lower(), machine),
                platform.python_version(), __version__)]


def plugin_lines():
    """``-plugins``: one directive a line, sorted, as CoreDNS 1.14 lists
    them; a directive another package provides is followed by that
    package and its version.  CorefileError when the installed plugins
    conflict."""
    entries = directives.registry().entries
    out = []
    for name in sorted(entries):
        reg = entries[name]
        extra = "" if reg.builtin() else " (%s %s)" % (reg.package,
                                                      reg.version)
        out.append(name + extra)
    return out


def list_plugins(out=None):
    """Print plugin_lines (and the blank line CoreDNS's Println adds);
    the exit status."""
    out = out or sys.stdout
    try:
        lines = plugin_lines()
    except CorefileError as e:
        print(str(e), file=out)
        return 1
    out.write("".join(line + "\n" for line in lines) + "\n")
    out.flush()
    return 0


def find_corefile(conf):
    """``-conf`` as given, else ``./Corefile`` when there is one, else None
    (CoreDNS's default server block)."""
    if conf:
        return conf
    return "Corefile" if os.path.exists("Corefile") else None


def check(path, dns_port, dump=False, out=None):
    """Build everything without sockets; print every error; 0 or 1."""
    from corednstw.core import dump as dumper
    from corednstw.service.app import App
    out = out or sys.stdout
    app = App(path, dns_port=dns_port)
    try:
        blocks = app.parse()
    except (CorefileError, OSError) as e:
        print(str(e), file=out)
        return 1
    if dump:
        out.write(dumper.dump(blocks))
    errors: list[Exception] = []
    try:
        app.load(errors)
    except (CorefileError, OSError) as e:
        for err in errors or [e]:
            print(str(err), file=out)
        return 1
    return 0


def load_app(path, dns_port, multisocket=None, reactor=None, err=None):
    """The App for ``path``, its Corefile loaded and nothing bound yet (a
    multisocket supervisor when workers are asked for).  A Corefile that
    cannot be used ends the process as CoreDNS does: the error alone on
    ``err`` (twistd: standard output; ``coredns``: standard error, where
    CoreDNS's log.Fatal writes), exit 1."""
    from corednstw.service.app import App
    app = App(path, reactor=reactor, dns_port=dns_port)
    app.multisocket = multisocket
    try:
        app.config = app.load()
    except (CorefileError, OSError) as e:
        print(str(e), file=err or sys.stdout, flush=True)
        sys.exit(1)
    app.prestart()
    from corednstw.service import multiproc
    if multiproc.worker_count(app.config, app.multisocket) > 1:
        app = multiproc.Supervisor.take_over(app)
    return app


def make_service(path, dns_port, multisocket=None, reactor=None, err=None):
    """load_app, with CoreDNS's signal handling (service/signals.py)
    installed once the reactor runs: the service every command runs."""
    from corednstw.service import stall
    stall.pause_collector()     # until the plugins have started (App)
    _prefetch(path)
    if reactor is None:
        from corednstw.service import reactor as loader
        reactor = loader.load()
    from corednstw.service import signals
    app = load_app(path, dns_port, multisocket, reactor, err)
    # Log lines leave through a thread while serving: a stalled stdout
    # must not stop the reactor (core/logger.py).
    logger.write_in_background()
    reactor.callWhenRunning(signals.install, app)
    return app


def _prefetch(path):
    """Before the reactor, the app and the plugins are imported: the
    kubernetes plugin's first lists are asked for, so the API server
    prepares them meanwhile (plugins/kubernetes/early.py).  Nothing for a
    Corefile without kubernetes, or one that does not parse (its build
    reports why)."""
    if not path or path == "stdin":
        return
    from corednstw.core import corefile
    try:
        blocks = corefile.load(path, strict=False)
    except Exception:
        return
    found = [d for b in blocks for d in b.directives
             if d.name == "kubernetes"]
    if found:
        from corednstw.plugins.kubernetes import early
        early.prefetch(found)


def run(svc, pidfile="", err=None):
    """Run ``svc`` in the foreground as twistd -n does (the application's
    startService now, stopService before the reactor shuts down), with
    twistd's logging of Twisted's own warnings and errors; the exit
    status.  A start that fails (a port taken) prints its error on ``err``
    and returns 1.  ``pidfile``: written once listening, removed at exit,
    as CoreDNS's -pidfile."""
    from twisted.application import app as tapp
    from twisted.application import service
    from twisted.internet import reactor
    from twisted.logger import globalLogBeginner

    from corednstw.service import signals
    err = err or sys.stderr
    globalLogBeginner.beginLoggingTo([logger.observer_factory()],
                                     redirectStandardIO=False)
    application = service.Application("coredns")
    svc.setServiceParent(application)
    try:
        tapp.startApplication(application, False)
    except Exception as e:
        print(_start_error(e), file=err, flush=True)
        return 1
    if pidfile:
        signals.at_exit(lambda: _remove(pidfile))
        try:
            with open(pidfile, "w") as f:
                f.write("%d\n" % os.getpid())
        except OSError as e:
            logger.error("", "Could not write pidfile: %s" % e)
    reactor.run()
    signals.run_exit_hooks()
    return 0


def _start_error(e):
    """The one line a failed start prints (CannotListenError and friends
    carry their own words)."""
    text = str(e).strip()
    return text or e.__class__.__name__


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass
