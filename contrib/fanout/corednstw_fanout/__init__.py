"""fanout: asks several upstreams in parallel, the first good answer wins
(the external plugin github.com/networkservicemesh/fanout).

    fanout FROM TO... {
        tls [CERT KEY CA]
        tls-server NAME
        network udp|tcp|tcp-tls
        worker-count N
        policy sequential|weighted-random
        weighted-random-server-count N
        weighted-random-load-factor N...
        timeout DURATION
        attempt-count N
        race
        except NAMES...
        except-file FILE
    }

The upstreams are corednstw's upstream engine (``Upstream``: connected UDP
sockets, pooled TCP and TLS connections) without forward's health checks:
fanout has none.  ``directive`` reads the stanza, ``plugin`` asks the
upstreams and picks the answer.
"""

from corednstw.core.directives import PluginEntry, names_from, setup_from

__version__ = "0.1.0"

__all__ = ["PLUGIN", "RCODE_COUNT", "REQUEST_COUNT", "REQUEST_DURATION",
           "Fanout", "setup"]

#: Imported when a Corefile uses the directive (see setup_from).
setup = setup_from("corednstw_fanout.directive:setup")

__getattr__ = names_from(__name__, "corednstw_fanout.plugin",
                         set(__all__) - {"PLUGIN", "setup"})

#: A backend like forward, right after it (the upstream build appends it
#: to the directives); the middleware that acts on answers stays above.
PLUGIN = PluginEntry(
    "fanout", setup, after="forward",
    follows=("prometheus", "errors", "log", "dnstap", "cache", "rewrite",
             "acl"))
