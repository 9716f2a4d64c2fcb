"""Signals to a real twistd process: SIGUSR1 reloads, SIGTERM drains."""

import os
import signal
import subprocess
import time

import dns.message
import dns.query
import dns.rcode
from twisted.trial import unittest

from tests.support import util
from tests.support.util import TWISTD, free_port

SERVING = """.:{port} {{
    whoami
    prometheus 127.0.0.1:{mport}
}}
"""
EMPTY = """.:{port} {{
    prometheus 127.0.0.1:{mport}
}}
"""


class SignalTest(unittest.TestCase):

    def start(self, text):
        self.port, self.mport = free_port(), free_port()
        self.dir = util.write_files(self, {})
        self.path = os.path.join(self.dir, "Corefile")
        self.write(text)
        self.proc = subprocess.Popen(
            [TWISTD, "-n", "--pidfile=", "coredns", "-c", self.path],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: self.proc.poll() is None and self.proc.kill())
        self.wait(lambda m: m is not None)

    def write(self, text):
        util.rewrite(self.path, text.format(port=self.port, mport=self.mport))

    def ask(self, name="example.org.", timeout=2.0):
        q = dns.message.make_query(name, "A")
        try:
            return dns.query.udp(q, "127.0.0.1", port=self.port,
                                 timeout=timeout)
        except Exception:
            return None

    def wait(self, predicate, limit=30.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            m = self.ask(timeout=0.5)
            if predicate(m):
                return m
            self.assertIsNone(self.proc.poll(), "server exited")
        self.fail("condition not met")

    def test_sigusr1_reloads_without_losing_queries(self):
        self.start(SERVING)
        texts = [EMPTY, SERVING, EMPTY]
        expect = [dns.rcode.SERVFAIL, dns.rcode.NOERROR, dns.rcode.SERVFAIL]
        lost = 0
        answered = 0
        for round_ in range(4):
            for i in range(2500):
                m = self.ask("q%d.example.org." % i)
                if m is None:
                    lost += 1
                else:
                    answered += 1
            if round_ < 3:
                self.write(texts[round_])
                self.proc.send_signal(signal.SIGUSR1)
                self.wait(lambda m, rc=expect[round_]: m is not None
                          and m.rcode() == rc)
        self.assertEqual(lost, 0)
        self.assertEqual(answered, 10000)
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        self.assertEqual(self.proc.returncode, 0)
        self.assertEqual(out.count("[INFO] Reloading complete"), 3, out)

    def test_broken_corefile_keeps_serving(self):
        self.start(SERVING)
        self.write(".:{port} {{\n    whoami extra\n}}\n")
        self.proc.send_signal(signal.SIGUSR1)
        m = self.wait(lambda m: m is not None)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        self.assertIn("Corefile changed but reload failed", out)
        self.assertIn("plugin/whoami: Wrong argument count", out)

    def test_sigquit_stops_at_once(self):
        self.start(SERVING)
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.communicate(timeout=30)
        self.assertEqual(self.proc.returncode, 0)

    def test_sighup_ignored_sigquit_message(self):
        """CoreDNS ignores SIGHUP (caddy's signal trap) and says "Quitting
        process immediately" on SIGQUIT."""
        self.start(SERVING)
        self.proc.send_signal(signal.SIGHUP)
        m = self.wait(lambda m: m is not None)
        self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        self.assertIsNone(self.proc.poll())
        self.proc.send_signal(signal.SIGQUIT)
        out, _ = self.proc.communicate(timeout=30)
        self.assertEqual(self.proc.returncode, 0)
        self.assertIn("[INFO] SIGQUIT: Quitting process immediately", out)

    def test_second_sigint_forces_quit(self):
        port = util.free_port()
        d = util.write_files(self, {"Corefile": ".:%d {\n    whoami\n"
                                    "    health 127.0.0.1:%d {\n"
                                    "        lameduck 20s\n    }\n}\n"
                                    % (port, util.free_port())})
        out = os.path.join(d, "out")
        with open(out, "w") as f:
            proc = subprocess.Popen(
                [TWISTD, "-n", "--pidfile=", "coredns", "-c",
                 os.path.join(d, "Corefile")], stdout=f,
                stderr=subprocess.STDOUT)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def logged(text):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with open(out) as f:
                    if text in f.read():
                        return
                self.assertIsNone(proc.poll(), "server exited")
                time.sleep(0.05)
            self.fail("%r never logged" % text)
        self.port, self.proc = port, proc
        self.wait(lambda m: m is not None)     # handlers are in place
        proc.send_signal(signal.SIGINT)
        logged("[INFO] SIGINT: Shutting down")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=30), 2)
        with open(out) as f:
            self.assertIn("[INFO] SIGINT: Force quit", f.read())
