"""The twistd command line: ``twistd -n coredns -c Corefile [options]``.

Mirrors CoreDNS's flags: -conf, -dns.port (-p), -plugins, -version,
-quiet, plus --check/--dump to validate a Corefile without serving.
"""

import sys

from twisted.python import usage

from corednstw.core import logger
from corednstw.service import entry


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
        print("\n".join(entry.version_lines()))
        sys.exit(0)

    def postOptions(self):
        try:
            self["dns-port"] = int(self["dns-port"])
        except ValueError:
            raise usage.UsageError("--dns-port must be a number") from None
        self["multisocket"] = _workers_option(self["multisocket"])
        if self["plugins"]:
            sys.exit(list_plugins())
        self["conf"] = entry.find_corefile(self["conf"])
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
    return entry.list_plugins()


def check(path, dns_port, dump):
    return entry.check(path, dns_port, dump)


def load_app(options, reactor=None):
    """The App for the parsed options (service/entry.py's load_app)."""
    return entry.load_app(options["conf"], options["dns-port"],
                          options.get("multisocket"), reactor)


def makeService(options):
    """twistd's entry point: the App, with CoreDNS's signal handling
    (service/signals.py) installed once the reactor runs; the ``coredns``
    command builds the same service (corednstw/cli.py)."""
    return entry.make_service(options["conf"], options["dns-port"],
                              options.get("multisocket"))
