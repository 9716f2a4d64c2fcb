"""Parsing ``clouddns [ZONE:PROJECT_ID:HOSTED_ZONE_NAME...] { credentials
[FILENAME]; fallthrough [ZONES...]; endpoint URL }`` with CoreDNS's checks
and messages."""

import json
import types

from corednstw.core.names import normalize_name
from corednstw.core.plugin import Fallthrough
from corednstw.engines.authority import go_quote
from corednstw.engines.hosted import HostedZone

from .plugin import KNOWN_TYPES, CloudDNS, Zone


def setup(d, block):
    """The options apply in Corefile order; ``upstream`` is accepted and
    ignored, as CoreDNS does."""
    o = types.SimpleNamespace(credentials=None, endpoint=None,
                              fall=Fallthrough())
    hosted = _zones(d)
    d.read_options({
        "upstream": lambda c: None,
        "credentials": lambda c: setattr(o, "credentials", read_credentials(
            c, block.path(c.between(1)[0]))),
        "fallthrough": lambda c: setattr(o, "fall",
                                         Fallthrough.parse(c.args)),
        "endpoint": lambda c: setattr(o, "endpoint", c.one()),
        None: _unknown,
    }, unknown=None)
    return CloudDNS(hosted, o.credentials, o.fall, o.endpoint)


def _unknown(c):
    """CoreDNS quotes an option it does not know, Go style."""
    raise c.error("unknown property %s" % go_quote(c.name))


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
    """The credentials file's JSON, its ``type`` checked as CoreDNS does
    and the fields each type needs checked now (CoreDNS's client library
    finds a missing one when it first asks for a token)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        check_credentials(data)
    except OSError as e:
        raise c.error("invalid credentials file %s: open %s: %s" % (
            go_quote(c.args[0]), path, (e.strerror or str(e)).lower())
        ) from e
    except ValueError as e:
        raise c.error("invalid credentials file %s: %s" % (
            go_quote(c.args[0]), e)) from e
    return data


#: The fields every credential type needs.
_REQUIRED = {
    "service_account": ("client_email", "private_key"),
    "authorized_user": ("client_id", "client_secret", "refresh_token"),
    "external_account": ("audience", "subject_token_type", "token_url",
                         "credential_source"),
    "impersonated_service_account": ("service_account_impersonation_url",
                                     "source_credentials"),
}


def check_credentials(data, nested=False):
    """ValueError when ``data`` is not credentials of a known type with
    the fields it needs (a service account's key must be an RSA key; an
    external account's subject token must come from a file or a URL)."""
    kind = data.get("type") if isinstance(data, dict) else None
    if not kind:
        raise ValueError("missing `type` field in credential")
    if kind not in KNOWN_TYPES:
        raise ValueError("unknown credential type: %s" % kind)
    for name in _REQUIRED[kind]:
        if not data.get(name):
            raise ValueError("%s credentials: missing %s" % (kind, name))
    if kind == "external_account":
        source = data["credential_source"]
        if not isinstance(source, dict) or not (source.get("file")
                                                or source.get("url")):
            raise ValueError(
                "external_account credentials: only a credential_source "
                "with a file or a url is supported (not AWS or an "
                "executable)")
        fmt = source.get("format") or {}
        if fmt.get("type", "text") not in ("text", "json") or (
                fmt.get("type") == "json"
                and not fmt.get("subject_token_field_name")):
            raise ValueError("external_account credentials: invalid "
                             "credential_source format")
    if kind == "impersonated_service_account":
        if nested:
            raise ValueError("impersonated_service_account credentials "
                             "cannot be the source of another")
        check_credentials(data["source_credentials"], nested=True)
