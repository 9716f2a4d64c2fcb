"""Corefile grammar: lexing, blocks, keys, env, snippets, imports, errors,
reverse zones, duplicate keys, and golden dumps of the shared Corefiles.

Goldens: ``tests/golden/<name>.dump`` is ``dump(parse(...))`` of
``tests/corefiles/shared/<name>.Corefile`` under GOLDEN_ENV.  Run with
REGEN_GOLDEN=1 to refresh the copy of the shared Corefiles (when the shared
directory is next to the repository) and rewrite the goldens.  The
"[not supported yet]" markers follow whichever plugins exist, so they are
ignored when comparing.
"""

import io
import os
import re
import shutil
import sys
import tempfile

from twisted.trial import unittest

from corednstw.core import corefile, names, plugin
from corednstw.core.corefile import ZoneAddr, check_duplicates, parse
from corednstw.core.dump import dump
from corednstw.core.errors import CorefileError

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(REPO, "..", "shared", "corefiles")
COPY = os.path.join(HERE, "corefiles", "shared")
GOLDEN = os.path.join(HERE, "golden")
GOLDEN_ENV = {"CLUSTER_DNS": "10.96.0.10", "TLS_CERT": "/certs/tls.crt",
              "TLS_KEY": "/certs/tls.key"}
MARK = re.compile(r" \[not supported yet[^\]]*\]")


def p(text, env=None, filename="Corefile"):
    return parse(text, filename, env or {})


def one(text, env=None):
    blocks = p(text, env)
    assert len(blocks) == 1, blocks
    return blocks[0]


def flat(d):
    """A directive as nested tuples, for compact assertions."""
    return (d.name, d.args, [flat(c) for c in d.children])


class LexerTests(unittest.TestCase):
    def test_comments(self):
        b = one(". {  # comment {\n  whoami#x y\n  # log\n  log a#b c\n}\n")
        self.assertEqual([flat(d) for d in b.directives],
                         [("whoami", [], []), ("log", ["a"], [])])

    def test_quotes_and_escapes(self):
        b = one('. {\n  log . "a b" "say \\"hi\\"" "c\\d" "" x"y"z "q"r\n}\n')
        self.assertEqual(b.directives[0].args,
                         [".", "a b", 'say "hi"', "c\\d", "", 'x"y"z', "q",
                          "r"])

    def test_backslash_pairs_stay(self):
        b = one('. {\n  log "a\\\\b"\n}\n')
        self.assertEqual(b.directives[0].args, ["a\\\\b"])

    def test_multiline_quote_continues_line(self):
        b = one('. {\n  log "a\nb" c\n  whoami\n}\n')
        self.assertEqual([flat(d) for d in b.directives],
                         [("log", ["a\nb", "c"], []), ("whoami", [], [])])
        self.assertEqual(b.directives[1].line, 4)

    def test_no_backquotes(self):
        b = one(". {\n  log `a b`\n}\n")
        self.assertEqual(b.directives[0].args, ["`a", "b`"])

    def test_crlf_and_bom(self):
        b = one("\ufeff.:53 {\r\n  whoami\r\n}\r\n")
        self.assertEqual(b.directives[0].name, "whoami")
        self.assertEqual(b.directives[0].line, 2)

    def test_unterminated_quote_at_eof_is_a_token(self):
        toks = corefile.tokenize('log "abc', "f")
        self.assertEqual([t.text for t in toks], ["log", "abc"])


class BlockTests(unittest.TestCase):
    def test_keys_space_and_comma(self):
        b = one("a.org b.org, c.org,\n  d.org {\n  whoami\n}\n")
        self.assertEqual([z.zone for z in b.keys],
                         ["a.org.", "b.org.", "c.org.", "d.org."])
        self.assertEqual((b.file, b.line), ("Corefile", 1))

    def test_brace_on_next_line(self):
        b = one("example.org\n{\n  whoami\n}\n")
        self.assertEqual(b.directives[0].name, "whoami")

    def test_single_block_without_braces(self):
        b = one("example.org:1053\nwhoami\nlog\n")
        self.assertEqual([d.name for d in b.directives], ["whoami", "log"])
        self.assertEqual(b.keys, [ZoneAddr("dns", "example.org.", "1053")])

    def test_keys_only(self):
        b = one("example.org")
        self.assertEqual(b.directives, [])

    def test_empty(self):
        self.assertEqual(p(""), [])
        self.assertEqual(p("# nothing\n\n"), [])

    def test_several_blocks_and_children(self):
        blocks = p("a:53 {\n  forward . 1.1.1.1 {\n    max_fails 3\n"
                   "    policy random\n  }\n  cache 30\n}\n"
                   "b:54 {\n  whoami\n}\n")
        self.assertEqual(len(blocks), 2)
        self.assertEqual([flat(d) for d in blocks[0].directives], [
            ("forward", [".", "1.1.1.1"],
             [("max_fails", ["3"], []), ("policy", ["random"], [])]),
            ("cache", ["30"], [])])
        child = blocks[0].directives[0].children[1]
        self.assertEqual((child.line, child.plugin), (4, "forward"))
        self.assertEqual(blocks[1].line, 8)

    def test_nested_and_inline_block(self):
        b = one(". {\n  template IN A x {\n    match a { b }\n"
                "    answer x\n  }\n"
                "  health { lameduck 5s }\n}\n")
        self.assertEqual([flat(d) for d in b.directives], [
            ("template", ["IN", "A", "x"],
             [("match", ["a"], [("b", [], [])]), ("answer", ["x"], [])]),
            ("health", [], [("lameduck", ["5s"], [])])])

    def test_empty_string_key_dropped(self):
        self.assertEqual(p('"" {\n whoami\n}\n'), [])

    def test_stray_close_in_unbraced_block(self):
        b = one(".\nwhoami\n}\n")
        self.assertEqual([d.name for d in b.directives], ["whoami"])


class KeyTests(unittest.TestCase):
    def keys(self, text):
        return [(z.transport, z.zone, z.port, z.key)
                for z in one(text + " {\n whoami\n}\n").keys]

    def test_schemes_and_default_ports(self):
        self.assertEqual(self.keys(
            ". dns://a tls://b grpc://c https://d quic://e https3://f"), [
            ("dns", ".", "53", "."), ("dns", "a.", "53", "dns://a"),
            ("tls", "b.", "853", "tls://b"), ("grpc", "c.", "443", "grpc://c"),
            ("https", "d.", "443", "https://d"), ("quic", "e.", "853", "quic://e"),
            ("https3", "f.", "443", "https3://f")])

    def test_ports_and_case(self):
        self.assertEqual(self.keys("Example.ORG:1053 tls://x.:0853 .:53"), [
            ("dns", "example.org.", "1053", "Example.ORG:1053"),
            ("tls", "x.", "853", "tls://x.:0853"), ("dns", ".", "53", ".:53")])

    def test_str(self):
        self.assertEqual(str(ZoneAddr("dns", "example.org.", "53")),
                         "dns://example.org.:53")

    def test_cidr_keys_expand(self):
        self.assertEqual(self.keys("10.0.0.0/22:1053 a"), [
            ("dns", "0.0.10.in-addr.arpa.", "1053", "10.0.0.0/22:1053"),
            ("dns", "1.0.10.in-addr.arpa.", "1053", "10.0.0.0/22:1053"),
            ("dns", "2.0.10.in-addr.arpa.", "1053", "10.0.0.0/22:1053"),
            ("dns", "3.0.10.in-addr.arpa.", "1053", "10.0.0.0/22:1053"),
            ("dns", "a.", "53", "a")])

    def test_bad_keys(self):
        for key, msg in [
                ("a..b", "zone is not a valid domain name: a..b"),
                (":53", "zone is not a valid domain name: "),
                ("a.:", 'expecting data after last colon: "a.:"'),
                ("::/0", "invalid CIDR ::/0"),
                ("x" * 256, "specified zone is too long: 256 > 255")]:
            e = self.assertRaises(CorefileError, p, "\n" + key + " {\n}\n")
            self.assertEqual(e.message, msg)
            self.assertEqual(e.line, 2)


class EnvTests(unittest.TestCase):
    def test_env_everywhere(self):
        env = {"Z": "example.org", "D": "whoami", "A": "1.1.1.1", "P": "53",
               "S": "a b"}
        b = one("{$Z}:{%P%} {\n  {$D}\n  forward . {$A} tls://{$A}:8{$P} "
                "\"{$S}\" x{$UNSET}y {$UNSET}\n}\n", env)
        self.assertEqual(b.keys, [ZoneAddr("dns", "example.org.", "53")])
        self.assertEqual([flat(d) for d in b.directives], [
            ("whoami", [], []),
            ("forward", [".", "1.1.1.1", "tls://1.1.1.1:853", "a b", "xy", ""],
             [])])

    def test_defaults_to_os_environ(self):
        os.environ["COREFILE_TEST_VAR"] = "from-env"
        self.addCleanup(os.environ.pop, "COREFILE_TEST_VAR")
        b = parse(". {\n  log {$COREFILE_TEST_VAR}\n}\n")
        self.assertEqual(b[0].directives[0].args, ["from-env"])

    def test_unclosed_reference_is_literal(self):
        self.assertEqual(corefile.expand_env("{$X", {"X": "1"}), "{$X")
        self.assertEqual(corefile.expand_env("a{$X}b{%X%}", {"X": "1"}),
                         "a1b1")


class SnippetTests(unittest.TestCase):
    def test_snippet(self):
        blocks = p("(common) {\n  errors\n  forward . 1.1.1.1 {\n"
                   "    force_tcp\n"
                   "  }\n}\na {\n  import common\n  whoami\n}\n"
                   "b {\n  whoami\n  import common\n}\n")
        self.assertEqual(len(blocks), 2)
        self.assertEqual([d.name for d in blocks[0].directives],
                         ["errors", "forward", "whoami"])
        self.assertEqual([d.name for d in blocks[1].directives],
                         ["whoami", "errors", "forward"])
        self.assertEqual(blocks[0].directives[1].line, 3)
        self.assertEqual(blocks[0].directives[1].children[0].name, "force_tcp")

    def test_one_line_snippet_and_import_in_directive_block(self):
        b = p("(opts) { max_fails 3 }\n. {\n  forward . 1.1.1.1 {\n"
              "    import opts\n    policy random\n  }\n}\n")[0]
        self.assertEqual(flat(b.directives[0]), (
            "forward", [".", "1.1.1.1"],
            [("max_fails", ["3"], []), ("policy", ["random"], [])]))

    def test_snippet_with_env_and_nesting(self):
        b = p("(s) {\n  log {$X}\n}\n(t) {\n  import s\n  whoami\n}\n"
              ". {\n  import t\n}\n", {"X": "y"})[0]
        self.assertEqual([flat(d) for d in b.directives],
                         [("log", ["y"], []), ("whoami", [], [])])

    def test_redeclaration(self):
        e = self.assertRaises(CorefileError, p, "(a) {\n}\n(a) {\n}\n")
        self.assertEqual(str(e), "Corefile:3 - Error during parsing: "
                                 "redeclaration of previously declared "
                                 "snippet a")

    def test_self_import(self):
        e = self.assertRaises(CorefileError, p,
                              "(a) {\n  whoami\n  import a\n}\n")
        self.assertEqual(e.line, 3)
        self.assertIn("maximum snippet import depth (10000) exceeded",
                      e.message)

    def test_snippet_cycle(self):
        e = self.assertRaises(CorefileError, p,
                              "(a) {\n  import b\n}\n(b) {\n  import a\n}\n"
                              ". {\n  import a\n}\n")
        self.assertEqual(e.line, 5)
        self.assertIn("import cycle: a -> b -> a", e.message)

    def test_snippet_needs_braces(self):
        e = self.assertRaises(CorefileError, p, "(a)\nwhoami\n")
        self.assertEqual(str(e), "Corefile:2 - Syntax error: Unexpected token "
                                 "'whoami', expecting '{'")

    def test_unclosed_snippet(self):
        e = self.assertRaises(CorefileError, p, "(a) {\n  whoami\n")
        self.assertEqual(str(e), "Corefile:2 - Syntax error: Unexpected token "
                                 "'whoami', expecting '}'")


class ImportTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        return path

    def parse_main(self, text, env=None):
        return parse(text, self.write("Corefile", text), env or {})

    def test_import_file_inside_block(self):
        self.write("conf/common.conf", "errors\nlog\n")
        blocks = self.parse_main(
            ". {\n  import conf/common.conf\n  whoami\n}\n")
        ds = blocks[0].directives
        self.assertEqual([d.name for d in ds], ["errors", "log", "whoami"])
        self.assertEqual(ds[0].file,
                         os.path.join(self.dir, "conf", "common.conf"))
        self.assertEqual((ds[1].line, ds[2].line), (2, 3))

    def test_import_top_level_blocks(self):
        self.write("blocks/a.conf", "a.org {\n  whoami\n}\n")
        self.write("blocks/b.conf", "b.org {\n  log\n}\n")
        blocks = self.parse_main("import blocks/*.conf\n. {\n  whoami\n}\n")
        self.assertEqual([b.keys[0].zone for b in blocks],
                         ["a.org.", "b.org.", "."])
        self.assertEqual(blocks[1].file,
                         os.path.join(self.dir, "blocks", "b.conf"))

    def test_nested_imports_relative_to_importer(self):
        self.write("d/x.conf", "import y.conf\n")
        self.write("d/y.conf", "whoami\n")
        b = self.parse_main(". {\n  import d/x.conf\n}\n")[0]
        self.assertEqual(b.directives[0].file,
                         os.path.join(self.dir, "d", "y.conf"))

    def test_absolute_import_and_env_path(self):
        path = self.write("abs.conf", "whoami\n")
        b = self.parse_main(". {\n  import {$P}\n}\n", {"P": path})[0]
        self.assertEqual(b.directives[0].name, "whoami")

    def test_empty_glob_warns(self):
        err = io.StringIO()
        self.patch(sys, "stderr", err)
        b = self.parse_main(". {\n  import none/*.conf\n  whoami\n}\n")[0]
        self.assertEqual([d.name for d in b.directives], ["whoami"])
        self.assertEqual(err.getvalue(), "[WARNING] No files matching import "
                                         "glob pattern: none/*.conf\n")

    def test_glob_sorted_and_siblings_not_cycles(self):
        self.write("g/b.conf", "log\n")
        self.write("g/a.conf", "import b.conf\n")
        b = self.parse_main(". {\n  import g/*.conf\n}\n")[0]
        self.assertEqual([d.name for d in b.directives], ["log", "log"])

    def test_import_snippet_defined_in_imported_file(self):
        self.write("snips", "(s) {\n  whoami\n}\n")
        b = self.parse_main("import snips\n. {\n  import s\n}\n")[0]
        self.assertEqual(b.directives[0].name, "whoami")

    def test_missing_file(self):
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  whoami\n  import nope.conf\n}\n")
        self.assertEqual(e.line, 3)
        self.assertEqual(e.message, "File to import not found: nope.conf")

    def test_too_many_wildcards(self):
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import */*.conf\n}\n")
        self.assertEqual(e.message,
                         "Glob pattern may only contain one wildcard "
                         "(*), but has others: %s/*/*.conf" % self.dir)

    def test_directory(self):
        os.mkdir(os.path.join(self.dir, "sub"))
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import sub\n}\n")
        self.assertTrue(e.message.endswith("sub: is a directory"), e.message)

    def test_argument_count(self):
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import\n}\n")
        self.assertEqual(str(e).split(" - ", 1)[1],
                         "Error during parsing: Wrong argument count or "
                         "unexpected line ending after 'import'")
        self.assertEqual(e.line, 2)
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import a b\n}\n")
        self.assertEqual(e.message, "Import takes only one argument "
                                    "(glob pattern or file)")
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import {$EMPTY}\n}\n")
        self.assertEqual(e.message, "Import requires a non-empty filepath")

    def test_file_cycle(self):
        self.write("a.conf", "whoami\nimport b.conf\n")
        self.write("b.conf", "log\nimport a.conf\n")
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import a.conf\n}\n")
        self.assertEqual((e.file, e.line),
                         (os.path.join(self.dir, "b.conf"), 2))
        self.assertIn("maximum file import depth", e.message)
        self.assertIn("a.conf -> ", e.message)

    def test_error_in_imported_file_names_it(self):
        path = self.write("bad.conf", "whoami\nbogus 1\n")
        e = self.assertRaises(CorefileError, self.parse_main,
                              ". {\n  import bad.conf\n}\n")
        self.assertEqual(str(e), "%s:2 - Error during parsing: Unknown "
                                 "directive 'bogus'" % path)

    def test_load(self):
        path = self.write("Corefile", ". {\n  whoami\n}\n")
        self.assertEqual(corefile.load(path)[0].directives[0].name, "whoami")
        self.patch(sys, "stdin", io.StringIO(". {\n  log\n}\n"))
        b = corefile.load("stdin")[0]
        self.assertEqual((b.file, b.directives[0].name), ("stdin", "log"))
        e = self.assertRaises(CorefileError, corefile.load,
                              os.path.join(self.dir, "missing"))
        self.assertIn("Could not read Corefile", e.message)


class ErrorTests(unittest.TestCase):
    def check(self, text, line, message, kind="Error during parsing"):
        e = self.assertRaises(CorefileError, p, text)
        self.assertEqual(str(e),
                         "Corefile:%d - %s: %s" % (line, kind, message))
        return e

    def test_unknown_directive(self):
        e = self.check(". {\n  whoami\n  bogus x\n}\n", 3,
                       "Unknown directive 'bogus'")
        self.assertEqual(e.directive, "bogus")

    def test_unknown_child_is_fine(self):
        self.assertEqual(len(p(". {\n forward . x {\n  bogus\n }\n}\n")), 1)

    def test_missing_close_brace(self):
        self.check(". {\n  whoami\n  log\n", 3,
                   "Unexpected token 'log', expecting '}'", "Syntax error")

    def test_missing_close_brace_after_directive_block(self):
        self.check(". {\n  forward . x {\n    force_tcp\n  }\n", 4,
                   "Unexpected token '}', expecting '}'", "Syntax error")

    def test_unclosed_directive_block(self):
        self.check(". {\n  forward . x {\n    force_tcp\n", 3,
                   "Unexpected EOF")

    def test_unmatched_close_brace(self):
        self.check(". {\n  whoami }\n", 2,
                   "Unexpected '}' because no matching opening brace")

    def test_extra_comma(self):
        self.check("a, {\n}\n", 1,
                   "Expected another address but had '{' - check for extra "
                   "comma")

    def test_comma_at_eof(self):
        self.check("a,", 1, "Unexpected EOF")

    def test_directive_errors(self):
        d = p(". {\n  forward . {\n    policy\n  }\n}\n")[0].directives[0]
        self.assertEqual(str(d.error("bad")),
                         "Corefile:2 - Error during parsing: "
                         "plugin/forward: bad")
        self.assertEqual(str(d.arg_error()),
                         "Corefile:2 - Error during parsing: "
                         "plugin/forward: Wrong argument count or unexpected "
                         "line ending after '.'")
        child = d.children[0]
        e = child.arg_error()
        self.assertEqual((e.file, e.line, e.directive),
                         ("Corefile", 3, "forward"))
        self.assertEqual(e.message, "plugin/forward: Wrong argument count or "
                                    "unexpected line ending after 'policy'")


class ZoneTests(unittest.TestCase):
    def test_normalize(self):
        cases = {
            "Example.ORG": ["example.org."], "example.org.": ["example.org."],
            ".": ["."], "tls://a.b:853": ["a.b."],
            "10.0.0.0/24": ["0.0.10.in-addr.arpa."],
            "10.0.0.0/8": ["10.in-addr.arpa."],
            "10.0.0.0/32": ["0.0.0.10.in-addr.arpa."],
            "10.1.2.3/16": ["1.10.in-addr.arpa."],
            "0.0.0.0/0": ["in-addr.arpa."],
            "10.0.0.0/22": ["%d.0.10.in-addr.arpa." % i for i in range(4)],
            "172.16.0.0/12": ["%d.172.in-addr.arpa." % i
                              for i in range(16, 32)],
            "10.0.0.0/15": ["0.10.in-addr.arpa.", "1.10.in-addr.arpa."],
            "192.168.1.0/25": ["%d.1.168.192.in-addr.arpa." % i
                               for i in range(128)],
            "fd00::/8": ["d.f.ip6.arpa."],
            "fd00::/7": ["c.f.ip6.arpa.", "d.f.ip6.arpa."],
            "2001:db8::/32": ["8.b.d.0.1.0.0.2.ip6.arpa."],
            "2001:db8::/30": ["%s.b.d.0.1.0.0.2.ip6.arpa." % c
                              for c in "89ab"],
            # a bare address is not a CIDR: CoreDNS keeps it as a name
            "10.0.0.1": ["10.0.0.1."],
            "::/0": [], "a..b": [], "": [],
        }
        for name, want in cases.items():
            self.assertEqual(names.normalize(name), want, name)

    def test_split_host_port(self):
        self.assertEqual(names.split_host_port("a.org:1053"),
                         (["a.org"], "1053"))
        self.assertEqual(names.split_host_port("a.org"), (["a.org"], ""))
        self.assertEqual(names.split_host_port("fd00::/8"),
                         (["d.f.ip6.arpa."], ""))
        self.assertEqual(names.split_host_port("fd00::/8:54"),
                         (["d.f.ip6.arpa."], "54"))
        self.assertEqual(names.split_transport("https3://x"), ("https3", "x"))
        self.assertEqual(names.split_transport("x"), ("dns", "x"))

    def test_is_subdomain(self):
        self.assertTrue(names.is_subdomain("A.example.org", "example.ORG."))
        self.assertTrue(names.is_subdomain("example.org.", "example.org"))
        self.assertTrue(names.is_subdomain("x.", "."))
        self.assertFalse(names.is_subdomain("badexample.org.", "example.org."))
        self.assertFalse(names.is_subdomain("org.", "example.org."))
        self.assertEqual(names.longest_match(["org.", "example.org.", "."],
                                             "www.example.org."),
                         "example.org.")

    def test_escaped_dots_are_in_labels(self):
        """miekg's IsSubDomain compares labels: ``a\\.internal.`` is one
        label under the root, ``a\\\\.internal.`` a label ``a\\`` under
        internal."""
        for child, parent, want in [
                ("a\\.internal.", "internal.", False),
                ("a\\\\.internal.", "internal.", True),
                ("a\\\\\\.internal.", "internal.", False),
                ("x.a\\.internal.", "a\\.internal.", True),
                ("a\\.internal.", ".", True),
                ("b.a\\.internal.", "internal.", False)]:
            self.assertEqual(names.is_subdomain(child, parent), want,
                             (child, parent))
        self.assertIsNone(plugin.match(["internal."], "a\\.internal."))
        self.assertEqual(plugin.match(["internal.", "."], "a\\.internal."),
                         ".")
        self.assertEqual(names.label_end("a\\.b\\\\.c."), 6)

    def test_is_domain_name(self):
        self.assertTrue(names.is_domain_name("a" * 63 + ".org"))
        self.assertFalse(names.is_domain_name("a" * 64 + ".org"))
        self.assertFalse(names.is_domain_name(".org"))
        self.assertTrue(names.is_domain_name("a\\.b.org"))


class DuplicateTests(unittest.TestCase):
    text = "a.org {\n whoami\n}\nb.org {\n whoami\n}\n\na.org {\n whoami\n}\n"

    def test_duplicate(self):
        e = self.assertRaises(CorefileError, check_duplicates, p(self.text))
        self.assertEqual(str(e), "Corefile:8 - Error during parsing: "
                                 "cannot serve "
                                 "dns://a.org.:53 - it is already defined")

    def test_same_zone_other_port_or_transport(self):
        check_duplicates(p("a.org {\n}\na.org:54 {\n}\ntls://a.org {\n}\n"))

    def test_duplicate_in_one_block(self):
        self.assertRaises(CorefileError, check_duplicates,
                          p("a.org a.org:53\n"))

    def test_filters(self):
        blocks = p(self.text)
        check_duplicates(blocks, [None, None, ((), True)])
        check_duplicates(blocks, [(["127.0.0.1"], False), None,
                                  (["127.0.0.2"], False)])
        e = self.assertRaises(CorefileError, check_duplicates, blocks,
                              [(["127.0.0.1"], False), None,
                               (["127.0.0.1"], False)])
        self.assertIn("dns://a.org.:53 on 127.0.0.1 - it is already",
                      e.message)
        e = self.assertRaises(CorefileError, check_duplicates, blocks,
                              [None, None, (["127.0.0.1"], False)])
        self.assertEqual(e.message,
                         "cannot serve dns://a.org.:53 on 127.0.0.1 - "
                         "zone overlap listener capacity with dns://a.org.:53")


class DumpTests(unittest.TestCase):
    def test_dump(self):
        self.patch(corefile._directives, "supported", lambda n: n != "forward")
        text = ("(s) {\n  errors\n}\nb.org:54 10.0.0.0/23 {\n"
                "  forward . 1.1.1.1 {\n    max_fails 3\n  }\n  import s\n"
                '  log . "a b"\n}\ntls://c.org {\n  whoami\n}\n')
        self.assertEqual(dump(parse(text, "Corefile", {})), """\
listeners
  dns :54 <- block 1
  dns :53 <- block 1
  tls :853 <- block 2
block 1 Corefile:4
  key dns://b.org.:54 <- b.org:54
  key dns://0.0.10.in-addr.arpa.:53 <- 10.0.0.0/23
  key dns://1.0.10.in-addr.arpa.:53 <- 10.0.0.0/23
  chain
    errors @ Corefile:2
    log . "a b" @ Corefile:9
    forward . 1.1.1.1 { @ Corefile:5 [not supported yet]
      max_fails 3 @ Corefile:6
    }
block 2 Corefile:11
  key tls://c.org.:853 <- tls://c.org
  chain
    whoami @ Corefile:12
""")

    def test_repeated_directives_keep_order(self):
        b = p(". {\n  template a\n  log\n  template b\n  rewrite x\n"
              "  rewrite y\n}\n")
        out = dump(b)
        self.assertLess(out.index("template a"), out.index("template b"))
        self.assertLess(out.index("rewrite x"), out.index("rewrite y"))
        self.assertLess(out.index("log"), out.index("rewrite x"))


def _golden_names():
    return sorted(n[:-len(".Corefile")] for n in os.listdir(COPY)
                  if n.endswith(".Corefile"))


class GoldenTests(unittest.TestCase):
    def test_copy_matches_shared(self):
        if not os.path.isdir(SHARED):
            raise unittest.SkipTest(
                "no shared Corefiles next to the repository")
        if os.environ.get("REGEN_GOLDEN"):
            # The eras Corefiles have their own copy (tests/test_eras.py).
            shutil.copytree(SHARED, COPY, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("eras"))
        for name in os.listdir(SHARED):
            if name.endswith(".Corefile"):
                with open(os.path.join(SHARED, name)) as a, \
                        open(os.path.join(COPY, name)) as b:
                    self.assertEqual(a.read(), b.read(),
                                     "%s: rerun with REGEN_GOLDEN=1" % name)

    def test_goldens(self):
        names = _golden_names()
        self.assertTrue(names)
        for name in names:
            got = dump(corefile.load(os.path.join(COPY, name + ".Corefile"),
                                     env=GOLDEN_ENV))
            path = os.path.join(GOLDEN, name + ".dump")
            if os.environ.get("REGEN_GOLDEN"):
                with open(path, "w") as fh:
                    fh.write(got)
            with open(path) as fh:
                want = fh.read()
            self.assertEqual(MARK.sub("", got), MARK.sub("", want), name)
