"""Parsing ``dnssec [ZONES...] { key file KEY...; cache_capacity N }``.

Errors use CoreDNS's words and point at the Corefile line that caused
them; a key that cannot be read names its file.
"""

from corednstw.core.plugin import match, zones_from_args
from corednstw.engines.dnssec import keys as keyfiles

from .cache import DEFAULT_CAPACITY


def parse(d, block):
    """(zones, keys, capacity) of directive ``d``."""
    zones = zones_from_args(d.args, block)
    keys = []
    capacity = DEFAULT_CAPACITY

    def cache_capacity(c):
        """``cache_capacity N``: Go's Atoi (values after N ignored)."""
        nonlocal capacity
        capacity = c.integer(c.between(1)[0])

    d.read_options({"key": lambda c: keys.extend(_keys(c, block)),
                    "cache_capacity": cache_capacity})
    for k in keys:
        if not any(match([k.name], z) for z in zones):
            raise d.error("key %s (keyid: %d) can not sign any of the "
                          "zones" % (k.name, k.tag))
    return zones, keys, capacity


def _keys(c, block):
    """The keys of one ``key SOURCE NAME...`` line."""
    source, *names = c.between(1)
    if source not in ("file", "aws_secretsmanager"):
        return []       # CoreDNS ignores other sources without a word
    if not names:
        raise c.arg_error()
    if source == "aws_secretsmanager":
        raise c.error("key aws_secretsmanager: AWS Secrets Manager is not "
                      "built into this server; use key file")
    out = []
    for name in names:
        base = block.path(keyfiles.base_name(name))
        try:
            out.append(keyfiles.read_pair(base))
        except keyfiles.KeyFileError as e:
            raise c.error(str(e)) from e
    return out
