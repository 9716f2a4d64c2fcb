"""deploy/monitoring: the alerting rules (promtool check and the unit tests
generated from real scrapes), and the Grafana dashboard against the
metrics a running server exports."""

import json
import os
import re
import shutil
import subprocess

import yaml
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import metrics
from tests.support import util
from tests.support.upstream import Upstream

MONITORING = os.path.join(util.REPO, "deploy", "monitoring")
RULES = os.path.join(MONITORING, "prometheus-rules.yaml")
RULES_TEST = os.path.join(MONITORING, "test", "rules_test.yaml")
DASHBOARD = os.path.join(MONITORING, "grafana-dashboard.json")

#: The coredns-mixin's alerts: (name, severity) pairs.
MIXIN = [("CoreDNSDown", "critical"), ("CoreDNSLatencyHigh", "critical"),
         ("CoreDNSErrorsHigh", "critical"), ("CoreDNSErrorsHigh", "warning"),
         ("CoreDNSForwardLatencyHigh", "critical"),
         ("CoreDNSForwardErrorsHigh", "critical"),
         ("CoreDNSForwardErrorsHigh", "warning"),
         ("CoreDNSForwardHealthcheckFailureCount", "warning"),
         ("CoreDNSForwardHealthcheckBrokenCount", "warning")]

_NAME = re.compile(r"\b((?:coredns|process)_[a-z_]+)\b")


def _rules():
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def _rules_test():
    with open(RULES_TEST) as f:
        return yaml.safe_load(f)


def _promtool(*args):
    if not shutil.which("promtool"):
        raise unittest.SkipTest("promtool is not installed (Debian package "
                                "prometheus)")
    return subprocess.run(["promtool"] + list(args), capture_output=True,
                          text=True, timeout=120)


class RulesTest(unittest.TestCase):

    def test_the_mixin_alerts_with_their_severities(self):
        got = [(r["alert"], r["labels"]["severity"]) for r in _rules()]
        self.assertEqual(sorted(got), sorted(MIXIN))

    def test_promtool_check_rules(self):
        r = _promtool("check", "rules", RULES)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS: %d rules found" % len(MIXIN), r.stdout)

    def test_promtool_unit_tests(self):
        r = _promtool("test", "rules", RULES_TEST)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout)

    def test_every_alert_fires_somewhere_and_a_healthy_run_is_silent(self):
        """The generated tests are what the brief of the rules promises:
        each alert fires in some scenario, none fires on the healthy one,
        and every scenario states all alerts (so silence is checked)."""
        fired = set()
        names = {a for a, _ in MIXIN}
        scenarios = {}
        for t in _rules_test()["tests"]:
            scenarios[t["name"]] = t
            checks = t["alert_rule_test"]
            self.assertEqual({c["alertname"] for c in checks}, names)
            for c in checks:
                for a in c["exp_alerts"]:
                    fired.add((c["alertname"],
                               a["exp_labels"]["severity"]))
        self.assertEqual(sorted(fired), sorted(MIXIN))
        healthy = scenarios["healthy"]["alert_rule_test"]
        self.assertEqual([c for c in healthy if c["exp_alerts"]], [])

    def test_rule_metrics_are_in_the_generated_input(self):
        """The rules read series the scrapes really had (plus ``up``,
        which Prometheus itself records)."""
        wanted = set()
        for r in _rules():
            wanted |= set(_NAME.findall(r["expr"]))
        scraped = set()
        for t in _rules_test()["tests"]:
            for s in t["input_series"]:
                scraped.add(s["series"].split("{", 1)[0])
        self.assertEqual(wanted - scraped, set())
        self.assertIn("up", scraped)


COREFILE = """
.:0 {
    bind 127.0.0.78
    errors
    prometheus 127.0.0.1:0
    cache 30
    forward . 127.0.0.1:%(dead)d 127.0.0.1:%(live)d {
        policy sequential
    }
}
"""


class DashboardTest(unittest.TestCase):

    def test_parses_as_a_dashboard(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertTrue(dash["title"])
        vars_ = {v["name"] for v in dash["templating"]["list"]}
        self.assertEqual(vars_, {"datasource", "job", "instance", "server"})
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for p in dash["panels"]:
            if p["type"] != "row":
                self.assertTrue(p["targets"], p["title"])

    @defer.inlineCallbacks
    def test_every_metric_it_names_is_exported(self):
        """A server with cache and forward (one upstream dead, so health
        checks fail), queried so that every family has a sample; its
        /metrics must name every metric the dashboard and the rules use."""
        with open(DASHBOARD) as f:
            dash = json.load(f)
        names = set()
        for p in dash["panels"]:
            for t in p.get("targets", []):
                names |= set(_NAME.findall(t["expr"]))
        for v in dash["templating"]["list"]:
            names |= set(_NAME.findall(json.dumps(v.get("query", ""))))
        for r in _rules():
            names |= set(_NAME.findall(r["expr"]))
        self.assertGreater(len(names), 15)

        live = Upstream().start()
        self.addCleanup(live.stop)
        dead = util.free_port()
        app = yield util.start(self, COREFILE % {"dead": dead,
                                                  "live": live.port})
        port = app.port()
        http = app.http_port("127.0.0.1:0")
        # A cache miss, a hit, and two upstream queries over TCP (the
        # second reuses the first's upstream connection: a connection
        # cache hit, which UDP, with a socket per query, never has).
        for name, proto in (("www.example.org.", "udp"),
                            ("www.example.org.", "udp"),
                            ("ftp.example.org.", "tcp"),
                            ("mail.example.org.", "tcp")):
            r = yield util.query(port, name, host="127.0.0.78",
                                 proto=proto)
            self.assertEqual(len(r.answer), 1)
        failures = metrics.families()[
            "coredns_proxy_healthcheck_failures_total"]
        to = "127.0.0.1:%d" % dead
        yield util.wait_for(lambda: any(to in k for k in failures.values))
        status, body = yield util.http_get(http, "/metrics")
        self.assertEqual(status, 200)
        exported = {line.split("{", 1)[0].split(" ", 1)[0]
                    for line in body.splitlines()
                    if line and not line.startswith("#")}
        self.assertEqual(sorted(names - exported), [])
