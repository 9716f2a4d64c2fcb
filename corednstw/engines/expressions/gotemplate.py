"""A subset of Go's text/template, compiled once to a Python callable.

The *template* plugin writes its records with Go templates:
``"{{ .Name }} 60 IN A {{ .Group.a }}"``.  ``compile(text)`` parses such a
text at setup (``ExpressionError`` for an unclosed action, an unknown
function, a stray ``{{ end }}``...) and returns a ``Template`` whose
``render(data)`` gives the text for one query.  Failures that Go only sees
while executing (a missing field, an index out of range, ``parseInt`` of
something that is no number) raise ``EvalError`` there too.

Supported: text and actions with the ``{{-``/``-}}`` trim markers,
comments, ``.`` and field chains (``.Group.a``, ``.Var.x``), method calls
with arguments (``.Meta "key"``), string, raw string, character, number,
``true``/``false``/``nil`` literals, parenthesized pipelines, pipelines
with ``|``, ``if``/``else if``/``else``/``end``, ``with`` and ``range``
(with ``else``, ``break`` and ``continue``), and the functions ``and or
not len index slice print printf println eq ne lt le gt ge html urlquery``
plus CoreDNS's ``parseInt``.  Variables (``$x``), ``define``,
``template`` and ``block`` are refused.

Data objects expose their Go field names through ``GO_FIELDS`` (Go name ->
attribute) and methods through ``GO_METHODS``; dicts behave as Go maps
(``GoMap`` for maps whose missing keys index to a zero value).

Why one module of this size: it is a compiler for one language (lexer,
parser, functions, evaluator); its parts share the node types and error
positions, and the subset it supports reads best in one place.
"""

import html
import re
from urllib.parse import quote_plus

from corednstw.core import goparse
from corednstw.engines.expressions.values import (
    NO_VALUE,
    EvalError,
    ExpressionError,
    go_text,
    is_number,
)


class GoMap(dict):
    """A Go map: ``zero`` is what ``index`` gives for a missing key
    (field syntax prints ``<no value>``, as Go's does)."""

    __slots__ = ("zero",)

    def __init__(self, items=(), zero=None):
        super().__init__(items)
        self.zero = zero


class Template:
    """A compiled template; ``render(data)`` -> text."""

    __slots__ = ("source", "render", "constant")

    def __init__(self, source, render, constant=None):
        self.source = source
        self.render = render
        #: The text when the template has no action (None otherwise).
        self.constant = constant


def compile(text, funcs=None):
    """Parse ``text``; ``funcs`` adds functions (name -> callable taking
    the evaluated arguments).  ExpressionError when malformed."""
    table = dict(_FUNCS)
    if funcs:
        table.update(funcs)
    tokens = _split(text)
    parser = _Parser(text, tokens, table)
    body = parser.parse()
    if all(isinstance(n, str) for n in body):
        const = "".join(body)
        return Template(text, lambda data: const, const)
    fn = _list(body)

    def render(data):
        out = []
        try:
            fn(data, out)
        except _Flow as e:
            raise EvalError(
                "{{break}} or {{continue}} outside {{range}}") from e
        return "".join(out)
    return Template(text, render)


# -- splitting text and actions ----------------------------------------------

_SPACE = " \t\r\n"


def _split(text):
    """A list of text strings and (action source, offset) tuples, with the
    trim markers applied to the text around them."""
    out = []
    i = 0
    n = len(text)
    while True:
        j = text.find("{{", i)
        if j < 0:
            out.append(text[i:])
            break
        chunk = text[i:j]
        start = j + 2
        if text.startswith("-", start) and start + 1 < n and \
                text[start + 1] in _SPACE:
            chunk = chunk.rstrip(_SPACE)
            start += 2
        out.append(chunk)
        end, inner_end = _action_end(text, start)
        inner = text[start:inner_end]
        if end > inner_end + 2:   # right trim marker
            k = end
            while k < n and text[k] in _SPACE:
                k += 1
            end = k
        out.append((inner, start))
        i = end
    return [x for x in out if x != ""]


def _action_end(text, start):
    """(offset after the action, offset of its closing delimiter).  Quotes
    are skipped so ``"}}"`` inside a string does not close it."""
    i = start
    n = len(text)
    if text.startswith("/*", _skip_space(text, i)):
        c = text.find("*/", i)
        if c < 0:
            raise _error(text, start, "unclosed comment")
        i = c + 2
    while i < n:
        c = text[i]
        if c in "\"'`":
            close = text.find(c, i + 1) if c == "`" else _quote_end(
                text, i)
            if close < 0:
                raise _error(text, i, "unterminated quoted string")
            i = close + 1
            continue
        if text.startswith(" -}}", i) or text.startswith("\t-}}", i) or \
                text.startswith("\n-}}", i):
            return i + 4, i
        if text.startswith("}}", i):
            return i + 2, i
        i += 1
    raise _error(text, start, "unclosed action")


def _skip_space(text, i):
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _quote_end(text, i):
    q = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == q:
            return j
        if text[j] == "\n":
            return -1
        j += 1
    return -1


def _error(text, pos, msg):
    line = text.count("\n", 0, pos) + 1
    return ExpressionError("template: %d: %s" % (line, msg))


# -- tokens inside an action ------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>/\*.*?\*/)
  | (?P<field>(\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<var>\$[A-Za-z0-9_]*)
  | (?P<str>"(\\.|[^"\\])*")
  | (?P<raw>`[^`]*`)
  | (?P<char>'(\\.|[^'\\])+')
  | (?P<num>[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|
              (\d[\d_]*)?\.?\d[\d_]*([eE][+-]?\d+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<dot>\.)
  | (?P<decl>:=|=)
  | (?P<punct>[()|,])
""", re.VERBOSE | re.DOTALL)


def _tokens(src, text, offset):
    out = []
    i = 0
    while i < len(src):
        m = _TOKEN.match(src, i)
        if m is None:
            raise _error(text, offset + i,
                         "unexpected %r in command" % src[i])
        kind = m.lastgroup
        if kind == "num" and m.group(0) in ("+", "-"):
            raise _error(text, offset + i, "bad number syntax")
        if kind not in ("space", "comment"):
            out.append((kind, m.group(0)))
        i = m.end()
    return out


_GO_ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b",
           "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"'}


def _unquote(tok, text, pos):
    body = tok[1:-1]
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _GO_ESC:
            out.append(_GO_ESC[e])
            i += 2
            continue
        size = {"x": 2, "u": 4, "U": 8}.get(e)
        if size:
            digits = body[i + 2:i + 2 + size]
            if re.fullmatch("[0-9a-fA-F]{%d}" % size, digits):
                out.append(chr(int(digits, 16)))
                i += 2 + size
                continue
        if re.fullmatch("[0-7]{3}", body[i + 1:i + 4]):
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
            continue
        raise _error(text, pos, "invalid syntax: %s" % tok)
    return "".join(out)


# -- parsing ------------------------------------------------------------------

class _Flow(Exception):
    def __init__(self, kind):
        self.kind = kind


class _Parser:
    def __init__(self, text, items, funcs):
        self.text = text
        self.items = items
        self.funcs = funcs
        self.i = 0
        self.loops = 0

    def parse(self):
        body, end = self.list(())
        if end is not None:
            raise _error(self.text, end[2], "unexpected {{%s}}" % end[0])
        return body

    def list(self, stops):
        """Nodes until one of the keywords ``stops`` (returned as
        (keyword, tokens, offset)), or the end of the text."""
        nodes = []
        while self.i < len(self.items):
            item = self.items[self.i]
            self.i += 1
            if isinstance(item, str):
                nodes.append(item)
                continue
            src, off = item
            toks = _tokens(src, self.text, off)
            if not toks:
                if src.strip().startswith("/*"):
                    continue
                raise _error(self.text, off, "missing value for command")
            head = toks[0]
            if head[0] == "ident" and head[1] in ("end", "else"):
                if head[1] not in stops:
                    raise _error(self.text, off,
                                 "unexpected {{%s}}" % head[1])
                return nodes, (head[1], toks[1:], off)
            nodes.append(self.action(toks, off))
        if stops:
            raise _error(self.text, len(self.text), "unexpected EOF")
        return nodes, None

    def action(self, toks, off):
        head = toks[0]
        if head[0] == "ident":
            word = head[1]
            if word in ("if", "with", "range"):
                return self.control(word, toks[1:], off)
            if word in ("break", "continue"):
                if not self.loops:
                    raise _error(self.text, off, "{{%s}} outside {{range}}"
                                 % word)
                if len(toks) > 1:
                    raise _error(self.text, off, "unexpected %s in {{%s}}"
                                 % (toks[1][1], word))
                return _flow(word)
            if word in ("define", "template", "block"):
                raise _error(self.text, off, "{{%s}} is not supported"
                             % word)
        pipe = self.pipeline(toks, off)
        return lambda data, out: out.append(go_text(pipe(data)))

    def control(self, word, toks, off):
        if not toks:
            raise _error(self.text, off, "missing value for %s" % word)
        cond = self.pipeline(toks, off)
        if word == "range":
            self.loops += 1
        body, end = self.list(("end", "else"))
        if word == "range":
            self.loops -= 1
        other = []
        if end[0] == "else":
            rest = end[1]
            if rest and rest[0] == ("ident", word) and word != "range":
                # {{else if ...}} / {{else with ...}}: a nested control
                # that consumes the final {{end}}.
                other = [self.control(word, rest[1:], end[2])]
            else:
                if rest:
                    raise _error(self.text, end[2],
                                 "unexpected tokens after else")
                other, end = self.list(("end",))
        elif end[1]:
            raise _error(self.text, end[2], "unexpected tokens after end")
        return _CONTROL[word](cond, _list(body), _list(other))

    def pipeline(self, toks, off):
        """A pipeline: commands separated by ``|``; each command's value
        is passed as the last argument of the next."""
        for kind, value in toks:
            if kind == "var":
                raise _error(self.text, off,
                             "template variables are not supported")
            if kind == "decl":
                raise _error(self.text, off,
                             "template variables are not supported")
        cmds = []
        current = []
        depth = 0
        for t in toks:
            if t == ("punct", "|") and depth == 0:
                cmds.append(current)
                current = []
                continue
            if t == ("punct", "("):
                depth += 1
            elif t == ("punct", ")"):
                depth -= 1
                if depth < 0:
                    raise _error(self.text, off, "unexpected right paren")
            current.append(t)
        if depth:
            raise _error(self.text, off, "unclosed left paren")
        cmds.append(current)
        if any(not c for c in cmds):
            raise _error(self.text, off, "missing command")
        fns = [self.command(c, off, i > 0) for i, c in enumerate(cmds)]
        if len(fns) == 1:
            return fns[0]

        def run(data):
            value = fns[0](data)
            for f in fns[1:]:
                value = f(data, value)
            return value
        return run

    def command(self, toks, off, piped):
        """A command: a function call, a method/field with arguments, or
        one operand.  ``piped`` commands take the previous value last."""
        operands = self.operands(toks, off)
        head_kind, head = operands[0]
        args = [fn[1] if kind == "field" else fn
                for kind, fn in operands[1:]]
        if head_kind == "func":
            return _call(head[0], head[1], args, piped)
        if head_kind == "field" and (args or piped):
            return _method(head, args, piped)
        if args or piped:
            raise _error(self.text, off, "can't give argument to non-function")
        fn = head[1] if head_kind == "field" else head
        return fn if not piped else (lambda data, prev: fn(data))

    def operands(self, toks, off):
        out = []
        i = 0
        while i < len(toks):
            kind, value = toks[i]
            if kind == "punct" and value == "(":
                depth, j = 1, i + 1
                while depth:
                    if toks[j] == ("punct", "("):
                        depth += 1
                    elif toks[j] == ("punct", ")"):
                        depth -= 1
                    j += 1
                inner = self.pipeline(toks[i + 1:j - 1], off)
                i = j
                if i < len(toks) and toks[i][0] == "field":
                    inner = _chain(inner, toks[i][1][1:].split("."))
                    i += 1
                out.append(("value", inner))
                continue
            i += 1
            if kind == "field":
                names = value[1:].split(".")
                out.append(("field", (names, _chain(_dot, names))))
            elif kind == "dot":
                out.append(("value", _dot))
            elif kind == "str":
                out.append(("value", _constant(
                    _unquote(value, self.text, off))))
            elif kind == "raw":
                out.append(("value", _constant(value[1:-1])))
            elif kind == "char":
                ch = _unquote('"' + value[1:-1] + '"', self.text, off)
                if len(ch) != 1:
                    raise _error(self.text, off, "malformed character "
                                 "constant: %s" % value)
                out.append(("value", _constant(ord(ch))))
            elif kind == "num":
                out.append(("value", _constant(self.number(value, off))))
            elif kind == "ident":
                if value in ("true", "false"):
                    out.append(("value", _constant(value == "true")))
                elif value == "nil":
                    if not out:
                        raise _error(self.text, off, "nil is not a command")
                    out.append(("value", _constant(None)))
                elif value in self.funcs:
                    if out:
                        out.append(("value", _call(
                            value, self.funcs[value], [], False)))
                    else:
                        out.append(("func", (value, self.funcs[value])))
                elif value in _KEYWORDS:
                    raise _error(self.text, off, "unexpected <%s> in "
                                 "command" % value)
                else:
                    raise _error(self.text, off, 'function "%s" not '
                                 'defined' % value)
            else:
                raise _error(self.text, off, "unexpected %s in command"
                             % value)
        return out

    def number(self, value, off):
        text = value.replace("_", "")
        try:
            if re.match(r"[+-]?0[xXoObB]", text):
                return int(text, 0)
            if re.fullmatch(r"[+-]?\d+", text):
                if re.match(r"[+-]?0\d", text):
                    return int(text, 8)
                return int(text)
            return float(text)
        except ValueError as e:
            raise _error(self.text, off,
                         "bad number syntax: %s" % value) from e


_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template",
             "block", "break", "continue"}


def _dot(data):
    return data


def _constant(v):
    return lambda data: v


def _flow(kind):
    def f(data, out):
        raise _Flow(kind)
    return f


def _list(nodes):
    """One callable ``f(data, out)`` for a list of nodes."""
    parts = []
    for n in nodes:
        if isinstance(n, str):
            parts.append(_text(n))
        else:
            parts.append(n)
    if len(parts) == 1:
        return parts[0]

    def run(data, out):
        for p in parts:
            p(data, out)
    return run


def _text(s):
    return lambda data, out: out.append(s)


# -- evaluation ---------------------------------------------------------------

def truth(v):
    """Go's template truth: false, 0, nil and empty things are false."""
    if v is None or v is NO_VALUE:
        return False
    if isinstance(v, (bool, int, float, str, list, tuple, dict)):
        return bool(v)
    return True


def _type_name(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, (list, tuple)):
        return "[]string"
    if v is None or v is NO_VALUE:
        return "nil"
    return "*" + type(v).__name__


def field(v, name):
    """``v.name``: a map key, or a field of a data object."""
    if isinstance(v, dict):
        return v.get(name, NO_VALUE)
    names = getattr(type(v), "GO_FIELDS", None)
    if names is not None:
        attr = names.get(name)
        if attr is not None:
            return getattr(v, attr)
        if name in getattr(type(v), "GO_METHODS", ()):
            return method(v, name, [])
    if v is None or v is NO_VALUE:
        raise EvalError("nil pointer evaluating %s.%s"
                        % (_type_name(v), name))
    raise EvalError("can't evaluate field %s in type %s"
                    % (name, _type_name(v)))


def method(v, name, args):
    names = getattr(type(v), "GO_METHODS", None) or {}
    attr = names.get(name)
    if attr is None:
        if isinstance(v, dict) or name in getattr(type(v), "GO_FIELDS", {}):
            raise EvalError("%s is not a method but has arguments" % name)
        raise EvalError("can't evaluate field %s in type %s"
                        % (name, _type_name(v)))
    try:
        return getattr(v, attr)(*args)
    except TypeError as e:
        raise EvalError("wrong number of args for %s: got %d"
                        % (name, len(args))) from e


def _chain(base, names):
    if len(names) == 1:
        name = names[0]
        return lambda data: field(base(data), name)

    def run(data):
        v = base(data)
        for name in names:
            v = field(v, name)
        return v
    return run


def _method(head, args, piped):
    names, _ = head
    base = _chain(_dot, names[:-1]) if len(names) > 1 else _dot
    last = names[-1]

    def run(data, *prev):
        vals = [a(data) for a in args] + list(prev)
        return method(base(data), last, vals)
    return run


def _call(name, fn, args, piped):
    if name in ("and", "or"):
        return _logic(name, args, piped)

    def run(data, *prev):
        vals = [a(data) for a in args] + list(prev)
        try:
            return fn(*vals)
        except EvalError as e:
            raise EvalError("error calling %s: %s" % (name, e)) from e
        except TypeError as e:
            raise EvalError("wrong number of args for %s: got %d"
                            % (name, len(vals))) from e
    return run


def _logic(name, args, piped):
    want = name == "or"

    def run(data, *prev):
        fns = list(args) + [(lambda d, v=v: v) for v in prev]
        if not fns:
            raise EvalError("wrong number of args for %s: want at least 1 "
                            "got 0" % name)
        v = None
        for f in fns:
            v = f(data)
            if truth(v) == want:
                return v
        return v
    return run


def _if(cond, body, other):
    def run(data, out):
        if truth(cond(data)):
            body(data, out)
        else:
            other(data, out)
    return run


def _with(cond, body, other):
    def run(data, out):
        v = cond(data)
        if truth(v):
            body(v, out)
        else:
            other(data, out)
    return run


def _range(cond, body, other):
    def run(data, out):
        v = cond(data)
        if v is None or v is NO_VALUE:
            items = []
        elif isinstance(v, dict):
            items = [v[k] for k in sorted(v)]
        elif isinstance(v, (list, tuple)):
            items = v
        elif isinstance(v, int) and not isinstance(v, bool):
            items = list(range(v))
        else:
            raise EvalError("range can't iterate over %s" % go_text(v))
        if not items:
            other(data, out)
            return
        for item in items:
            try:
                body(item, out)
            except _Flow as f:
                if f.kind == "break":
                    break
    return run


_CONTROL = {"if": _if, "with": _with, "range": _range}


# -- functions ----------------------------------------------------------------

def _not(v):
    return not truth(v)


def _len(v):
    if isinstance(v, (str, list, tuple, dict)):
        return len(v)
    raise EvalError("len of type %s" % _type_name(v))


def _index(v, *keys):
    for k in keys:
        if isinstance(v, (list, tuple, str)):
            if not isinstance(k, int) or isinstance(k, bool):
                raise EvalError("cannot index slice/array with type %s"
                                % _type_name(k))
            if not 0 <= k < len(v):
                raise EvalError("index out of range: %d" % k)
            v = v[k] if not isinstance(v, str) else ord(v[k])
        elif isinstance(v, dict):
            if not isinstance(k, str):
                raise EvalError("value has type %s; should be string"
                                % _type_name(k))
            v = v.get(k, getattr(v, "zero", None))
        elif v is None or v is NO_VALUE:
            raise EvalError("index of untyped nil")
        else:
            raise EvalError("can't index item of type %s" % _type_name(v))
    return v


def _slice(v, *idx):
    if not isinstance(v, (str, list, tuple)):
        raise EvalError("can't slice item of type %s" % _type_name(v))
    if len(idx) > 2:
        raise EvalError("too many slice indexes: %d" % len(idx))
    lo = idx[0] if idx else 0
    hi = idx[1] if len(idx) > 1 else len(v)
    if not (0 <= lo <= hi <= len(v)):
        raise EvalError("index out of range: %d" % hi)
    return v[lo:hi]


def _sprint(*args):
    out = []
    for i, a in enumerate(args):
        if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_text(a))
    return "".join(out)


def _sprintln(*args):
    return " ".join(go_text(a) for a in args) + "\n"


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(\.(\d+|\*)?)?([a-zA-Z%])")


def _sprintf(fmt, *args):
    if not isinstance(fmt, str):
        raise EvalError("wrong type for value; expected string; got %s"
                        % _type_name(fmt))
    args = list(args)
    out = []
    pos = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, _, prec, verb = m.groups()
        if verb == "%":
            out.append("%")
            continue
        if not args:
            out.append("%%!%s(MISSING)" % verb)
            continue
        out.append(_format(args.pop(0), flags, width, prec, verb))
    out.append(fmt[pos:])
    if args:
        out.append("%!(EXTRA " + ", ".join(
            "%s=%s" % (_type_name(a), go_text(a)) for a in args) + ")")
    return "".join(out)


def _format(v, flags, width, prec, verb):
    spec = "%" + (flags or "") + (width or "") + (
        "." + prec if prec is not None else "")
    if verb in "vs":
        text = go_text(v)
        if prec is not None:
            text = text[:int(prec)]
        return ("%" + (flags or "").replace("0", "") + (width or "") +
                "s") % text
    if verb == "q" and isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if verb == "t" and isinstance(v, bool):
        return go_text(v)
    if verb in "dxXobc" and isinstance(v, int) and not isinstance(v, bool):
        if verb == "c":
            return chr(v)
        if verb == "b":
            return format(v, "b")
        return (spec + verb) % v
    if verb in "xX" and isinstance(v, str):
        return v.encode().hex() if verb == "x" else v.encode().hex().upper()
    if verb in "feEgG" and is_number(v):
        if prec is None and verb in "fe":
            spec += ".6"
        return (spec + verb) % v
    return "%%!%s(%s=%s)" % (verb, _type_name(v), go_text(v))


def _basic(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise EvalError("invalid type for comparison")


def _eq(a, *others):
    if not others:
        raise EvalError("missing argument for comparison")
    a = _basic(a)
    for b in others:
        b = _basic(b)
        if is_number(a) and is_number(b):
            if isinstance(a, float) != isinstance(b, float):
                raise EvalError("incompatible types for comparison")
            if a == b:
                return True
        elif type(a) is not type(b):
            if a is None or b is None:
                if a is b:
                    return True
                continue
            raise EvalError("incompatible types for comparison")
        elif a == b:
            return True
    return False


def _ne(a, b):
    return not _eq(a, b)


def _lt(a, b):
    a, b = _basic(a), _basic(b)
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        raise EvalError("invalid type for comparison")
    if is_number(a) and is_number(b):
        if isinstance(a, float) != isinstance(b, float):
            raise EvalError("incompatible types for comparison")
        return a < b
    if isinstance(a, str) and isinstance(b, str):
        return a < b
    raise EvalError("incompatible types for comparison")


def _le(a, b):
    return _lt(a, b) or _eq(a, b)


def _gt(a, b):
    return not _le(a, b)


def _ge(a, b):
    return not _lt(a, b)


def _html(*args):
    return html.escape(_sprint(*args)).replace("&#x27;", "&#39;")


def _urlquery(*args):
    return quote_plus(_sprint(*args))


def parse_uint(s, base, bits):
    """Go's ``strconv.ParseUint`` (CoreDNS's ``parseInt``)."""
    if not isinstance(s, str):
        raise EvalError("wrong type for value; expected string; got %s"
                        % _type_name(s))
    for x in (base, bits):
        if not isinstance(x, int) or isinstance(x, bool):
            raise EvalError("wrong type for value; expected int; got %s"
                            % _type_name(x))
    syntax = EvalError(goparse.num_error("ParseUint", s, "invalid syntax"))
    text = s
    if base == 0:
        base = 10
        low = text.lower()
        if low.startswith(("0x", "0o", "0b")) and len(text) > 2:
            base = {"x": 16, "o": 8, "b": 2}[low[1]]
            text = text[2:]
        elif text.startswith("0") and len(text) > 1:
            base, text = 8, text[1:]
        if "_" in text:
            if text.startswith("_") or text.endswith("_") or "__" in text:
                raise syntax
            text = text.replace("_", "")
    elif not 2 <= base <= 36:
        raise EvalError(goparse.num_error(
            "ParseUint", s, "invalid base %d" % base))
    if bits == 0:
        bits = 64
    if not 0 < bits <= 64:
        raise EvalError(goparse.num_error(
            "ParseUint", s, "invalid bit size %d" % bits))
    if not text or not all(c.isascii() and c.isalnum() for c in text):
        raise syntax
    try:
        value = int(text, base)
    except ValueError as e:
        raise syntax from e
    if value >= 1 << bits:
        raise EvalError(goparse.num_error(
            "ParseUint", s, "value out of range"))
    return value


_FUNCS = {
    "and": None, "or": None, "not": _not, "len": _len, "index": _index,
    "slice": _slice, "print": _sprint, "printf": _sprintf,
    "println": _sprintln, "eq": _eq, "ne": _ne, "lt": _lt, "le": _le,
    "gt": _gt, "ge": _ge, "html": _html, "urlquery": _urlquery,
}


#: The functions CoreDNS's template plugin adds to Go's.
COREDNS_FUNCS = {"parseInt": parse_uint}
