"""Parsing ``nomad [ZONE] { address URL...; filter FILTER; token TOKEN;
ttl DURATION }`` with CoreDNS's checks and messages; the defaults come
from the environment as Nomad's Go client takes them (NOMAD_ADDR,
NOMAD_TOKEN, NOMAD_REGION)."""

import os
from types import SimpleNamespace

from corednstw.core.names import fqdn

from .plugin import DEFAULT_ADDRESS, DEFAULT_TTL, Nomad


def setup(d, block):
    zone = d.args[0] if d.args else "service.nomad"
    o = SimpleNamespace(addresses=[], token=None, filter="", ttl=DEFAULT_TTL)
    d.read_options({
        "address": lambda c: o.addresses.extend(
            c.between(1, error="at least one address is required")),
        "filter": lambda c: setattr(
            o, "filter", c.one("exactly one filter is required")),
        "token": lambda c: setattr(
            o, "token", c.one("exactly one token is required")),
        "ttl": lambda c: setattr(o, "ttl", _ttl(c)),
    }, fold_case=True)
    addresses = o.addresses or [os.environ.get("NOMAD_ADDR")
                                or DEFAULT_ADDRESS]
    token = o.token
    if token is None:
        token = os.environ.get("NOMAD_TOKEN", "")
    return Nomad(fqdn(zone), addresses, token, o.filter, o.ttl,
                 region=os.environ.get("NOMAD_REGION", ""))


def _ttl(c):
    """Whole seconds in [0, 3600] (Go's strconv.Atoi)."""
    return c.integer(c.one("exactly one ttl value is required"), lo=0,
                     hi=3600, error="error parsing ttl: %s",
                     range_error="ttl must be in range [0, 3600]: %d")
