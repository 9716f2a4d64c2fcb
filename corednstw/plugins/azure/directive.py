"""Parsing ``azure RESOURCE_GROUP:ZONE... { tenant TENANT_ID; client
CLIENT_ID; secret CLIENT_SECRET; subscription SUBSCRIPTION_ID;
environment ENVIRONMENT; fallthrough [ZONES...]; access private|public;
endpoint URL [LOGIN_URL] }`` with CoreDNS's checks and messages."""

from corednstw.core.names import normalize_name
from corednstw.core.plugin import Fallthrough
from corednstw.engines.authority import go_quote
from corednstw.engines.hosted import HostedZone

from .plugin import ENVIRONMENTS, Azure, Credentials, Zone

_CREDENTIALS = {"tenant": "tenant", "client": "client", "secret": "secret",
                "subscription": "subscription"}


def setup(d, block):
    hosted = _zones(d)
    creds = Credentials()
    fall = Fallthrough()
    for c in d.children:
        if c.name in _CREDENTIALS:
            if not c.args:
                raise c.arg_error()
            setattr(creds, _CREDENTIALS[c.name], c.args[0])
        elif c.name == "environment":
            _environment(c, creds)
        elif c.name == "fallthrough":
            fall = Fallthrough.parse(c.args)
        elif c.name == "access":
            _access(c, hosted)
        elif c.name == "endpoint":
            if not c.args or len(c.args) > 2:
                raise c.arg_error()
            creds.management = c.args[0]
            creds.login = c.args[-1]
        else:
            raise c.error("unknown property: %s" % go_quote(c.name))
    missing = [k for k in ("tenant", "client", "secret", "subscription")
               if not getattr(creds, k)]
    if missing:
        raise d.error("%s must be set: managed identities are not "
                      "supported" % ", ".join(missing))
    return Azure(hosted, creds, fall)


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


def _environment(c, creds):
    if not c.args:
        raise c.arg_error()
    env = ENVIRONMENTS.get(c.args[0].upper())
    if env is None:
        raise c.error("cannot set azure environment: %s" % go_quote(
            "autorest/azure: There is no cloud environment matching the "
            "name %s" % go_quote(c.args[0].upper())))
    creds.login, creds.management = env
    creds.resource = env[1]


def _access(c, hosted):
    if not c.args:
        raise c.arg_error()
    access = c.args[0]
    if access not in ("public", "private"):
        raise c.error("invalid access value: can be public/private, found: "
                      "%s" % access)
    for hz in hosted:
        hz.ref.private = access == "private"
