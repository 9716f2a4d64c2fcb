"""The ``coredns`` command: CoreDNS 1.14's command line, flag for flag.

Manifests, unit files and scripts written for CoreDNS run
``coredns -conf /etc/coredns/Corefile`` (Go's single-dash flags); this
command takes exactly CoreDNS's flags (``-conf``, ``-dns.port`` and its
short form ``-p``, ``-pidfile``, ``-plugins``, ``-quiet``, ``-version``)
by Go's flag rules (corednstw/goflag.py), prints what CoreDNS prints and
exits with CoreDNS's statuses: 2 for a bad command line, 1 for a Corefile
or start-up error (its text on standard error, as Go's log.Fatal), 0 after
SIGTERM, SIGINT or SIGQUIT.  The server it runs is the one ``twistd
coredns`` runs (service/entry.py), in the foreground, with the same
signals; ``--check``, ``--dump`` and ``--multisocket`` stay twistd's.
"""

import os
import sys
import time

from corednstw import goflag
from corednstw.core import logger
from corednstw.service import entry


def flagset(prog):
    """CoreDNS's flags, as coremain registers them."""
    fs = goflag.FlagSet(prog)
    fs.string("conf", "", 'Corefile to load (default "Corefile")')
    fs.bool("plugins", False, "List installed plugins")
    fs.string("pidfile", "", "Path to write pid file")
    fs.bool("version", False, "Show version")
    fs.bool("quiet", False, "Quiet mode (no initialization output)")
    fs.string("dns.port", "53", "Default port", dest="port")
    fs.string("p", "53", "Default port", dest="port")
    return fs


def fatal(text, stamp=False):
    """Go's log.Fatal to standard error: the line, exit 1.  ``stamp``:
    with the standard logger's date and time, as CoreDNS prints errors
    met before it sets its log flags."""
    prefix = time.strftime("%Y/%m/%d %H:%M:%S ") if stamp else ""
    sys.stderr.write(prefix + text + "\n")
    sys.stderr.flush()
    sys.exit(1)


def port_number(text):
    """-dns.port as a number; CoreDNS fails such a port when it listens,
    this fails it before anything starts, with the same status."""
    if text.isdigit() and int(text) <= 65535:
        return int(text)
    fatal('invalid port "%s"' % text)


def informational(values, rest):
    """What coremain.Run does before loading a Corefile: refuse extra
    arguments (exit 1), answer -version or -plugins (their status);
    None when the server is to run."""
    if rest:
        fatal("extra command line arguments: [%s]" % " ".join(rest),
              stamp=True)
    if values["version"]:
        print("\n".join(entry.version_lines()), flush=True)
        return 0
    if values["plugins"]:
        return entry.list_plugins()
    return None


def main(argv=None, prog=None):
    """The console script; the process's exit status."""
    args = sys.argv[1:] if argv is None else argv
    fs = flagset(prog or os.path.basename(sys.argv[0]) or "coredns")
    values, rest = fs.parse_or_exit(args)
    status = informational(values, rest)
    if status is not None:
        return status
    port = port_number(values["port"])
    if values["quiet"]:
        logger.quiet = True
    svc = entry.make_service(entry.find_corefile(values["conf"]), port,
                             err=sys.stderr)
    return entry.run(svc, values["pidfile"])
