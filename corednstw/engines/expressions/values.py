"""Values shared by the two languages: errors, Go's ``%v`` printing and
the comparisons both define the same way."""

import decimal
import math


class ExpressionError(ValueError):
    """A program that cannot be compiled (a setup error)."""


class EvalError(Exception):
    """A program failed while running for one query (CoreDNS's runtime
    error: the caller decides what the query gets)."""


class _NoValue:
    """What Go's templates print for a missing map key."""

    __slots__ = ()

    def __repr__(self):
        return "<no value>"

    def __bool__(self):
        return False


NO_VALUE = _NoValue()


def go_text(v):
    """``fmt.Sprint(v)`` for the values the languages produce."""
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if v is None:
        return "<nil>"
    if v is NO_VALUE:
        return "<no value>"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(go_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(
            "%s:%s" % (go_text(k), go_text(v[k])) for k in sorted(v)) + "]"
    return str(v)


def go_float(f):
    """Go's ``%v`` of a float64: the shortest digits, in exponent form
    when the exponent is below -4 or at least 6 (strconv's 'g', -1)."""
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if math.isnan(f):
        return "NaN"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exponent = decimal.Decimal(repr(f)).as_tuple()
    digits = "".join(map(str, digits)).rstrip("0") or "0"
    exp = len("".join(map(str, decimal.Decimal(repr(f)).as_tuple()[1]))
              ) + exponent - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return "%s%se%s%02d" % (neg, mant, "-" if exp < 0 else "+",
                                abs(exp))
    if exp < 0:
        return neg + "0." + "0" * (-exp - 1) + digits
    if len(digits) <= exp + 1:
        return neg + digits + "0" * (exp + 1 - len(digits))
    return neg + digits[:exp + 1] + "." + digits[exp + 1:]


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def equal(a, b):
    """expr's ``==``: numbers by value whatever their kind, arrays item by
    item, anything else only when of one type and equal."""
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    return a == b
