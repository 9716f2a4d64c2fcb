"""Kubernetes label selectors (the ``labels`` and ``namespace_labels``
options): parsed at setup so a bad expression is a Corefile error, sent to
the API server as ``labelSelector``, and evaluated locally by the test API
server.

Grammar (apimachinery's labels.Parse): comma-separated requirements, each
``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``,
``key in (v1, v2)``, ``key notin (v1, v2)``, ``key > N`` or ``key < N``.
"""

import re

_KEY = (r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?/)?"
        r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_REQ = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<nkey>%(k)s)"
    r"|(?P<skey>%(k)s)\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\)"
    r"|(?P<key>%(k)s)\s*(?:(?P<op>==|=|!=|>|<)\s*(?P<val>%(v)s))?)\s*(?:,|$)"
    % {"k": _KEY, "v": _VALUE})


class SelectorError(ValueError):
    pass


def parse(text):
    """A list of (key, op, values) requirements; SelectorError if bad.

    ops: 'exists', '!', '=', '!=', 'in', 'notin', '>', '<'."""
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    pos = 0
    text = text.strip()
    if not text:
        return reqs
    while pos < len(text):
        m = _REQ.match(text, pos)
        if m is None or m.end() == pos:
            raise SelectorError("unable to parse requirement: %r" % text[pos:])
        pos = m.end()
        if m.group("not"):
            reqs.append((m.group("nkey"), "!", ()))
        elif m.group("skey"):
            vals = tuple(v.strip() for v in m.group("vals").split(","))
            for v in vals:
                if not re.fullmatch(_VALUE, v):
                    raise SelectorError("invalid label value: %r" % v)
            reqs.append((m.group("skey"), m.group("setop"), vals))
        else:
            op = m.group("op")
            if op is None:
                reqs.append((m.group("key"), "exists", ()))
                continue
            val = m.group("val")
            if op in (">", "<"):
                try:
                    int(val)
                except ValueError as e:
                    raise SelectorError("%s needs an integer: %r"
                                        % (op, val)) from e
            reqs.append((m.group("key"), "=" if op == "==" else op, (val,)))
    return reqs


def matches(reqs, labels):
    """True when ``labels`` (a dict) satisfies every requirement."""
    labels = labels or {}
    for key, op, vals in reqs:
        have = key in labels
        v = labels.get(key)
        if op == "exists":
            ok = have
        elif op == "!":
            ok = not have
        elif op == "=" or op == "in":
            ok = have and v in vals
        elif op == "!=" or op == "notin":
            ok = not have or v not in vals
        else:
            try:
                n = int(v)
            except (TypeError, ValueError):
                return False
            ok = n > int(vals[0]) if op == ">" else n < int(vals[0])
        if not ok:
            return False
    return True
