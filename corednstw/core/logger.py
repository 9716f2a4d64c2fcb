"""Log lines as CoreDNS writes them: ``[LEVEL] plugin/NAME: message``.

Written straight to the process's real standard output (``sys.__stdout__``):
twistd redirects ``sys.stdout`` into its own log, which would add a
timestamp prefix CoreDNS does not have.  Tests swap ``out`` for a buffer.
"""

import sys

out = None
#: When False, debug lines are dropped (the ``debug`` plugin turns them on).
debug_enabled = False
quiet = False


def _write(line):
    stream = out if out is not None else sys.__stdout__
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _fmt(level, plugin, msg):
    if plugin:
        return "[%s] plugin/%s: %s" % (level, plugin, msg)
    return "[%s] %s" % (level, msg)


def info(plugin, msg):
    if not quiet:
        _write(_fmt("INFO", plugin, msg))


def warning(plugin, msg):
    _write(_fmt("WARNING", plugin, msg))


def error(plugin, msg):
    _write(_fmt("ERROR", plugin, msg))


def debug(plugin, msg):
    if debug_enabled:
        _write(_fmt("DEBUG", plugin, msg))


def fatal(plugin, msg):
    _write(_fmt("FATAL", plugin, msg))


def raw(line):
    """A line with no level prefix (the log plugin's query lines)."""
    _write(line)


def observer_factory():
    """twistd's --logger: Twisted's own events in CoreDNS's style.

    Informational chatter ("Starting protocol", "reactor class: ...") is
    not something CoreDNS prints, so only warnings and errors pass, as
    ``[WARNING] ...``/``[ERROR] ...`` lines without a timestamp.
    """
    from twisted.logger import ILogObserver, LogLevel, formatEvent
    from zope.interface import provider

    @provider(ILogObserver)
    def observe(event):
        level = event.get("log_level")
        failure = event.get("log_failure")
        if failure is None and (level is None or level < LogLevel.warn):
            return
        text = formatEvent(event)
        name = "ERROR" if failure is not None or level >= LogLevel.error \
            else "WARNING"
        if failure is not None:
            text = (text + "\n" if text else "") + failure.getTraceback()
        _write("[%s] %s" % (name, text.rstrip("\n")))
    return observe
