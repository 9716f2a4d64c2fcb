"""The twistd command line, run as a real process."""

import os
import signal
import subprocess
import time

import dns.message
import dns.query
from twisted.trial import unittest

from tests.support import util
from tests.support.util import TWISTD, free_port

SHARED = os.path.join(util.REPO, "tests", "corefiles", "shared")


def run(*args, cwd=None, stdin=None):
    return subprocess.run([TWISTD, "-n", "--pidfile=", "coredns"] + list(args),
                          capture_output=True, text=True, cwd=cwd or util.REPO,
                          input=stdin, timeout=60)


class CheckTest(unittest.TestCase):

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("CoreDNS-1.14.0"))

    def test_plugins(self):
        r = run("--plugins")
        self.assertEqual(r.returncode, 0)
        self.assertIn("\nwhoami\n", r.stdout)

    def test_check_ok(self):
        d = util.write_files(self, {"Corefile": ".:1053 {\n    whoami\n}\n"})
        r = run("--check", "-c", os.path.join(d, "Corefile"))
        self.assertEqual((r.returncode, r.stdout), (0, ""))

    def test_check_reports_every_error(self):
        d = util.write_files(self, {"Corefile": (
            ".:1053 {\n    whoami a\n}\nexample.org:1053 {\n"
            "    health {\n        lameduck x\n    }\n}\n")})
        r = run("--check", "-c", os.path.join(d, "Corefile"))
        self.assertEqual(r.returncode, 1)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertIn("Corefile:2 - Error during parsing: plugin/whoami",
                      lines[0])
        self.assertIn("Corefile:5 - Error during parsing: plugin/health",
                      lines[1])

    def test_check_prints_deprecations(self):
        # --check is how a user finds what to modernise: the notices a
        # start would log, and exit 0 (the Corefile works).
        d = util.write_files(self, {"Corefile": (
            ".:1053 {\n    header {\n        set ra\n    }\n"
            "    whoami\n}\n")})
        r = run("--check", "-c", os.path.join(d, "Corefile"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertEqual(r.stdout.splitlines(), [
            '[WARNING] plugin/header: a rule without a selector is '
            'deprecated: write "response set ra" instead of "set ra" '
            '(%s:3)' % os.path.join(d, "Corefile")])

    def test_check_warns_tls_without_certificate(self):
        d = util.write_files(self, {"Corefile": (
            "tls://example.net:1853 {\n    whoami\n}\n")})
        r = run("--check", "-c", os.path.join(d, "Corefile"))
        self.assertEqual((r.returncode, r.stdout.splitlines()), (0, [
            "[WARNING] plugin/tls: tls://example.net.:1853 has no "
            "certificate (no tls directive): serving plain DNS over TCP "
            "only"]))

    def test_check_dump_matches_golden(self):
        # The dump through the real command equals the parser's golden
        # file (markers of plugins built later aside).
        env_file = os.path.join(SHARED, "multi-block.Corefile")
        r = run("--check", "--dump", "-c", env_file)
        golden = open(os.path.join(util.REPO, "tests", "golden",
                                   "multi-block.dump")).read()
        def strip(t):
            return t.replace(" [not supported yet]", "")
        dump = r.stdout[:r.stdout.index("block 4")]
        self.assertEqual(strip(dump), strip(golden)[:len(strip(dump))])

    def test_bad_corefile_exits_nonzero(self):
        d = util.write_files(self,
                             {"Corefile": ".:1053 {\n    whoami foo\n}\n"})
        r = run("-c", os.path.join(d, "Corefile"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("Corefile:2 - Error during parsing: plugin/whoami: "
                      "Wrong argument count", r.stdout)

    def test_stdin(self):
        r = run("--check", "-c", "stdin", stdin=".:1053 {\n    whoami\n}\n")
        self.assertEqual(r.returncode, 0, r.stdout)


class ServeTest(unittest.TestCase):
    """A real twistd process: answers, then SIGTERM ends it cleanly."""

    def serve(self, args, cwd=None):
        """Start twistd; return (process, first answer or None)."""
        proc = subprocess.Popen(
            [TWISTD, "-n", "--pidfile=", "coredns"] + args, cwd=cwd,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        q = dns.message.make_query("example.org.", "A")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                return proc, dns.query.udp(q, "127.0.0.1", port=self.port,
                                           timeout=0.5)
            except Exception:
                continue
        return proc, None

    def stop(self, proc):
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        return out

    def test_serve_and_sigterm(self):
        self.port = free_port()
        d = util.write_files(self, {"Corefile": (
            ".:%d {\n    whoami\n}\n" % self.port)})
        proc, answer = self.serve(["-c", os.path.join(d, "Corefile")])
        out = self.stop(proc)
        self.assertIsNotNone(answer, out)
        self.assertEqual(len(answer.additional), 2)
        self.assertEqual(proc.returncode, 0, out)

    def test_default_corefile(self):
        # No Corefile at all: whoami and log on --dns-port.
        self.port = free_port()
        d = util.write_files(self, {})
        proc, answer = self.serve(["--dns-port", str(self.port)], cwd=d)
        out = self.stop(proc)
        self.assertIsNotNone(answer, out)
        self.assertEqual(len(answer.additional), 2)


class CommandLineTest(unittest.TestCase):

    def test_p_is_dns_port(self):
        # CoreDNS has -p as the short form of -dns.port.
        from corednstw.tap import Options, load_app
        d = util.write_files(self, {"Corefile": ". {\n    whoami\n}\n"})
        o = Options()
        o.parseOptions(["-p", "1053", "-c", os.path.join(d, "Corefile")])
        self.assertEqual(o["dns-port"], 1053)
        app = load_app(o)
        self.assertEqual(app.config.blocks[0].keys[0].port, "1053")
