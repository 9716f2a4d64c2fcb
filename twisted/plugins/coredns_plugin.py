"""twistd plugin: ``twistd -n coredns -c Corefile``."""

from twisted.application.service import ServiceMaker

coredns = ServiceMaker(
    "corednstw", "corednstw.tap",
    "A CoreDNS-compatible DNS server", "coredns")
