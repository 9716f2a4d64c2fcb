"""A subset of the expr language (expr-lang.org), compiled to closures.

CoreDNS's *view* and *template* plugins filter with expr programs.  They
are compiled here once, at setup, with expr's static checks: an unknown
name, a call with the wrong arguments or operands of the wrong type is an
``ExpressionError`` then, never a surprise for a query.  What cannot be
known before running (a bad IP address given to ``incidr``, ``int('x')``)
raises ``EvalError`` while running, as expr's runtime errors do.

Compiling gives a ``Program``; ``program.run(scope)`` evaluates it.  A
``Scope`` carries what the environment's functions read: the request,
the regex groups of a template, the variables set so far.

The subset: literals (integers in any base, floats, strings with both
quotes and backticks, true, false, nil, arrays, maps), the operators
``not ! - + * / % ** ^ + - .. == != < > <= >= in not-in matches contains
startsWith endsWith and && or || ?: ?? |``, member access ``a.b``,
``a[i]``, and a set of expr's builtins (``BUILTINS``), including the
predicate functions (``any(list, # > 1)``).  ``let``, ``if``/``else``,
slices, ``$env`` and the other builtins are refused at compile time.

Why one module of this size: it is a compiler for one language (lexer,
parser, static type checks, the builtin and request functions, code
generation to closures); the checks and the generator walk the same node
types, and the supported subset reads best in one place.
"""

import ipaddress
import math
import re

from corednstw.core import goparse
from corednstw.engines.expressions import goregexp
from corednstw.engines.expressions.values import (
    EvalError,
    ExpressionError,
    equal,
    go_text,
    is_number,
)

BOOL, INT, FLOAT, STRING = "bool", "int", "float", "string"
ARRAY, MAP, NIL, ANY = "array", "map", "nil", "unknown"

#: Every builtin name of expr (reserved: not usable as a variable name).
EXPR_BUILTINS = frozenset("""
all none any one filter map find findIndex findLast findLastIndex count
sum groupBy sortBy reduce len type abs ceil floor round int float string
trim trimPrefix trimSuffix upper lower split splitAfter replace repeat
join indexOf lastIndexOf hasPrefix hasSuffix max min mean median toJSON
fromJSON toBase64 fromBase64 now duration date timezone first last get
take keys values toPairs fromPairs reverse uniq concat flatten sort bitnot
bitand bitor bitxor bitnand bitshl bitshr bitushr
""".split())

#: Words of the language itself.
KEYWORDS = frozenset(("true", "false", "nil", "not", "and", "or", "in",
                      "matches", "contains", "startsWith", "endsWith",
                      "let", "if", "else"))

_WORD_OPS = {"not", "and", "or", "in", "matches", "contains", "startsWith",
             "endsWith", "let", "if", "else"}

_BINARY = {
    "|": 0, "or": 10, "||": 10, "and": 15, "&&": 15,
    "==": 20, "!=": 20, "<": 20, ">": 20, ">=": 20, "<=": 20, "in": 20,
    "matches": 20, "contains": 20, "startsWith": 20, "endsWith": 20,
    "..": 25, "+": 30, "-": 30, "*": 60, "/": 60, "%": 60,
    "**": 100, "^": 100, "??": 500,
}
_RIGHT = {"**", "^"}
_UNARY = {"not": 50, "!": 50, "-": 90, "+": 90}
_COMPARISON = {"<", ">", "<=", ">="}
_NEGATABLE = {"contains", "matches", "startsWith", "endsWith", "in"}
_PREDICATES = {"all", "none", "any", "one", "filter", "map", "count"}


# -- the environment ----------------------------------------------------------

class Function:
    """A function of the environment: ``impl(scope, *args)``.

    ``params`` are the argument types (ANY accepts anything), ``result``
    the type it returns.
    """

    __slots__ = ("name", "params", "result", "impl")

    def __init__(self, name, params, result, impl):
        self.name = name
        self.params = tuple(params)
        self.result = result
        self.impl = impl


class Variable:
    """A value of the environment read from ``scope.vars[name]``."""

    __slots__ = ("name", "type")

    def __init__(self, name, type_):
        self.name = name
        self.type = type_


class Scope:
    """What one evaluation reads: ``req`` (a core Request), ``groups``
    (name or index text -> matched text), ``vars`` (name -> value)."""

    __slots__ = ("req", "groups", "vars", "item")

    def __init__(self, req=None, groups=None, vars=None):
        self.req = req
        self.groups = groups if groups is not None else {}
        self.vars = vars if vars is not None else {}
        self.item = None


class Program:
    """A compiled expression: ``run(scope)`` gives its value."""

    __slots__ = ("source", "type", "run")

    def __init__(self, source, type_, run):
        self.source = source
        self.type = type_
        self.run = run

    def truth(self, scope):
        """True only for a boolean true result (view's and template's
        rule: anything else, an error too, is false)."""
        try:
            return self.run(scope) is True
        except EvalError:
            return False


def compile(source, env):
    """Compile ``source`` against ``env`` (name -> Function or Variable);
    ExpressionError when it is not a valid program of the subset."""
    tokens = _lex(source)
    parser = _Parser(source, tokens)
    node = parser.parse()
    fn, type_ = _Compiler(source, env).visit(node)
    return Program(source, type_, fn)


# -- lexing -------------------------------------------------------------------

class _Tok:
    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind, value, pos):
        self.kind = kind    # num, str, ident, op, bracket, eof
        self.value = value
        self.pos = pos

    def is_(self, kind, *values):
        return self.kind == kind and (not values or self.value in values)

    def __repr__(self):
        if self.kind == "eof":
            return "EOF"
        if self.kind == "str":
            return "String(%r)" % self.value
        return "%s(%s)" % ({"num": "Number", "ident": "Identifier",
                            "op": "Operator", "bracket": "Bracket"}
                           [self.kind], self.value)


_NUM = re.compile(r"0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|"
                  r"\d[\d_]*(\.\d[\d_]*)?([eE][+-]?\d+)?|"
                  r"\.\d[\d_]*([eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_OPS2 = ("==", "!=", "<=", ">=", "&&", "||", "**", "..", "??", "?.", "::")
_ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
        "v": "\v", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


def _error(source, pos, msg):
    line = source.count("\n", 0, pos) + 1
    col = pos - (source.rfind("\n", 0, pos) + 1) + 1
    return ExpressionError("%s (%d:%d)" % (msg, line, col))


def _lex(source):
    out = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c.isspace():
            i += 1
        elif source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            if j < 0:
                raise _error(source, i, "unclosed comment")
            i = j + 2
        elif c in "'\"":
            value, i2 = _string(source, i)
            out.append(_Tok("str", value, i))
            i = i2
        elif c == "`":
            j = source.find("`", i + 1)
            if j < 0:
                raise _error(source, i, "literal not terminated")
            out.append(_Tok("str", source[i + 1:j], i))
            i = j + 1
        elif c.isdigit() or (c == "." and _NUM.match(source, i)):
            m = _NUM.match(source, i)
            out.append(_Tok("num", m.group(0), i))
            i = m.end()
        elif c.isalpha() or c in "_$":
            m = _IDENT.match(source, i)
            word = m.group(0)
            kind = "op" if word in _WORD_OPS else "ident"
            out.append(_Tok(kind, word, i))
            i = m.end()
        elif c in "([{":
            out.append(_Tok("bracket", c, i))
            i += 1
        elif c in ")]}":
            out.append(_Tok("bracket", c, i))
            i += 1
        else:
            two = source[i:i + 2]
            if two in _OPS2:
                out.append(_Tok("op", two, i))
                i += 2
            elif c in "+-*/%^,;.:?!<>=|#":
                out.append(_Tok("op", c, i))
                i += 1
            else:
                raise _error(source, i, "unrecognized character: %r" % c)
    out.append(_Tok("eof", "", n))
    return out


def _string(source, i):
    quote = source[i]
    j = i + 1
    buf = []
    n = len(source)
    while j < n:
        c = source[j]
        if c == quote:
            return "".join(buf), j + 1
        if c == "\\":
            if j + 1 >= n:
                break
            e = source[j + 1]
            if e in _ESC:
                buf.append(_ESC[e])
                j += 2
                continue
            size = {"x": 2, "u": 4, "U": 8}.get(e)
            if size and re.match("[0-9a-fA-F]{%d}" % size,
                                 source[j + 2:j + 2 + size]):
                buf.append(chr(int(source[j + 2:j + 2 + size], 16)))
                j += 2 + size
                continue
            raise _error(source, j, "invalid char escape")
        if c == "\n":
            break
        buf.append(c)
        j += 1
    raise _error(source, i, "literal not terminated")


# -- parsing ------------------------------------------------------------------
#
# Nodes are tuples: (kind, pos, ...).

class _Parser:
    def __init__(self, source, tokens):
        self.source = source
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    @property
    def cur(self):
        return self.tokens[self.i]

    def next(self):
        self.i += 1

    def error(self, msg, tok=None):
        tok = tok or self.cur
        return _error(self.source, tok.pos, msg)

    def unexpected(self, tok=None):
        tok = tok or self.cur
        if tok.kind == "eof":
            return self.error("unexpected end of expression", tok)
        return self.error("unexpected token %r" % tok, tok)

    def expect(self, kind, value):
        if not self.cur.is_(kind, value):
            raise self.unexpected()
        self.next()

    def parse(self):
        if self.cur.kind == "eof":
            raise self.error("unexpected end of expression")
        node = self.expression(0)
        if self.cur.is_("op", ";"):
            raise self.error("sequences with ';' are not supported")
        if self.cur.kind != "eof":
            raise self.unexpected()
        return node

    def expression(self, prec):
        tok = self.cur
        if tok.is_("op", "let", "if", "else"):
            raise self.error("%r is not supported" % tok.value)
        left = self.primary()
        while True:
            tok = self.cur
            if tok.kind != "op":
                break
            negate = False
            if tok.value == "not":
                nxt = self.tokens[self.i + 1]
                if not (nxt.kind == "op" and nxt.value in _NEGATABLE):
                    raise self.unexpected(nxt)
                if _BINARY[nxt.value] < prec:
                    break
                negate = True
                self.next()
                tok = self.cur
            op = tok.value
            p = _BINARY.get(op)
            if p is None or p < prec:
                break
            self.next()
            if op == "|":
                name = self.cur
                if name.kind != "ident":
                    raise self.unexpected()
                self.next()
                left = self.call(name, [left])
                continue
            if op in _COMPARISON:
                left = self.comparison(left, tok, p)
                continue
            right = self.expression(p if op in _RIGHT else p + 1)
            left = ("binary", tok.pos, op, left, right)
            if negate:
                left = ("unary", tok.pos, "not", left)
        if prec == 0 and self.cur.is_("op", "?"):
            left = self.conditional(left)
        return left

    def comparison(self, left, tok, prec):
        root = None
        while True:
            right = self.expression(prec + 1)
            node = ("binary", tok.pos, tok.value, left, right)
            root = node if root is None else (
                "binary", tok.pos, "&&", root, node)
            left = right
            tok = self.cur
            if not (tok.kind == "op" and tok.value in _COMPARISON):
                return root
            self.next()

    def conditional(self, cond):
        while self.cur.is_("op", "?"):
            pos = self.cur.pos
            self.next()
            if self.cur.is_("op", ":"):
                self.next()
                a, b = cond, self.expression(0)
            else:
                a = self.expression(0)
                self.expect("op", ":")
                b = self.expression(0)
            cond = ("cond", pos, cond, a, b)
        return cond

    def primary(self):
        tok = self.cur
        if tok.kind == "op" and tok.value in _UNARY:
            self.next()
            operand = self.expression(_UNARY[tok.value])
            return self.postfix(("unary", tok.pos, tok.value, operand))
        if tok.is_("bracket", "("):
            self.next()
            node = self.expression(0)
            self.expect("bracket", ")")
            return self.postfix(node)
        if self.depth and tok.is_("op", "#"):
            self.next()
            return self.postfix(("item", tok.pos))
        if self.depth and tok.is_("op", "."):
            return self.postfix(("item", tok.pos))
        return self.secondary()

    def secondary(self):
        tok = self.cur
        if tok.kind == "ident":
            self.next()
            if tok.value in ("true", "false"):
                return ("const", tok.pos, tok.value == "true", BOOL)
            if tok.value == "nil":
                return ("const", tok.pos, None, NIL)
            if tok.value.startswith("$"):
                raise self.error("%s is not supported" % tok.value, tok)
            if self.cur.is_("bracket", "("):
                node = self.call(tok, [])
            else:
                node = ("name", tok.pos, tok.value)
        elif tok.kind == "num":
            self.next()
            node = self.number(tok)
        elif tok.kind == "str":
            self.next()
            node = ("const", tok.pos, tok.value, STRING)
        elif tok.is_("bracket", "["):
            node = self.array()
        elif tok.is_("bracket", "{"):
            node = self.map()
        else:
            raise self.unexpected()
        return self.postfix(node)

    def number(self, tok):
        text = tok.value.replace("_", "")
        low = text.lower()
        try:
            if low.startswith(("0x", "0o", "0b")):
                return ("const", tok.pos, int(text, 0), INT)
            if "." in low or "e" in low:
                return ("const", tok.pos, float(text), FLOAT)
            return ("const", tok.pos, int(text, 10), INT)
        except ValueError as e:
            raise self.error("invalid number literal %s" % tok.value,
                             tok) from e

    def call(self, tok, args):
        name = tok.value
        self.expect("bracket", "(")
        if name in _PREDICATES:
            if not args:
                args.append(self.expression(0))
                if not self.cur.is_("bracket", ")"):
                    self.expect("op", ",")
            if not self.cur.is_("bracket", ")"):
                args.append(self.predicate())
            if self.cur.is_("op", ","):
                self.next()
            self.expect("bracket", ")")
            return ("builtin", tok.pos, name, args)
        first = True
        while not self.cur.is_("bracket", ")"):
            if not first or args and not first:
                self.expect("op", ",")
                if self.cur.is_("bracket", ")"):
                    break
            first = False
            args.append(self.expression(0))
        self.expect("bracket", ")")
        return ("call", tok.pos, name, args)

    def predicate(self):
        pos = self.cur.pos
        braces = self.cur.is_("bracket", "{")
        if braces:
            self.next()
        self.depth += 1
        node = self.expression(0)
        self.depth -= 1
        if braces:
            self.expect("bracket", "}")
        return ("predicate", pos, node)

    def array(self):
        pos = self.cur.pos
        self.expect("bracket", "[")
        items = []
        while not self.cur.is_("bracket", "]"):
            if items:
                self.expect("op", ",")
                if self.cur.is_("bracket", "]"):
                    break
            items.append(self.expression(0))
        self.expect("bracket", "]")
        return ("array", pos, items)

    def map(self):
        pos = self.cur.pos
        self.expect("bracket", "{")
        pairs = []
        while not self.cur.is_("bracket", "}"):
            if pairs:
                self.expect("op", ",")
                if self.cur.is_("bracket", "}"):
                    break
            tok = self.cur
            if tok.kind in ("num", "str", "ident"):
                key = ("const", tok.pos, tok.value, STRING)
                self.next()
            elif tok.is_("bracket", "("):
                key = self.expression(0)
            else:
                raise self.error("a map key must be a quoted string, a "
                                 "number, a identifier, or an expression "
                                 "enclosed in parentheses")
            self.expect("op", ":")
            pairs.append((key, self.expression(0)))
        self.expect("bracket", "}")
        return ("map", pos, pairs)

    def postfix(self, node):
        while True:
            tok = self.cur
            if tok.is_("op", "."):
                self.next()
                prop = self.cur
                if prop.kind not in ("ident", "op") or \
                        not _IDENT.fullmatch(prop.value):
                    raise self.error("expected name")
                self.next()
                if self.cur.is_("bracket", "("):
                    raise self.error("method calls are not supported", prop)
                node = ("member", tok.pos, node,
                        ("const", prop.pos, prop.value, STRING))
            elif tok.is_("op", "?."):
                raise self.error("optional chaining is not supported")
            elif tok.is_("bracket", "["):
                self.next()
                if self.cur.is_("op", ":"):
                    raise self.error("slices are not supported")
                index = self.expression(0)
                if self.cur.is_("op", ":"):
                    raise self.error("slices are not supported")
                self.expect("bracket", "]")
                node = ("member", tok.pos, node, index)
            else:
                return node


# -- compiling ----------------------------------------------------------------

def _numeric(t):
    return t in (INT, FLOAT)


def _unknown(t):
    return t == ANY


def _maybe(a, b, *kinds):
    """expr's MaybeCompatible: one side unknown, the other of ``kinds``
    (or both unknown)."""
    return (a == ANY and b == ANY) or (a == ANY and b in kinds) or (
        b == ANY and a in kinds)


def _typename(t):
    return {INT: "int", FLOAT: "float64", STRING: "string", BOOL: "bool",
            ARRAY: "[]interface {}", MAP: "map[string]interface {}",
            NIL: "nil", ANY: "interface {}"}.get(t, t)


def _kind(v):
    """The type name of a runtime value."""
    if v is None:
        return NIL
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, float):
        return FLOAT
    if isinstance(v, str):
        return STRING
    if isinstance(v, list):
        return ARRAY
    if isinstance(v, dict):
        return MAP
    return ANY


def _mismatch(op, a, b):
    return EvalError("invalid operation: %s (mismatched types %s and %s)"
                     % (op, _typename(_kind(a)), _typename(_kind(b))))


def _go_mod(a, b):
    if b == 0:
        raise EvalError("integer divide by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _divide(a, b):
    a, b = float(a), float(b)
    if b == 0:
        if a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _pow(a, b):
    try:
        return math.pow(a, b)
    except (OverflowError, ValueError):
        return math.inf


def _arith(op):
    """Runtime arithmetic with expr's type rules (ints stay ints)."""
    def num_check(a, b):
        if not (is_number(a) and is_number(b)):
            raise _mismatch(op, a, b)
    if op == "+":
        def f(a, b):
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            num_check(a, b)
            return a + b
    elif op == "-":
        def f(a, b):
            num_check(a, b)
            return a - b
    elif op == "*":
        def f(a, b):
            num_check(a, b)
            return a * b
    elif op == "/":
        def f(a, b):
            num_check(a, b)
            return _divide(a, b)
    elif op == "%":
        def f(a, b):
            if not (type(a) is int and type(b) is int):
                raise _mismatch(op, a, b)
            return _go_mod(a, b)
    else:
        def f(a, b):
            num_check(a, b)
            return _pow(a, b)
    return f


def _order(op):
    import operator
    cmp = {"<": operator.lt, ">": operator.gt, "<=": operator.le,
           ">=": operator.ge}[op]

    def f(a, b):
        if (is_number(a) and is_number(b)) or (
                isinstance(a, str) and isinstance(b, str)):
            return cmp(a, b)
        raise _mismatch(op, a, b)
    return f


def _in(a, b):
    if isinstance(b, list):
        return any(equal(a, x) for x in b)
    if isinstance(b, dict):
        return a in b
    if b is None:
        return False
    raise EvalError("operator \"in\" not defined on %s" %
                    _typename(_kind(b)))


def _strings(op, fn):
    def f(a, b):
        if not (isinstance(a, str) and isinstance(b, str)):
            raise _mismatch(op, a, b)
        return fn(a, b)
    return f


_RX_CACHE = {}


def _regexp(pattern):
    rx = _RX_CACHE.get(pattern)
    if rx is None:
        try:
            rx = goregexp.compile(pattern)
        except goregexp.RegexpError as e:
            raise EvalError(str(e)) from e
        if len(_RX_CACHE) > 256:
            _RX_CACHE.clear()
        _RX_CACHE[pattern] = rx
    return rx


def _const(v):
    return lambda s: v


class _Compiler:
    """Type-checks a node tree and turns it into closures ``f(scope)``."""

    def __init__(self, source, env):
        self.source = source
        self.env = env

    def error(self, node, msg):
        return _error(self.source, node[1], msg)

    def visit(self, node):
        return getattr(self, "n_" + node[0])(node)

    def n_const(self, node):
        return _const(node[2]), node[3]

    def n_name(self, node):
        name = node[2]
        entry = self.env.get(name)
        if isinstance(entry, Variable):
            key = entry.name
            return (lambda s: s.vars[key]), entry.type
        if isinstance(entry, Function) or name in EXPR_BUILTINS:
            raise self.error(node, "%s is a function: call it as %s()"
                             % (name, name))
        raise self.error(node, "unknown name %s" % name)

    def n_item(self, node):
        return (lambda s: s.item), ANY

    def n_array(self, node):
        fns = [self.visit(x)[0] for x in node[2]]
        return (lambda s: [f(s) for f in fns]), ARRAY

    def n_map(self, node):
        pairs = []
        for k, v in node[2]:
            pairs.append((self.visit(k)[0], self.visit(v)[0]))
        return (lambda s: {k(s): v(s) for k, v in pairs}), MAP

    def n_predicate(self, node):
        raise self.error(node, "a predicate needs a function such as any")

    def n_unary(self, node):
        op = node[2]
        fn, t = self.visit(node[3])
        if op in ("not", "!"):
            if t not in (BOOL, ANY):
                raise self.error(node, "invalid operation: %s (mismatched "
                                 "type %s)" % (op, _typename(t)))

            def f(s):
                v = fn(s)
                if not isinstance(v, bool):
                    raise EvalError("invalid operation: ! on %s"
                                    % _typename(_kind(v)))
                return not v
            return f, BOOL
        if t not in (INT, FLOAT, ANY):
            raise self.error(node, "invalid operation: %s (mismatched "
                             "type %s)" % (op, _typename(t)))
        if op == "+":
            return fn, t

        def neg(s):
            v = fn(s)
            if not is_number(v):
                raise EvalError("invalid operation: - on %s"
                                % _typename(_kind(v)))
            return -v
        return neg, t

    def n_cond(self, node):
        c, ct = self.visit(node[2])
        a, at = self.visit(node[3])
        b, bt = self.visit(node[4])
        if ct not in (BOOL, ANY):
            raise self.error(node, "non-bool expression (type %s) used as "
                             "condition" % _typename(ct))

        def f(s):
            v = c(s)
            if not isinstance(v, bool):
                raise EvalError("non-bool value used as condition")
            return a(s) if v else b(s)
        return f, at if at == bt else ANY

    def n_binary(self, node):
        op = node[2]
        lf, lt = self.visit(node[3])
        rf, rt = self.visit(node[4])
        method = self._BINARY_OPS.get(op)
        return method(self, node, op, lf, lt, rf, rt)

    def _logic(self, node, op, lf, lt, rf, rt):
        if not ((lt == BOOL or lt == ANY) and (rt == BOOL or rt == ANY)):
            raise self._mismatch(node, op, lt, rt)
        both = op in ("and", "&&")

        def check(v):
            if not isinstance(v, bool):
                raise EvalError("invalid operation: %s on %s"
                                % (op, _typename(_kind(v))))
            return v
        if both:
            return (lambda s: check(lf(s)) and check(rf(s))), BOOL
        return (lambda s: check(lf(s)) or check(rf(s))), BOOL

    def _mismatch(self, node, op, lt, rt):
        return self.error(node, "invalid operation: %s (mismatched types "
                          "%s and %s)" % (op, _typename(lt), _typename(rt)))

    def _equality(self, node, op, lf, lt, rf, rt):
        ok = (ANY in (lt, rt) or NIL in (lt, rt) or lt == rt
              or (_numeric(lt) and _numeric(rt)))
        if not ok:
            raise self._mismatch(node, op, lt, rt)
        if op == "==":
            return (lambda s: equal(lf(s), rf(s))), BOOL
        return (lambda s: not equal(lf(s), rf(s))), BOOL

    def _ordering(self, node, op, lf, lt, rf, rt):
        ok = ((_numeric(lt) and _numeric(rt)) or (lt == rt == STRING)
              or _maybe(lt, rt, INT, FLOAT, STRING))
        if not ok:
            raise self._mismatch(node, op, lt, rt)
        cmp = _order(op)
        return (lambda s: cmp(lf(s), rf(s))), BOOL

    def _arith(self, node, op, lf, lt, rf, rt):
        if _numeric(lt) and _numeric(rt):
            if op in ("/", "**", "^"):
                out = FLOAT
            elif op == "%":
                if lt != INT or rt != INT:
                    raise self._mismatch(node, op, lt, rt)
                out = INT
            else:
                out = FLOAT if FLOAT in (lt, rt) else INT
        elif op == "+" and lt == rt == STRING:
            out = STRING
        elif op == "+" and _maybe(lt, rt, INT, FLOAT, STRING):
            out = ANY
        elif op == "%" and _maybe(lt, rt, INT):
            out = INT
        elif _maybe(lt, rt, INT, FLOAT):
            out = FLOAT if op in ("/", "**", "^") else ANY
        else:
            raise self._mismatch(node, op, lt, rt)
        if op == "+" and out == STRING:
            return (lambda s: lf(s) + rf(s)), out
        fn = _arith(op)
        return (lambda s: fn(lf(s), rf(s))), out

    def _membership(self, node, op, lf, lt, rf, rt):
        if rt not in (ARRAY, MAP, ANY, NIL):
            raise self._mismatch(node, op, lt, rt)
        return (lambda s: _in(lf(s), rf(s))), BOOL

    def _textual(self, node, op, lf, lt, rf, rt):
        if not ((lt == rt == STRING) or _maybe(lt, rt, STRING)):
            raise self._mismatch(node, op, lt, rt)
        if op == "matches":
            pat = node[4]
            if pat[0] == "const":
                try:
                    rx = goregexp.compile(pat[2])
                except goregexp.RegexpError as e:
                    raise self.error(node, str(e)) from e
                search = rx.search

                def f(s):
                    v = lf(s)
                    if not isinstance(v, str):
                        raise _mismatch(op, v, "")
                    return search(v) is not None
                return f, BOOL
            fn = _strings(op, lambda a, b: _regexp(b).search(a) is not None)
        elif op == "contains":
            fn = _strings(op, lambda a, b: b in a)
        elif op == "startsWith":
            fn = _strings(op, lambda a, b: a.startswith(b))
        else:
            fn = _strings(op, lambda a, b: a.endswith(b))
        return (lambda s: fn(lf(s), rf(s))), BOOL

    def _range(self, node, op, lf, lt, rf, rt):
        if not (lt == rt == INT or _maybe(lt, rt, INT)):
            raise self._mismatch(node, op, lt, rt)

        def f(s):
            a, b = lf(s), rf(s)
            if type(a) is not int or type(b) is not int:
                raise _mismatch(op, a, b)
            return list(range(a, b + 1))
        return f, ARRAY

    def _coalesce(self, node, op, lf, lt, rf, rt):
        def f(s):
            v = lf(s)
            return rf(s) if v is None else v
        return f, lt if lt == rt else ANY

    _BINARY_OPS = {
        "or": _logic, "||": _logic, "and": _logic, "&&": _logic,
        "==": _equality, "!=": _equality,
        "<": _ordering, ">": _ordering, "<=": _ordering, ">=": _ordering,
        "+": _arith, "-": _arith, "*": _arith, "/": _arith, "%": _arith,
        "**": _arith, "^": _arith,
        "in": _membership, "matches": _textual, "contains": _textual,
        "startsWith": _textual, "endsWith": _textual,
        "..": _range, "??": _coalesce,
    }

    def n_member(self, node):
        base, bt = self.visit(node[2])
        key, kt = self.visit(node[3])
        if bt == ARRAY:
            if kt not in (INT, ANY):
                raise self.error(node, "array elements can only be "
                                 "selected using an integer (got %s)"
                                 % _typename(kt))
        elif bt not in (MAP, ANY):
            raise self.error(node, "type %s has no field %s"
                             % (_typename(bt), node[3][2]
                                if node[3][0] == "const" else "[...]"))

        def f(s):
            b, k = base(s), key(s)
            if isinstance(b, list):
                if type(k) is not int:
                    raise EvalError("array index must be an integer")
                if k < 0:
                    k += len(b)
                if not 0 <= k < len(b):
                    raise EvalError("index out of range: %d (array length "
                                    "is %d)" % (k, len(b)))
                return b[k]
            if isinstance(b, dict):
                return b.get(k)
            if b is None:
                raise EvalError("cannot fetch %s from nil" % go_text(k))
            raise EvalError("cannot fetch %s from %s"
                            % (go_text(k), _typename(_kind(b))))
        return f, ANY

    # -- calls --------------------------------------------------------------

    def n_call(self, node):
        name, args = node[2], node[3]
        entry = self.env.get(name)
        if isinstance(entry, Function):
            return self._env_call(node, entry, args)
        if isinstance(entry, Variable):
            raise self.error(node, "%s is not callable" % name)
        builder = _BUILTINS.get(name)
        if builder is not None:
            compiled = [self.visit(a) for a in args]
            return builder(self, node, compiled)
        if name in EXPR_BUILTINS:
            raise self.error(node, "function %s is not supported" % name)
        raise self.error(node, "unknown name %s" % name)

    def _env_call(self, node, fn, args):
        name = fn.name
        if len(args) > len(fn.params):
            raise self.error(node, "too many arguments to call %s" % name)
        if len(args) < len(fn.params):
            raise self.error(node, "not enough arguments to call %s" % name)
        compiled = []
        for i, (a, want) in enumerate(zip(args, fn.params)):
            f, t = self.visit(a)
            if want != ANY and t not in (want, ANY):
                raise self.error(node, "cannot use %s as argument (type %s) "
                                 "to call %s " % (_typename(t),
                                                  _typename(want), name))
            compiled.append(self._checked(f, t, want, name))
        impl = fn.impl
        if not compiled:
            return (lambda s: impl(s)), fn.result
        if len(compiled) == 1:
            a0 = compiled[0]
            return (lambda s: impl(s, a0(s))), fn.result
        if len(compiled) == 2:
            a0, a1 = compiled
            return (lambda s: impl(s, a0(s), a1(s))), fn.result
        return (lambda s: impl(s, *[a(s) for a in compiled])), fn.result

    @staticmethod
    def _checked(f, t, want, name):
        """An argument of unknown static type checked when it runs."""
        if t != ANY or want == ANY:
            return f

        def g(s):
            v = f(s)
            if _kind(v) != want:
                raise EvalError("cannot use %s as %s in argument to %s"
                                % (_typename(_kind(v)), _typename(want),
                                   name))
            return v
        return g

    def n_builtin(self, node):
        name, args = node[2], node[3]
        if len(args) < 2 and not (name == "count" and len(args) == 1):
            raise self.error(node, "expected at least 2 arguments")
        lf, lt = self.visit(args[0])
        if lt not in (ARRAY, ANY):
            raise self.error(node, "builtin %s takes only array (got %s)"
                             % (name, _typename(lt)))
        if len(args) == 1:
            def pf(s):
                return s.item
        else:
            pf, _ = self.visit(args[1][2])
        return _predicate(name, lf, pf), {
            "filter": ARRAY, "map": ARRAY, "count": INT}.get(name, BOOL)


def _items(lf, s, name):
    v = lf(s)
    if not isinstance(v, list):
        raise EvalError("builtin %s takes only array (got %s)"
                        % (name, _typename(_kind(v))))
    return v


def _predicate(name, lf, pf):
    """any/all/none/one/filter/map/count: run ``pf`` with ``#`` bound to
    each item (the previous binding kept for nested predicates)."""
    def each(s):
        saved = s.item
        try:
            for x in _items(lf, s, name):
                s.item = x
                yield x, pf(s)
        finally:
            s.item = saved

    def truth(v):
        if not isinstance(v, bool):
            raise EvalError("predicate should return bool (got %s)"
                            % _typename(_kind(v)))
        return v
    if name == "any":
        return lambda s: any(truth(r) for _, r in each(s))
    if name == "all":
        return lambda s: all(truth(r) for _, r in each(s))
    if name == "none":
        return lambda s: not any(truth(r) for _, r in each(s))
    if name == "one":
        return lambda s: sum(1 for _, r in each(s) if truth(r)) == 1
    if name == "filter":
        return lambda s: [x for x, r in each(s) if truth(r)]
    if name == "map":
        return lambda s: [r for _, r in each(s)]
    return lambda s: sum(1 for _, r in each(s) if truth(r))


# -- builtins -----------------------------------------------------------------

def _arity(c, node, args, *counts):
    if len(args) not in counts:
        raise c.error(node, "invalid number of arguments (expected %s, got "
                      "%d)" % (" or ".join(map(str, counts)), len(args)))


def _want(c, node, args, *types):
    for (f, t), want in zip(args, types):
        if t not in (want, ANY):
            raise c.error(node, "cannot use %s as argument (type %s) to "
                          "call %s" % (_typename(t), _typename(want),
                                       node[2]))


def _apply(fn, args, name, types):
    """A closure calling ``fn`` on the evaluated arguments, checking the
    ones whose type was unknown at compile time."""
    fns = [f for f, _ in args]

    def g(s):
        vals = [f(s) for f in fns]
        for v, want in zip(vals, types):
            if want != ANY and _kind(v) != want:
                raise EvalError("invalid argument for %s (type %s)"
                                % (name, _typename(_kind(v))))
        return fn(*vals)
    return g


def _b_len(c, node, args):
    _arity(c, node, args, 1)
    if args[0][1] not in (STRING, ARRAY, MAP, ANY):
        raise c.error(node, "invalid argument for len (type %s)"
                      % _typename(args[0][1]))

    def fn(v):
        if not isinstance(v, (str, list, dict)):
            raise EvalError("invalid argument for len (type %s)"
                            % _typename(_kind(v)))
        return len(v)
    return _apply(fn, args, "len", (ANY,)), INT


def _to_int(v):
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise EvalError("invalid operation: int(%s)" % _typename(_kind(v)))
    if isinstance(v, str):
        try:
            return int(v, 10) if v.strip() == v else int("x")
        except ValueError as e:
            raise EvalError(goparse.num_error(
                "Atoi", v, "invalid syntax")) from e
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        raise EvalError("invalid operation: int(%s)" % go_text(v))
    return int(v)


def _to_float(v):
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise EvalError("invalid operation: float(%s)"
                        % _typename(_kind(v)))
    try:
        return float(v)
    except ValueError as e:
        raise EvalError(goparse.num_error(
            "ParseFloat", v, "invalid syntax")) from e


def _b_int(c, node, args):
    _arity(c, node, args, 1)
    if args[0][1] not in (INT, FLOAT, STRING, ANY):
        raise c.error(node, "invalid argument for int (type %s)"
                      % _typename(args[0][1]))
    return _apply(_to_int, args, "int", (ANY,)), INT


def _b_float(c, node, args):
    _arity(c, node, args, 1)
    if args[0][1] not in (INT, FLOAT, STRING, ANY):
        raise c.error(node, "invalid argument for float (type %s)"
                      % _typename(args[0][1]))
    return _apply(_to_float, args, "float", (ANY,)), FLOAT


def _b_string(c, node, args):
    _arity(c, node, args, 1)
    return _apply(go_text, args, "string", (ANY,)), STRING


def _b_abs(c, node, args):
    _arity(c, node, args, 1)
    _want_number(c, node, args)
    return _apply(_num(abs, "abs"), args, "abs", (ANY,)), args[0][1]


def _want_number(c, node, args):
    for _, t in args:
        if t not in (INT, FLOAT, ANY):
            raise c.error(node, "invalid argument for %s (type %s)"
                          % (node[2], _typename(t)))


def _num(fn, name):
    def g(*vals):
        for v in vals:
            if not is_number(v):
                raise EvalError("invalid argument for %s (type %s)"
                                % (name, _typename(_kind(v))))
        return fn(*vals)
    return g


def _minmax(fn):
    def build(c, node, args):
        if not args:
            raise c.error(node, "not enough arguments to call %s" % node[2])
        _want_number(c, node, args)
        types = {t for _, t in args}
        out = types.pop() if len(types) == 1 else ANY
        return _apply(_num(fn, node[2]), args, node[2],
                      (ANY,) * len(args)), out
    return build


def _strfn(fn, counts, types, result=STRING):
    def build(c, node, args):
        _arity(c, node, args, *counts)
        _want(c, node, args, *types)
        return _apply(fn, args, node[2], types), result
    return build


def _trim(s, chars=None):
    return s.strip() if chars is None else s.strip(chars)


def _trim_prefix(s, p=" "):
    return s[len(p):] if p and s.startswith(p) else s


def _trim_suffix(s, p=" "):
    return s[:-len(p)] if p and s.endswith(p) else s


def _split(s, sep, n=-1):
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[:n - 1] + ["".join(parts[n - 1:])]
        return parts
    return s.split(sep, n - 1 if n > 0 else -1)


def _replace(s, old, new, n=-1):
    if old == "":
        if n < 0:
            n = len(s) + 1
        out = []
        for i, ch in enumerate(s):
            if i < n:
                out.append(new)
            out.append(ch)
        if len(s) < n:
            out.append(new)
        return "".join(out)
    return s.replace(old, new, n)


def _join(items, sep=""):
    if not isinstance(items, list) or not all(isinstance(x, str)
                                              for x in items):
        raise EvalError("invalid argument for join")
    return sep.join(items)


def _first(items):
    if not isinstance(items, list):
        raise EvalError("cannot get first element from %s"
                        % _typename(_kind(items)))
    return items[0] if items else None


def _last(items):
    if not isinstance(items, list):
        raise EvalError("cannot get last element from %s"
                        % _typename(_kind(items)))
    return items[-1] if items else None


def _listfn(fn):
    def build(c, node, args):
        _arity(c, node, args, 1)
        if args[0][1] not in (ARRAY, ANY):
            raise c.error(node, "invalid argument for %s (type %s)"
                          % (node[2], _typename(args[0][1])))
        return _apply(fn, args, node[2], (ANY,)), ANY
    return build


def _b_join(c, node, args):
    _arity(c, node, args, 1, 2)
    if args[0][1] not in (ARRAY, ANY):
        raise c.error(node, "invalid argument for join (type %s)"
                      % _typename(args[0][1]))
    _want(c, node, args[1:], STRING)
    return _apply(_join, args, "join", (ANY, STRING)), STRING


_BUILTINS = {
    "len": _b_len, "int": _b_int, "float": _b_float, "string": _b_string,
    "abs": _b_abs, "max": _minmax(max), "min": _minmax(min),
    "lower": _strfn(str.lower, (1,), (STRING,)),
    "upper": _strfn(str.upper, (1,), (STRING,)),
    "trim": _strfn(_trim, (1, 2), (STRING, STRING)),
    "trimPrefix": _strfn(_trim_prefix, (1, 2), (STRING, STRING)),
    "trimSuffix": _strfn(_trim_suffix, (1, 2), (STRING, STRING)),
    "split": _strfn(_split, (2, 3), (STRING, STRING, INT), ARRAY),
    "replace": _strfn(_replace, (3, 4), (STRING, STRING, STRING, INT)),
    "repeat": _strfn(lambda s, n: s * max(n, 0), (2,), (STRING, INT)),
    "indexOf": _strfn(str.find, (2,), (STRING, STRING), INT),
    "lastIndexOf": _strfn(str.rfind, (2,), (STRING, STRING), INT),
    "hasPrefix": _strfn(str.startswith, (2,), (STRING, STRING), BOOL),
    "hasSuffix": _strfn(str.endswith, (2,), (STRING, STRING), BOOL),
    "join": _b_join, "first": _listfn(_first), "last": _listfn(_last),
}

#: The builtins this subset implements (the predicates included).
BUILTINS = frozenset(_BUILTINS) | _PREDICATES


# -- CoreDNS's environment ----------------------------------------------------

def _incidr(scope, ip, cidr):
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError as e:
        raise EvalError("first argument is not an IP address") from e
    try:
        net = _network(cidr)
    except ValueError as e:
        raise EvalError("invalid CIDR address: %s" % cidr) from e
    if addr.version != net.version:
        if addr.version == 6 and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        else:
            return False
    return addr in net


_NETS = {}


def _network(cidr):
    net = _NETS.get(cidr)
    if net is None:
        if "/" not in cidr:
            raise ValueError(cidr)
        net = ipaddress.ip_network(cidr, strict=False)
        if len(_NETS) > 1024:
            _NETS.clear()
        _NETS[cidr] = net
    return net


def _metadata(scope, label):
    md = scope.req.metadata if scope.req is not None else None
    if not md:
        return ""
    v = md.get(label)
    if v is None:
        return ""
    if callable(v):
        v = v()
    return v if v is not None else ""
