"""forward: proxies queries to upstream resolvers (CoreDNS's forward).

One ``Upstream`` of the upstream engine (``corednstw.engines.upstream``) per
upstream.  UDP goes over one connected socket per upstream with a map of
pending message IDs (the socket is replaced after ``expire`` so source
ports rotate); TCP and DNS-over-TLS use pooled connections, one query at
a time each, reused until ``expire``.  Upstream answers go back to the
client as the upstream's bytes (``RawResponse``): the server patches the
client's ID and question case.  DNS-over-HTTPS upstreams (``https://``) go
through the engine's pooled HTTP client.  Host names in TO are resolved
when the plugin starts (``resolve``), through ``resolver`` or the system.

A failed exchange starts the upstream's health check (``. IN NS``, every
``health_check`` interval until it answers); ``max_fails`` failed checks in
a row mark it down.  Every failure path ends in SERVFAIL, never a hang.

The package: ``plugin`` (``Forward`` and the attempts of one query),
``directive`` (the Corefile stanza), ``resolve`` (host names of TO).
"""

from corednstw.plugins.forward.directive import (
    MAX_UPSTREAMS,
    setup,
    tls_options,
)
from corednstw.plugins.forward.plugin import (
                                              DEADLINE,
                                              HEALTHCHECK_BROKEN,
                                              MAX_CONCURRENT_REJECTS,
                                              Forward,
)

__all__ = ["DEADLINE", "Forward", "HEALTHCHECK_BROKEN",
           "MAX_CONCURRENT_REJECTS", "MAX_UPSTREAMS",
           "setup", "tls_options"]
