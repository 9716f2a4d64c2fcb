"""cache's Corefile stanza: sizes, TTL bounds, prefetch, serve_stale and
its policy, servfail, disable and keepttl (CoreDNS's cache/setup.go)."""

import functools

from corednstw.core import goparse, names
from corednstw.core.plugin import zones_from_args
from corednstw.engines.response import DENIAL, SUCCESS
from corednstw.plugins.cache.plugin import Cache


def setup(d, block):
    """``cache [TTL] [ZONES...] { ... }``: the options apply in Corefile
    order, each to the one Cache."""
    ca = Cache()
    ca.zones = zones_from_args(_leading_ttl(d, ca), block)
    d.read_options({name: functools.partial(read, ca)
                    for name, read in _OPTIONS.items()}, unknown=None)
    lines = {c.name: c for c in d.children}
    policy = lines.get("serve_stale_policy")
    if policy is not None and "serve_stale" not in lines:
        raise policy.error("serve_stale_policy requires serve_stale")
    ca.zlabel = ",".join(ca.zones)
    ca.build()
    return ca


def _leading_ttl(d, ca):
    """The zone arguments.  A first argument Go's Atoi reads is instead
    the TTL capping both caches (CoreDNS tells the two apart that way)."""
    args = list(d.args)
    try:
        ttl = goparse.atoi(args[0])
    except (IndexError, ValueError):
        return args
    if ttl <= 0:
        raise d.error("cache TTL can not be zero or negative: %d" % ttl)
    ca.pttl = ca.nttl = ttl
    return args[1:]


def _sizes(c, ttl, minttl):
    """(CAPACITY, TTL, MINTTL) of a ``success|denial CAPACITY [TTL
    [MINTTL]]`` line; ``ttl`` and ``minttl`` where it gives none."""
    args = c.between(1, 3)
    capacity = c.integer(args[0])
    if len(args) > 1:
        ttl = c.integer(args[1], lo=1, range_error="cache TTL can not be "
                        "zero or negative: %d")
    if len(args) > 2:
        minttl = c.integer(args[2], lo=0, range_error="cache min TTL can "
                           "not be negative: %d")
    return capacity, ttl, minttl


def _success(ca, c):
    """``success``: the positive cache's size and TTL bounds."""
    ca.pcap, ca.pttl, ca.minpttl = _sizes(c, ca.pttl, ca.minpttl)


def _denial(ca, c):
    """``denial``: the denial cache's size and TTL bounds."""
    ca.ncap, ca.nttl, ca.minnttl = _sizes(c, ca.nttl, ca.minnttl)


def _prefetch(ca, c):
    """``prefetch AMOUNT [DURATION [PERCENTAGE%]]``: refresh an item
    asked AMOUNT times in DURATION when PERCENTAGE of its TTL is left."""
    args = c.between(1, 3)
    ca.prefetch = c.integer(args[0], lo=0, range_error="prefetch amount "
                            "should be positive: %d")
    if len(args) > 1:
        ca.window = c.duration(args[1])
    if len(args) > 2:
        pct = args[2]
        if not pct.endswith("%"):
            raise c.error("last character of percentage should be `%%`, "
                          "but is: %r" % pct[-1:])
        ca.percentage = c.integer(pct[:-1], lo=10, hi=90, range_error=(
            "percentage should fall in range [10, 90]: %d"))


def _serve_stale(ca, c):
    """``serve_stale [DURATION [immediate|verify [TIMEOUT] [TTL
    [RECHECK]]]]``: answer from expired items for DURATION (1h); with
    ``verify`` only after the upstream failed to answer in TIMEOUT."""
    args = c.between(0, 5)
    ca.stale_up_to, ca.stale_ttl, ca.stale_recheck = 3600.0, 0, 0.0
    ca.verify_stale, ca.verify_timeout = False, 0.0
    if args:
        ca.stale_up_to = c.duration(
            args[0], lo=0,
            range_error="invalid negative duration for serve_stale")
    if len(args) > 1:
        mode = c.choice(args[1].lower(), ("immediate", "verify"), error=(
            "invalid value for serve_stale refresh mode: %s"))
        ca.verify_stale = mode == "verify"
    # The later durations are refused naming the value, not Go's reason.
    rest = args[2:]
    if ca.verify_stale and rest:
        ca.verify_timeout = c.duration(
            rest.pop(0), error="invalid serve_stale verify timeout: {text}",
            lo=0, range_error="invalid negative timeout for serve_stale "
            "verify")
    elif not ca.verify_stale and len(rest) > 2:
        raise c.arg_error()
    if rest:
        ttl = c.duration(
            rest[0], error="invalid serve_stale response TTL: {text}", lo=0,
            range_error="invalid negative response TTL for serve_stale")
        if ttl != int(ttl):
            raise c.error("serve_stale response TTL must be a whole number "
                          "of seconds")
        if ttl > 0xFFFFFFFF:
            raise c.error("serve_stale response TTL exceeds the DNS TTL "
                          "range")
        ca.stale_ttl = int(ttl)
    if len(rest) > 1:
        ca.stale_recheck = c.duration(
            rest[1], error="invalid serve_stale failure recheck: {text}",
            lo=0, range_error="invalid negative failure recheck for "
            "serve_stale")
        if ca.stale_recheck > 300:
            raise c.error("serve_stale failure recheck cannot exceed 5 "
                          "minutes")


def _serve_stale_policy(ca, c):
    """``serve_stale_policy prefer_positive``, given once: a stale
    positive answer wins over a fresh denial."""
    if ca.prefer_positive:
        raise c.error("serve_stale_policy can only be specified once")
    if c.one().lower() != "prefer_positive":
        raise c.error("invalid serve_stale_policy: %s" % c.args[0])
    ca.prefer_positive = True


def _servfail(ca, c):
    """``servfail DURATION``: how long a SERVFAIL is cached (at most 5
    minutes)."""
    ttl = c.duration(c.one())
    if ttl < 0:
        raise c.error("invalid negative ttl for servfail")
    if ttl > 300:
        raise c.error("caching SERVFAIL responses over 5 minutes is not "
                      "permitted")
    ca.failttl = ttl


def _disable(ca, c):
    """``disable success|denial [ZONES...]``: that cache stores nothing
    for ZONES (every zone)."""
    kind, *zones = c.between(1)
    disabled = [_disabled_zone(c, z) for z in zones] or ["."]
    if kind == DENIAL:
        ca.nexcept = disabled
    elif kind == SUCCESS:
        ca.pexcept = disabled
    else:
        raise c.error('cache type for disable must be "success" or '
                      '"denial"')


def _disabled_zone(c, zone):
    if not names.is_domain_name(zone):
        raise c.error("invalid disabled zone: %s" % zone)
    return names.normalize_name(zone)


def _keepttl(ca, c):
    """``keepttl``: answers keep the TTL they were stored with."""
    c.no_args()
    ca.keepttl = True


def _unknown(ca, c):
    """CoreDNS refuses an unknown option with its argument-count error."""
    raise c.arg_error()


_OPTIONS = {SUCCESS: _success, DENIAL: _denial, "prefetch": _prefetch,
            "serve_stale": _serve_stale,
            "serve_stale_policy": _serve_stale_policy,
            "servfail": _servfail, "disable": _disable,
            "keepttl": _keepttl, None: _unknown}
