"""log: one line per query, in CoreDNS's formats (CoreDNS's log).

Middleware: the query goes on down the chain, and the answer (or the lack
of one) is written as ``[INFO] <format with placeholders replaced>``.  A
format is compiled once, at setup, into a list of pieces, so a query only
pays for the placeholders it uses.  The placeholders and their text are
those of CoreDNS's replacer package; ``{duration}`` is seconds as Go's
``strconv.FormatFloat(secs, 'f', -1, 64)`` writes them.

``compile_format``, ``unanswered`` and ``render`` are the replacer other
plugins with placeholders use (dnstap's ``extra``).
"""

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Union

from corednstw.core import dnswire as w
from corednstw.core import logger as clog
from corednstw.core.plugin import Plugin, is_deferred, match
from corednstw.engines import response
from corednstw.plugins import metadata

NAME = "log"
EMPTY = "-"

COMMON = ('{remote}:{port} ' + EMPTY + ' {>id} "{type} {class} {name} '
          '{proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} '
          '{duration}')
COMBINED = COMMON + ' "{>opcode}"'
DEFAULT = COMMON

CLASSES = response.CLASSES

_FLAGS = ((w.QR, "qr"), (w.AA, "aa"), (w.TC, "tc"), (w.RD, "rd"),
          (w.RA, "ra"), (0x0040, "z"), (w.AD, "ad"), (w.CD, "cd"))


# -- response classification (the response engine) ---------------------------

class Outcome:
    """What a rule needs to know about the answer: wire flags, rcode, size,
    and (lazily) its response type and class (CoreDNS's response.Typify
    and Classify)."""

    __slots__ = ("req", "resp", "flags", "rcode", "size", "_type")

    def __init__(self, req, resp):
        self.req = req
        self.resp = resp
        self._type = None
        if resp is None:
            # Nothing written: CoreDNS's log synthesises a SERVFAIL reply
            # (question only, no OPT) for the line.
            self.flags = w.QR | (req.opcode << 11) | (req.flags
                                                      & (w.RD | w.CD))
            self.rcode = w.SERVFAIL
            self.size = req.qend
        else:
            wire = resp.finish(req)
            self.size = len(wire)
            self.flags = struct.unpack_from("!H", wire, 2)[0] if len(
                wire) >= 4 else 0
            self.rcode = resp.rcode

    def type(self):
        """NOERROR, NXDOMAIN, SERVERERROR, NODATA, DELEGATION, META,
        UPDATE or OTHERERROR."""
        return response.type_text(self._typified())

    def cls(self):
        """success, denial or error."""
        return response.classify(self._typified())

    def _typified(self):
        t = self._type
        if t is None:
            an, ns_types = self._sections()
            # No clock: signatures are not checked for expiry here.
            t = self._type = response.typify_parts(
                (self.flags >> 11) & 0xF, self.req.qtype, self.rcode, an,
                ns_types)
        return t

    def _sections(self):
        """(answer count, authority types) of the answer; a message that
        cannot be walked counts no records."""
        resp = self.resp
        if resp is None:
            return 0, ()
        if resp.raw is None:
            return len(resp.answer), {rr.rtype for rr in resp.authority}
        try:
            return response.sections(resp.finish(self.req))
        except (w.FormatError, struct.error):
            return 0, ()


# -- formats ------------------------------------------------------------------

def go_float(secs):
    """Go's strconv.FormatFloat(secs, 'f', -1, 64): shortest digits that
    read back as the same float, never an exponent."""
    text = repr(float(secs))
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    if text.endswith(".0"):
        text = text[:-2]
    return text


def go_seconds(delta):
    """Go's Duration.Seconds() of a span, as the log writes it: the span
    is whole nanoseconds first (a monotonic float difference has noise
    digits Go's integer durations do not)."""
    ns = max(int(round(delta * 1e9)), 0)
    sec, nsec = divmod(ns, 1000000000)
    return go_float(sec + nsec / 1e9)


def _addr(host):
    if host is None:
        return EMPTY
    return "[%s]" % host if ":" in host else host


def _rflags(flags):
    out = [name for bit, name in _FLAGS if flags & bit]
    return ",".join(out)


def _rcode(o):
    return w.rcode_text(o.rcode)


def _local(req):
    loc = req.local
    if not loc:
        return EMPTY
    return _addr(loc[0])


# Placeholder -> function(req, outcome, now) giving its text.
_LABELS = {
    "{type}": lambda r, o, t: w.type_text(r.qtype),
    "{name}": lambda r, o, t: r.qname,
    "{class}": lambda r, o, t: w.class_text(r.qclass),
    "{proto}": lambda r, o, t: r.proto,
    "{size}": lambda r, o, t: str(len(r.data)),
    "{remote}": lambda r, o, t: _addr(r.client),
    "{port}": lambda r, o, t: str(r.port),
    "{local}": lambda r, o, t: _local(r),
    "{>id}": lambda r, o, t: str(r.id),
    "{>opcode}": lambda r, o, t: str(r.opcode),
    "{>do}": lambda r, o, t: "true" if r.do else "false",
    "{>bufsize}": lambda r, o, t: str(r.size),
    "{rcode}": lambda r, o, t: _rcode(o),
    "{rsize}": lambda r, o, t: str(o.size),
    "{duration}": lambda r, o, t: go_seconds(t - r.start) + "s",
    "{>rflags}": lambda r, o, t: _rflags(o.flags),
}


def _metadata(label):
    def text(r, o, t):
        v = metadata.value(r, label)
        return EMPTY if v is None else str(v)
    return text


def compile_format(fmt):
    """Pieces of a format: literal strings and placeholder functions.

    Follows CoreDNS's parser: find each ``}``, back up to the nearest
    ``{``; a known label or ``{/metadata}`` is a placeholder, anything else
    stays literal text.
    """
    pieces = []
    s = fmt
    while True:
        j = s.find("}")
        if j < 0:
            break
        i = s.rfind("{", 0, j)
        if i < 0:
            pieces.append(s[:j + 1])
            s = s[j + 1:]
            continue
        val = s[i:j + 1]
        fn = _LABELS.get(val)
        if fn is None and val.startswith("{/"):
            fn = _metadata(val[2:-1])
        if fn is None:
            pieces.append(s[:j + 1])
        else:
            if i:
                pieces.append(s[:i])
            pieces.append(fn)
        s = s[j + 1:]
    if s:
        pieces.append(s)
    # Merge neighbouring literals.
    out: list[Union[str, Callable[..., str]]] = []
    for p in pieces:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return out


def unanswered(pieces):
    """Compiled ``pieces`` for a line written before any answer is known
    (dnstap's ``extra``): the answer's placeholders write ``-``, as
    CoreDNS's replacer does without a response."""
    answer = {_LABELS[k] for k in ("{rcode}", "{rsize}", "{duration}",
                                   "{>rflags}")}
    return [EMPTY if p in answer else p for p in pieces]


def render(pieces, req, outcome, now):
    """The text of compiled ``pieces`` (other plugins with placeholders,
    such as dnstap's ``extra``, use this)."""
    return "".join([p if p.__class__ is str else p(req, outcome, now)
                    for p in pieces])


class Format:
    """A compiled format: one %-template with a function per placeholder,
    so a line is one string formatting operation."""

    __slots__ = ("text", "pieces", "template", "fns")

    def __init__(self, text):
        self.text = text
        self.pieces = compile_format(text)
        parts = []
        fns = []
        for p in self.pieces:
            if p.__class__ is str:
                parts.append(p.replace("%", "%%"))
            else:
                parts.append("%s")
                fns.append(p)
        self.template = "".join(parts)
        self.fns = tuple(fns)

    def render(self, req, outcome, now):
        return self.template % tuple([f(req, outcome, now)
                                      for f in self.fns])


# -- the plugin ---------------------------------------------------------------

class Rule:
    __slots__ = ("scope", "format", "compiled", "classes", "all")

    def __init__(self, scope, fmt, classes=None):
        self.scope = scope
        self.format = fmt
        self.compiled = Format(fmt)
        self.classes = classes if classes is not None else {"all"}
        self.all = "all" in self.classes


class Log(Plugin):
    """One plugin per block holds every rule of its ``log`` lines; the
    first rule whose name scope contains the query decides."""

    name = NAME
    once = False
    passes_answers = True

    def __init__(self, rules):
        self.rules = rules

    def _rule(self, qname):
        for rule in self.rules:
            if rule.scope == "." or match((rule.scope,), qname):
                return rule
        return None

    def serve(self, req):
        rule = self._rule(req.qname)
        if rule is None:
            return self.next.serve(req)
        result = self.next.serve(req)
        if is_deferred(result):
            return result.addCallbacks(self._write, self._failed,
                                       callbackArgs=(req, rule),
                                       errbackArgs=(req, rule))
        return self._write(result, req, rule)

    def _write(self, resp, req, rule):
        self._emit(Outcome(req, resp), req, rule)
        return resp

    def _failed(self, failure, req, rule):
        # An error from the chain: CoreDNS logs the SERVFAIL it implies.
        self._emit(Outcome(req, None), req, rule)
        return failure

    def _emit(self, outcome, req, rule):
        md = req.metadata
        if md is not None:
            # Published only where the metadata plugin collects (CoreDNS's
            # SetValueFunc); computed only when read.
            md["log/type"] = outcome.type
            md["log/class"] = outcome.cls
        if rule.all or outcome.cls() in rule.classes:
            now = (req.block.server.clock() if req.block is not None
                   else req.start)
            clog.info("", rule.compiled.render(req, outcome, now))


def _scope(name):
    return (name if name.endswith(".") else name + ".").lower()


def _classes(c):
    """``class CLASS...``: the response classes to log."""
    return [c.choice(a, CLASSES, "invalid Class: %s") for a in c.between(1)]


def setup(d, block):
    rules = []
    args = list(d.args)
    if not args:
        rules.append([".", DEFAULT])
    elif len(args) == 1:
        rules.append([_scope(args[0]), DEFAULT])
    else:
        fmt = DEFAULT
        if "{" in args[-1]:
            fmt = args.pop().replace("{common}", COMMON).replace(
                "{combined}", COMBINED)
        for a in args:
            rules.append([_scope(a), fmt])
    classes = set()
    d.read_options({"class": lambda c: classes.update(_classes(c))})
    if not classes:
        classes = {"all"}
    new = [Rule(scope, fmt, classes) for scope, fmt in rules]
    existing = block.plugin(NAME)
    if existing is not None:
        # Every log line of a block feeds one plugin, as in CoreDNS.
        existing.rules.extend(new)
        return None
    return Log(new)
