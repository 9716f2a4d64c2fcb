"""Parsing ``nomad [ZONE] { address URL...; filter FILTER; token TOKEN;
ttl DURATION }`` with CoreDNS's checks and messages; the defaults come
from the environment as Nomad's Go client takes them (NOMAD_ADDR,
NOMAD_TOKEN, NOMAD_REGION)."""

import os
import re

from corednstw.core.names import fqdn

from .plugin import DEFAULT_ADDRESS, DEFAULT_TTL, Nomad


def setup(d, block):
    zone = d.args[0] if d.args else "service.nomad"
    addresses = []
    token = None
    flt = ""
    ttl = DEFAULT_TTL
    for c in d.children:
        key = c.name.lower()
        if key == "address":
            if not c.args:
                raise c.error("at least one address is required")
            addresses.extend(c.args)
        elif key == "filter":
            flt = _one(c, "exactly one filter is required")
        elif key == "token":
            token = _one(c, "exactly one token is required")
        elif key == "ttl":
            ttl = _ttl(c)
        else:
            raise c.error("unknown property '%s'" % key)
    if not addresses:
        addresses = [os.environ.get("NOMAD_ADDR") or DEFAULT_ADDRESS]
    if token is None:
        token = os.environ.get("NOMAD_TOKEN", "")
    return Nomad(fqdn(zone), addresses, token, flt, ttl,
                 region=os.environ.get("NOMAD_REGION", ""))


def _one(c, message):
    if len(c.args) != 1:
        raise c.error(message)
    return c.args[0]


def _ttl(c):
    """Whole seconds in [0, 3600] (Go's strconv.Atoi)."""
    text = _one(c, "exactly one ttl value is required")
    if not re.fullmatch(r"[+-]?\d+", text):
        raise c.error('error parsing ttl: strconv.Atoi: parsing "%s": '
                      'invalid syntax' % text)
    t = int(text)
    if t < 0 or t > 3600:
        raise c.error("ttl must be in range [0, 3600]: %d" % t)
    return t
