"""rrl: BIND 9's response rate limiting (the external plugin
github.com/coredns/rrl), against DNS amplification: the responses of one
category to one client prefix are limited to a rate; over it they are
dropped, every ``slip-ratio``-th sent truncated instead.

    rrl [ZONES...] {
        window SECONDS
        ipv4-prefix-length LENGTH
        ipv6-prefix-length LENGTH
        responses-per-second ALLOWANCE
        nodata-per-second ALLOWANCE
        nxdomains-per-second ALLOWANCE
        referrals-per-second ALLOWANCE
        errors-per-second ALLOWANCE
        slip-ratio N
        requests-per-second ALLOWANCE
        max-table-size SIZE
        report-only
    }

``directive`` reads the stanza, ``plugin`` keeps the accounts.
"""

from corednstw.core.directives import PluginEntry, names_from, setup_from

__version__ = "0.1.0"

__all__ = ["PLUGIN", "REQUESTS_EXCEEDED", "RESPONSES_EXCEEDED",
           "RESPONSES_SLIPPED", "RRL", "setup"]

#: Imported when a Corefile uses the directive (see setup_from).
setup = setup_from("corednstw_rrl.directive:setup")

__getattr__ = names_from(__name__, "corednstw_rrl.plugin",
                         set(__all__) - {"PLUGIN", "setup"})

#: Where coredns/rrl's plugin.cfg.yaml puts it: right before acl, so it
#: sees every answer of the data plugins and of cache; the plugins that
#: count and log answers stay above it and see what it drops.
PLUGIN = PluginEntry("rrl", setup, before="acl",
                     follows=("prometheus", "errors", "log", "dnstap"),
                     precedes=("cache",))
