#!/usr/bin/env python3
"""CPU time per forwarded query, by upstream transport, in one run.

    .venv/bin/python bench/forward_cpu_bench.py [--queries 5000]
        [--inflight 20] [--rounds 3] [--only udp]

One upstream process (corednstw serving a zone with ``file`` over plain
DNS, DNS over TLS and DNS over HTTPS, pinned to the last core when
``taskset`` is there) and, in this process, one forwarding configuration
per transport: UDP, TCP (``force_tcp``), DNS over TLS, DoH POST and DoH
GET.  Queries go straight into the
forwarder's block mux (no client sockets), ``--inflight`` at a time, and
every answer is checked (NOERROR, the zone's address).  The figures: CPU
µs of this process per forwarded query (``time.process_time``: the
forwarder's whole cost, upstream exchange included, the upstream's own
work not), best of ``--rounds``, and the queries per second of that round
as an indication only.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import dns.message
from twisted.internet import defer, reactor, task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsperf_run  # noqa: E402

from corednstw.core import logger  # noqa: E402
from corednstw.service.app import App  # noqa: E402

NAMES = 100
HOSTNAME = "dns.bench.test"


def address(i):
    return "10.0.%d.%d" % (i >> 8 & 255, i & 255)


def write_zone(tmp):
    """bench.test with NAMES names n<i> (``address(i)``) in ``tmp``;
    returns the ``file`` line serving it."""
    with open(os.path.join(tmp, "bench.test.zone"), "w") as fh:
        fh.write("$ORIGIN bench.test.\n$TTL 3600\n"
                 "@ IN SOA ns admin 1 7200 3600 1209600 300\n@ IN NS ns\n"
                 "ns IN A 192.0.2.1\n")
        fh.write("".join("n%d IN A %s\n" % (i, address(i))
                         for i in range(NAMES)))
    return "    file bench.test.zone bench.test\n"


def start_upstream(tmp, port, tls_port, https_port, cert, key):
    zone = write_zone(tmp)
    with open(os.path.join(tmp, "Corefile"), "w") as fh:
        fh.write(".:%d {\n bind 127.0.0.1\n%s}\n" % (port, zone))
        for scheme, p in (("tls", tls_port), ("https", https_port)):
            fh.write("%s://.:%d {\n bind 127.0.0.1\n tls %s %s\n%s}\n"
                     % (scheme, p, cert, key, zone))
    cmd = [dnsperf_run.TWISTD, "-n", "--pidfile=", "coredns", "-q", "-c",
           os.path.join(tmp, "Corefile")]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(os.cpu_count() - 1)] + cmd
    return subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL)


def corefiles(port, tls_port, https_port, ca):
    doh = ("https://127.0.0.1:%d {\n  tls %s\n  tls_servername %s\n"
           "  doh_method %%s\n }" % (https_port, ca, HOSTNAME))
    return [
        ("udp", "127.0.0.1:%d" % port),
        ("tcp (force_tcp)", "127.0.0.1:%d {\n  force_tcp\n }" % port),
        ("DoT", "tls://127.0.0.1:%d {\n  tls %s\n  tls_servername %s\n }"
         % (tls_port, ca, HOSTNAME)),
        ("DoH POST", doh % "POST"),
        ("DoH GET", doh % "GET"),
    ]


def wires():
    out = []
    for i in range(NAMES):
        m = dns.message.make_query("n%d.bench.test." % i, "A")
        out.append((m.to_wire(), address(i)))
    return out


def check(wire, want, full):
    """NOERROR, one answer record, the zone's address in it; ``full``:
    parsed with dnspython too (too slow for every answer: it would cost
    more CPU than the forwarding measured)."""
    ok = (wire[3] & 0xF == 0 and wire[6:8] == b"\x00\x01"
          and socket.inet_aton(want) in wire)
    if ok and full:
        m = dns.message.from_wire(wire)
        ok = [rd.to_text() for rr in m.answer for rd in rr] == [want]
    if not ok:
        raise SystemExit("wrong answer:\n%s" % dns.message.from_wire(wire))


def run(mux, qs, n, inflight):
    """Send ``n`` queries, ``inflight`` at a time; Deferred firing with
    (CPU seconds, wall seconds)."""
    done = defer.Deferred()
    state = {"sent": 0, "answered": 0}
    t0 = time.process_time()
    w0 = time.perf_counter()

    def send():
        i = state["sent"]
        state["sent"] += 1
        wire, want = qs[i % len(qs)]
        mux.handle(wire, "127.0.0.1", 40000, "udp", None,
                   lambda data: answered(data, want, i % 97 == 0))

    def answered(data, want, full):
        check(data, want, full)
        state["answered"] += 1
        if state["sent"] < n:
            send()
        elif state["answered"] == n:
            done.callback((time.process_time() - t0,
                           time.perf_counter() - w0))

    for _ in range(min(inflight, n)):
        send()
    return done


@defer.inlineCallbacks
def measure(d, name, to, qs, args):
    os.makedirs(d)
    with open(os.path.join(d, "Corefile"), "w") as fh:
        fh.write(".:0 {\n bind 127.0.0.1\n forward . %s\n}\n" % to)
    app = App(os.path.join(d, "Corefile"), reactor=reactor, dns_port=0)
    app.config = app.load()
    yield app.startService()
    mux = app.muxes[0]
    try:
        yield run(mux, qs, min(500, args.queries), args.inflight)  # warm
        best = None
        for _ in range(args.rounds):
            cpu, wall = yield run(mux, qs, args.queries, args.inflight)
            if best is None or cpu < best[0]:
                best = (cpu, wall)
    finally:
        yield app.stopService()
    us = best[0] / args.queries * 1e6
    print("%-16s %7.1f µs CPU per query  (%6.0f QPS)"
          % (name, us, args.queries / best[1]))
    return us


@defer.inlineCallbacks
def main(_reactor, args):
    from tests.support.unbound import make_certs
    logger.quiet = True
    tmp = tempfile.mkdtemp(prefix="forward-cpu-bench-")
    up = None
    try:
        ca, cert, key = make_certs(tmp, (HOSTNAME,))
        port, tls_port, https_port = (dnsperf_run.free_port()
                                      for _ in range(3))
        up = start_upstream(tmp, port, tls_port, https_port, cert, key)
        yield task.deferLater(reactor, 0, lambda: None)
        dnsperf_run.wait_answer(port, "n0.bench.test.")
        qs = wires()
        results = {}
        configs = corefiles(port, tls_port, https_port, ca)
        if args.only:
            want = args.only.split(",")
            configs = [c for c in configs if c[0] in want]
        for i, (name, to) in enumerate(configs):
            results[name] = yield measure(os.path.join(tmp, str(i)), name,
                                          to, qs, args)
        base = results.get("udp")
        for name, us in results.items() if base else ():
            print("%-16s %5.2f× the UDP cost" % (name, us / base))
    finally:
        if up is not None:
            up.terminate()
            up.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--inflight", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="",
                    help="comma-separated transports to measure (udp, "
                    "'tcp (force_tcp)', DoT, 'DoH POST', 'DoH GET')")
    task.react(main, (ap.parse_args(),))
