"""Turn scrapes of a running corednstw into promtool unit tests for the
alerting rules in deploy/monitoring/prometheus-rules.yaml.

    .venv/bin/python deploy/monitoring/test/collect.py [--scrapes 22]
        [--every 2] [--qps 100] [--out deploy/monitoring/test/rules_test.yaml]
    promtool test rules deploy/monitoring/test/rules_test.yaml

Alert rules cannot be trusted until they have seen the series a server
really exports: a wrong label, a renamed family or a missing ``_bucket``
makes a rule silently never fire.  So each scenario below starts a real
corednstw (``twistd -n coredns``) with *prometheus* and *forward*, an
upstream for it (another corednstw: *whoami*, *template* answering
SERVFAIL, or *erratic* delaying every answer; or nothing at all), puts
dnsperf load on it, and scrapes /metrics ``--scrapes`` times, ``--every``
seconds apart.  The ``up`` series is what Prometheus would record: 1 when
the scrape answered, 0 when it did not.

Every scrape becomes one sample of promtool's ``input_series``, one
minute apart: the run is compressed in time (rules need 15 minutes of
history and the collection takes about a minute per scenario).  That does
not change what the rules compute: a ratio of two rates and a histogram
quantile of bucket rates are the same whatever the time unit, and a rate
above 0 stays above 0.  Each scenario's test states, for every alert in
the rules file, exactly which alerts are firing at the end (and that none
is yet at minute 3): the alerts a failure should raise fire, and a healthy
run raises none.

The expected labels and annotations come from the scraped label sets and
the rules file's own annotation templates, so the generated test only
depends on what the server exported.
"""

import argparse
import datetime
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

sys.path.insert(0, os.path.join(REPO, "bench"))
from compare import stop  # noqa: E402

TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
RULES = os.path.join(os.path.dirname(HERE), "prometheus-rules.yaml")
JOB = "kube-dns"
#: How long the slow upstream holds every answer; above the rules' 4s.
SLOW = "4300ms"

# Upstream Corefiles; {port} is the upstream's port.
WHOAMI = """.:{port} {{
    whoami
}}
"""
# Names under fail.example. get SERVFAIL from the upstream itself.
SOME_FAIL = """fail.example.:{port} {{
    template ANY ANY {{
        rcode SERVFAIL
    }}
}}
.:{port} {{
    whoami
}}
"""
DELAYED = """.:{port} {{
    erratic {{
        delay 1 %s
    }}
}}
""" % SLOW

# The server under test.  read_timeout is above the slow upstream's delay
# so that forward waits for its answer (CoreDNS's default is 2s).
SERVER = """.:{port} {{
    errors
    prometheus 127.0.0.1:{mport}
    forward . 127.0.0.1:{uport} {{
        read_timeout 6s
    }}
}}
"""

ALERTS = ("CoreDNSDown", "CoreDNSLatencyHigh", "CoreDNSErrorsHigh",
          "CoreDNSForwardLatencyHigh", "CoreDNSForwardErrorsHigh",
          "CoreDNSForwardHealthcheckFailureCount",
          "CoreDNSForwardHealthcheckBrokenCount")


class Scenario:
    """One run: an upstream, a query mix, and the alerts it must raise
    (as (alertname, severity) pairs)."""

    def __init__(self, name, why, upstream, failing, expect, stop_after=None):
        self.name = name
        self.why = why
        self.upstream = upstream      # Corefile template, or None: no server
        self.failing = failing        # queries in 100 under fail.example.
        self.expect = expect
        self.stop_after = stop_after  # scrapes before the server is stopped


SCENARIOS = [
    Scenario("healthy", "upstream answers every query at once",
             WHOAMI, 0, []),
    Scenario("servfail-2pct",
             "upstream answers 2 queries in 100 with SERVFAIL",
             SOME_FAIL, 2,
             [("CoreDNSErrorsHigh", "warning"),
              ("CoreDNSForwardErrorsHigh", "warning")]),
    Scenario("servfail-20pct",
             "upstream answers 20 queries in 100 with SERVFAIL",
             SOME_FAIL, 20,
             [("CoreDNSErrorsHigh", "critical"),
              ("CoreDNSErrorsHigh", "warning"),
              ("CoreDNSForwardErrorsHigh", "critical"),
              ("CoreDNSForwardErrorsHigh", "warning")]),
    Scenario("upstream-dead",
             "nothing listens on the upstream's port: forward answers "
             "SERVFAIL, health checks fail, every upstream is down",
             None, 0,
             [("CoreDNSErrorsHigh", "critical"),
              ("CoreDNSErrorsHigh", "warning"),
              ("CoreDNSForwardHealthcheckFailureCount", "warning"),
              ("CoreDNSForwardHealthcheckBrokenCount", "warning")]),
    Scenario("upstream-slow",
             "upstream answers every query after %s" % SLOW,
             DELAYED, 0,
             [("CoreDNSLatencyHigh", "critical"),
              ("CoreDNSForwardLatencyHigh", "critical")]),
    Scenario("server-down",
             "corednstw is stopped after the 4th scrape; later scrapes "
             "fail", WHOAMI, 0, [("CoreDNSDown", "critical")],
             stop_after=4),
]

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Prometheus text exposition -> {(name, ((label, value), ...)): value}
    with empty labels dropped, as Prometheus does on ingestion."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError("unparsable metrics line: %r" % line)
        labels = tuple(sorted(
            (k, v) for k, v in _LABEL.findall(m.group(2) or "") if v))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def scrape(mport):
    try:
        with urllib.request.urlopen(
                "http://127.0.0.1:%d/metrics" % mport, timeout=5) as r:
            return parse(r.read().decode())
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


def start(corefile, workdir, name):
    path = os.path.join(workdir, name + ".Corefile")
    with open(path, "w") as f:
        f.write(corefile)
    log = open(os.path.join(workdir, name + ".log"), "w")
    return subprocess.Popen([TWISTD, "-n", "--pidfile=", "coredns", "-c",
                             path], cwd=workdir, stdout=log,
                            stderr=subprocess.STDOUT)


def free_port():
    """A free port below the ephemeral range.  A port picked from that
    range can be handed to one of the server's own outgoing sockets while
    the run lasts; the dead upstream's queries would then come back to
    the server instead of being refused."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port
    raise OSError("no free port below %d" % low)


def listening(port, timeout=60):
    """Wait until a TCP connect to ``port`` succeeds (the slow upstream
    answers no query fast enough to be polled with queries)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def dnsperf(port, qfile, seconds, qps, result):
    out = subprocess.run(
        ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", qfile,
         "-l", str(seconds), "-Q", str(qps), "-q", "1000", "-t", "10"],
        capture_output=True, text=True).stdout
    sent = re.search(r"Queries sent:\s+(\d+)", out)
    codes = re.search(r"Response codes:\s+(.*)", out)
    result["sent"] = int(sent.group(1)) if sent else 0
    result["codes"] = codes.group(1).strip() if codes else "none"


def run(sc, args, workdir):
    """Scrape ``sc``: returns (instance, [scrape or None, ...], load)."""
    port, mport, uport = free_port(), free_port(), free_port()
    qfile = os.path.join(workdir, sc.name + ".queries")
    with open(qfile, "w") as f:
        for i in range(100):
            zone = "fail.example." if i < sc.failing else "example.org."
            f.write("q%d.%s A\n" % (i, zone))
    procs = []
    try:
        if sc.upstream:
            procs.append(start(sc.upstream.format(port=uport), workdir,
                               sc.name + "-upstream"))
            listening(uport)
        server = start(SERVER.format(port=port, mport=mport, uport=uport),
                       workdir, sc.name)
        procs.append(server)
        deadline = time.monotonic() + 60
        while scrape(mport) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("%s: no /metrics" % sc.name)
            time.sleep(0.1)
        load = {}
        seconds = args.scrapes * args.every + 2
        t = threading.Thread(target=dnsperf,
                             args=(port, qfile, seconds, args.qps, load))
        t.start()
        scrapes = []
        nxt = time.monotonic() + args.every
        for i in range(args.scrapes):
            time.sleep(max(0.0, nxt - time.monotonic()))
            nxt += args.every
            if sc.stop_after is not None and i == sc.stop_after:
                stop(server)
            scrapes.append(scrape(mport))
        t.join()
        return "127.0.0.1:%d" % mport, scrapes, load
    finally:
        for p in reversed(procs):
            stop(p)


def _fmt(v):
    return repr(v) if v != int(v) else str(int(v))


def _selector(name, labels):
    inner = ",".join('%s="%s"' % (k, v.replace("\\", "\\\\")
                                  .replace('"', '\\"')) for k, v in labels)
    return "%s{%s}" % (name, inner)


def input_series(instance, scrapes):
    """promtool input_series: one value per scrape, ``_`` where the series
    was not in that scrape (not yet created, or the server was down)."""
    target = (("instance", instance), ("job", JOB))
    keys = []
    seen = set()
    for s in scrapes:
        for k in (s or {}):
            if k not in seen:
                seen.add(k)
                keys.append(k)
    series = [{"series": _selector("up", target),
               "values": " ".join("0" if s is None else "1"
                                  for s in scrapes)}]
    for name, labels in keys:
        vals = []
        for s in scrapes:
            v = None if s is None else s.get((name, labels))
            vals.append("_" if v is None else _fmt(v))
        full = tuple(sorted(dict(labels + target).items()))
        series.append({"series": _selector(name, full),
                       "values": " ".join(vals)})
    return series


def _last(scrapes):
    return [s for s in scrapes if s][-1]


def alert_labels(alert, scrapes):
    """The label sets the rule named ``alert`` fires with on these series:
    what each rule's aggregation leaves of the scraped labels."""
    last = _last(scrapes)

    def sets(family, keep):
        out = set()
        for name, labels in last:
            if name == family:
                d = dict(labels)
                out.add(tuple(sorted(
                    [(k, d[k]) for k in keep if k in d] + [("job", JOB)])))
        return [dict(x) for x in sorted(out)]

    if alert == "CoreDNSDown":
        return [{}]
    if alert == "CoreDNSLatencyHigh":
        return sets("coredns_dns_request_duration_seconds_bucket",
                    ("server", "zone", "view"))
    if alert in ("CoreDNSErrorsHigh",
                 "CoreDNSForwardHealthcheckBrokenCount"):
        return [{"job": JOB}]
    if alert in ("CoreDNSForwardLatencyHigh", "CoreDNSForwardErrorsHigh"):
        return sets("coredns_proxy_request_duration_seconds_count",
                    ("proxy_name", "to"))
    if alert == "CoreDNSForwardHealthcheckFailureCount":
        return sets("coredns_proxy_healthcheck_failures_total",
                    ("proxy_name", "to"))
    raise KeyError(alert)


def _render(text, labels):
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}",
                  lambda m: labels.get(m.group(1), ""), text)


def expected(sc, scrapes, rules):
    """exp_alerts per alert name for the end of the run."""
    out = {a: [] for a in ALERTS}
    for alert, severity in sc.expect:
        rule = [r for r in rules if r["alert"] == alert
                and r["labels"]["severity"] == severity][0]
        for labels in alert_labels(alert, scrapes):
            exp = dict(labels, severity=severity)
            out[alert].append({
                "exp_labels": exp,
                "exp_annotations": {k: _render(v, exp) for k, v
                                    in rule["annotations"].items()}})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=22)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--qps", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(HERE, "rules_test.yaml"))
    ap.add_argument("--only", action="append",
                    help="run only this scenario (repeatable)")
    args = ap.parse_args(argv)
    if not shutil.which("dnsperf"):
        sys.exit("dnsperf is not installed (Debian package dnsperf)")
    with open(RULES) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    workdir = tempfile.mkdtemp(prefix="corednstw-rules-")
    tests = []
    notes = []
    try:
        for sc in SCENARIOS:
            if args.only and sc.name not in args.only:
                continue
            instance, scrapes, load = run(sc, args, workdir)
            ok = sum(1 for s in scrapes if s is not None)
            notes.append("# %s: %s; %d scrapes (%d answered), dnsperf "
                         "sent %d, rcodes %s"
                         % (sc.name, sc.why, len(scrapes), ok,
                            load.get("sent", 0), load.get("codes")))
            print(notes[-1][2:], flush=True)
            end = "%dm" % (len(scrapes) - 1)
            exp = expected(sc, scrapes, rules)
            tests.append({
                "name": sc.name,
                "interval": "1m",
                "input_series": input_series(instance, scrapes),
                "alert_rule_test": (
                    [{"eval_time": "3m", "alertname": a, "exp_alerts": []}
                     for a in ALERTS]
                    + [{"eval_time": end, "alertname": a,
                        "exp_alerts": exp[a]} for a in ALERTS]),
            })
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    header = [
        "# Generated by deploy/monitoring/test/collect.py from real scrapes "
        "of corednstw",
        "# (%s, %d scrapes %gs apart, each one minute of input_series)."
        % (datetime.date.today().isoformat(), args.scrapes, args.every),
        "# Check with: promtool test rules rules_test.yaml",
    ] + notes
    doc = {"rule_files": ["../prometheus-rules.yaml"],
           "evaluation_interval": "1m", "tests": tests}
    with open(args.out, "w") as f:
        f.write("\n".join(header) + "\n")
        yaml.safe_dump(doc, f, sort_keys=False, width=1000)
    print("wrote", os.path.relpath(args.out, REPO))


if __name__ == "__main__":
    main()
