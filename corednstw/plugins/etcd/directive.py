"""Parsing the etcd directive::

    etcd [ZONES...] {
        fallthrough [ZONES...]
        path PATH
        endpoint ENDPOINT...
        credentials USERNAME PASSWORD
        tls [CERT KEY] [CACERT]
        min-lease-ttl DURATION
        max-lease-ttl DURATION
    }

``stubzones``, ``debug`` and ``upstream`` are accepted and ignored, as in
CoreDNS.  Certificates are read here, so a bad file fails the setup.
"""

import functools
from urllib.parse import urlparse

from corednstw.core.durations import parse_duration
from corednstw.core.plugin import Fallthrough, zones_from_args
from corednstw.engines.upstream.tlsfiles import load_client_tls
from corednstw.plugins.etcd import client as cl
from corednstw.plugins.etcd.plugin import Etcd, Options

_TTL_FORMAT = ("invalid TTL format, use format like '30', '30s', '5m', "
               "'1h', or '2h30m'")


def setup(d, block):
    o = Options()
    o.zones = zones_from_args(d.args, block)
    d.read_options({name: functools.partial(read, o=o, block=block)
                    for name, read in _OPTIONS.items()})
    return Etcd(o)


def _one_arg(c):
    """The single argument CoreDNS reads with NextArg; a second one on
    the line would be read as the next property (hence not ``c.one()``,
    whose error is the argument count)."""
    if not c.args:
        raise c.arg_error()
    if len(c.args) > 1:
        raise c.error("unknown property '%s'" % c.args[1])
    return c.args[0]


def _ignore(c, o, block):
    """Options CoreDNS still accepts but no longer acts on."""


def _fallthrough(c, o, block):
    o.fall = Fallthrough.parse(c.args)


def _path(c, o, block):
    o.path = _one_arg(c)


def _endpoint(c, o, block):
    """One or more etcd URLs; a bare host:port means http://."""
    urls = []
    for e in c.between(1):
        url = e if "://" in e else "http://" + e
        p = urlparse(url)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise c.error("endpoint %s: only http:// and https:// "
                          "endpoints are supported" % e)
        urls.append(url)
    o.endpoints = urls


def _credentials(c, o, block):
    """Username and password; none at all is CoreDNS's argument-count
    error, any other count its own words."""
    c.between(1)
    o.username, o.password = c.exactly(
        2, "credentials requires 2 arguments, username and password")


def _tls(c, o, block):
    """``tls [CERT KEY] [CA]``, read now so that a bad file fails the
    setup."""
    many = "maximum of three arguments allowed for TLS config, found %d"
    args = [block.path(a) for a in c.between(0, 3, many % len(c.args))]
    try:
        trust, client = load_client_tls(args)
    except Exception as e:
        raise c.error("could not load TLS config: %s" % e) from e
    o.tls = cl.TLSPolicy(trust, client)


def _lease_ttl(attr):
    """The reader of a lease bound: CoreDNS's own TTL syntax (a bare
    number is seconds), so not ``c.duration``."""
    def handler(c, o, block):
        text = _one_arg(c)
        try:
            ttl = parse_ttl(text)
        except ValueError as e:
            raise c.error("invalid %s value: %s" % (c.name, e)) from e
        setattr(o, attr, ttl)
    return handler


def parse_ttl(text):
    """Seconds from '30', '30s', '5m', '2h30m' (CoreDNS's parseTTL)."""
    t = text.strip()
    if not t:
        return 0
    if t.isdigit():
        t += "s"
    try:
        seconds = parse_duration(t, strict=True)
    except ValueError as e:
        raise ValueError(_TTL_FORMAT) from e
    if seconds < 0:
        raise ValueError("TTL must be non-negative")
    if seconds > 0xFFFFFFFF:
        raise ValueError("TTL too large, maximum is 4294967295 seconds")
    return int(seconds)


_OPTIONS = {
    "stubzones": _ignore,
    "debug": _ignore,
    "upstream": _ignore,
    "fallthrough": _fallthrough,
    "path": _path,
    "endpoint": _endpoint,
    "credentials": _credentials,
    "tls": _tls,
    "min-lease-ttl": _lease_ttl("min_lease_ttl"),
    "max-lease-ttl": _lease_ttl("max_lease_ttl"),
}
