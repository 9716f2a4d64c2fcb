#!/usr/bin/env python3
"""QPS and latency of each transport (UDP, TCP, DoT, DoH), side by side.

    .venv/bin/python bench/transports_bench.py [--reference PATH]
        [--seconds 10] [--rounds 3] [--transports udp,tcp,dot,doh,doh-get]
        [--server-cpu 0] [--client-cpu 1]

One Corefile serves whoami (with prometheus) on ``dns://``, ``tls://``
and ``https://`` keys, with a self-signed certificate made by openssl.
Each round starts corednstw (and, with ``--reference``, the CoreDNS
binary on the same Corefile; the order flips every round) pinned to one
core and, for every transport, runs on the other core:

* dnsperf in that mode (``-m udp|tcp|dot|doh``, ``-O doh-method=GET`` for
  doh-get) with ``-c 20 -q 200`` for the QPS and the queries lost;
* alongside it, a second dnsperf at a fixed 200 queries/s with ``-v``,
  whose per-answer times give p50/p99 (dnsperf 2.10 prints no
  percentiles; ``-v`` would slow the loading instance itself);
* before the run, one query over that transport with dnspython, whose
  answer is checked in full (whoami's address record for 127.0.0.1).

Every answer dnsperf counts must be NOERROR.  The table gives, per
server and transport, QPS, p50/p99 in ms, lost, and the ratio of
corednstw to CoreDNS within the round.
"""

import argparse
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading

import dns.message
import dns.query
import dns.rcode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import percentile, start, stop, write  # noqa: E402
from dnsperf_run import free_port, wait_answer  # noqa: E402

MODES = {"udp": ("udp", "dns", []), "tcp": ("tcp", "dns", []),
         "dot": ("dot", "tls", []), "doh": ("doh", "https", []),
         "doh-get": ("doh", "https", ["-O", "doh-method=GET"])}
NAME = "example.org"


def certificate(work):
    """A self-signed certificate and key for the tls and https keys."""
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    return cert, key


def corefile(ports, cert, key):
    block = "    whoami\n    prometheus 127.0.0.1:%d\n" % ports["metrics"]
    tls = "    tls %s %s\n" % (cert, key)
    return ("dns://.:%d {\n%s}\n" % (ports["dns"], block)
            + "tls://.:%d {\n%s%s}\n" % (ports["tls"], tls, block)
            + "https://.:%d {\n%s%s}\n" % (ports["https"], tls, block))


def check(transport, port):
    """One query over ``transport``; True when the whoami answer is
    right."""
    q = dns.message.make_query(NAME, "A")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        if transport == "udp":
            r = dns.query.udp(q, "127.0.0.1", port=port, timeout=3)
        elif transport == "tcp":
            r = dns.query.tcp(q, "127.0.0.1", port=port, timeout=3)
        elif transport == "dot":
            r = dns.query.tls(q, "127.0.0.1", port=port, timeout=3,
                              ssl_context=ctx)
        else:
            r = dns.query.https(q, "https://127.0.0.1:%d/dns-query" % port,
                                timeout=3, verify=False,
                                post=transport == "doh")
    except Exception as e:      # any failure makes the check fail
        print("  check over %s failed: %s" % (transport, e))
        return False
    text = [rr.to_text() for rrset in r.additional for rr in rrset]
    return r.rcode() == dns.rcode.NOERROR and "127.0.0.1" in text


def dnsperf(mode, port, qpath, seconds, core, extra, rate=None):
    cmd = ["taskset", "-c", core, "dnsperf", "-m", mode, "-s", "127.0.0.1",
           "-p", str(port), "-d", qpath, "-l", str(seconds)] + extra
    if rate is None:
        cmd += ["-c", "20", "-q", "200"]
    else:
        cmd += ["-c", "1", "-q", "20", "-Q", str(rate), "-v"]
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def _num(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else 0.0


def measure(transport, ports, qpath, args):
    mode, key, extra = MODES[transport]
    port = ports[key]
    ok = check(transport, port)
    sampled = {}

    def sample():
        sampled["out"] = dnsperf(mode, port, qpath, args.seconds,
                                 args.client_cpu, extra, rate=200)
    t = threading.Thread(target=sample)
    t.start()
    out = dnsperf(mode, port, qpath, args.seconds, args.client_cpu, extra)
    t.join()
    lat = sorted(float(x) for x in re.findall(
        r"^> NOERROR \S+ \S+ ([\d.]+)", sampled.get("out", ""), re.M))
    completed = _num(r"Queries completed:\s+(\d+)", out)
    noerror = _num(r"NOERROR (\d+)", out)
    return {"qps": _num(r"Queries per second:\s+([\d.]+)", out),
            "lost": _num(r"Queries lost:\s+(\d+)", out),
            "p50": percentile(lat, 0.50), "p99": percentile(lat, 0.99),
            "ok": ok and completed > 0 and noerror == completed}


def run_server(server, work, args, cert, key):
    ports = {k: free_port() for k in ("dns", "tls", "https", "metrics")}
    run_dir = tempfile.mkdtemp(dir=work)
    qpath = os.path.join(run_dir, "queries.txt")
    write(qpath, "%s A\n" % NAME)
    proc = start(server, corefile(ports, cert, key), run_dir,
                 args.server_cpu)
    try:
        wait_answer(ports["dns"], NAME + ".")
        return {t: measure(t, ports, qpath, args) for t in args.transports}
    finally:
        stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)


def parse_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transports", default="udp,tcp,dot,doh,doh-get")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    args = ap.parse_args(argv)
    args.transports = args.transports.split(",")
    return args


def main(argv=None):
    args = parse_args(argv)
    work = tempfile.mkdtemp(prefix="corednstw-transports-")
    cert, key = certificate(work)
    names = ["corednstw"] + ([args.reference] if args.reference else [])
    print("%-5s %-9s %-8s %9s %8s %8s %6s %6s %5s" % (
        "round", "server", "transport", "QPS", "p50 ms", "p99 ms", "lost",
        "ratio", "ok"))
    bad = 0
    try:
        for rnd in range(args.rounds):
            order = names if rnd % 2 == 0 else names[::-1]
            res = {s: run_server(s, work, args, cert, key) for s in order}
            for s in names:
                for t in args.transports:
                    r = res[s][t]
                    ratio = ""
                    if args.reference and s == "corednstw":
                        ref = res[args.reference][t]["qps"]
                        ratio = "%.2f" % (r["qps"] / ref) if ref else "-"
                    bad += not r["ok"]
                    print("%-5d %-9s %-9s %9.0f %8.2f %8.2f %6d %6s %5s" % (
                        rnd + 1, "corednstw" if s == "corednstw"
                        else "coredns", t, r["qps"], r["p50"],
                        r["p99"], r["lost"], ratio,
                        "yes" if r["ok"] else "NO"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
