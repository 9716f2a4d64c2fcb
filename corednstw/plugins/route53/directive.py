"""Parsing ``route53 [ZONE:HOSTED_ZONE_ID...] { aws_access_key
[AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY]; aws_endpoint ENDPOINT;
credentials PROFILE [FILENAME]; fallthrough [ZONES...]; refresh DURATION
}`` with CoreDNS's checks and messages."""

import re

from corednstw.core import logger
from corednstw.core.durations import parse_duration
from corednstw.core.names import normalize_name
from corednstw.core.plugin import Fallthrough
from corednstw.engines.authority import go_quote
from corednstw.engines.hosted import HostedZone

from .plugin import DEFAULT_REFRESH, Options, Route53


def setup(d, block):
    try:
        import boto3  # noqa: F401
    except ImportError as e:
        raise d.error("boto3 is not installed (pip install "
                      "'corednstw[route53]')") from e
    hosted = _zones(d)
    opts = Options()
    fall = Fallthrough()
    refresh = DEFAULT_REFRESH
    for c in d.children:
        if c.name == "fallthrough":
            fall = Fallthrough.parse(c.args)
        elif c.name == "refresh":
            refresh = _refresh(c)
        elif c.name == "upstream":
            pass        # accepted and ignored, as CoreDNS does
        else:
            _credential_option(c, opts)
    return Route53(hosted, opts, refresh, fall)


def _zones(d):
    """The ZONE:HOSTED_ZONE_ID arguments, in order (repeats refused)."""
    seen = set()
    hosted = []
    for arg in d.args:
        name, sep, zone_id = arg.partition(":")
        if not sep or not name or not zone_id:
            raise d.error("invalid zone %s" % go_quote(arg))
        if arg in seen:
            raise d.error("conflict zone %s" % go_quote(arg))
        seen.add(arg)
        hosted.append(HostedZone(normalize_name(name), zone_id))
    return hosted


def _credential_option(c, opts):
    """aws_access_key, aws_endpoint and credentials (else an error)."""
    if c.name == "aws_access_key":
        if len(c.args) < 2:
            raise c.error("invalid access key: '[%s]'" % " ".join(c.args))
        opts.key_id, opts.secret = c.args[0], c.args[1]
        logger.warning("route53", "Save aws_access_key in Corefile has been "
                       "deprecated, please use other authentication methods "
                       "instead")
    elif c.name == "aws_endpoint":
        if not c.args:
            raise c.arg_error()
        opts.endpoint = c.args[0]
    elif c.name == "credentials":
        if not c.args:
            raise c.arg_error()
        opts.profile = c.args[0]
        if len(c.args) > 1:
            opts.credentials_file = c.args[1]
    else:
        raise c.error("unknown property %s" % go_quote(c.name))


def _refresh(c):
    """``refresh DURATION``: a Go duration, or bare seconds."""
    if not c.args:
        raise c.arg_error()
    text = c.args[0]
    if re.fullmatch(r"[+-]?\d+", text):
        text += "s"
    try:
        seconds = parse_duration(text, strict=True)
    except ValueError as e:
        raise c.error("Unable to parse duration: %s" % e) from e
    if seconds <= 0:
        raise c.error("refresh interval must be greater than 0: %s"
                      % go_quote(text))
    return seconds
