"""Parsing ``dnssec [ZONES...] { key file|aws_secretsmanager KEY...;
cache_capacity N }``.

Errors use CoreDNS's words and point at the Corefile line that caused
them; a key that cannot be read names its file (or secret).
"""

import json

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
        return [_secret_key(c, name) for name in names]
    out = []
    for name in names:
        base = block.path(keyfiles.base_name(name))
        try:
            out.append(keyfiles.read_pair(base))
        except keyfiles.KeyFileError as e:
            raise c.error(str(e)) from e
    return out


def _secret_key(c, secret_id):
    """The key stored in AWS Secrets Manager as ``secret_id`` (a name or
    an ARN): a JSON string ``{"key": DNSKEY record, "private": private key
    file}``, read now as CoreDNS reads it at setup.  The credentials,
    region and endpoint are boto3's defaults (environment, shared files,
    instance role), as the Go SDK's are for CoreDNS."""
    try:
        import boto3
        import botocore.exceptions
    except ImportError as e:
        raise c.error("key aws_secretsmanager: boto3 is not installed (pip "
                      "install 'corednstw[aws]')") from e
    try:
        client = boto3.session.Session().client("secretsmanager")
        value = client.get_secret_value(SecretId=secret_id)
    except (botocore.exceptions.BotoCoreError,
            botocore.exceptions.ClientError) as e:
        raise c.error("key aws_secretsmanager %s: %s" % (secret_id, e)) \
            from e
    try:
        data = json.loads(value.get("SecretString") or "")
        pub, priv = data["key"], data["private"]
        if not isinstance(pub, str) or not isinstance(priv, str):
            raise TypeError("key and private must be strings")
    except (ValueError, KeyError, TypeError) as e:
        raise c.error("key aws_secretsmanager %s: the secret is not a JSON "
                      "object with key and private: %s" % (secret_id, e)) \
            from e
    try:
        return keyfiles.parse_pair(pub, priv, secret_id, secret_id)
    except keyfiles.KeyFileError as e:
        raise c.error(str(e)) from e
