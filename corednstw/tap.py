"""The twistd command line: ``twistd -n coredns -c Corefile [options]``.

Mirrors CoreDNS's flags: -conf, -dns.port (-p), -plugins, -version,
-quiet, plus --check/--dump to validate a Corefile without serving.
"""

import os
import sys

from twisted.python import usage

from corednstw import COREDNS_VERSION, __version__
from corednstw.core import directives, logger
from corednstw.core.errors import CorefileError


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "Serve DNS as CoreDNS does, configured by a Corefile."
    optParameters = [
        ["conf", "c", None,
         "Corefile to load (default ./Corefile; 'stdin' reads standard "
         "input)"],
        ["dns-port", "p", "53", "Port for server blocks that name none"],
        ["multisocket", None, None,
         "Worker processes per address when a server block has no "
         "multisocket directive (1: one process, the default)"],
    ]
    optFlags = [
        ["plugins", None, "List the installed plugins and exit"],
        ["version", "v", "Show the version and exit"],
        ["check", None, "Set the Corefile up without serving; exit 0 or 1"],
        ["dump", None, "With --check: print the resolved configuration"],
        ["quiet", "q", "Quiet mode (no initialization output)"],
    ]

    def opt_version(self):
        print("CoreDNS-%s (corednstw %s)" % (COREDNS_VERSION, __version__))
        print("linux/python, corednstw")
        sys.exit(0)

    def postOptions(self):
        try:
            self["dns-port"] = int(self["dns-port"])
        except ValueError:
            raise usage.UsageError("--dns-port must be a number") from None
        self["multisocket"] = _workers_option(self["multisocket"])
        if self["plugins"]:
            sys.exit(list_plugins())
        if self["conf"] is None and os.path.exists("Corefile"):
            self["conf"] = "Corefile"
        if self["quiet"]:
            logger.quiet = True
        if self["check"]:
            sys.exit(check(self["conf"], self["dns-port"], self["dump"]))
        if self.parent is not None and not self.parent.get("logger"):
            # Chosen here: twistd creates its logger before makeService.
            self.parent["logger"] = "corednstw.core.logger.observer_factory"


def _workers_option(value):
    """--multisocket: None (unset) or a count from 1 to 1024."""
    if value is None:
        return None
    from corednstw.plugins import multisocket
    try:
        n = int(value)
    except ValueError:
        raise usage.UsageError("--multisocket must be a number") from None
    if not 1 <= n <= multisocket.MAX:
        raise usage.UsageError("--multisocket must be between 1 and %d"
                               % multisocket.MAX)
    return n


def list_plugins():
    """--plugins: CoreDNS's list, then the package and version of each
    directive a package other than corednstw provides."""
    print("Server types:\n  dns\n\nCaddyfile loaders:\n  flag\n"
          "  default\n\nOther plugins:")
    try:
        entries = directives.registry().entries
    except CorefileError as e:
        print(str(e))
        return 1
    for name in sorted(entries):
        reg = entries[name]
        extra = "" if reg.builtin() else " (%s %s)" % (reg.package,
                                                      reg.version)
        print("  dns." + name + extra)
    return 0


def check(path, dns_port, dump):
    """--check: build everything (no sockets); print errors; 0 or 1."""
    from corednstw.service.app import App
    app = App(path, dns_port=dns_port)
    try:
        blocks = app.parse()
    except (CorefileError, OSError) as e:
        print(str(e))
        return 1
    if dump:
        sys.stdout.write(dump.dump(blocks))
    errors = []
    try:
        app.load(errors)
    except (CorefileError, OSError) as e:
        for err in errors or [e]:
            print(str(err))
        return 1
    return 0


def load_app(options, reactor=None):
    """The App for the parsed options, its Corefile loaded and nothing
    bound yet.  A Corefile that cannot be used ends the process as CoreDNS
    does: the error alone on stdout, exit 1 (no usage text: the command
    line was fine, the Corefile was not)."""
    from corednstw.service.app import App
    app = App(options["conf"], reactor=reactor,
              dns_port=options["dns-port"])
    app.multisocket = options.get("multisocket")
    try:
        app.config = app.load()
    except (CorefileError, OSError) as e:
        print(str(e), flush=True)
        sys.exit(1)
    app.prestart()
    from corednstw.service import multiproc
    if multiproc.worker_count(app.config, app.multisocket) > 1:
        app = multiproc.Supervisor.take_over(app)
    return app


def makeService(options):
    """twistd's entry point: the App, with CoreDNS's signal handling
    (service/signals.py) installed once the reactor runs."""
    from twisted.internet import reactor

    from corednstw.service import signals
    app = load_app(options, reactor)
    logger.write_in_background()
    reactor.callWhenRunning(signals.install, app)
    return app
