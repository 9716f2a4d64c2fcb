"""Parsing ``dnssec [ZONES...] { key file KEY...; cache_capacity N }``.

Errors use CoreDNS's words and point at the Corefile line that caused
them; a key that cannot be read names its file.
"""

from corednstw.core.plugin import match, zones_from_args

from . import keys as keyfiles
from .cache import DEFAULT_CAPACITY


def parse(d, block):
    """(zones, keys, capacity) of directive ``d``."""
    zones = zones_from_args(d.args, block)
    keys = []
    capacity = DEFAULT_CAPACITY
    for c in d.children:
        if c.name == "key":
            keys.extend(_keys(c, block))
        elif c.name == "cache_capacity":
            capacity = _capacity(c)
        else:
            raise c.error("unknown property '%s'" % c.name)
    for k in keys:
        if not any(match([k.name], z) for z in zones):
            raise d.error("key %s (keyid: %d) can not sign any of the "
                          "zones" % (k.name, k.tag))
    return zones, keys, capacity


def _capacity(c):
    if not c.args:
        raise c.arg_error()
    v = c.args[0]
    try:
        return int(v, 10)
    except ValueError as e:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax'
                      % v) from e


def _keys(c, block):
    """The keys of one ``key SOURCE NAME...`` line."""
    if not c.args:
        raise c.arg_error()
    source, names = c.args[0], c.args[1:]
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
