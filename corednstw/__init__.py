"""corednstw: a CoreDNS-compatible DNS server on Twisted."""

__version__ = "1.14.0"
#: The CoreDNS release whose behaviour we follow (reported in --version and
#: coredns_build_info).
COREDNS_VERSION = "1.14.0"
