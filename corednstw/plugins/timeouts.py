"""timeouts: read, write and idle timeouts of the TCP listeners.

``timeouts { read D; write D; idle D; maxtcpqueries N }``, durations
between 1s and 24h.  Stored in ``block.settings["timeouts"]`` (seconds, and
the query count); the listener takes them from the blocks it serves.
"""

from corednstw.core.durations import format_duration, parse_duration
from corednstw.core.plugin import Plugin

MIN = 1.0
MAX = 24 * 3600.0
OPTIONS = ("read", "write", "idle")


class Timeouts(Plugin):
    name = "timeouts"
    in_chain = False

    def __init__(self, values):
        self.values = values


def _max_queries(c):
    """maxtcpqueries: -1 (unlimited, the default) or a positive count."""
    try:
        n = int(c.args[0])
    except ValueError as e:
        raise c.error("invalid value for maxtcpqueries '%s'"
                      % c.args[0]) from e
    if n == 0 or n < -1:
        raise c.error("maxtcpqueries provided '%d' needs to be -1 "
                      "(unlimited) or a positive integer" % n)
    return n


def setup(d, block):
    if d.args:
        raise d.arg_error()
    values = {}
    for c in d.children:
        if len(c.args) != 1:
            raise c.arg_error()
        if c.name == "maxtcpqueries":
            values["maxtcpqueries"] = _max_queries(c)
            continue
        arg = c.args[0]
        if arg.lstrip("+-").isdigit():
            arg += "s"   # a bare number is seconds
        try:
            secs = parse_duration(arg)
        except ValueError as e:
            raise c.error("failed to parse duration '%s'" % arg) from e
        if secs < MIN or secs > MAX:
            raise c.error("timeout provided '%s' needs to be between 1 second "
                          "and 24 hours" % format_duration(secs))
        if c.name not in OPTIONS:
            raise c.error("unknown option: '%s'" % c.name)
        values[c.name] = secs
    if not values:
        raise d.error("timeouts block with no timeouts specified")
    block.settings["timeouts"] = values
    return Timeouts(values)
