"""kubernetes: Kubernetes DNS-Based Service Discovery (CoreDNS's
kubernetes plugin).

The package: ``plugin`` (the Kubernetes plugin: answers and life cycle),
``directive`` (parsing the Corefile stanza), ``answers`` (PTR, NS and
zone transfer records), ``names`` (query-name parsing), ``records``
(JSON to compact records), ``typed`` (list items decoded into msgspec
Structs, and the same records from them), ``store`` (the indexed view
on the reactor thread, fed by the list/watch threads of
``engines.kubernetes``), ``early`` (the first lists asked for before
the server is built), ``upstream`` (the old ``upstream ADDRESS...``
resolvers).
"""

from corednstw.plugins.kubernetes.directive import setup
from corednstw.plugins.kubernetes.plugin import Kubernetes

__all__ = ["Kubernetes", "setup"]
