"""Parsing ``azure RESOURCE_GROUP:ZONE... { tenant TENANT_ID; client
CLIENT_ID; secret CLIENT_SECRET; certificate FILE [PASSWORD];
subscription SUBSCRIPTION_ID; environment ENVIRONMENT; fallthrough
[ZONES...]; access private|public; endpoint URL [LOGIN_URL] }`` with
CoreDNS's checks and messages."""

import functools
from collections.abc import Callable
from typing import Any, Optional

from corednstw.core.names import normalize_name
from corednstw.core.plugin import Fallthrough
from corednstw.engines.authority import go_quote
from corednstw.engines.hosted import HostedZone

from .plugin import ENVIRONMENTS, Azure, Credentials, Zone, read_certificate

_CREDENTIALS = ("tenant", "client", "secret", "subscription")


def setup(d, block):
    """The options apply in Corefile order.  A secret or a certificate
    needs a tenant and a client; without either, the machine's managed
    identity is used (``client``: a user-assigned one)."""
    hosted = _zones(d)
    creds = Credentials()
    fall = Fallthrough()

    def fallthrough(c):
        nonlocal fall
        fall = Fallthrough.parse(c.args)

    handlers: dict[Optional[str], Callable[[Any], None]] = {
        **{name: functools.partial(_credential, creds, name)
           for name in _CREDENTIALS},
        "environment": lambda c: _environment(c, creds),
        "fallthrough": fallthrough,
        "access": lambda c: _access(c, hosted),
        "endpoint": lambda c: _endpoint(c, creds),
        "certificate": lambda c: _certificate(c, creds, block),
        None: _unknown,
    }
    d.read_options(handlers, unknown=None)
    if creds.kind != "managed identity":
        missing = [k for k in ("tenant", "client") if not getattr(creds, k)]
        if missing:
            raise d.error("%s must be set with a %s" % (
                " and ".join(missing), creds.kind))
    return Azure(hosted, creds, fall)


def _certificate(c, creds, block):
    """``certificate FILE [PASSWORD]``: a client certificate and its RSA
    key (PEM, or PKCS#12 with its password), read now."""
    args = c.between(1, 2)
    path = block.path(args[0])
    try:
        creds.certificate = read_certificate(
            path, args[1] if len(args) > 1 else None)
    except OSError as e:
        raise c.error("cannot read certificate %s: %s" % (
            path, (e.strerror or str(e)).lower())) from e
    except ValueError as e:
        raise c.error("cannot read certificate %s: %s" % (path, e)) from e


def _zones(d):
    seen = set()
    hosted = []
    for arg in d.args:
        group, sep, zone = arg.partition(":")
        if not sep or not group or not zone:
            raise d.error("invalid resource group/zone: %s" % go_quote(arg))
        if group + zone in seen:
            raise d.error("conflicting zone: %s" % go_quote(arg))
        seen.add(group + zone)
        hosted.append(HostedZone(normalize_name(zone),
                                 Zone(group, zone.rstrip("."))))
    return hosted


def _unknown(c):
    """CoreDNS quotes an option it does not know, Go style."""
    raise c.error("unknown property: %s" % go_quote(c.name))


def _credential(creds, name, c):
    """``tenant|client|secret|subscription VALUE`` (values after the
    first are ignored, as before)."""
    setattr(creds, name, c.between(1)[0])


def _environment(c, creds):
    """``environment NAME``: an Azure cloud's login and management
    endpoints, its name matched without case."""
    name = c.between(1)[0].upper()
    env = ENVIRONMENTS.get(name)
    if env is None:
        raise c.error("cannot set azure environment: %s" % go_quote(
            "autorest/azure: There is no cloud environment matching the "
            "name %s" % go_quote(name)))
    creds.login, creds.management = env
    creds.resource = env[1]


def _access(c, hosted):
    """``access public|private``: which of Azure's DNS APIs every zone
    is read from."""
    access = c.choice(c.between(1)[0], ("public", "private"), error=(
        "invalid access value: can be public/private, found: %s"))
    for hz in hosted:
        hz.ref.private = access == "private"


def _endpoint(c, creds):
    """``endpoint URL [LOGIN_URL]``: the management URL and the login URL
    (the management one when it is not given)."""
    args = c.between(1, 2)
    creds.management, creds.login = args[0], args[-1]
