"""Go-style durations ("5s", "1m30s", "250ms") as CoreDNS's options use."""

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0,
          "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text, strict=False):
    """Seconds (float) from a Go duration; ValueError when malformed.

    A bare integer is taken as seconds (several CoreDNS options allow it).
    With ``strict``, Go's time.ParseDuration rules apply: a unit is
    required except for "0", and the error texts are Go's.
    """
    t = text.strip()
    if not t:
        raise ValueError("empty duration")
    if re.fullmatch(r"\d+", t):
        # Go takes a bare "0" alone ("00" lacks a unit, as "5" does).
        if strict and t != "0":
            raise ValueError('time: missing unit in duration "%s"' % text)
        return float(t)
    if strict and not re.fullmatch(r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)"
                                   r"(?:ns|us|µs|ms|s|m|h))+|[+-]?0", t):
        raise ValueError('time: invalid duration "%s"' % text)
    sign = 1.0
    if t[0] in "+-":
        sign = -1.0 if t[0] == "-" else 1.0
        t = t[1:]
    if t == "0":
        return 0.0
    pos = 0
    total = 0.0
    while pos < len(t):
        m = _PART.match(t, pos)
        if m is None:
            raise ValueError("invalid duration %r" % text)
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds):
    """Go's time.Duration.String() for a number of seconds."""
    if seconds == 0:
        return "0s"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1e-6:
        return "%dns" % round(seconds * 1e9)
    if seconds < 1e-3:
        return _trim("%.3f" % (seconds * 1e6)) + "µs"
    if seconds < 1:
        return _trim("%.6f" % (seconds * 1e3)) + "ms"
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = ""
    if h:
        out += "%dh" % h
    if h or m:
        out += "%dm" % m
    return out + _trim("%.9f" % s) + "s"


def _trim(num):
    return num.rstrip("0").rstrip(".") if "." in num else num
