"""cache's Corefile stanza: sizes, TTL bounds, prefetch, serve_stale and
its policy, servfail, disable and keepttl (CoreDNS's cache/setup.go)."""

from corednstw.core import names
from corednstw.core.durations import parse_duration
from corednstw.core.plugin import zones_from_args
from corednstw.engines.response import DENIAL, SUCCESS
from corednstw.plugins.cache.plugin import Cache


def _int(c, text):
    try:
        return int(text, 10)
    except ValueError as e:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax'
                      % text) from e


def _dur(c, text):
    try:
        return parse_duration(text, strict=True)
    except ValueError as e:
        raise c.error(str(e)) from e


def setup(d, block):
    ca = Cache()
    args = list(d.args)
    if args:
        try:
            ttl = int(args[0], 10)
        except ValueError:
            ttl = None
        if ttl is not None:
            if ttl <= 0:
                raise d.error("cache TTL can not be zero or negative: %d"
                              % ttl)
            ca.pttl = ca.nttl = ttl
            args = args[1:]
    ca.zones = zones_from_args(args, block)
    policy_line = stale_line = None
    for c in d.children:
        a = list(c.args)
        if c.name in (SUCCESS, DENIAL):
            if not a or len(a) > 3:
                raise c.arg_error()
            cap = _int(c, a[0])
            ttl = mn = None
            if len(a) > 1:
                ttl = _int(c, a[1])
                if ttl <= 0:
                    raise c.error("cache TTL can not be zero or negative: "
                                  "%d" % ttl)
            if len(a) > 2:
                mn = _int(c, a[2])
                if mn < 0:
                    raise c.error("cache min TTL can not be negative: %d"
                                  % mn)
            if c.name == SUCCESS:
                ca.pcap = cap
                ca.pttl = ttl if ttl is not None else ca.pttl
                ca.minpttl = mn if mn is not None else ca.minpttl
            else:
                ca.ncap = cap
                ca.nttl = ttl if ttl is not None else ca.nttl
                ca.minnttl = mn if mn is not None else ca.minnttl
        elif c.name == "prefetch":
            if not a or len(a) > 3:
                raise c.arg_error()
            amount = _int(c, a[0])
            if amount < 0:
                raise c.error("prefetch amount should be positive: %d"
                              % amount)
            ca.prefetch = amount
            if len(a) > 1:
                ca.window = _dur(c, a[1])
            if len(a) > 2:
                pct = a[2]
                if not pct.endswith("%"):
                    raise c.error("last character of percentage should be "
                                  "`%%`, but is: %r" % pct[-1:])
                num = _int(c, pct[:-1])
                if num < 10 or num > 90:
                    raise c.error("percentage should fall in range "
                                  "[10, 90]: %d" % num)
                ca.percentage = num
        elif c.name == "serve_stale":
            stale_line = c
            _parse_stale(c, a, ca)
        elif c.name == "serve_stale_policy":
            if policy_line is not None:
                raise c.error("serve_stale_policy can only be specified "
                              "once")
            policy_line = c
            if len(a) != 1:
                raise c.arg_error()
            if a[0].lower() != "prefer_positive":
                raise c.error("invalid serve_stale_policy: %s" % a[0])
            ca.prefer_positive = True
        elif c.name == "servfail":
            if len(a) != 1:
                raise c.arg_error()
            dur = _dur(c, a[0])
            if dur < 0:
                raise c.error("invalid negative ttl for servfail")
            if dur > 300:
                raise c.error("caching SERVFAIL responses over 5 minutes is "
                              "not permitted")
            ca.failttl = dur
        elif c.name == "disable":
            if not a:
                raise c.arg_error()
            zs = []
            for z in a[1:]:
                if not names.is_domain_name(z):
                    raise c.error("invalid disabled zone: %s" % z)
                zs.append(names.normalize_name(z))
            zs = zs or ["."]
            if a[0] == DENIAL:
                ca.nexcept = zs
            elif a[0] == SUCCESS:
                ca.pexcept = zs
            else:
                raise c.error('cache type for disable must be "success" or '
                              '"denial"')
        elif c.name == "keepttl":
            if a:
                raise c.arg_error()
            ca.keepttl = True
        else:
            raise c.arg_error()
    if policy_line is not None and stale_line is None:
        raise policy_line.error("serve_stale_policy requires serve_stale")
    ca.zlabel = ",".join(ca.zones)
    ca.build()
    return ca


def _parse_stale(c, a, ca):
    if len(a) > 5:
        raise c.arg_error()
    ca.stale_up_to = 3600.0
    ca.stale_ttl = 0
    ca.stale_recheck = 0.0
    if a:
        dur = _dur(c, a[0])
        if dur < 0:
            raise c.error("invalid negative duration for serve_stale")
        ca.stale_up_to = dur
    ca.verify_stale = False
    ca.verify_timeout = 0.0
    if len(a) > 1:
        mode = a[1].lower()
        if mode not in ("immediate", "verify"):
            raise c.error("invalid value for serve_stale refresh mode: %s"
                          % mode)
        ca.verify_stale = mode == "verify"
    rest = a[2:]
    if ca.verify_stale and rest:
        try:
            t = parse_duration(rest[0], strict=True)
        except ValueError as e:
            raise c.error("invalid serve_stale verify timeout: %s"
                          % rest[0]) from e
        if t < 0:
            raise c.error("invalid negative timeout for serve_stale verify")
        ca.verify_timeout = t
        rest = rest[1:]
    elif not ca.verify_stale and len(rest) > 2:
        raise c.arg_error()
    if rest:
        try:
            t = parse_duration(rest[0], strict=True)
        except ValueError as e:
            raise c.error("invalid serve_stale response TTL: %s"
                          % rest[0]) from e
        if t < 0:
            raise c.error("invalid negative response TTL for serve_stale")
        if t != int(t):
            raise c.error("serve_stale response TTL must be a whole number "
                          "of seconds")
        if t > 0xFFFFFFFF:
            raise c.error("serve_stale response TTL exceeds the DNS TTL "
                          "range")
        ca.stale_ttl = int(t)
    if len(rest) > 1:
        try:
            t = parse_duration(rest[1], strict=True)
        except ValueError as e:
            raise c.error("invalid serve_stale failure recheck: %s"
                          % rest[1]) from e
        if t < 0:
            raise c.error("invalid negative failure recheck for serve_stale")
        if t > 300:
            raise c.error("serve_stale failure recheck cannot exceed 5 "
                          "minutes")
        ca.stale_recheck = t
