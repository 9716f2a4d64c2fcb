"""sign: signs zone files for file and auto to serve (CoreDNS's sign
plugin).  See docs/plugins/sign.md."""

from .directive import parse
from .plugin import Sign


def setup(d, block):
    return Sign(parse(d, block))


__all__ = ["Sign", "setup"]
