"""The expression engines: expr-lang and Go template subsets, as tables of
programs with their results or their errors."""

from twisted.trial import unittest

from corednstw.core.request import Request, make_query
from corednstw.engines import expressions as x
from corednstw.engines.expressions import goregexp, gotemplate
from corednstw.engines.expressions.gotemplate import GoMap


def request(name="Abc.X.Example.com.", qtype=1, client="10.1.2.3",
            port=5353, proto="udp", do=False):
    req = Request(make_query(name, qtype, do=do), client=client, port=port,
                  proto=proto, local=("127.0.0.1", 1053))
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    return req


# (expression, expected value)
VALUES = [
    ("name()", "abc.x.example.com."),
    ("type()", "A"),
    ("class()", "IN"),
    ("proto()", "udp"),
    ("client_ip()", "10.1.2.3"),
    ("port()", "5353"),
    ("server_ip()", "127.0.0.1"),
    ("server_port()", "1053"),
    ("do()", False),
    ("bufsize()", 512),
    ("opcode()", 0),
    ("type() in ['A', 'AAAA']", True),
    ("type() not in ['A', 'AAAA']", False),
    ("incidr(client_ip(), '10.0.0.0/8')", True),
    ("incidr(client_ip(), '192.168.0.0/16')", False),
    ("incidr('::1', '::/64')", True),
    ("incidr('10.0.0.1', '2001:db8::/32')", False),
    ("name() matches '^abc\\\\..*\\\\.example\\\\.com\\\\.$'", True),
    ("name() matches '(?i)ABC'", True),
    ("name() contains 'example'", True),
    ("name() startsWith 'abc'", True),
    ("name() endsWith 'com.'", True),
    ("not (name() endsWith 'org.')", True),
    ("!false && true", True),
    ("false or true and false", False),
    ("(type() == 'A' && name() == 'example.com.') || "
     "client_ip() == '10.1.2.3'", True),
    ("1 + 2 * 3", 7),
    ("7 / 2", 3.5),
    ("-7 % 3", -1),
    ("2 ** 10", 1024.0),
    ("1 < 2 < 3", True),
    ("1 == 1.0", True),
    ("'a' + 'b'", "ab"),
    ("1..3", [1, 2, 3]),
    ("[1, 2, 3][-1]", 3),
    ("{a: 1}.a", 1),
    ("true ? 'y' : 'n'", "y"),
    ("nil ?? 'd'", "d"),
    ("name() | upper()", "ABC.X.EXAMPLE.COM."),
    ("len('abc')", 3),
    ("int('42') + 1", 43),
    ("float('1.5')", 1.5),
    ("string(12)", "12"),
    ("replace('1-2-3-4', '-', '.')", "1.2.3.4"),
    ("split('a.b.c', '.')", ["a", "b", "c"]),
    ("trimSuffix(name(), '.')", "abc.x.example.com"),
    ("any(['10.0.0.0/8', '172.16.0.0/12'], incidr(client_ip(), #))", True),
    ("all([1, 2], # > 1)", False),
    ("none([1, 2], {# > 5})", True),
    ("one([1, 2], # > 1)", True),
    ("filter(1..6, # % 2 == 0)", [2, 4, 6]),
    ("map([1, 2], # * 10)", [10, 20]),
    ("count([true, false, true])", 2),
    ("0x1F + 0b11 + 0o7 + 1_000", 1041),
    ("1.5e3", 1500.0),
    ("`raw\\n`", "raw\\n"),
    ("'tab\\there'", "tab\there"),
    ("metadata('test/region')", "eu"),
    ("metadata('no/such')", ""),
]

# (expression, fragment of the compile error)
COMPILE_ERRORS = [
    ("undefined == 1", "unknown name undefined"),
    ("name() ==", "unexpected end of expression"),
    ("invalid expression", "unexpected token"),
    ("1 + 'x'", "mismatched types int and string"),
    ("'1' == 1", "mismatched types string and int"),
    ("incidr(1, '10.0.0.0/8')", "cannot use int as argument"),
    ("name(1)", "too many arguments"),
    ("incidr('1.2.3.4')", "not enough arguments"),
    ("nosuch()", "unknown name nosuch"),
    ("toJSON(1)", "not supported"),
    ("type", "is a function"),
    ("len(1)", "invalid argument for len"),
    ("!1", "mismatched type"),
    ("name() matches '('", "error parsing regexp"),
    ("name() matches '(?=x)'", "unsupported Perl syntax"),
    ("let x = 1; x", "not supported"),
    ("(1 + 2", "unexpected end of expression"),
    ("[1, 2", "unexpected end of expression"),
    ("'unterminated", "literal not terminated"),
    ("1 ; 2", "not supported"),
    ("name() in 'abc'", "mismatched types"),
    ("", "unexpected end of expression"),
]

# (expression, fragment of the runtime error)
RUN_ERRORS = [
    ("incidr('notanip', '10.0.0.0/8')", "not an IP address"),
    ("incidr(client_ip(), 'bad')", "invalid CIDR"),
    ("int('x')", "invalid syntax"),
    ("1 % 0", "divide by zero"),
    ("[1][5]", "out of range"),
]


class ExprTest(unittest.TestCase):

    def setUp(self):
        self.env = x.default_env()
        self.scope = x.Scope(request())
        self.scope.req.metadata = {"test/region": lambda: "eu"}

    def test_values(self):
        for source, want in VALUES:
            prog = x.compile_expr(source, self.env)
            got = prog.run(self.scope)
            self.assertEqual((source, got), (source, want))
            self.assertIs(type(got), type(want), source)

    def test_compile_errors(self):
        for source, fragment in COMPILE_ERRORS:
            with self.assertRaises(x.ExpressionError, msg=source) as cm:
                x.compile_expr(source, self.env)
            self.assertIn(fragment, str(cm.exception), source)

    def test_run_errors(self):
        for source, fragment in RUN_ERRORS:
            prog = x.compile_expr(source, self.env)
            with self.assertRaises(x.EvalError, msg=source) as cm:
                prog.run(self.scope)
            self.assertIn(fragment, str(cm.exception), source)
            self.assertFalse(prog.truth(self.scope))

    def test_variables_and_groups(self):
        env = dict(self.env, n=x.Variable("n", x.INT))
        prog = x.compile_expr("n * 2 > 3", env)
        self.assertIs(prog.run(x.Scope(None, vars={"n": 2})), True)
        with self.assertRaises(x.ExpressionError):
            x.compile_expr("n + 'x'", env)

    def test_ipv6_client(self):
        scope = x.Scope(request(client="2001:db8::1"))
        prog = x.compile_expr("incidr(client_ip(), '2001:0DB8::/32')",
                              self.env)
        self.assertIs(prog.run(scope), True)
        self.assertEqual(x.compile_expr("client_ip()", self.env).run(scope),
                         "2001:db8::1")

    def test_tcp_bufsize_and_do(self):
        scope = x.Scope(request(proto="tcp", do=True))
        self.assertEqual(x.compile_expr("bufsize()", self.env).run(scope),
                         65535)
        self.assertIs(x.compile_expr("do()", self.env).run(scope), True)


class Data:
    GO_FIELDS = {"Name": "name", "Group": "group", "Match": "match",
                 "Var": "var", "Class": "klass"}
    GO_METHODS = {"Meta": "meta"}

    def __init__(self):
        self.name = "ip-10-95-12-8.example."
        self.match = ["ip-10-95-12-8.example.", "95", "0a"]
        self.group = GoMap({"0": self.match[0], "1": "95", "2": "0a",
                            "b": "95", "h": "0a"}, zero="")
        self.var = GoMap({"n": 2, "f": 2.5, "ok": True, "l": [1, 2]})
        self.klass = "IN"

    def meta(self, key):
        return {"foo": "myfoo"}.get(key, "")


# (template, expected text)
TEMPLATES = [
    ("plain text", "plain text"),
    ("{{ .Name }} 60 IN A 10.{{ .Group.b }}", "ip-10-95-12-8.example. 60 "
     "IN A 10.95"),
    ("{{ index .Match 1 }}", "95"),
    ('{{ .Meta "foo" }}-{{ .Meta "bar" }}|', "myfoo-|"),
    ("{{ parseInt .Group.h 16 8 }}", "10"),
    ("{{ parseInt \"0x10\" 0 0 }}", "16"),
    ("{{ if .Var.ok }}y{{ else }}n{{ end }}", "y"),
    ("{{ if eq .Class \"CH\" }}c{{ else if eq .Class \"IN\" }}i{{ end }}",
     "i"),
    ("{{ len .Var }}", "4"),
    ("a  {{- .Class -}}  b", "aINb"),
    ("{{ .Group.missing }}", "<no value>"),
    ("{{ index .Group \"missing\" }}|", "|"),
    ("{{ range .Match }}[{{ . }}]{{ end }}",
     "[ip-10-95-12-8.example.][95][0a]"),
    ("{{ range .Var.l }}{{ if eq . 2 }}{{ break }}{{ end }}{{ . }}"
     "{{ end }}", "1"),
    ("{{ with .Var.n }}{{ . }}{{ end }}", "2"),
    ("{{ .Var.f }} {{ .Var.l }}", "2.5 [1 2]"),
    ("{{/* comment */}}x", "x"),
    ('{{ printf "%03d-%s" 7 "a" }}', "007-a"),
    ('{{ .Name | printf "%s!" }}', "ip-10-95-12-8.example.!"),
    ('{{ "}}" }}', "}}"),
    ("{{ and 1 0 }} {{ or 0 \"x\" }} {{ not false }}", "0 x true"),
    ("{{ .Group.b | len }}", "2"),
    ("{{ (index .Match 1) }}", "95"),
    ("a }} b", "a }} b"),
]

# (template, fragment of the compile error)
TEMPLATE_ERRORS = [
    ("{{", "unclosed action"),
    ("x {{ .Name", "unclosed action"),
    ("{{ notAFunction }}", 'function "notAFunction" not defined'),
    ("{{ end }}", "unexpected {{end}}"),
    ("{{ if 1 }}", "unexpected EOF"),
    ("{{ $x := 1 }}", "variables are not supported"),
    ("{{ }}", "missing value"),
    ("{{ (1 }}", "unclosed left paren"),
    ('{{ define "x" }}{{ end }}', "not supported"),
    ("{{ break }}", "outside {{range}}"),
]

# (template, fragment of the execution error)
TEMPLATE_RUN_ERRORS = [
    ("{{ index .Match 3 }}", "index out of range: 3"),
    ('{{ parseInt "gg" 16 8 }}', 'parsing "gg": invalid syntax'),
    ('{{ parseInt "300" 10 8 }}', "value out of range"),
    ("{{ parseInt }}", "wrong number of args"),
    ("{{ .Grup.d }}", "can't evaluate field Grup"),
    ("{{ eq 1 \"a\" }}", "incompatible types"),
]


class TemplateTest(unittest.TestCase):

    def compile(self, text):
        return gotemplate.compile(text, gotemplate.COREDNS_FUNCS)

    def test_render(self):
        data = Data()
        for text, want in TEMPLATES:
            self.assertEqual((text, self.compile(text).render(data)),
                             (text, want))

    def test_constant(self):
        self.assertEqual(self.compile("a. 60 IN A 1.2.3.4").constant,
                         "a. 60 IN A 1.2.3.4")
        self.assertIsNone(self.compile("{{ .Name }}").constant)

    def test_compile_errors(self):
        for text, fragment in TEMPLATE_ERRORS:
            with self.assertRaises(x.ExpressionError, msg=text) as cm:
                self.compile(text)
            self.assertIn(fragment, str(cm.exception), text)

    def test_run_errors(self):
        data = Data()
        for text, fragment in TEMPLATE_RUN_ERRORS:
            t = self.compile(text)
            with self.assertRaises(x.EvalError, msg=text) as cm:
                t.render(data)
            self.assertIn(fragment, str(cm.exception), text)


class GoRegexpTest(unittest.TestCase):

    def test_translations(self):
        for pattern, name, want in [
            ("^(?P<a>[0-9]*)[.]x$", "12.x", ["12.x", "12"]),
            ("^(?<a>[0-9]*)[.]x$", "12.x", ["12.x", "12"]),
            ("^[[:digit:]]+\\z", "123", ["123"]),
            ("\\Qa.b\\E", "xa.b", ["a.b"]),
            ("(a)|(b)", "b", ["b", "", "b"]),
            ("a{,2}", "a{,2}", ["a{,2}"]),
            ("\\pL+", "ab1", ["ab"]),
            ("(?U)a+", "aaa", ["a"]),
            ("a$", "a\n", None),
        ]:
            rx = goregexp.compile(pattern)
            self.assertEqual(goregexp.submatches(rx, name), want, pattern)

    def test_refused(self):
        for pattern in ["(a)\\1", "(?=a)", "(?<=a)b", "\\C", "(?P<\u00e9>a)",
                        "[a", "a{1001}", "a" * 10001]:
            self.assertRaises(goregexp.RegexpError, goregexp.compile,
                              pattern)

    def test_group_names(self):
        rx = goregexp.compile("(?P<x>a)(b)")
        self.assertEqual(goregexp.group_names(rx), ["", "x", ""])
