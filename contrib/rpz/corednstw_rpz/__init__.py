"""rpz: DNS response policy zones (a DNS firewall), from zone files:

    rpz [ZONES...] {
        policy NAME FILE
    }

QNAME (exact and wildcard), rpz-ip and rpz-client-ip triggers; the
NXDOMAIN, NODATA, PASSTHRU, DROP and TCP-only actions and local data.
``policy`` reads a zone, ``plugin`` applies them, ``directive`` reads the
stanza.
"""

from corednstw.core.directives import PluginEntry
from corednstw_rpz.directive import setup
from corednstw_rpz.plugin import HITS, RPZ

__version__ = "0.1.0"

__all__ = ["HITS", "PLUGIN", "RPZ", "setup"]

#: Right before cache: cached answers pass through the policies too, and
#: the answers the policies make are never cached; the plugins that log
#: and count answers stay above.
PLUGIN = PluginEntry("rpz", setup, before="cache",
                     follows=("prometheus", "errors", "log", "dnstap"))
