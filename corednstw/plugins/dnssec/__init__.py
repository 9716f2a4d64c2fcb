"""dnssec: on-the-fly DNSSEC signing with NSEC black lies (CoreDNS's
dnssec plugin).  See docs/plugins/dnssec.md."""

from .directive import parse
from .plugin import Dnssec


def setup(d, block):
    zones, keys, capacity = parse(d, block)
    return Dnssec(zones, keys, capacity)


__all__ = ["Dnssec", "setup"]
