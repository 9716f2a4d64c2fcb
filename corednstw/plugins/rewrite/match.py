"""Name matching and string rewriting shared by the rule kinds.

Every rule that looks at the question name (name, ttl, rcode, cname) picks
one of five match types.  Patterns are compiled once at setup; a matcher is
a plain function of the lower-case question name so that a rule that does
not match costs one call and one string operation.
"""

import re

from corednstw.core.names import normalize_name
from corednstw.engines.expressions import goregexp

EXACT, PREFIX, SUFFIX, SUBSTRING, REGEX = (
    "exact", "prefix", "suffix", "substring", "regex")
MATCH_TYPES = (EXACT, PREFIX, SUFFIX, SUBSTRING, REGEX)

#: Longest regular expression accepted (a compiled pattern's size grows
#: with it; CoreDNS refuses longer ones for the same reason).
MAX_REGEX_LEN = 10000

_GROUP_REF = re.compile(r"\{(\d+)\}")


def normalize(name):
    """CoreDNS's ``plugin.Name(s).Normalize()``: lower case, final dot.

    Applied to exact, prefix, suffix and substring strings alike, so a
    prefix ``foo`` matches names starting with ``foo.``.
    """
    return normalize_name(name)


def compile_regex(pattern, context="regex"):
    """A compiled pattern, or ValueError with CoreDNS's wording."""
    if len(pattern) > MAX_REGEX_LEN:
        raise ValueError("%s pattern too long: %d > %d"
                         % (context, len(pattern), MAX_REGEX_LEN))
    try:
        return goregexp.compile(pattern)
    except goregexp.RegexpError as e:
        raise ValueError("invalid regex matching pattern: %s" % pattern) from e


def checked_regex(pattern, replacement):
    """Compile ``pattern`` and make sure ``replacement`` refers to no more
    groups than it has (CoreDNS counts distinct ``{N}`` up to 100)."""
    rx = compile_regex(pattern, "regex")
    used = {int(n) for n in _GROUP_REF.findall(replacement) if int(n) <= 100}
    if len(used) > rx.groups:
        raise ValueError(
            "the rewrite regex pattern (%s) uses more subexpressions than "
            "its corresponding matching regex pattern (%s)"
            % (replacement, pattern))
    return rx


def expand(template, m):
    """``template`` with ``{0}``, ``{1}``... replaced by ``m``'s groups.

    Groups are substituted one after the other, as CoreDNS does, so the
    result is the same even for odd templates; a group that did not take
    part in the match is the empty string.
    """
    s = template
    if "{" not in s:
        return s
    for i in range(m.re.groups + 1):
        s = s.replace("{%d}" % i, m.group(i) or "")
    return s


def matcher(kind, value):
    """A function ``f(q) -> truthy`` testing ``q.qname`` (the lower-case
    question name of a Request or a rewrite State) for one match type.

    ``value`` is the normalized string, or a compiled pattern for regex
    (then the truthy result is the match object).
    """
    if kind == EXACT:
        return lambda q: q.qname == value
    if kind == PREFIX:
        return lambda q: q.qname.startswith(value)
    if kind == SUFFIX:
        return lambda q: q.qname.endswith(value)
    if kind == SUBSTRING:
        return lambda q: value in q.qname
    if kind == REGEX:
        search = value.search
        return lambda q: search(q.qname)
    raise ValueError(kind)


class RegexRewriter:
    """Rewrite a whole string into ``template`` when ``pattern`` finds a
    match in it (the ``answer name``/``answer value`` options)."""

    __slots__ = ("pattern", "template")

    def __init__(self, pattern, template):
        self.pattern = pattern
        self.template = template

    def __call__(self, src):
        m = self.pattern.search(src)
        if m is None:
            return src
        return expand(self.template, m)


class RemapRewriter:
    """Map one name, and the names below it, to another: how ``answer
    auto`` undoes the question's rewrite in the records."""

    __slots__ = ("orig", "replacement")

    def __init__(self, orig, replacement):
        self.orig = orig
        self.replacement = replacement

    def __call__(self, src):
        orig = self.orig
        low = src.lower()
        if low == orig:
            return self.replacement
        i = len(src) - len(orig)
        if i > 0 and src[i - 1] == "." and low[i:] == orig:
            return src[:i] + self.replacement
        return src


class SuffixRewriter:
    """Swap a suffix back (``answer auto`` of a suffix rule)."""

    __slots__ = ("suffix", "replacement")

    def __init__(self, suffix, replacement):
        self.suffix = suffix
        self.replacement = replacement

    def __call__(self, src):
        if src.endswith(self.suffix):
            return src[:len(src) - len(self.suffix)] + self.replacement
        return src
