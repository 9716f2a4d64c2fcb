"""Go (RE2) regular expressions run by Python's ``re``.

Corefiles are written for Go's regexp package.  Most RE2 syntax means the
same in Python; the differences are translated here, once, at setup:
``(?<name>...)`` groups, ``\\z``, ``\\Q...\\E`` quoting and the POSIX
classes ``[[:alpha:]]``.  What RE2 rejects but Python would accept
(backreferences, look-around) and what Python cannot express (``\\pL``
Unicode classes, the ``U`` flag) is refused with ``RegexpError``, so a
pattern never silently means something else.
"""

import re

MAX_LEN = 10000

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f",
    "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9",
    "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}

_FLAGS = set("imsU")


class RegexpError(ValueError):
    """The pattern is not valid RE2, or uses RE2 syntax Python lacks."""


def compile(pattern):
    """A compiled Python pattern with the meaning of Go's
    ``regexp.Compile(pattern)``; RegexpError otherwise."""
    if len(pattern) > MAX_LEN:
        raise RegexpError("regex pattern too long: %d > %d"
                          % (len(pattern), MAX_LEN))
    text = translate(pattern)
    try:
        return re.compile(text)
    except re.error as e:
        raise RegexpError("error parsing regexp: %s: `%s`"
                          % (e, pattern)) from e


def translate(pattern):
    """Python ``re`` source for an RE2 pattern."""
    out = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            step, text = _escape(pattern, i, in_class)
            out.append(text)
            i += step
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end < 0:
                    raise RegexpError("missing closing ]: `%s`" % pattern)
                out.append(_posix(pattern[i + 2:end], pattern))
                i = end + 2
                continue
            if c == "[":
                out.append("\\[")
            else:
                if c == "]" and not _class_start(out):
                    in_class = False
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            step, text = _group(pattern, i)
            out.append(text)
            i += step
            continue
        if c == "{" and not _repeat(pattern, i):
            out.append("\\{")
            i += 1
            continue
        out.append(c)
        i += 1
    if in_class:
        raise RegexpError("missing closing ]: `%s`" % pattern)
    return "".join(out)


def _class_start(out):
    """True right after ``[`` or ``[^`` (where ``]`` is a literal)."""
    return bool(out) and (out[-1] == "[" or out[-2:] == ["[", "^"])


def _repeat(pattern, i):
    """True when ``{`` at ``i`` starts a counted repetition RE2 accepts
    (``{n}``, ``{n,}``, ``{n,m}``); RE2 takes any other brace literally."""
    m = re.match(r"\{(\d+)(,(\d*))?\}", pattern[i:])
    if not m:
        return False
    lo = int(m.group(1))
    hi = m.group(3)
    if lo > 1000 or (hi and int(hi) > 1000):
        raise RegexpError("invalid repeat count: `%s`" % m.group(0))
    if hi and int(hi) < lo:
        raise RegexpError("invalid repeat count: `%s`" % m.group(0))
    return True


def _posix(name, pattern):
    neg = name.startswith("^")
    if neg:
        name = name[1:]
    cls = _POSIX.get(name)
    if cls is None:
        raise RegexpError("invalid character class range: `[:%s:]`" % name)
    if neg:
        raise RegexpError("negated POSIX classes are not supported: `%s`"
                          % pattern)
    return cls


def _escape(pattern, i, in_class):
    """(characters consumed, Python text) for the escape at ``i``."""
    if i + 1 >= len(pattern):
        raise RegexpError("trailing backslash at end of expression: ``")
    c = pattern[i + 1]
    if c == "Q" and not in_class:
        end = pattern.find("\\E", i + 2)
        lit = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
        return (len(pattern) - i if end < 0 else end + 2 - i), re.escape(lit)
    if c == "z":
        return 2, "\\Z"
    if c.isdigit() and c != "0":
        raise RegexpError("invalid escape sequence: `\\%s`" % c)
    if c in "pPCXRNkg" or c == "Z":
        raise RegexpError("invalid or unsupported escape: `\\%s`" % c)
    if c == "x" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        if end < 0:
            raise RegexpError("invalid escape sequence: `\\x{`")
        code = int(pattern[i + 3:end], 16)
        return end + 1 - i, "\\U%08x" % code
    return 2, "\\" + c


def _group(pattern, i):
    """(characters consumed, Python text) for a ``(?`` group or flags."""
    rest = pattern[i + 2:]
    if rest.startswith("P<") or rest.startswith("<"):
        start = i + (4 if rest.startswith("P<") else 3)
        end = pattern.find(">", start)
        name = pattern[start:end] if end > 0 else ""
        if end < 0 or not re.match(r"^[A-Za-z0-9_]+$", name):
            raise RegexpError("invalid named capture: `%s`"
                              % pattern[i:end + 1])
        return end + 1 - i, "(?P<%s>" % name
    if rest.startswith(("=", "!", "<=", "<!", "P=", "P>", "#", ">")):
        raise RegexpError("invalid or unsupported Perl syntax: `(?%s`"
                          % rest[:1])
    m = re.match(r"([a-zA-Z]*)(-([a-zA-Z]*))?([:)])", rest)
    if not m or not set(m.group(1) + (m.group(3) or "")) <= _FLAGS:
        raise RegexpError("invalid or unsupported Perl syntax: `(?%s`"
                          % rest[:2])
    if "U" in m.group(0):
        raise RegexpError("the U (ungreedy) flag is not supported")
    return 2 + len(m.group(0)), "(?" + m.group(0)


def submatches(rx, text):
    """Go's FindStringSubmatch: the whole match then every group, with ""
    for groups that did not take part; None when nothing matches."""
    m = rx.search(text)
    if m is None:
        return None
    return [m.group(0)] + [g or "" for g in m.groups()]


def group_names(rx):
    """Go's SubexpNames: "" for the whole match and unnamed groups."""
    names = [""] * (rx.groups + 1)
    for name, idx in rx.groupindex.items():
        names[idx] = name
    return names
