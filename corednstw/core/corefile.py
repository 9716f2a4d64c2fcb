"""The Corefile grammar: CoreDNS's dialect of the (version 1) Caddyfile.

A Corefile is a list of server blocks.  Each starts with one or more keys
(zones with an optional scheme and port, separated by spaces, or by commas
that may continue the key list on the next line), then its directives inside
``{ ... }``.  A file whose only block has no braces is that one block.

Lexing follows Caddy v1, because a Corefile that CoreDNS reads must read the
same here:

* tokens are split on whitespace; ``#`` starts a comment anywhere outside
  quotes (``foo#bar`` is the token ``foo``);
* a token that *starts* with ``"`` runs to the next unescaped ``"`` and may
  span lines; inside it only ``\\"`` is an escape (other backslashes stay).
  Quotes in the middle of a token are literal.  There are no backquotes;
* a logical line ends where the next token begins on a later line than the
  previous token ended, so a multi-line quoted token continues its line;
* ``{$VAR}`` and ``{%VAR%}`` are replaced from the environment anywhere in
  a token (unset is empty) after lexing, so a value never splits a token.

A first block without keys holds global options, as in Caddy 2: only
``order`` lines (``order DIRECTIVE before|after DIRECTIVE``, ``order
DIRECTIVE first|last``), which change the chain order of the whole
Corefile (see ``directives.Ordering``).  CoreDNS has none.

Snippets ``(name) { ... }`` are defined at top level and replayed by
``import name``; otherwise ``import`` takes one file path or a glob with one
wildcard, relative to the file holding the ``import``.  Imports work at top
level (whole server blocks) and at the start of any line inside a block.  An
import chain that comes back to a file or snippet already being expanded is
an error (CoreDNS only stops at an expansion cap; naming the cycle is
kinder).  Errors carry the file and line of the offending token, in
CoreDNS's words.

The parser only parses.  Keys are resolved to ``ZoneAddr`` (CIDRs expanded,
default port per transport) but transports are not judged, duplicate keys
are left to :func:`check_duplicates`, and directives are checked only for
being known directive names.

The ``--dump`` printer is ``core/dump.py``; its format, one item per
line, two-space indentation::

    listeners
      dns :53 <- blocks 2 3          one line per (transport, port): a
                                     socket set
    block 1 Corefile:4               block number, where its first key is
      key dns://example.org.:53 <- example.org
      chain                          directives in chain order (stable for
                                     repeats)
        log . "{remote}" @ Corefile:5 [not supported yet]
        forward . 1.1.1.1 { @ Corefile:6
          max_fails 3 @ Corefile:7
        }

``@ file:line`` gives where each directive (or block line) was written,
snippet and file imports expanded; files are shown relative to the main
Corefile's directory when below it.  Args are quoted only when needed.  A
directive an installed package provides ends with ``[package version]``.
A Corefile with global options starts with ``options`` and its ``order``
lines; the chains are in the order those make.

Why one module of this size: the lexer, the block parser, snippets and
imports implement one grammar; split, each part would need the others'
token types, and the rules read best in one place next to CoreDNS's.
Errors live in ``core/errors.py`` and the ``Directive`` line with its
typed readers in ``core/directive.py``, so the registry of directives and
every plugin use them without importing the grammar.
"""

import glob
import os
import re
import sys
from dataclasses import dataclass, field

from corednstw.core import directives as _directives
from corednstw.core import names
from corednstw.core.directive import Directive
from corednstw.core.errors import CorefileError

MAX_SNIPPET_EXPANSIONS = 10000
#: What the global options block (a first block without keys) may hold.
GLOBAL_OPTIONS = ("order",)
MAX_FILE_EXPANSIONS = 100000


@dataclass(frozen=True)
class ZoneAddr:
    """A resolved server block key; equal when transport, zone and port are."""
    transport: str
    zone: str
    port: str
    key: str = field(default="", compare=False)

    def __str__(self):
        return "%s://%s:%s" % (self.transport, self.zone, self.port)


@dataclass(eq=False)
class ServerBlock:
    """Keys (CIDRs expanded) and directives in Corefile order.  ``root`` is
    the main Corefile this block was read from (for relative display)."""
    keys: list
    directives: list
    file: str
    line: int
    root: str = ""
    #: The global options (``order`` lines) of the whole Corefile: the
    #: same list on every block.
    options: list = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Token:
    text: str
    file: str
    line: int
    nl: bool        # starts a logical line


_LEX_RE = re.compile(r'''
    (?P<nl>\n) | [^\S\n]+ | \#[^\n]* |
    "(?P<q>(?:[^"\\]|\\.)*)(?P<qend>"|\\?\Z) |
    (?P<bare>[^\s\#]+)
''', re.X | re.S)
_ESC_RE = re.compile(r"\\(.)", re.S)


def _unescape(m):
    return '"' if m.group(1) == '"' else m.group(0)


def tokenize(text, filename):
    """Lex ``text`` into tokens carrying file, line and a start-of-line
    flag."""
    if text.startswith("\ufeff"):
        text = text[1:]
    tokens = []
    line = 1
    end_line = 0            # line on which the previous token ended
    for m in _LEX_RE.finditer(text):
        if m.group("nl"):
            line += 1
            continue
        q = m.group("q")
        if q is not None:
            value = _ESC_RE.sub(_unescape, q) if "\\" in q else q
            if not m.group("qend") == '"' and not value:
                continue        # unterminated empty quote at EOF: no token
        else:
            value = m.group("bare")
            if value is None:
                continue        # blanks or a comment
        if "\x00" in value:
            # No file, name or address can hold one (Go's syscalls fail
            # with "invalid argument" in every plugin that opens a path).
            raise CorefileError(filename, line,
                                "NUL byte in token %r" % value)
        tokens.append(_Token(value, filename, line, line > end_line))
        if q is not None:
            line += q.count("\n")
        end_line = line
    return tokens


_ENV_PCT = re.compile(r"\{%(.+?)%\}", re.S)
_ENV_DOLLAR = re.compile(r"\{\$([^}]+)\}")


def expand_env(s, env):
    """Replace ``{%VAR%}`` then ``{$VAR}`` (unset: empty string)."""
    if "{" not in s:
        return s
    s = _ENV_PCT.sub(lambda m: env.get(m.group(1), ""), s)
    return _ENV_DOLLAR.sub(lambda m: env.get(m.group(1), ""), s)


class _Frame:
    """Tokens being read: the main file, an imported file or a snippet."""
    __slots__ = ("tokens", "i", "source")

    def __init__(self, tokens, source):
        self.tokens, self.i, self.source = tokens, 0, source


class _Parser:
    def __init__(self, text, filename, env, strict=True):
        self.env = env
        self.strict = strict
        self.root = filename
        self.snippets = {}
        self.frames = [_Frame(tokenize(text, filename),
                              ("file", os.path.realpath(filename)))]
        self.last = None
        self.expand_imports = True
        self.snippet_expansions = self.file_expansions = 0

    # -- errors ---------------------------------------------------------
    @staticmethod
    def err(tok, msg, directive=None):
        return CorefileError(tok.file, tok.line, msg, directive)

    @staticmethod
    def syntax_err(tok, expected):
        return CorefileError(
            tok.file, tok.line,
            "Unexpected token '%s', expecting '%s'" % (tok.text, expected),
            kind="Syntax error")

    # -- token stream ---------------------------------------------------
    def peek(self):
        """The next token, with ``import`` lines expanded in place."""
        frames = self.frames
        while frames:
            f = frames[-1]
            if f.i >= len(f.tokens):
                frames.pop()
                continue
            tok = f.tokens[f.i]
            if self.expand_imports and tok.nl and tok.text == "import":
                self.do_import(f)
                continue
            return tok
        return None

    def next(self):
        tok = self.peek()
        if tok is not None:
            self.frames[-1].i += 1
            self.last = tok
        return tok

    def do_import(self, f):
        imp = f.tokens[f.i]
        f.i += 1
        self.last = imp
        if f.i >= len(f.tokens) or f.tokens[f.i].nl:
            raise self.err(imp, "Wrong argument count or unexpected line "
                                "ending after 'import'")
        arg = f.tokens[f.i]
        f.i += 1
        self.last = arg
        pattern = expand_env(arg.text, self.env)
        if not pattern:
            raise self.err(arg, "Import requires a non-empty filepath")
        if f.i < len(f.tokens) and not f.tokens[f.i].nl:
            raise self.err(f.tokens[f.i], "Import takes only one argument "
                                          "(glob pattern or file)")
        if pattern in self.snippets:
            self.snippet_expansions += 1
            if self.snippet_expansions > MAX_SNIPPET_EXPANSIONS:
                raise self.err(arg, "maximum snippet import depth (%d) "
                               "exceeded" % MAX_SNIPPET_EXPANSIONS)
            self.push(arg, [self.snippets[pattern]], [("snippet", pattern)])
            return
        self.file_expansions += 1
        if self.file_expansions > MAX_FILE_EXPANSIONS:
            raise self.err(arg, "maximum file import depth (%d) exceeded"
                           % MAX_FILE_EXPANSIONS)
        self.push(arg, *self.read_imports(arg, pattern))

    def read_imports(self, arg, pattern):
        """Lex the files ``pattern`` names, relative to the importing file."""
        base = os.path.dirname(os.path.abspath(arg.file))
        path = (pattern if os.path.isabs(pattern)
                else os.path.join(base, pattern))
        if (path.count("*") > 1 or path.count("?") > 1
                or ("[" in path and "]" in path)):
            raise self.err(arg, "Glob pattern may only contain one wildcard "
                                "(*), but has others: %s" % path)
        if glob.has_magic(path):
            matches = sorted(glob.glob(path, include_hidden=True))
        else:
            matches = [path] if os.path.lexists(path) else []
        if not matches:
            if any(c in path for c in "*?[]"):
                sys.stderr.write("[WARNING] No files matching import glob "
                                 "pattern: %s\n" % pattern)
            else:
                raise self.err(arg, "File to import not found: %s" % pattern)
        lists, sources = [], []
        for match in matches:
            name = os.path.abspath(match)
            if os.path.isdir(name):
                raise self.err(arg,
                               "Could not import %s: is a directory" % match)
            try:
                with open(name, encoding="utf-8") as fh:
                    text = fh.read()
            except (OSError, UnicodeDecodeError) as e:
                raise self.err(arg, "Could not import %s: %s"
                               % (match, e)) from e
            lists.append(tokenize(text, name))
            sources.append(("file", os.path.realpath(name)))
        return lists, sources

    def push(self, arg, token_lists, sources):
        """Splice imported token lists in, refusing import cycles.  Only
        frames already started are ancestors of the import being read
        (the not yet started ones are its siblings from the same glob)."""
        active = [f.source for f in self.frames if f.i > 0]
        for toks, src in zip(token_lists, sources):
            if src in active:
                chain = [s[1] for s in active[active.index(src):]] + [src[1]]
                kind = "snippet" if src[0] == "snippet" else "file"
                cap = (MAX_SNIPPET_EXPANSIONS if kind == "snippet"
                       else MAX_FILE_EXPANSIONS)
                raise self.err(arg, "maximum %s import depth (%d) exceeded "
                               "(import cycle: %s)"
                               % (kind, cap, " -> ".join(chain)))
        for toks, src in reversed(list(zip(token_lists, sources))):
            if toks:
                # whatever preceded the import, its first token opens a line
                first = toks[0]
                toks = ([_Token(first.text, first.file, first.line, True)]
                        + toks[1:])
                self.frames.append(_Frame(toks, src))

    # -- grammar --------------------------------------------------------
    def parse(self):
        options = self.global_options()
        blocks = []
        while self.peek() is not None:
            block = self.server_block()
            if block is not None:
                block.options = options
                blocks.append(block)
        return blocks

    def global_options(self):
        """A leading block without keys, as Caddy 2's global options:
        ``{ order DIRECTIVE before|after|first|last [DIRECTIVE] }``."""
        tok = self.peek()
        if tok is None or tok.text != "{":
            return []
        self.next()
        options = []
        while True:
            tok = self.next()
            if tok is None:
                raise self.err(self.last, "Unexpected EOF")
            if tok.text == "}":
                return options
            name = expand_env(tok.text, self.env)
            if name not in GLOBAL_OPTIONS:
                raise self.err(tok, "unknown global option '%s'" % name)
            options.append(self.directive(tok, name, 1))

    def server_block(self):
        keys = []           # (text, token)
        expecting = False   # a trailing comma asks for another key
        braced = False
        while True:
            tok = self.next()
            text = expand_env(tok.text, self.env)
            if text == "{":
                if expecting:
                    raise self.err(tok, "Expected another address but had "
                                        "'{' - check for extra comma")
                braced = True
                break
            if text:
                expecting = text.endswith(",")
                keys.append((text[:-1] if expecting else text, tok))
            nxt = self.peek()
            if nxt is None:
                if expecting:
                    raise self.err(tok, "Unexpected EOF")
                return self.make_block(keys, [])
            if not expecting and nxt.nl:
                break
        if not braced and self.peek().text == "{":
            self.next()
            braced = True

        if (len(keys) == 1 and keys[0][0].startswith("(")
                and keys[0][0].endswith(")")):
            self.define_snippet(keys[0][0][1:-1], braced)
            return None

        body = []
        while True:
            tok = self.peek()
            if tok is None:
                if braced:
                    raise self.syntax_err(self.last, "}")
                break
            if tok.text == "}":
                self.next()
                break       # unbraced: a stray '}' ends the block, as in Caddy
            body.append(self.directive(self.next(), None, 0))
        return self.make_block(keys, body)

    def define_snippet(self, name, braced):
        if not braced:
            raise self.syntax_err(self.peek() or self.last, "{")
        if name in self.snippets:
            raise self.err(self.last, "redeclaration of previously declared "
                                      "snippet %s" % name)
        self.expand_imports = False
        depth, body = 1, []
        try:
            while True:
                tok = self.next()
                if tok is None:
                    raise self.syntax_err(self.last, "}")
                if tok.text == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif tok.text == "{":
                    depth += 1
                body.append(tok)
        finally:
            self.expand_imports = True
        for i, tok in enumerate(body[:-1]):
            if (tok.text == "import" and (i == 0 or tok.nl)
                    and expand_env(body[i + 1].text, self.env) == name):
                raise self.err(tok, "maximum snippet import depth (%d) "
                               "exceeded"
                               " (import cycle: %s -> %s)"
                               % (MAX_SNIPPET_EXPANSIONS, name, name))
        self.snippets[name] = body

    def directive(self, tok, plugin, depth):
        """One line: name, args up to the end of the line, and any ``{...}``
        block opened on it (its lines become children)."""
        name = expand_env(tok.text, self.env)
        if plugin is None and self.strict and not _directives.known(name):
            raise self.err(tok, "Unknown directive '%s'" % name, name)
        d = Directive(name, [], [], tok.file, tok.line, plugin or name)
        while True:
            nxt = self.peek()
            if nxt is None or nxt.nl:
                break
            if nxt.text == "}":
                if depth:
                    break   # closes the enclosing block on this line
                self.next()
                raise self.err(nxt, "Unexpected '}' because no matching "
                                    "opening brace", d.plugin)
            self.next()
            if nxt.text == "{":
                d.children.extend(self.block(d.plugin, depth + 1))
            else:
                d.args.append(expand_env(nxt.text, self.env))
        return d

    def block(self, plugin, depth):
        children = []
        while True:
            tok = self.next()
            if tok is None:
                raise self.err(self.last, "Unexpected EOF", plugin)
            if tok.text == "}":
                return children
            children.append(self.directive(tok, plugin, depth))

    def make_block(self, keys, body):
        if not keys:
            return None     # e.g. only "" as key: Caddy drops the block
        addrs = []
        for text, tok in keys:
            try:
                addrs.extend(resolve_key(text))
            except ValueError as e:
                if self.strict:
                    raise self.err(tok, str(e)) from e
                addrs.append(ZoneAddr("", "", "", text))
        first = keys[0][1]
        return ServerBlock(addrs, body, first.file, first.line, self.root)


def resolve_key(key):
    """A server block key as the ZoneAddrs it stands for (ValueError with
    CoreDNS's message when it is not a zone)."""
    transport, rest = names.split_transport(key)
    hosts, port = names.split_host_port(rest)
    for h in hosts:
        names.split_host_port(names.fqdn(h))
    port = port or names.DEFAULT_PORTS[transport]
    return [ZoneAddr(transport, names.normalize_name(h), port, key)
            for h in hosts]


def parse(text, filename="Corefile", env=None, strict=True):
    """Parse Corefile ``text``; ``filename`` names it in errors and anchors
    relative imports; ``env`` (default ``os.environ``) feeds ``{$VAR}``.

    ``strict=False`` reads only the grammar, as Caddy's parser does for
    CoreDNS's reload: unknown directives are kept and keys that are no
    zone are kept unresolved (transport, zone and port empty), so a
    Corefile whose only fault is there counts as changed, and then fails
    its setup.
    """
    env = os.environ if env is None else env
    return _Parser(text, filename, env, strict).parse()


def load(path, env=None, strict=True):
    """Read and parse the Corefile at ``path`` (``stdin``: standard input;
    its relative imports resolve against the working directory)."""
    if path == "stdin":
        return parse(sys.stdin.read(), "stdin", env, strict)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CorefileError(path, 0, "Could not read Corefile: %s" % e) from e
    return parse(text, path, env, strict)


def check_duplicates(blocks, filters=None):
    """Refuse two blocks serving the same transport, zone and port, as
    CoreDNS does once plugins are set up.

    ``filters`` is parallel to ``blocks``: per block None or
    ``(bind_addresses, filtered)``: the addresses ``bind`` listens on (empty
    means all) and whether the block filters queries (``view``).  Filtered
    blocks may share a key with others; blocks bound to different addresses
    may too, but not with an unbound block on the same zone and port.
    """
    registered, unbound = set(), {}
    for i, block in enumerate(blocks):
        spec = filters[i] if filters else None
        addrs, filtered = spec if spec else ((), False)
        for za in block.keys:
            for addr in list(addrs) or [""]:
                akey = (za.transport, za.zone, addr, za.port)
                ukey = (za.transport, za.zone, "", za.port)
                label = str(za) + (" on " + addr if addr else "")
                exists = akey in registered
                overlap = None
                if not exists and ukey in unbound:
                    if addr == "":
                        overlap = unbound[ukey]
                    elif ukey in registered:
                        overlap = str(za)
                if exists and not filtered:
                    raise CorefileError(block.file, block.line, "cannot serve "
                                        "%s - it is already defined" % label)
                if overlap:
                    raise CorefileError(block.file, block.line, "cannot serve "
                                        "%s - zone overlap listener capacity "
                                        "with %s" % (label, overlap))
                if not filtered and not exists:
                    registered.add(akey)
                    unbound[ukey] = label
