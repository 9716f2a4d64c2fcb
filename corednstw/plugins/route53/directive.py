"""Parsing ``route53 [ZONE:HOSTED_ZONE_ID...] { aws_access_key
[AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY]; aws_endpoint ENDPOINT;
credentials PROFILE [FILENAME]; fallthrough [ZONES...]; refresh DURATION
}`` with CoreDNS's checks and messages."""

import dataclasses
import re

from corednstw.core import logger
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

    def set_fall(c):
        nonlocal fall
        fall = Fallthrough.parse(c.args)

    def set_refresh(c):
        nonlocal refresh
        refresh = _refresh(c)

    as_read(d).read_options({
        "fallthrough": set_fall,
        "refresh": set_refresh,
        "upstream": lambda c: None,   # accepted and ignored, as CoreDNS
        "aws_access_key": lambda c: _access_key(c, opts),
        "aws_endpoint": lambda c: setattr(opts, "endpoint",
                                          c.between(1)[0]),
        "credentials": lambda c: _credentials(c, opts),
        None: _unknown,
    }, unknown=None)
    return Route53(hosted, opts, refresh, fall)


#: Options whose arguments CoreDNS reads one token at a time (NextArg),
#: and how many at most: the tokens after them on the line are read as
#: the next option (``credentials default file extra`` has the option
#: ``extra``, refused as unknown).
_TOKENS = {"credentials": 2, "aws_endpoint": 1, "refresh": 1}


def as_read(d):
    """``d`` with its option lines as CoreDNS's token reader sees them:
    what an option leaves on its line begins another option."""
    lines = []
    for c in d.children:
        n = _TOKENS.get(c.name)
        while n is not None and len(c.args) > n:
            lines.append(dataclasses.replace(c, args=c.args[:n],
                                             children=[]))
            c = dataclasses.replace(c, name=c.args[n], args=c.args[n + 1:],
                                    children=[])
            n = _TOKENS.get(c.name)
        lines.append(c)
    return dataclasses.replace(d, children=lines)


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


def _access_key(c, opts):
    """``aws_access_key ID SECRET``: deprecated, but still honoured."""
    opts.key_id, opts.secret = c.between(
        2, error="invalid access key: '[%s]'" % " ".join(c.args))[:2]
    logger.warning("route53", "Save aws_access_key in Corefile has been "
                   "deprecated, please use other authentication methods "
                   "instead")


def _credentials(c, opts):
    """``credentials PROFILE [FILENAME]``: a shared-credentials profile."""
    args = c.between(1)
    opts.profile = args[0]
    if len(args) > 1:
        opts.credentials_file = args[1]


def _unknown(c):
    """CoreDNS quotes the unknown name Go's way (%q)."""
    raise c.error("unknown property %s" % go_quote(c.name))


def _refresh(c):
    """``refresh DURATION``: a Go duration, or bare seconds."""
    text = c.between(1)[0]
    if re.fullmatch(r"[+-]?\d+", text):
        text += "s"
    seconds = c.duration(text, error="Unable to parse duration: %s")
    if seconds <= 0:
        raise c.error("refresh interval must be greater than 0: %s"
                      % go_quote(text))
    return seconds
