"""The ``name`` field: rewrite the question name, and (``answer ...``)
map the names in the response back so the client sees only what it
asked for.

``rewrite [continue|stop] name [exact|prefix|suffix|substring|regex] FROM
TO [answer auto | answer name FROM TO | answer value FROM TO]...``
"""

from corednstw.core import dnswire as w
from corednstw.plugins.rewrite import match as m
from corednstw.plugins.rewrite.rule import Rule

AUTO, NAME, VALUE = "auto", "name", "value"

# Where the one name of a record's rdata starts: the record types whose
# value ``answer value`` (and ``answer auto``) rewrites.
_VALUE_AT = {w.CNAME: 0, w.NS: 0, w.PTR: 0, w.DNAME: 0, w.SOA: 0,
             w.MX: 2, w.SRV: 6}
NAPTR = 35


def _value_span(rr):
    """(start, end) of the rewritable name in ``rr.rdata``, or None."""
    rd = rr.rdata
    off = _VALUE_AT.get(rr.rtype)
    if off is None:
        if rr.rtype != NAPTR:
            return None
        off = 4
        for _ in range(3):          # flags, services, regexp
            if off >= len(rd):
                return None
            off += rd[off] + 1
    try:
        end = w.skip_name(rd, off)
    except w.FormatError:
        return None
    return off, end


class NameResponse:
    """Rewrite the owner name of every record."""

    __slots__ = ("rewrite",)
    message = False

    def __init__(self, rewrite):
        self.rewrite = rewrite

    def record(self, resp, rr):
        rr.name = self.rewrite(rr.name)


class ValueResponse:
    """Rewrite the name in the value of CNAME, DNAME, NS, PTR, MX, SRV,
    NAPTR and SOA (its primary server) records."""

    __slots__ = ("rewrite",)
    message = False

    def __init__(self, rewrite):
        self.rewrite = rewrite

    def record(self, resp, rr):
        span = _value_span(rr)
        if span is None:
            return
        start, end = span
        rd = rr.rdata
        try:
            old = w.read_name(rd, start)[0]
        except w.FormatError:
            return
        new = self.rewrite(old)
        if new != old:
            try:
                wire = w.name_to_wire(new)
            except ValueError:
                return
            rr.rdata = rd[:start] + wire + rd[end:]


class NameRule(Rule):
    """One question-name rewrite; ``auto`` answers are built per query
    from the names before and after (they differ for every query)."""

    def __init__(self, mode, kind, frm, to, auto, static):
        super().__init__(mode)
        self.kind = kind
        self.frm = frm
        self.to = to
        self.auto = auto
        self.static = static
        self.match = m.matcher(kind, frm)

    def apply(self, st, hit):
        before = st.name
        qname = st.qname
        kind = self.kind
        if kind == m.EXACT:
            new = self.to
        elif kind == m.PREFIX:
            new = self.to + qname[len(self.frm):]
        elif kind == m.SUFFIX:
            new = qname[:len(qname) - len(self.frm)] + self.to
        elif kind == m.SUBSTRING:
            new = qname.replace(self.frm, self.to)
        else:
            new = m.expand(self.to, hit)
        st.set_name(new)
        if not self.auto:
            return self.static
        back = m.RemapRewriter(new.lower(), before)
        return [NameResponse(back), ValueResponse(back)] + self.static


def parse_answers(kind, args):
    """(auto, [response rules]) from the ``answer ...`` options."""
    if len(args) < 2:
        raise ValueError("invalid arguments for %s rule" % kind)
    auto = False
    rules: list[NameResponse | ValueResponse] = []
    names = 0
    last = ""
    i = 0
    while i < len(args):
        if last == "" and args[i] != "answer":
            raise ValueError("exceeded the number of arguments for a "
                             "non-answer rule argument for %s rule" % kind)
        if args[i] == "answer":
            i += 1
        if i == len(args):
            raise ValueError("type missing for answer rule for %s rule"
                             % kind)
        last = args[i]
        i += 1
        if last == AUTO:
            auto = True
            continue
        if last not in (NAME, VALUE):
            raise ValueError("invalid type %r for answer rule for %s rule"
                             % (last, kind))
        if len(args) - i < 2:
            raise ValueError("%s answer rule for %s rule: 2 arguments "
                             "required" % (last, kind))
        try:
            rx = m.checked_regex(args[i], args[i + 1])
        except ValueError as e:
            raise ValueError("%s answer rule for %s rule: %s"
                             % (last, kind, e)) from e
        rewriter = m.RegexRewriter(rx, m.normalize(args[i + 1]))
        if last == NAME:
            rules.append(NameResponse(rewriter))
            names += 1
        else:
            rules.append(ValueResponse(rewriter))
        i += 2
    if auto and names:
        raise ValueError("auto name answer rule cannot be combined with "
                         "explicit name anwer rules")
    return auto, rules


def new_rule(mode, args):
    """A NameRule from the arguments after ``name``."""
    if len(args) < 2:
        raise ValueError("too few arguments for a name rule")
    if len(args) == 2:
        kind, frm, to = m.EXACT, args[0], args[1]
    else:
        kind, frm, to = args[0].lower(), args[1], args[2]
    if kind != m.REGEX:
        frm, to = m.normalize(frm), m.normalize(to)
    auto, static = False, []
    if len(args) > 3:
        auto, static = parse_answers(kind, args[3:])
    if kind == m.EXACT:
        m.checked_regex(to, frm)
        return NameRule(mode, kind, frm, to, True, static)
    if kind in (m.PREFIX, m.SUBSTRING):
        return NameRule(mode, kind, frm, to, auto, static)
    if kind == m.SUFFIX:
        if auto:
            # The reverse suffix swap is known at setup: no per-query work.
            back = m.SuffixRewriter(to, frm)
            static = [NameResponse(back), ValueResponse(back)] + static
        return NameRule(mode, kind, frm, to, False, static)
    if kind == m.REGEX:
        rx = m.checked_regex(frm, to)
        return NameRule(mode, kind, rx, m.normalize(to), auto, static)
    raise ValueError("name rule supports only exact, prefix, suffix, "
                     "substring, and regex name matching, received: %s"
                     % kind)
