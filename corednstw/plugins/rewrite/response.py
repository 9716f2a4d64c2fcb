"""Fields that change only the response: ``ttl``, ``rcode`` and
``cname`` (the CNAME target, resolved again under its new name)."""

import re

from corednstw.core import dnswire as w
from corednstw.core import goparse
from corednstw.engines.expressions import goregexp
from corednstw.plugins.rewrite import match as m
from corednstw.plugins.rewrite.rule import Rule

_MAX_TTL = 2147483647
_DIGITS = re.compile(r"[0-9]+\Z")


def parse_ttl(s):
    """(min, max) from ``N``, ``A-B``, ``-B`` or ``A-``; ValueError when
    invalid (``-`` alone and inverted ranges included)."""
    parts = s.split("-")
    if len(parts) == 1:
        v = goparse.parse_uint(s, 32)
        return v, v
    if len(parts) != 2 or parts == ["", ""]:
        raise ValueError(s)
    lo = goparse.parse_uint(parts[0], 32) if parts[0] else 0
    hi = goparse.parse_uint(parts[1], 32) if parts[1] else _MAX_TTL
    if lo > hi:
        raise ValueError(s)
    return lo, hi


def parse_rcode(s):
    """An rcode from its number (0-23) or mnemonic; None if neither."""
    if _DIGITS.match(s):
        return int(s) if int(s) <= 23 else None
    try:
        rc = w.rcode_value(s)
    except ValueError:
        return None
    return rc if w.rcode_text(rc) == s.upper() or rc == 16 else None


def _name_matcher(field, kind, value):
    """A matcher for the ttl and rcode rules' name argument."""
    kind = kind.lower()
    if kind == m.REGEX:
        if len(value) > m.MAX_REGEX_LEN:
            raise ValueError("regex pattern too long in a %s rule: %d > %d"
                             % (field, len(value), m.MAX_REGEX_LEN))
        try:
            return m.matcher(kind, goregexp.compile(value))
        except goregexp.RegexpError as e:
            raise ValueError("invalid regex pattern in a %s rule: %s"
                             % (field, value)) from e
    if kind not in m.MATCH_TYPES:
        raise ValueError("%s rule supports only exact, prefix, suffix, "
                         "substring, and regex name matching" % field)
    return m.matcher(kind, m.normalize(value))


class TTLResponse:
    """Clamp every record's TTL into [lo, hi]."""

    __slots__ = ("lo", "hi")
    message = False

    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    def record(self, resp, rr):
        if rr.ttl < self.lo:
            rr.ttl = self.lo
        elif rr.ttl > self.hi:
            rr.ttl = self.hi


class RcodeResponse:
    """Swap the response's rcode; a message-level rule, so it also runs
    when the response has no records."""

    __slots__ = ("old", "new")
    message = True

    def __init__(self, old, new):
        self.old = old
        self.new = new

    def record(self, resp, rr):
        if resp.rcode == self.old:
            resp.rcode = self.new


class NameMatchRule(Rule):
    """A rule that only adds fixed response rules when the question name
    matches (ttl and rcode)."""

    def __init__(self, mode, match, responses):
        super().__init__(mode)
        self.match = match
        self.responses = responses

    def apply(self, st, hit):
        return self.responses


def new_ttl_rule(mode, args):
    if len(args) < 2:
        raise ValueError("too few (%d) arguments for a ttl rule" % len(args))
    s = args[1] if len(args) == 2 else args[2] if len(args) == 3 else ""
    try:
        lo, hi = parse_ttl(s)
    except ValueError as e:
        raise ValueError("invalid TTL '%s' for a ttl rule" % s) from e
    kind, name = (m.EXACT, args[0]) if len(args) == 2 else args[:2]
    return NameMatchRule(mode, _name_matcher("ttl", kind, name),
                         [TTLResponse(lo, hi)])


def new_rcode_rule(mode, args):
    if len(args) < 3:
        raise ValueError("too few (%d) arguments for a rcode rule"
                         % len(args))
    old_s, new_s = ("", "")
    if len(args) == 3:
        old_s, new_s = args[1], args[2]
    elif len(args) == 4:
        old_s, new_s = args[2], args[3]
    old = parse_rcode(old_s)
    if old is None:
        raise ValueError("invalid matching RCODE '%s' for a rcode rule"
                         % old_s)
    new = parse_rcode(new_s)
    if new is None:
        raise ValueError("invalid replacement RCODE '%s' for a rcode rule"
                         % new_s)
    kind, name = (m.EXACT, args[0]) if len(args) == 3 else args[:2]
    return NameMatchRule(mode, _name_matcher("rcode", kind, name),
                         [RcodeResponse(old, new)])


class CnameRule(Rule):
    """Rewrite a CNAME target in the response and resolve the new target
    (through this server) for the records that follow it."""

    def __init__(self, mode, kind, frm, to):
        super().__init__(mode)
        self.kind = kind
        self.frm = frm
        self.to = to

    def target(self, old):
        """The new target for CNAME target ``old``, or None."""
        kind = self.kind
        if kind == m.EXACT:
            return self.to if old == self.frm else None
        if kind == m.PREFIX:
            if old.startswith(self.frm):
                return self.to + old[len(self.frm):]
        elif kind == m.SUFFIX:
            if old.endswith(self.frm):
                return old[:len(old) - len(self.frm)] + self.to
        elif kind == m.SUBSTRING:
            if self.frm in old:
                return old.replace(self.frm, self.to)
        else:
            hit = self.frm.search(old)
            if hit is not None:
                return m.expand(self.to, hit)
        return None

    def apply(self, st, hit):
        return [CnameResponse(self, st.qtype)]


class CnameResponse:
    """The per-query half of a cname rule: it needs the query's type for
    the new lookup.  Run by the plugin before the record rules, since it
    may wait for the lookup."""

    __slots__ = ("rule", "qtype")
    message = False
    cname = True

    def __init__(self, rule, qtype):
        self.rule = rule
        self.qtype = qtype

    def record(self, resp, rr):
        pass

    def find(self, resp):
        """(index, new target) of the first CNAME to rewrite, or None."""
        for i, rr in enumerate(resp.answer):
            if rr.rtype != w.CNAME:
                continue
            try:
                old = w.read_name(rr.rdata, 0)[0]
            except w.FormatError:
                continue
            new = self.rule.target(old)
            if new is not None and new != old:
                return i, new
        return None

    def splice(self, resp, index, new, up):
        """Keep the CNAMEs up to the rewritten one, then ``up``'s answer."""
        kept = [rr for rr in resp.answer[:index] if rr.rtype == w.CNAME]
        rr = resp.answer[index]
        rr.rdata = w.name_to_wire(new)
        resp.answer = kept + [rr] + list(up.answer)
        resp.set_flag(w.TC, up.tc)


def new_cname_rule(mode, args):
    if len(args) == 3:
        kind = args[0].lower()
        if kind not in m.MATCH_TYPES:
            raise ValueError("unknown cname rewrite type: %s" % kind)
        frm, to = args[1].lower(), args[2].lower()
    elif len(args) == 2:
        kind, frm, to = m.EXACT, args[0].lower(), args[1].lower()
    else:
        raise ValueError("too few (%d) arguments for a cname rule"
                         % len(args))
    if kind == m.EXACT:
        frm, to = m.normalize(frm), m.normalize(to)
    if kind == m.REGEX:
        if len(frm) > m.MAX_REGEX_LEN:
            raise ValueError("regex pattern too long in a cname rule: "
                             "%d > %d" % (len(frm), m.MAX_REGEX_LEN))
        try:
            frm = goregexp.compile(frm)
        except goregexp.RegexpError as e:
            raise ValueError("invalid cname rewrite regex pattern: %s"
                             % e) from e
    return CnameRule(mode, kind, frm, to)
