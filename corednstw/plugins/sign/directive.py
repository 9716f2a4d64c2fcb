"""Parsing ``sign DBFILE [ZONES...] { key file KEY...; directory DIR }``
with CoreDNS's rules and words."""

import os

from corednstw.core.plugin import zones_from_args
from corednstw.engines.dnssec import keys as keyfiles

from .signer import Signer

#: Where signed zones go unless ``directory`` says otherwise.
DEFAULT_DIRECTORY = "/var/lib/coredns"


def parse(d, block):
    """The Signers of directive ``d``, one per zone."""
    args = d.between(1)
    dbfile = block.path(args[0])
    if "\ufffd" in dbfile:
        raise d.error("dbfile %s contains invalid characters"
                      % _quote(dbfile))
    origins = zones_from_args(args[1:], block)
    keys = []
    directory = DEFAULT_DIRECTORY

    def set_directory(c):
        nonlocal directory
        path = c.one('can only be one argument after "directory"')
        directory = os.path.normpath(block.path(path))

    d.read_options({"key": lambda c: keys.extend(_keys(c, block)),
                    "directory": set_directory})
    return [Signer(dbfile, origin, keys, directory) for origin in origins]


def _keys(c, block):
    """``key file NAME...``: the KSKs (or CSKs) read from those files."""
    args = c.between(1)
    source, names = args[0], args[1:]
    if source == "directory":
        raise c.error("directory: not implemented")
    if source != "file":
        return []       # CoreDNS ignores other sources without a word
    if not names:
        raise c.arg_error()
    out = []
    for name in names:
        base = block.path(keyfiles.base_name(name))
        try:
            key = keyfiles.read_pair(base)
        except keyfiles.KeyFileError as e:
            raise c.error(str(e)) from e
        if not key.is_ksk():
            raise c.error("DNSKEY in %s is not a CSK/KSK"
                          % _quote(base + ".key"))
        out.append(key)
    return out


def _quote(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
