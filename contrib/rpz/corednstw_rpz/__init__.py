"""rpz: DNS response policy zones (a DNS firewall), from zone files or
transferred from primaries:

    rpz [ZONES...] {
        policy NAME FILE
        policy NAME axfr PRIMARY...
    }

QNAME (exact and wildcard), rpz-ip, rpz-client-ip and rpz-nsdname
triggers; the NXDOMAIN, NODATA, PASSTHRU, DROP and TCP-only actions and
local data.  ``policy`` reads a zone, ``plugin`` applies them and keeps
the transferred ones, ``directive`` reads the stanza.
"""

from corednstw.core.directives import PluginEntry, names_from, setup_from

__version__ = "0.1.0"

__all__ = ["HITS", "PLUGIN", "RPZ", "setup"]

#: Imported when a Corefile uses the directive (see setup_from).
setup = setup_from("corednstw_rpz.directive:setup")

__getattr__ = names_from(__name__, "corednstw_rpz.plugin",
                         set(__all__) - {"PLUGIN", "setup"})

#: Right before cache: cached answers pass through the policies too, and
#: the answers the policies make are never cached; the plugins that log
#: and count answers stay above.
PLUGIN = PluginEntry("rpz", setup, before="cache",
                     follows=("prometheus", "errors", "log", "dnstap"))
