"""etcd: SkyDNS service discovery from etcd (CoreDNS's etcd plugin).

The package: ``plugin`` (answers and life cycle), ``directive`` (the
Corefile stanza), ``lookup`` (CoreDNS's backend lookup rules), ``records``
(the SkyDNS message format, keys and names), ``client`` (etcd's JSON
gateway and the watched in-memory copy of the prefix).
"""

from corednstw.plugins.etcd.directive import setup
from corednstw.plugins.etcd.plugin import Etcd

__all__ = ["Etcd", "setup"]
