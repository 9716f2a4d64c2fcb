"""Route 53's escaped names (CoreDNS's maybeUnescape).

Route 53 returns every character of a name other than a-z, 0-9, ``-``
and ``_`` as an octal escape (``\\052`` for ``*``).  CoreDNS turns back the
escapes of a-z, 0-9, ``-``, ``.`` and a leading ``*`` (a wildcard) and
refuses any other: the record set is then skipped.
"""

ESCAPE = "\\"


def unescape(s):
    """``s`` with its octal escapes decoded; ValueError as CoreDNS words
    it for an escape it refuses."""
    out: list[str] = []
    while True:
        i = s.find(ESCAPE)
        if i < 0:
            return "".join(out) + s
        out.append(s[:i])
        digits = s[i + 1:i + 4]
        if len(digits) < 3:
            raise ValueError("invalid escape sequence: '%s%s'"
                             % (ESCAPE, s[i + 1:]))
        ch = _decode(digits)
        _check(ch, bool("".join(out)))
        out.append(ch)
        s = s[i + 4:]


def _decode(digits):
    """Three octal digits as one character below 128 (Go's ParseInt with
    base 8 and 8 bits)."""
    try:
        n = int(digits, 8)
    except ValueError:
        n = -1
    if not digits.isdigit() or n < 0 or n > 127:
        raise ValueError("invalid escape sequence: '%s%s'" % (ESCAPE,
                                                              digits))
    return chr(n)


def _check(ch, after_text):
    """Only the characters CoreDNS accepts back from an escape."""
    if "a" <= ch <= "z" or "0" <= ch <= "9" or ch in "-.":
        return
    if ch == "*":
        if after_text:
            raise ValueError("`*' only supported as wildcard (leftmost "
                             "label)")
        return
    raise ValueError("invalid character: %s%s" % (
        ESCAPE, ("0%o" % ord(ch)).rjust(3, "0")))
