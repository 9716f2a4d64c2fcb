"""The command lines, run as real processes: ``twistd coredns`` and the
``coredns`` command with CoreDNS's own flags."""

import os
import re
import signal
import subprocess
import time

import dns.message
import dns.query
from twisted.trial import unittest

from tests.support import util
from tests.support.util import COREDNS, TWISTD, free_port

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


class Serving:
    """Runs ``command`` as a real process and asks it on ``self.port``."""

    command: list = []

    def serve(self, args, cwd=None):
        """Start the command; return (process, first answer or None)."""
        proc = subprocess.Popen(
            self.command + args, cwd=cwd,
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


class ServeTest(Serving, unittest.TestCase):
    """A real twistd process: answers, then SIGTERM ends it cleanly."""

    command = [TWISTD, "-n", "--pidfile=", "coredns"]

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


def coredns(*args, cwd=None, stdin=None):
    return subprocess.run([COREDNS] + list(args), capture_output=True,
                          text=True, cwd=cwd or util.REPO, input=stdin,
                          timeout=60)


USAGE = """Usage of coredns:
  -conf string
    \tCorefile to load (default "Corefile")
  -dns.port string
    \tDefault port (default "53")
  -p string
    \tDefault port (default "53")
  -pidfile string
    \tPath to write pid file
  -plugins
    \tList installed plugins
  -quiet
    \tQuiet mode (no initialization output)
  -version
    \tShow version
"""


class CorednsFlagsTest(unittest.TestCase):
    """``coredns``'s command line by Go's flag rules, as CoreDNS 1.14."""

    def test_version(self):
        r = coredns("-version")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "CoreDNS-1.14.0")
        self.assertRegex(lines[1], r"\Alinux/\w+, python3\.\d+\.\d+, "
                                   r"corednstw-1\.14\.0\Z")
        self.assertEqual(len(lines), 2)

    def test_flag_forms(self):
        # --flag, -flag=true: the same flag for Go.
        for args in (["--version"], ["-version=true"], ["-version=1"],
                     ["--version=T"]):
            r = coredns(*args)
            self.assertEqual(r.returncode, 0, args)
            self.assertTrue(r.stdout.startswith("CoreDNS-1.14.0\n"), args)

    def test_bool_false_runs_on(self):
        # -version=false turns it off: -plugins answers instead.
        r = coredns("-version=false", "-plugins")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("acl\n"), r.stdout[:40])

    def test_plugins(self):
        r = coredns("-plugins")
        self.assertEqual(r.returncode, 0)
        names = r.stdout.splitlines()
        # CoreDNS prints the sorted names, then Println's blank line.
        self.assertTrue(r.stdout.endswith("\n\n"))
        self.assertEqual(names[-1], "")
        names = [n.split(" ")[0] for n in names[:-1]]
        self.assertEqual(names, sorted(names))
        for name in ("kubernetes", "forward", "cache", "whoami"):
            self.assertIn(name, names)

    def test_help_exits_zero(self):
        for flag in ("-h", "-help", "--help"):
            r = coredns(flag)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (0, "", USAGE), flag)

    def test_unknown_flag_exits_two(self):
        r = coredns("-c", "Corefile")
        self.assertEqual((r.returncode, r.stdout), (2, ""))
        self.assertEqual(r.stderr, "flag provided but not defined: -c\n"
                         + USAGE)

    def test_bad_flag_values(self):
        for args, err in (
                (["-conf"], "flag needs an argument: -conf"),
                (["-quiet=maybe"],
                 'invalid boolean value "maybe" for -quiet: parse error'),
                (["---conf", "x"], "bad flag syntax: ---conf"),
                (["-=x"], "bad flag syntax: -=x")):
            r = coredns(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stderr.splitlines()[0], err)

    def test_extra_arguments_exit_one(self):
        # Flags end at the first non-flag and after "--"; what is left is
        # refused by log.Fatal (with the standard logger's time stamp).
        for args, rest in ((["-conf", "x", "serve", "-quiet"],
                            "[serve -quiet]"),
                           (["--", "-version"], "[-version]"),
                           (["-quiet", "false"], "[false]")):
            r = coredns(*args)
            self.assertEqual(r.returncode, 1, args)
            self.assertRegex(r.stderr, r"\A\d{4}/\d\d/\d\d \d\d:\d\d:\d\d "
                             r"extra command line arguments: %s\n\Z"
                             % re.escape(rest))

    def test_bad_corefile_on_stderr(self):
        d = util.write_files(self,
                             {"Corefile": ".:1053 {\n    whoami foo\n}\n"})
        r = coredns("-conf", os.path.join(d, "Corefile"))
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertIn("Corefile:2 - Error during parsing: plugin/whoami: "
                      "Wrong argument count", r.stderr)

    def test_missing_corefile(self):
        r = coredns("-conf", "/nonexistent/Corefile")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertIn("/nonexistent/Corefile", r.stderr)

    def test_port_taken_exits_one(self):
        import socket
        s = socket.socket()
        self.addCleanup(s.close)
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        d = util.write_files(self, {"Corefile": (
            ".:%d {\n    bind 127.0.0.1\n    whoami\n}\n" % port)})
        r = coredns("-conf", os.path.join(d, "Corefile"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("Address already in use", r.stderr)


class CorednsServeTest(Serving, unittest.TestCase):
    """The ``coredns`` command serving, as CoreDNS's manifests run it."""

    command = [COREDNS]

    def corefile(self, text):
        d = util.write_files(self, {"Corefile": text})
        return d, os.path.join(d, "Corefile")

    def test_kubeadm_args(self):
        # kubeadm's Deployment: args: ["-conf", "/etc/coredns/Corefile"].
        self.port = free_port()
        _, path = self.corefile(
            ".:%d {\n    errors\n    whoami\n}\n" % self.port)
        proc, answer = self.serve(["-conf", path])
        out = self.stop(proc)
        self.assertIsNotNone(answer, out)
        self.assertEqual(len(answer.additional), 2)
        self.assertEqual(proc.returncode, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[:2], [".:%d" % self.port, "CoreDNS-1.14.0"])
        self.assertIn("[INFO] SIGTERM: Shutting down servers then "
                      "terminating", lines)

    def test_default_corefile(self):
        # No Corefile at all: whoami and log on -dns.port.
        self.port = free_port()
        d = util.write_files(self, {})
        proc, answer = self.serve(["-dns.port", str(self.port)], cwd=d)
        out = self.stop(proc)
        self.assertIsNotNone(answer, out)
        self.assertEqual(len(answer.additional), 2)

    def test_dns_port_forms(self):
        # -p is -dns.port; -flag=value and --flag as Go takes them; a key
        # without a port gets it; ./Corefile is read when -conf is absent.
        for args in (["-p", "{port}"], ["--dns.port={port}"],
                     ["-conf=Corefile", "-p={port}"]):
            self.port = free_port()
            d, _ = self.corefile(". {\n    whoami\n}\n")
            proc, answer = self.serve(
                [a.format(port=self.port) for a in args], cwd=d)
            out = self.stop(proc)
            self.assertIsNotNone(answer, (args, out))
            self.assertEqual(proc.returncode, 0, out)

    def test_quiet(self):
        self.port = free_port()
        _, path = self.corefile(".:%d {\n    whoami\n}\n" % self.port)
        proc, answer = self.serve(["-quiet", "-conf", path])
        out = self.stop(proc)
        self.assertIsNotNone(answer, out)
        self.assertNotIn("CoreDNS-1.14.0", out)

    def test_pidfile(self):
        self.port = free_port()
        d, path = self.corefile(".:%d {\n    whoami\n}\n" % self.port)
        pidfile = os.path.join(d, "coredns.pid")
        proc, answer = self.serve(["-conf", path, "-pidfile", pidfile])
        self.assertIsNotNone(answer)
        # Written once the listeners are open, before the first answer.
        with open(pidfile) as f:
            self.assertEqual(f.read(), "%d\n" % proc.pid)
        out = self.stop(proc)
        self.assertEqual(proc.returncode, 0, out)
        self.assertFalse(os.path.exists(pidfile))

    def test_no_pidfile_unless_asked(self):
        self.port = free_port()
        d, path = self.corefile(".:%d {\n    whoami\n}\n" % self.port)
        proc, answer = self.serve(["-conf", path], cwd=d)
        self.assertIsNotNone(answer)
        self.assertEqual(sorted(os.listdir(d)), ["Corefile"])
        self.stop(proc)

    def test_sigterm_waits_for_lameduck(self):
        # health's lameduck: still answering after SIGTERM, then exit 0.
        self.port = free_port()
        hport = free_port()
        _, path = self.corefile(
            ".:%d {\n    health 127.0.0.1:%d {\n        lameduck 1s\n"
            "    }\n    whoami\n}\n" % (self.port, hport))
        proc, answer = self.serve(["-conf", path])
        self.assertIsNotNone(answer)
        proc.send_signal(signal.SIGTERM)
        q = dns.message.make_query("example.org.", "A")
        during = dns.query.udp(q, "127.0.0.1", port=self.port, timeout=5)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(len(during.additional), 2)
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("[INFO] plugin/health: Going into lameduck mode for 1s",
                      out)

    def test_sigquit_exits_zero(self):
        self.port = free_port()
        d, path = self.corefile(".:%d {\n    whoami\n}\n" % self.port)
        pidfile = os.path.join(d, "pid")
        proc, answer = self.serve(["-conf", path, "-pidfile", pidfile])
        self.assertIsNotNone(answer)
        proc.send_signal(signal.SIGQUIT)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("[INFO] SIGQUIT: Quitting process immediately", out)
        # caddy's OnProcessExit: the pid file goes on every way out.
        self.assertFalse(os.path.exists(pidfile))
