"""proxy: the forwarding plugin of CoreDNS 1.0-1.4, kept so that old
Corefiles run (CoreDNS 1.5.0 removed it; ``forward`` replaced it).

Each upstream host is an ``Upstream`` of the shared upstream engine
(``corednstw.engines.upstream``, labelled ``proxy``), so sockets and
connection reuse are forward's; what is proxy's own is the choice of host
(``random``, ``least_conn``, ``round_robin``, ``sequential``/``first``),
1.4's failure counting (``max_fails`` failures within ``fail_timeout``
mark a host down; timeouts do not count), ``spray`` when every host is
down, and the HTTP health check.

The package: ``policy`` (hosts and policies), ``health`` (the HTTP
check), ``plugin`` (the query path), ``setup`` (the Corefile stanza).
A deprecation warning naming ``forward`` is logged once per build.
"""

from corednstw.plugins.proxy.directive import DEPRECATION, MAX_UPSTREAMS, setup
from corednstw.plugins.proxy.plugin import (
                                            MAX_ATTEMPTS,
                                            READ_TIMEOUT,
                                            REQUEST_COUNT,
                                            TRY_DURATION,
                                            Group,
                                            ProxyPlugin,
)

__all__ = ["DEPRECATION", "Group", "MAX_ATTEMPTS", "MAX_UPSTREAMS",
           "ProxyPlugin", "READ_TIMEOUT", "REQUEST_COUNT", "TRY_DURATION",
           "setup"]
