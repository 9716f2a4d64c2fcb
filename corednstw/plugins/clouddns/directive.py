"""Parsing ``clouddns [ZONE:PROJECT_ID:HOSTED_ZONE_NAME...] { credentials
[FILENAME]; fallthrough [ZONES...]; endpoint URL }`` with CoreDNS's checks
and messages."""

import json

from corednstw.core.names import normalize_name
from corednstw.core.plugin import Fallthrough
from corednstw.engines.authority import go_quote
from corednstw.engines.hosted import HostedZone

from .plugin import KNOWN_TYPES, SUPPORTED_TYPES, CloudDNS, Zone


def setup(d, block):
    hosted = _zones(d)
    credentials = None
    endpoint = None
    fall = Fallthrough()
    for c in d.children:
        if c.name == "upstream":
            pass        # accepted and ignored, as CoreDNS does
        elif c.name == "credentials":
            if not c.args:
                raise c.arg_error()
            credentials = read_credentials(c, block.path(c.args[0]))
        elif c.name == "fallthrough":
            fall = Fallthrough.parse(c.args)
        elif c.name == "endpoint":
            if len(c.args) != 1:
                raise c.arg_error()
            endpoint = c.args[0]
        else:
            raise c.error("unknown property %s" % go_quote(c.name))
    return CloudDNS(hosted, credentials, fall, endpoint)


def _zones(d):
    seen = set()
    hosted = []
    for arg in d.args:
        parts = arg.split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise d.error("invalid zone %s" % go_quote(arg))
        if arg in seen:
            raise d.error("conflict zone %s" % go_quote(arg))
        seen.add(arg)
        hosted.append(HostedZone(normalize_name(parts[0]),
                                 Zone(parts[1], parts[2])))
    return hosted


def read_credentials(c, path):
    """The credentials file's JSON, its ``type`` checked as CoreDNS does;
    types CoreDNS accepts that are not implemented here are refused."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        kind = data.get("type") if isinstance(data, dict) else None
        if not kind:
            raise ValueError("missing `type` field in credential")
        if kind not in KNOWN_TYPES:
            raise ValueError("unknown credential type: %s" % kind)
    except OSError as e:
        raise c.error("invalid credentials file %s: open %s: %s" % (
            go_quote(c.args[0]), path, (e.strerror or str(e)).lower())
        ) from e
    except ValueError as e:
        raise c.error("invalid credentials file %s: %s" % (
            go_quote(c.args[0]), e)) from e
    if kind not in SUPPORTED_TYPES:
        raise c.error("credential type %s is not supported" % kind)
    return data
