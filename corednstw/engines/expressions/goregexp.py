"""Go regular expressions, run by RE2.

Corefiles are written for Go's regexp package, whose syntax and
guarantees are RE2's: matching takes time linear in the text, whatever
the pattern.  Python's ``re`` backtracks, so a pattern like
``^(a+)+\\.example\\.net\\.$`` and one query of a few dozen letters would
hold the reactor for hours.  Every Corefile regular expression is
therefore compiled here, on RE2 (the ``google-re2`` package), with
Go's meaning: leftmost-first matching, ``$`` at the end of the text only,
``(?P<name>...)`` and ``(?<name>...)`` groups, ``\\pL`` classes and the
``U`` flag.  What Go refuses and RE2 would accept (``\\C``, non-ASCII
group names) is refused here too, and a refusal is worded as Go's
``regexp.Compile`` error.
"""

import re

import re2

MAX_LEN = 10000

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

_UNANCHORED = re2._Anchor.UNANCHORED
_ANCHOR_START = re2._Anchor.ANCHOR_START
_ANCHOR_BOTH = re2._Anchor.ANCHOR_BOTH

#: RE2's error texts and Go's words for the same error (regexp/syntax).
_GO_CODES = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator":
        "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid UTF-8": "invalid UTF-8",
    "pattern too large - compile failed": "expression too large",
}

_GO_NAME = re.compile(r"[A-Za-z0-9_]+\Z")
_ESCAPE = re.compile(r"\\Q.*?(?:\\E|\Z)|\\(.)", re.S)


class RegexpError(ValueError):
    """The pattern is not a valid Go regular expression."""


def _error(code, expr):
    return RegexpError("error parsing regexp: %s: `%s`" % (code, expr))


def compile(pattern):
    """Go's ``regexp.Compile(pattern)``; RegexpError with Go's message
    otherwise."""
    if len(pattern) > MAX_LEN:
        raise RegexpError("regex pattern too long: %d > %d"
                          % (len(pattern), MAX_LEN))
    for m in _ESCAPE.finditer(pattern):
        if m.group(1) == "C":
            raise _error("invalid escape sequence", "\\C")
    try:
        source = pattern.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _error("invalid UTF-8", pattern) from e
    raw = re2._re2.RE2(source, _OPTIONS)
    if not raw.ok():
        text = raw.error().decode("utf-8", "replace")
        code, _, arg = text.partition(": ")
        if code == "trailing \\":
            arg = ""
        elif not arg:
            arg = pattern
        raise _error(_GO_CODES.get(code, code), arg)
    rx = Regexp(pattern, raw)
    for name in rx.groupindex:
        if not _GO_NAME.match(name):
            raise _error("invalid named capture", "(?P<%s>" % name)
    return rx


class Regexp:
    """A compiled pattern with the part of ``re.Pattern``'s interface the
    plugins use (``search``, ``match``, ``fullmatch``, ``groups``,
    ``groupindex``), calling RE2 directly: the ``re2`` module's own
    wrapper costs ten times more per call than the match."""

    __slots__ = ("pattern", "groups", "groupindex", "_run")

    def __init__(self, pattern, raw):
        self.pattern = pattern
        self.groups = raw.NumberOfCapturingGroups()
        self.groupindex = {name.decode("utf-8"): index for name, index
                           in raw.NamedCapturingGroups()}
        self._run = raw.Match

    def __repr__(self):
        return "goregexp.compile(%r)" % self.pattern

    def _exec(self, anchor, text):
        if text.isascii():
            data = text.encode("ascii")
            spans = self._run(anchor, data, 0, len(data))
            if spans[0][0] < 0:
                return None
            return Match(self, text, spans)
        # Lone surrogates become one byte each, so that every character
        # is still one UTF-8 sequence and byte offsets map back to str.
        data = text.encode("utf-8", "replace")
        spans = self._run(anchor, data, 0, len(data))
        if spans[0][0] < 0:
            return None
        chars = {-1: -1}
        for span in spans:
            for off in span:
                if off not in chars:
                    chars[off] = len(data[:off].decode("utf-8"))
        return Match(self, text, [(chars[a], chars[b]) for a, b in spans])

    def search(self, text):
        return self._exec(_UNANCHORED, text)

    def match(self, text):
        return self._exec(_ANCHOR_START, text)

    def fullmatch(self, text):
        return self._exec(_ANCHOR_BOTH, text)


class Match:
    """One match: ``group``, ``groups``, ``start``, ``end``, ``span`` as
    ``re.Match`` has them (a group that took no part is None)."""

    __slots__ = ("re", "string", "_spans")

    def __init__(self, rx, text, spans):
        self.re = rx
        self.string = text
        self._spans = spans

    def __repr__(self):
        return "<goregexp.Match span=%r match=%r>" % (self.span(),
                                                       self.group(0))

    def _index(self, group):
        if not isinstance(group, int):
            try:
                return self.re.groupindex[group]
            except KeyError:
                raise IndexError("no such group") from None
        if not 0 <= group <= self.re.groups:
            raise IndexError("no such group")
        return group

    def __getitem__(self, group):
        start, end = self._spans[self._index(group)]
        return None if start < 0 else self.string[start:end]

    def group(self, *groups):
        if len(groups) == 1:
            return self[groups[0]]
        if not groups:
            return self[0]
        return tuple(self[g] for g in groups)

    def groups(self, default=None):
        out = []
        for g in range(1, self.re.groups + 1):
            v = self[g]
            out.append(default if v is None else v)
        return tuple(out)

    def span(self, group=0):
        return self._spans[self._index(group)]

    def start(self, group=0):
        return self.span(group)[0]

    def end(self, group=0):
        return self.span(group)[1]


def submatches(rx, text):
    """Go's FindStringSubmatch: the whole match then every group, with ""
    for groups that did not take part; None when nothing matches."""
    m = rx.search(text)
    if m is None:
        return None
    return [m.group(0)] + list(m.groups(""))


def group_names(rx):
    """Go's SubexpNames: "" for the whole match and unnamed groups."""
    names = [""] * (rx.groups + 1)
    for name, idx in rx.groupindex.items():
        names[idx] = name
    return names
