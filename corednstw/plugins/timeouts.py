"""timeouts: read, write and idle timeouts of the TCP listeners.

``timeouts { read D; write D; idle D; maxtcpqueries N }``, durations
between 1s and 24h.  Stored in ``block.settings["timeouts"]`` (seconds, and
the query count); the listener takes them from the blocks it serves.
"""

from corednstw.core.durations import format_duration
from corednstw.core.plugin import Plugin

MIN = 1.0
MAX = 24 * 3600.0
OPTIONS = ("read", "write", "idle")


class Timeouts(Plugin):
    name = "timeouts"
    in_chain = False

    def __init__(self, values):
        self.values = values


def _max_queries(c, values):
    """maxtcpqueries: -1 (unlimited, the default) or a positive count
    (Go's Atoi; the refusal is worded without Go's text)."""
    n = c.integer(c.one(), error="invalid value for maxtcpqueries '{text}'")
    if n == 0 or n < -1:
        raise c.error("maxtcpqueries provided '%d' needs to be -1 "
                      "(unlimited) or a positive integer" % n)
    values["maxtcpqueries"] = n


def _timeout(c, values):
    """read, write, idle: a duration between 1s and 24h, a bare number
    being seconds.  CoreDNS reads the value before it looks at the name,
    so an unknown name with a bad value gets the value's error (worded
    without Go's text, as for maxtcpqueries)."""
    arg = c.one()
    if arg.lstrip("+-").isdigit():
        arg += "s"
    secs = c.duration(arg, error="failed to parse duration '{text}'")
    if secs < MIN or secs > MAX:
        raise c.error("timeout provided '%s' needs to be between 1 second "
                      "and 24 hours" % format_duration(secs))
    if c.name not in OPTIONS:
        raise c.error("unknown option: '%s'" % c.name)
    values[c.name] = secs


def setup(d, block):
    d.no_args()
    values: dict[str, float] = {}
    d.read_options({"maxtcpqueries": lambda c: _max_queries(c, values),
                    None: lambda c: _timeout(c, values)}, unknown=None)
    if not values:
        raise d.error("timeouts block with no timeouts specified")
    block.settings["timeouts"] = values
    return Timeouts(values)
