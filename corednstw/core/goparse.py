"""Go's text-to-value parsers, as CoreDNS's setup functions call them.

A Corefile value CoreDNS accepts must be accepted here, and one it refuses
refused with the same words: Go's ``strconv`` takes no blanks and no
underscores where Python's ``int`` does, and ``net.ParseIP`` reads an
IPv4-mapped IPv6 address as IPv4.  Each function raises ValueError with
Go's error text (``strconv.Atoi: parsing "x": invalid syntax``).
"""

import ipaddress
import math
import re

_DIGITS = re.compile(r"[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:inf(?:inity)?|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
                    r"(?:e[+-]?[0-9]+)?)\Z", re.I)
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
            "\r": "\\r", "\t": "\\t", "\v": "\\v", "\\": "\\\\",
            '"': '\\"'}


def quote(text):
    """``text`` as Go's strconv.Quote (and ``%q``) writes it: in double
    quotes, with ``"`` and ``\\`` escaped, and what Go does not print
    (control characters, separators other than the space, unassigned
    code points) escaped as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``.
    A Corefile value can hold any of them, and CoreDNS's errors quote it
    this way."""
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append("\\x%02x" % ord(ch))
        elif 0xD800 <= ord(ch) < 0xE000:
            # Bytes that were not UTF-8 (a lone surrogate, as
            # surrogateescape keeps them): Go writes each byte.
            out.extend("\\x%02x" % b for b in
                       ch.encode("utf-8", "surrogateescape"
                                 if 0xDC80 <= ord(ch) <= 0xDCFF
                                 else "surrogatepass"))
        elif ord(ch) < 0x10000:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append("\\U%08x" % ord(ch))
    out.append('"')
    return "".join(out)


def num_error(func, text, why):
    """Go's strconv.NumError text: ``func`` refused ``text`` for ``why``
    (``invalid syntax``, ``value out of range``)."""
    return "strconv.%s: parsing %s: %s" % (func, quote(text), why)


def _err(func, text, why):
    return ValueError(num_error(func, text, why))


def parse_int(text, bits=64, func="ParseInt"):
    """A signed decimal integer of ``bits`` bits (Go's ParseInt(s, 10,
    bits)); ``func`` names the Go function in the error text."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not _DIGITS.match(body):
        raise _err(func, text, "invalid syntax")
    value = int(text, 10)
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise _err(func, text, "value out of range")
    return value


def atoi(text):
    """Go's strconv.Atoi: a 64-bit signed decimal integer."""
    return parse_int(text, 64, "Atoi")


def parse_uint(text, bits=64, func="ParseUint"):
    """An unsigned decimal integer of ``bits`` bits (Go's ParseUint(s, 10,
    bits)): no sign at all."""
    if not _DIGITS.match(text):
        raise _err(func, text, "invalid syntax")
    value = int(text, 10)
    if value >= 1 << bits:
        raise _err(func, text, "value out of range")
    return value


def parse_bool(text):
    """Go's strconv.ParseBool."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _err("ParseBool", text, "invalid syntax")


def parse_float(text):
    """Go's strconv.ParseFloat(s, 64) for decimal text."""
    if not _FLOAT.match(text):
        raise _err("ParseFloat", text, "invalid syntax")
    value = float(text)
    if math.isinf(value) and "inf" not in text.lower():
        raise _err("ParseFloat", text, "value out of range")
    return value


def parse_ip(text, zone=False):
    """An address as Go's net.ParseIP reads it, or None: IPv4-mapped IPv6
    counts as IPv4 (Go's To4).  ``zone``: drop an IPv6 ``%zone`` first
    (hosts files may carry one; ParseIP itself refuses it)."""
    if not text:
        return None
    i = text.find("%")
    if i >= 0:
        if not zone:
            return None
        text = text[:i]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def split_host_port(text):
    """(host, port) as Go's net.SplitHostPort splits ``host:port`` or
    ``[host]:port``: a port is required but not checked (a service name
    passes, as Go looks it up only when listening).  ValueError with Go's
    text (``address bla: missing port in address``)."""
    def fail(why):
        return ValueError("address %s: %s" % (text, why))
    i = text.rfind(":")
    if i < 0:
        raise fail("missing port in address")
    j = k = 0
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise fail("missing ']' in address")
        if end + 1 == len(text):
            raise fail("missing port in address")
        if end + 1 != i:
            if text[end + 1] == ":":
                raise fail("too many colons in address")
            raise fail("missing port in address")
        host = text[1:end]
        j, k = 1, end + 1
    else:
        host = text[:i]
        if ":" in host:
            raise fail("too many colons in address")
    if "[" in text[j:]:
        raise fail("unexpected '[' in address")
    if "]" in text[k:]:
        raise fail("unexpected ']' in address")
    return host, text[i + 1:]
