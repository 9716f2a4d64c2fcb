"""template: answers written by Go templates (CoreDNS's template).

``template CLASS TYPE [ZONE...] { match REGEX...; var NAME EXPR; expr EXPR;
answer RR; additional RR; authority RR; rcode CODE; ederror CODE [REASON];
fallthrough [ZONES...]; upstream }``.  Each occurrence is one template;
they are tried in Corefile order (one plugin per occurrence, adjacent in
the chain, which is what CoreDNS's single handler with a list does).

For a query in the template's zones and of its class and type (ANY on
either side matches), the regexes are tried in order on the lower-cased
name; the first that matches, once every ``var`` is set and every ``expr``
is true, makes the answer.  Otherwise the query goes on to the next
template (or plugin) when ``fallthrough`` covers the name, and gets
SERVFAIL when it does not.  A ``var`` or ``expr`` that fails while running
is SERVFAIL whatever ``fallthrough`` says, as in CoreDNS.

Everything is compiled at setup (regexes, templates, expressions).  A
record text that never changes is parsed once; rendered texts are parsed
through a small cache, since the same names come back.  A template with no
regex, record, variable or condition (``template ANY AAAA { rcode NOERROR
}``) costs a zone match, a counter and an empty Response.

A CNAME answer to an A or AAAA query is followed through the server
(``app.lookup``): the target's answer records are appended after it.
"""

import re
import struct
from functools import partial

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.plugin import Fallthrough, Plugin, match, zones_from_args
from corednstw.core.request import Response
from corednstw.engines import expressions as ex
from corednstw.engines.expressions import goregexp, gotemplate

NAME = "template"
DEFAULT_TTL = 3600          # miekg's zone parser default
EDE = 15                    # the EDNS0 Extended DNS Error option

MATCHES = metrics.counter(
    "coredns_template_matches_total", "Counter of template regex matches.",
    ("server", "zone", "view", "class", "type"))
TEMPLATE_FAILURES = metrics.counter(
    "coredns_template_template_failures_total",
    "Counter of go template failures.",
    ("server", "zone", "view", "class", "type", "section", "template"))
RR_FAILURES = metrics.counter(
    "coredns_template_rr_failures_total", "Counter of mis-templated RRs.",
    ("server", "zone", "view", "class", "type", "section", "template"))

#: miekg's StringToClass (exact spelling).
CLASSES = {"IN": 1, "CS": 2, "CH": 3, "HS": 4, "NONE": 254, "ANY": 255}

_VAR_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class Question:
    """``.Question``: the question as the client sent it (miekg's
    dns.Question)."""

    GO_FIELDS = {"Name": "name", "Qtype": "qtype", "Qclass": "qclass"}

    def __init__(self, req):
        self.name = req.name
        self.qtype = req.qtype
        self.qclass = req.qclass

    def __str__(self):
        return ";%s\t%s\t %s" % (self.name, w.class_text(self.qclass),
                                 w.type_text(self.qtype))


class Message:
    """``.Message``: the query's header fields and question."""

    GO_FIELDS = {"Id": "id", "Opcode": "opcode", "Question": "question",
                 "RecursionDesired": "rd", "CheckingDisabled": "cd",
                 "AuthenticatedData": "ad"}

    def __init__(self, req, question):
        self.id = req.id
        self.opcode = req.opcode
        self.question = [question]
        self.rd = req.rd
        self.cd = req.cd
        self.ad = bool(req.flags & 0x20)
        self._req = req

    def __str__(self):
        return self._req.message().to_text()


class Data:
    """What a template sees (CoreDNS's templateData)."""

    GO_FIELDS = {"Zone": "zone", "Name": "name", "Regex": "regex",
                 "Match": "match", "Group": "group", "Class": "klass",
                 "Type": "type", "Message": "message",
                 "Question": "question", "Remote": "remote", "Var": "var"}
    GO_METHODS = {"Meta": "meta"}

    def __init__(self, req, zone, regex, groups, names, klass, rtype):
        self.req = req
        self.zone = zone
        self.name = req.qname
        self.regex = regex
        self.match = groups
        group = gotemplate.GoMap(zero="")
        for i, text in enumerate(groups):
            group[str(i)] = text
        for i, n in enumerate(names):
            if n:
                group[n] = groups[i]
        self.group = group
        self.klass = klass
        self.type = rtype
        self.remote = req.client
        self.var = gotemplate.GoMap()
        self._question = None

    @property
    def question(self):
        if self._question is None:
            self._question = Question(self.req)
        return self._question

    @property
    def message(self):
        return Message(self.req, self.question)

    def meta(self, key):
        md = self.req.metadata
        if not md:
            return ""
        v = md.get(key)
        if v is None:
            return ""
        if callable(v):
            v = v()
        return v or ""


class RRText:
    """A record template: its section, the compiled template and, when it
    has no action, the record parsed once."""

    __slots__ = ("section", "template", "label", "fixed")

    def __init__(self, section, template):
        self.section = section
        self.template = template
        self.label = template.source
        self.fixed = None
        if template.constant is not None:
            try:
                self.fixed = parse_rr(template.constant)
            except ValueError:
                pass        # reported per query, as CoreDNS does


class Template(Plugin):
    name = NAME
    once = False

    def __init__(self, qclass, qtype, zones):
        self.qclass = qclass
        self.qtype = qtype
        self.zones = zones
        self.regexes = []       # (compiled, source, group names)
        self.vars = []          # (name, Program)
        self.exprs = []         # Programs
        self.answer = []
        self.additional = []
        self.authority = []
        self.rcode = w.NOERROR
        self.ede = None
        self.fall = Fallthrough()
        self.simple = False
        self.class_text = w.class_text(qclass)
        self.type_text = w.type_text(qtype)

    def finish_setup(self):
        """Decide once whether queries need any per-query data."""
        self.simple = not (self.regexes or self.vars or self.exprs or
                           self.answer or self.additional or self.authority)
        if not self.regexes:
            self.regexes = [(None, ".*", [""])]

    # -- serving ----------------------------------------------------------

    def serve(self, req):
        zone = match(self.zones, req.qname)
        if zone is None:
            return self.next.serve(req)
        qc, qt = req.qclass, req.qtype
        if (self.qclass != 255 and qc != 255 and qc != self.qclass) or (
                self.qtype != 255 and qt != 255 and qt != self.qtype):
            return self.next.serve(req)
        klass = w.class_text(qc) if qc != 255 else self.class_text
        rtype = w.type_text(qt) if qt != 255 else self.type_text
        if self.simple:
            MATCHES.inc((req.server, zone, req.view, klass, rtype))
            if self.rcode == w.SERVFAIL:
                return None
            return self._respond([], [], [])
        data, outcome = self._match(req, zone, klass, rtype)
        if outcome is _FALL:
            return self.next.serve(req)
        if outcome is _FAIL:
            return None
        MATCHES.inc((req.server, zone, req.view, klass, rtype))
        if self.rcode == w.SERVFAIL:
            return None
        return self._answer(req, data)

    def _match(self, req, zone, klass, rtype):
        """(data, outcome): outcome is _OK, _FALL or _FAIL."""
        name = req.qname
        for rx, source, names in self.regexes:
            if rx is None:
                groups = [name]
            else:
                groups = goregexp.submatches(rx, name)
                if groups is None:
                    continue
            data = Data(req, zone, source, groups, names, klass, rtype)
            if self.vars or self.exprs:
                return data, self._conditions(req, data)
            return data, _OK
        return None, _FALL if self.fall.through(name) else _FAIL

    def _conditions(self, req, data):
        scope = ex.Scope(req, data.group, {})
        try:
            for name, prog in self.vars:
                value = prog.run(scope)
                scope.vars[name] = value
                data.var[name] = value
            for prog in self.exprs:
                if prog.run(scope) is not True:
                    return _FALL if self.fall.through(req.qname) else _FAIL
        except ex.EvalError:
            return _FAIL
        return _OK

    def _answer(self, req, data):
        sections: tuple[list[w.RR], list[w.RR], list[w.RR]] = ([], [], [])
        for part in self.answer + self.additional + self.authority:
            rr = part.fixed
            if rr is None:
                rr = self._render(req, data, part)
                if isinstance(rr, Response):
                    return rr
            sections[part.section].append(rr)
        answer, additional, authority = sections
        if req.qtype in (w.A, w.AAAA) and any(
                rr.rtype == w.CNAME for rr in answer):
            return self._follow(req, answer, additional, authority)
        return self._respond(answer, authority, additional)

    def _render(self, req, data, part):
        """The record of ``part`` for this query, or a SERVFAIL Response
        carrying the error (counted as CoreDNS counts it)."""
        labels = (req.server, data.zone, req.view, data.klass, data.type,
                  _SECTIONS[part.section], part.label)
        try:
            text = part.template.render(data)
        except ex.EvalError as e:
            TEMPLATE_FAILURES.inc(labels)
            return _failure("template: %s: %s" % (
                _SECTIONS[part.section], e))
        try:
            return parse_rr(text)
        except ValueError as e:
            RR_FAILURES.inc(labels)
            return _failure("dns: %s" % e)

    def _follow(self, req, answer, additional, authority):
        """Append the answers of each CNAME target, looked up through the
        server, after its CNAME."""
        app = self.block.server
        lookups = []
        for rr in answer:
            if rr.rtype == w.CNAME:
                target = w.read_name(rr.rdata, 0)[0]
                lookups.append(app.lookup(target, req.qtype, parent=req))
            else:
                lookups.append(None)
        pending = [d.addErrback(lambda f: None)
                   for d in lookups if d is not None]

        def done(results):
            results = iter(results)
            out = []
            for rr, d in zip(answer, lookups):
                out.append(rr)
                if d is not None:
                    up = next(results)
                    if isinstance(up, Response):
                        out.extend(up.answer)
            return self._respond(out, authority, additional)
        return defer.gatherResults(pending).addCallback(done)

    def _respond(self, answer, authority, additional):
        resp = Response(self.rcode, answer, authority, additional, aa=True,
                        plugin=NAME)
        if self.ede is not None:
            resp.opt = w.EDNS(4096, 0x8000, [self.ede])
        return resp


_OK, _FALL, _FAIL = object(), object(), object()
_SECTIONS = ("answer", "additional", "authority")


def _failure(text):
    resp = Response(w.SERVFAIL, plugin=NAME)
    resp.error = text
    return resp


# -- records from text -------------------------------------------------------

_RR_CACHE: dict[str, w.RR] = {}
_RR_CACHE_MAX = 4096


def parse_rr(text):
    """One record from zone-file text, as miekg's ``dns.NewRR`` reads it
    (owner, then TTL and class in either order, both optional, type,
    rdata; relative names are made absolute).  ValueError when invalid.
    Results are cached: rendered texts repeat."""
    rr = _RR_CACHE.get(text)
    if rr is None:
        rr = _parse_rr(text)
        if len(_RR_CACHE) >= _RR_CACHE_MAX:
            _RR_CACHE.clear()
        _RR_CACHE[text] = rr
    return rr


def _parse_rr(text):
    import dns.exception
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.tokenizer
    import dns.ttl
    tok = dns.tokenizer.Tokenizer(text)
    try:
        first = tok.get()
        if first.is_eol_or_eof():
            raise ValueError("no record in %r" % text)
        owner = first.value
        if owner == "@":
            owner = "."
        elif not owner.endswith(".") or owner.endswith("\\."):
            owner += "."
        dns.name.from_text(owner)
        ttl = rclass = None
        while True:
            t = tok.get()
            if t.is_eol_or_eof():
                raise ValueError('not a TTL: "%s"' % owner)
            v = t.value
            if ttl is None and v[:1].isdigit():
                try:
                    ttl = dns.ttl.from_text(v)
                    continue
                except dns.exception.DNSException as e:
                    raise ValueError('not a TTL: "%s"' % v) from e
            up = v.upper()
            if rclass is None and (up in CLASSES or
                                   re.match(r"CLASS\d+$", up)):
                rclass = dns.rdataclass.from_text(up)
                continue
            rtype = dns.rdatatype.from_text(up)
            break
        rclass = dns.rdataclass.IN if rclass is None else rclass
        rd = dns.rdata.from_text(rclass, rtype, tok, origin=dns.name.root,
                                 relativize=False)
    except dns.exception.DNSException as e:
        raise ValueError("%s in %r" % (e, text)) from e
    return w.RR(owner, rtype, DEFAULT_TTL if ttl is None else ttl,
                w.rdata_wire(rd), rclass)


# -- setup -------------------------------------------------------------------

def setup(d, block):
    """``template CLASS TYPE [ZONE...] { ... }``: the expressions and
    templates are compiled here, so a bad one fails the configuration."""
    args = d.between(2)
    qclass = CLASSES.get(args[0])
    if qclass is None:
        raise d.error("invalid query class %s" % args[0])
    qtype = _type(args[1])
    if qtype is None:
        raise d.error("invalid RR class %s" % args[1])
    t = Template(qclass, qtype, zones_from_args(args[2:], block))
    env = _base_env()
    # An unknown option is CoreDNS's argument error, after its name.
    d.read_options({name: partial(handler, t, env=env)
                    for name, handler in _OPTIONS.items()},
                   unknown="Wrong argument count or unexpected line ending "
                           "after '%s'")
    t.finish_setup()
    return t


def _type(text):
    if text != text.upper() or text.startswith("TYPE"):
        return None
    try:
        return w.type_value(text)
    except ValueError:
        return None


def _base_env():
    env = ex.default_env()
    env["group"] = ex.Function("group", (ex.ANY,), ex.STRING, _group)
    return env


def _group(scope, key):
    if isinstance(key, bool):
        return ""
    if isinstance(key, int):
        return scope.groups.get(str(key), "")
    if isinstance(key, str):
        return scope.groups.get(key, "")
    return ""


def _opt_match(t, c, env):
    for source in c.between(1):
        try:
            rx = goregexp.compile(source)
        except goregexp.RegexpError as e:
            if "too long" in str(e):
                raise c.error(str(e)) from e
            raise c.error("could not parse regex: %s, %s" % (source, e)) from e
        t.regexes.append((rx, source, goregexp.group_names(rx)))


def _section(index):
    def handler(t, c, env):
        for source in c.between(1):
            try:
                tmpl = gotemplate.compile(source, gotemplate.COREDNS_FUNCS)
            except ex.ExpressionError as e:
                raise c.error("could not compile template: %s, %s"
                              % (source, e)) from e
            part = RRText(index, tmpl)
            (t.answer, t.additional, t.authority)[index].append(part)
    return handler


def _opt_var(t, c, env):
    name = c.between(2)[0]
    if not _VAR_NAME.match(name):
        raise c.error("invalid variable name %r" % name)
    if name in env or name in ex.EXPR_BUILTINS or name in ex.KEYWORDS:
        raise c.error("variable name %r is reserved" % name)
    prog = _compile(c, " ".join(c.args[1:]), env)
    env[name] = ex.Variable(name, prog.type)
    t.vars.append((name, prog))


def _opt_expr(t, c, env):
    t.exprs.append(_compile(c, " ".join(c.between(1)), env))


def _compile(c, source, env):
    try:
        return ex.compile_expr(source, env)
    except ex.ExpressionError as e:
        raise c.error("could not compile expression: %s, %s"
                      % (source, e)) from e


def _opt_rcode(t, c, env):
    code = c.one()
    try:
        if code != code.upper():
            raise ValueError(code)
        t.rcode = w.rcode_value(code)
    except ValueError as e:
        raise c.error("unknown rcode %s" % code) from e


def _opt_ederror(t, c, env):
    """``ederror CODE [REASON]``: the code is Go's ParseUint of 16 bits,
    refused without Go's text."""
    args = c.between(1, 2)
    code = c.integer(args[0], func="ParseUint", bits=16,
                     error="error parsing extended DNS error code {text}")
    reason = args[1] if len(args) == 2 else ""
    t.ede = (EDE, struct.pack("!H", code) + reason.encode())


def _opt_fallthrough(t, c, env):
    t.fall = Fallthrough.parse(c.args)


def _opt_upstream(t, c, env):
    """Accepted and ignored, as in CoreDNS (CNAMEs are always followed)."""


_OPTIONS = {
    "match": _opt_match, "answer": _section(0), "additional": _section(1),
    "authority": _section(2), "var": _opt_var, "expr": _opt_expr,
    "rcode": _opt_rcode, "ederror": _opt_ederror,
    "fallthrough": _opt_fallthrough, "upstream": _opt_upstream,
}
