"""debug: tracebacks of plugin failures and [DEBUG] log lines.

``block.debug`` makes the server print the traceback of a failure in the
block's chain (it still answers SERVFAIL: see the doc page); debug log
lines are enabled process-wide, as in CoreDNS.  ``hexdump`` is the
text2pcap-style dump plugins use for messages in debug lines.
"""

from corednstw.core import logger
from corednstw.core.plugin import Plugin

#: the started debug plugins of every live configuration
_live: set["Debug"] = set()


class Debug(Plugin):
    name = "debug"
    in_chain = False
    runs_in = "both"

    def start(self):
        _live.add(self)
        logger.debug_enabled = True

    def stop(self):
        # Off only when no live configuration has debug any more (a reload
        # starts the new plugins before it stops the old ones).
        _live.discard(self)
        logger.debug_enabled = bool(_live)


def hexdump(data, prefix="debug: "):
    """Lines of ``prefix`` + offset + hex bytes, 16 a line, then the
    length (the format text2pcap reads)."""
    lines = []
    for i in range(0, len(data), 16):
        lines.append("%s%06x %s" % (prefix, i, " ".join(
            "%02x" % b for b in data[i:i + 16])))
    lines.append("%s%06x" % (prefix, len(data)))
    return "\n".join(lines)


def setup(d, block):
    """``debug``: no arguments, no block."""
    d.no_args()
    d.no_block()
    block.debug = True
    return Debug()
