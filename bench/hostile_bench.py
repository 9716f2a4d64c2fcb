#!/usr/bin/env python3
"""What hostile clients cost the server: its memory and other clients'
latency while the attack runs.

    .venv/bin/python bench/hostile_bench.py pipeline [--connections 50]
        [--queries 1500] [--seconds 20] [--tls]

    .venv/bin/python bench/hostile_bench.py quic-flood [--rate 2400]
        [--seconds 20]

``pipeline``: each connection (TCP, or DoT with ``--tls``) sends its
queries for a 63 KB TXT answer at once, then reads 4 KiB every 100 ms
(slowly, but enough that the write timeout never ends it).  Meanwhile a
UDP client asks for a small record every 10 ms.  Printed: the server's
RSS before the attack and at its peak, the UDP latencies (p50, p99, the
worst) and answers lost, the big answers the slow clients got.

``quic-flood``: QUIC Initials at ``--rate`` a second on a DoQ listener,
each for a connection ID of its own (copies of one real client's
Initial, as a spoofing flood sends), while the UDP client asks the plain
listener every 10 ms.  Printed: the UDP latencies, the Retries the flood
got back, the server's RSS.

The server runs pinned to core 0 and the clients on core 1, as in the
other benchmarks.
"""

import argparse
import os
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time

import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import cpu_seconds, percentile, rss_mb, stop  # noqa: E402
from dnsperf_run import free_port, start_server, wait_answer  # noqa: E402
from transports_bench import certificate  # noqa: E402

BIG_RECORDS = 235
ZONE = ("$ORIGIN example.org.\n@ 3600 IN SOA ns hostmaster 1 7200 3600 "
        "1209600 3600\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.1\n"
        "www 3600 IN A 192.0.2.2\n" + "".join(
            'big 3600 IN TXT "%03d%s"\n' % (i, "x" * 247)
            for i in range(BIG_RECORDS)))


class Prober(threading.Thread):
    """Asks www.example.org over UDP every ``interval`` seconds and keeps
    the latencies (a lost answer counts as lost, not as a latency)."""

    def __init__(self, port, interval=0.01):
        super().__init__(daemon=True)
        self.port = port
        self.interval = interval
        self.times = []
        self.lost = 0
        self.running = True

    def run(self):
        q = dns.message.make_query("www.example.org.", "A")
        while self.running:
            t0 = time.perf_counter()
            try:
                dns.query.udp(q, "127.0.0.1", port=self.port, timeout=1)
                self.times.append(time.perf_counter() - t0)
            except Exception:
                self.lost += 1
            time.sleep(max(0.0, self.interval - (time.perf_counter() - t0)))

    def summary(self):
        t = sorted(self.times)
        if not t:
            return "no answers, %d lost" % self.lost
        return ("%d answers, p50 %.2f ms, p99 %.2f ms, worst %.2f ms, "
                "%d lost" % (len(t), percentile(t, 0.5),
                             percentile(t, 0.99), 1000 * t[-1],
                             self.lost))


def pipeline(args, work):
    port, tls_port = free_port(), free_port()
    with open(os.path.join(work, "db.example.org"), "w") as f:
        f.write(ZONE)
    text = ".:%d {\n    file %s/db.example.org example.org\n}\n" % (
        port, work)
    if args.tls:
        cert, key = certificate(work)
        text += "tls://.:%d {\n    tls %s %s\n" \
                "    file %s/db.example.org example.org\n}\n" % (
                    tls_port, cert, key, work)
    proc = start_server(text, work, core="0")
    try:
        wait_answer(port, "www.example.org.")
        target = tls_port if args.tls else port
        big = dns.message.make_query("big.example.org.", "TXT")
        size = len(dns.query.tcp(big, "127.0.0.1", port=port).to_wire())
        q = big.to_wire()
        data = b"".join(struct.pack("!H", len(q)) + q
                        for _ in range(args.queries))
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        probe = Prober(port)
        probe.start()
        time.sleep(1.0)
        before = rss_mb(proc.pid)
        socks = []
        for _ in range(args.connections):
            s = socket.create_connection(("127.0.0.1", target))
            if args.tls:
                s = ctx.wrap_socket(s)
            s.sendall(data)
            s.setblocking(False)
            socks.append(s)
        got = [0] * len(socks)
        cut = set()
        peak = before
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            for i, s in enumerate(socks):
                if i in cut:
                    continue
                try:
                    n = len(s.recv(4096))
                except (BlockingIOError, ssl.SSLWantReadError):
                    continue
                except OSError:
                    n = 0
                if not n:
                    cut.add(i)      # the server ended the connection
                got[i] += n
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.1)
        probe.running = False
        probe.join()
        print("%s: %d connections x %d queries for a %d-byte answer, "
              "%d s" % ("DoT" if args.tls else "TCP", args.connections,
                        args.queries, size, args.seconds))
        print("server RSS: %.1f MiB before, %.1f MiB at the peak "
              "(+%.1f MiB)" % (before, peak, peak - before))
        print("UDP meanwhile: %s" % probe.summary())
        print("slow clients read %.1f MiB in all; the server ended %d "
              "of their connections" % (sum(got) / 2**20, len(cut)))
        for s in socks:
            s.close()
    finally:
        stop(proc)


def _flood(quic_port, rate, seconds, out):
    """Send the Initials (a process of its own: the prober's timings must
    not wait on this loop); ``out`` gets (sent, datagrams back)."""
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection
    config = QuicConfiguration(is_client=True, alpn_protocols=["doq"],
                               server_name="localhost")
    config.verify_mode = ssl.CERT_NONE
    qc = QuicConnection(configuration=config)
    qc.connect(("127.0.0.1", quic_port), now=time.time())
    initial = bytearray(qc.datagrams_to_send(now=time.time())[0][0])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sent = replies = 0
    tick = 0.01
    per_tick = max(1, int(rate * tick))
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        for _ in range(per_tick):
            initial[6:14] = os.urandom(8)
            try:
                sock.sendto(initial, ("127.0.0.1", quic_port))
                sent += 1
            except BlockingIOError:
                pass
        while True:
            try:
                sock.recv(65535)
                replies += 1
            except BlockingIOError:
                break
        next_at = start + tick * (sent // per_tick)
        time.sleep(max(0.0, next_at - time.monotonic()))
    out.put((sent, replies, time.monotonic() - start))


def quic_flood(args, work):
    import multiprocessing
    port, quic_port = free_port(), free_port()
    cert, key = certificate(work)
    text = (".:%d {\n    whoami\n}\nquic://.:%d {\n    tls %s %s\n"
            "    whoami\n}\n" % (port, quic_port, cert, key))
    proc = start_server(text, work, core="0")
    try:
        wait_answer(port)
        probe = Prober(port)
        probe.start()
        time.sleep(1.0)
        before = rss_mb(proc.pid)
        cpu = cpu_seconds(proc.pid)
        out = multiprocessing.Queue()
        flood = multiprocessing.Process(
            target=_flood, args=(quic_port, args.rate, args.seconds, out))
        flood.start()
        peak = before
        while flood.is_alive() and out.empty():
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.5)
        sent, replies, elapsed = out.get()
        cpu = cpu_seconds(proc.pid) - cpu
        flood.join()
        probe.running = False
        probe.join()
        print("QUIC flood: %d Initials in %.1f s (%.0f/s); %d datagrams "
              "back (Retries)" % (sent, elapsed, sent / elapsed, replies))
        print("server RSS: %.1f MiB before, %.1f MiB at the peak; CPU "
              "%.0f%% of a core" % (before, peak, 100 * cpu / elapsed))
        print("UDP meanwhile: %s" % probe.summary())
    finally:
        stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="attack", required=True)
    p = sub.add_parser("pipeline")
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--queries", type=int, default=1500)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--tls", action="store_true")
    p = sub.add_parser("quic-flood")
    p.add_argument("--rate", type=int, default=2400)
    p.add_argument("--seconds", type=int, default=20)
    args = ap.parse_args()
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory(prefix="hostile-") as work:
        if args.attack == "pipeline":
            pipeline(args, work)
        else:
            quic_flood(args, work)


if __name__ == "__main__":
    main()
