"""multisocket: the directive, the merged counters, and a real twistd
process group (a supervisor and its workers) answering over the wire."""

import http.client
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
from twisted.python import usage
from twisted.trial import unittest

from corednstw import tap
from corednstw.core import metrics
from corednstw.plugins import multisocket
from corednstw.service import multiproc
from tests.support import contrib, tlsutil, util
from tests.support import k8s_apiserver as k8s
from tests.support.util import TWISTD, free_port


def setup_error(testcase, text):
    with testcase.assertRaises(Exception) as cm:
        util.Direct(testcase, text)
    return str(cm.exception)


class DirectiveTest(unittest.TestCase):

    def count(self, text):
        d = util.Direct(self, text)
        return multiproc.worker_count(d.app.config)

    def test_counts(self):
        self.assertEqual(self.count(". {\n multisocket 3\n whoami\n}\n"), 3)
        self.assertEqual(self.count(". {\n whoami\n}\n"), 1)
        self.assertEqual(self.count(". {\n multisocket\n whoami\n}\n"),
                         multisocket.default_count())

    def test_first_block_of_an_address_decides(self):
        text = ("a.example:1053 {\n multisocket 2\n whoami\n}\n"
                "b.example:1053 {\n multisocket 5\n whoami\n}\n"
                "c.example:1054 {\n whoami\n}\n")
        cfg = util.Direct(self, text).app.config
        counts = sorted(multiproc.count_of(e)
                        for e in cfg.listeners.values())
        self.assertEqual(counts, [1, 2])
        self.assertEqual(multiproc.worker_count(cfg), 2)
        # --multisocket is the default where no block says it.
        self.assertEqual(sorted(multiproc.count_of(e, 4)
                                for e in cfg.listeners.values()), [2, 4])

    def test_errors(self):
        cases = [
            ("multisocket 0", "num sockets can not be zero or negative: 0"),
            ("multisocket -2", "num sockets can not be zero or negative"),
            ("multisocket 1025", "num sockets exceeds maximum (1024): 1025"),
            ("multisocket x", 'invalid num sockets: strconv.Atoi: parsing '
                              '"x": invalid syntax'),
            ("multisocket 1 2", "Wrong argument count"),
        ]
        for line, text in cases:
            err = setup_error(self, ". {\n    %s\n    whoami\n}\n" % line)
            self.assertIn(text, err, line)
            self.assertIn(":2 - Error during parsing", err, line)

    def test_twistd_option(self):
        opts = tap.Options()
        opts.parseOptions(["--multisocket", "3", "-c", "/dev/null"])
        self.assertEqual(opts["multisocket"], 3)
        for bad in ("0", "1025", "many"):
            self.assertRaises(usage.UsageError, tap.Options().parseOptions,
                              ["--multisocket", bad, "-c", "/dev/null"])


class MergeTest(unittest.TestCase):
    """What /metrics shows is the sum of the processes' snapshots."""

    def test_counters_histograms_and_gauges(self):
        snaps = [
            {metrics.REQUESTS.name: {("dns://:53", "1", "udp", "."): 5}},
            {metrics.REQUESTS.name: {("dns://:53", "1", "udp", "."): 7,
                                     ("dns://:53", "1", "tcp", "."): 1}},
        ]
        total = {}
        for s in snaps:
            metrics.merge(total, s)
        self.assertEqual(total[metrics.REQUESTS.name],
                         {("dns://:53", "1", "udp", "."): 12,
                          ("dns://:53", "1", "tcp", "."): 1})

        hist = metrics.Histogram("t_seconds", "h", ("a",), [0.1, 1])
        acc = {}
        hist.merge(acc, {("x",): [1, 2, 0, 3, 0.5]})
        hist.merge(acc, {("x",): [0, 1, 1, 2, 1.5]})
        self.assertEqual(acc, {("x",): [1, 3, 1, 5, 2.0]})

        up = metrics.Gauge("t_up", "g", ("a",))
        size = metrics.Gauge("t_size", "g", ("a",), merge="sum")
        acc_up, acc_size = {}, {}
        for v in (1, 3, 2):
            up.merge(acc_up, {("x",): v})
            size.merge(acc_size, {("x",): v})
        self.assertEqual(acc_up, {("x",): 3})
        self.assertEqual(acc_size, {("x",): 6})

    def test_gone_process_keeps_counters_not_gauges(self):
        g = metrics.gauge("coredns_test_multisocket_gauge", "g")
        self.addCleanup(metrics._FAMILIES.pop, g.name)
        snap = {g.name: {(): 4},
                metrics.REQUESTS.name: {("s", "1", "udp", "."): 2}}
        total = metrics.merge({}, snap, gauges=False)
        self.assertNotIn(g.name, total)
        self.assertEqual(total[metrics.REQUESTS.name],
                         {("s", "1", "udp", "."): 2})


class ReadyTest(unittest.TestCase):
    """/ready of a supervisor waits for its first workers, once."""

    def test_waits_for_every_worker_once(self):
        import types
        h = types.SimpleNamespace
        sup = h(_up=False, count=2, slots={0: h(ready=True)})
        not_ready = multiproc.Supervisor.not_ready
        self.assertEqual(not_ready(sup), ("multisocket",))
        sup.slots[1] = h(ready=False)
        self.assertEqual(not_ready(sup), ("multisocket",))
        sup.slots[1].ready = True
        self.assertEqual(not_ready(sup), ())
        # A worker that dies later does not make the server unready: its
        # sockets stay open and its successor answers what waited.
        del sup.slots[0]
        self.assertEqual(not_ready(sup), ())


# -- a real process group ----------------------------------------------

WHOAMI = """.:{port} {{
    multisocket {n}
    whoami
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""
EMPTY = """.:{port} {{
    multisocket {n}
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""
KUBERNETES = """.:{port} {{
    multisocket {n}
    kubernetes cluster.local {{
        endpoint {api}
    }}
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""
K8S_GATEWAY = """.:{port} {{
    multisocket {n}
    k8s_gateway example.com {{
        kubeconfig {kubeconfig}
    }}
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""

LAMEDUCK = """.:{port} {{
    multisocket {n}
    whoami
    health 127.0.0.1:{hport} {{
        lameduck 4s
    }}
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""
DOT = """tls://.:{port} {{
    multisocket {n}
    tls {cert} {key}
    whoami
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""
QUIC = """quic://.:{port} {{
    multisocket {n}
    tls {cert} {key}
    whoami
    prometheus 127.0.0.1:{mport}
    ready 127.0.0.1:{rport}
}}
"""

STARTED = re.compile(r"worker (\d+) started, pid (\d+)")


class GroupTest(unittest.TestCase):
    """twistd with ``multisocket 2``: one supervisor, two workers."""

    def start(self, text, **kw):
        self.port, self.mport, self.rport = (free_port(), free_port(),
                                             free_port())
        self.dir = util.write_files(self, {})
        self.path = os.path.join(self.dir, "Corefile")
        self.log = os.path.join(self.dir, "log")
        self.fields = dict(port=self.port, mport=self.mport,
                           rport=self.rport, n=2, **kw)
        self.write(text)
        out = open(self.log, "w")
        self.addCleanup(out.close)
        self.proc = subprocess.Popen(
            [TWISTD, "-n", "--pidfile=", "coredns", "-c", self.path],
            stdout=out, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self.kill_group)
        self.wait_for(self.ready)

    def write(self, text):
        util.rewrite(self.path, text.format(**self.fields))

    def kill_group(self):
        if self.proc.poll() is None:
            for pid in self.worker_pids().values():
                _kill(pid)
            self.proc.kill()
            self.proc.wait()

    def output(self):
        with open(self.log) as fh:
            return fh.read()

    def worker_pids(self):
        """slot -> pid of the latest worker started in each slot."""
        return {int(m.group(1)): int(m.group(2))
                for m in STARTED.finditer(self.output())}

    def wait_for(self, predicate, limit=60.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if predicate():
                return
            self.assertIsNone(self.proc.poll(),
                              "server exited:\n" + self.output())
            time.sleep(0.02)
        self.fail("condition not met:\n" + self.output())

    def ready(self):
        try:
            with urllib.request.urlopen(
                    "http://127.0.0.1:%d/ready" % self.rport,
                    timeout=2) as r:
                return r.status == 200
        except (OSError, http.client.HTTPException):
            # Refused, reset or cut short while the workers start (a busy
            # machine): not ready yet.
            return False

    def scrape(self):
        with urllib.request.urlopen(
                "http://127.0.0.1:%d/metrics" % self.mport, timeout=5) as r:
            return r.read().decode()

    def ask(self, name="example.org.", rdtype="A"):
        """One query from a fresh socket (a new source port, so the kernel
        may pick either worker's socket); None when unanswered."""
        q = dns.message.make_query(name, rdtype)
        try:
            return dns.query.udp(q, "127.0.0.1", port=self.port, timeout=2)
        except (dns.exception.Timeout, OSError):
            return None

    def all_answer(self, check, count=60, **kw):
        return all(m is not None and check(m)
                   for m in (self.ask(**kw) for _ in range(count)))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        return self.output()

    def test_workers_answer_and_metrics_read_as_one_server(self):
        self.start(WHOAMI)
        self.assertEqual(sorted(self.worker_pids()), [0, 1])
        for pid in self.worker_pids().values():
            self.assertEqual(_parent(pid), self.proc.pid)
        answers = [self.ask() for _ in range(200)]
        self.assertTrue(all(m is not None and m.rcode() == dns.rcode.NOERROR
                            for m in answers))
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            q = dns.message.make_query("example.org.", "A")
            m = dns.query.tcp(q, "127.0.0.1", port=self.port, sock=s)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        text = self.scrape()
        self.assertEqual(_value(text, "coredns_dns_requests_total",
                                proto="udp"), 200)
        self.assertEqual(_value(text, "coredns_dns_requests_total",
                                proto="tcp"), 1)
        self.assertEqual(_value(text, "coredns_corednstw_workers"), 2)
        per = [_value(text, "coredns_corednstw_worker_requests_total",
                      proto="udp", worker=str(w)) for w in (0, 1)]
        # 200 source ports spread by the kernel's hash over two sockets.
        self.assertEqual(sum(per), 200)
        self.assertTrue(all(n > 0 for n in per), per)
        # One family each, as one server's /metrics.
        self.assertEqual(text.count("# TYPE coredns_dns_requests_total "), 1)
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)

    def test_dead_worker_replaced_port_kept(self):
        self.start(WHOAMI)
        before = self.worker_pids()
        for _ in range(50):
            self.assertIsNotNone(self.ask())
        counted = _value(self.scrape(), "coredns_dns_requests_total",
                         proto="udp")
        os.kill(before[0], signal.SIGKILL)
        self.wait_for(lambda: self.worker_pids()[0] != before[0])
        self.wait_for(self.ready)
        self.assertTrue(self.all_answer(
            lambda m: m.rcode() == dns.rcode.NOERROR))
        self.assertEqual(self.worker_pids()[1], before[1])
        text = self.scrape()
        self.assertEqual(_value(
            text, "coredns_corednstw_worker_restarts_total"), 1)
        # The counts of a worker that was killed before a scrape are gone
        # with it; those scraped before are kept (never fewer).
        self.assertGreaterEqual(
            _value(text, "coredns_dns_requests_total", proto="udp"),
            counted)
        out = self.stop()
        self.assertIn("[ERROR] plugin/multisocket: worker 0 (pid %d) was "
                      "killed by signal 9; starting another" % before[0],
                      out)

    def test_reload_reaches_every_worker(self):
        self.start(WHOAMI)
        before = set(self.worker_pids().values())
        self.write(EMPTY)
        self.proc.send_signal(signal.SIGUSR1)
        self.wait_for(lambda: self.all_answer(
            lambda m: m.rcode() == dns.rcode.SERVFAIL))
        self.wait_for(lambda: not any(_alive(p) for p in before))
        self.write(WHOAMI)
        self.proc.send_signal(signal.SIGUSR1)
        self.wait_for(lambda: self.all_answer(
            lambda m: m.rcode() == dns.rcode.NOERROR))
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)
        self.assertEqual(out.count("[INFO] Reloading complete"), 2, out)

    def test_broken_reload_keeps_workers(self):
        self.start(WHOAMI)
        before = self.worker_pids()
        util.rewrite(self.path, ".:%d {\n    whoami extra\n}\n" % self.port)
        self.proc.send_signal(signal.SIGUSR1)
        self.wait_for(lambda: "reload failed" in self.output())
        self.assertTrue(self.all_answer(
            lambda m: m.rcode() == dns.rcode.NOERROR))
        self.assertEqual(self.worker_pids(), before)
        self.stop()

    def test_sigterm_stops_every_worker(self):
        self.start(WHOAMI)
        pids = list(self.worker_pids().values())
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)
        for pid in pids:
            self.assertFalse(_alive(pid), out)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", self.port), timeout=2)

    def test_lameduck_workers_answer_until_the_end(self):
        self.start(LAMEDUCK, hport=free_port())
        pids = list(self.worker_pids().values())
        self.proc.send_signal(signal.SIGTERM)
        self.wait_for(lambda: "Going into lameduck mode for 4s"
                      in self.output())
        # Within the lameduck every worker still answers.
        self.assertTrue(self.all_answer(
            lambda m: m.rcode() == dns.rcode.NOERROR))
        self.assertTrue(all(_alive(p) for p in pids))
        self.proc.wait(timeout=60)
        self.assertEqual(self.proc.returncode, 0, self.output())
        self.assertFalse(any(_alive(p) for p in pids))

    def test_dot_served_by_every_worker(self):
        _, ca, cert, key = tlsutil.certs(self)
        self.start(DOT, cert=cert, key=key)
        ctx = tlsutil.client_context(ca)
        for _ in range(40):
            q = dns.message.make_query("example.org.", "A")
            m = dns.query.tls(q, "127.0.0.1", port=self.port, timeout=5,
                              ssl_context=ctx,
                              server_hostname=tlsutil.HOSTNAME)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        text = self.scrape()
        per = [_value(text, "coredns_corednstw_worker_requests_total",
                      proto="tcp", worker=str(w)) for w in (0, 1)]
        self.assertEqual(sum(per), 40)
        # 40 connections from fresh ports, spread over two listeners.
        self.assertTrue(all(n > 0 for n in per), per)
        self.stop()

    def test_quic_served_by_worker_zero(self):
        """A QUIC connection's datagrams must all reach one process."""
        _, ca, cert, key = tlsutil.certs(self)
        self.start(QUIC, cert=cert, key=key)
        for _ in range(5):
            q = dns.message.make_query("example.org.", "A")
            m = dns.query.quic(q, "127.0.0.1", port=self.port, timeout=5,
                               verify=ca, server_hostname=tlsutil.HOSTNAME)
            self.assertEqual(m.rcode(), dns.rcode.NOERROR)
        text = self.scrape()
        self.assertEqual(_value(
            text, "coredns_corednstw_worker_requests_total", proto="udp",
            worker="0"), 5)
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)
        self.assertNotIn("starting another", out)

    def test_kubernetes_data_reaches_workers(self):
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        api.add("namespaces", k8s.namespace("ns"))
        api.add("services", k8s.service("one", "ns", ips=("10.0.0.1",)))
        self.start(KUBERNETES, api=api.url)
        name = "one.ns.svc.cluster.local."

        def addresses(want, qname):
            return lambda m: (m.rcode() == dns.rcode.NOERROR
                              and [r.address for rr in m.answer
                                   for r in rr] == [want])
        self.assertTrue(self.all_answer(addresses("10.0.0.1", name),
                                        name=name))
        api.add("services", k8s.service("two", "ns", ips=("10.0.0.2",)))
        two = "two.ns.svc.cluster.local."
        self.wait_for(lambda: self.all_answer(addresses("10.0.0.2", two),
                                              name=two))
        # Only the supervisor watches: one watch per kind, not three.
        watches = api.count("services", "watch")
        self.assertEqual(watches, 1)
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)

    def test_k8s_gateway_data_reaches_workers(self):
        """The add-on package's watches run in the supervisor too, and
        its changes reach every worker."""
        if not contrib.installed("corednstw_k8s_gateway"):
            raise unittest.SkipTest(contrib.README_CHECK % "k8s_gateway")
        api = k8s.APIServer().start()
        self.addCleanup(api.stop)
        api.add("ingresses", k8s.ingress("a", "default", ["a.example.com"],
                                         ["192.0.2.1"]))
        self.start(K8S_GATEWAY, kubeconfig=api.kubeconfig(self))

        def address(want):
            return lambda m: (m.rcode() == dns.rcode.NOERROR
                              and [r.address for rr in m.answer
                                   for r in rr] == [want])
        self.assertTrue(self.all_answer(address("192.0.2.1"),
                                        name="a.example.com."))
        api.add("ingresses", k8s.ingress("b", "default", ["b.example.com"],
                                         ["192.0.2.2"]))
        self.wait_for(lambda: self.all_answer(address("192.0.2.2"),
                                              name="b.example.com."))
        self.assertEqual(api.count("ingresses", "watch"), 1)
        out = self.stop()
        self.assertEqual(self.proc.returncode, 0, out)


def _value(text, name, **labels):
    """The value of ``name`` with ``labels`` in a scrape (0 if absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(
                name + " "):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _parent(pid):
    with open("/proc/%d/stat" % pid) as fh:
        return int(fh.read().split(") ", 1)[1].split()[1])


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
