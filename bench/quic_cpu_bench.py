#!/usr/bin/env python3
"""Server CPU time per query over DNS over QUIC and HTTP/3, beside UDP.

    .venv/bin/python bench/quic_cpu_bench.py [--queries 5000]
        [--inflight 20] [--rounds 3] [--kinds udp,doq,doh3]

The server runs in this process on Twisted's default reactor: one
Corefile with a ``file`` zone on ``.:0`` (UDP), ``quic://.:0`` and
``https3://.:0``, bound to 127.0.0.1.  The client is another process
(this script with ``--client``): a blocking loop over one UDP socket,
one DoQ connection or one HTTP/3 connection, keeping ``--inflight``
queries outstanding (DoQ and HTTP/3: one stream each) and checking every
answer (NOERROR, the zone's address).  The figure is the CPU time of
this process only (``time.process_time``: socket reads and writes,
QUIC and TLS record work, HTTP/3 framing, the chain) per query, best of
``--rounds``; the client's own work is not in it.  QUIC handshakes are
one per round and in the figure.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(SCRIPT))
sys.path.insert(0, ROOT)

sys.path.insert(0, os.path.dirname(SCRIPT))
from forward_cpu_bench import (  # noqa: E402
    HOSTNAME,
    NAMES,
    address,
    write_zone,
)

# -- the client process ----------------------------------------------------

def client_udp(port, n, inflight):
    import dns.message
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5)
    wires = []
    for i in range(NAMES):
        q = dns.message.make_query("n%d.bench.test." % i, "A")
        wires.append(q.to_wire())
    sent = done = 0
    while done < n:
        while sent < n and sent - done < inflight:
            qid = sent & 0xFFFF
            w = wires[sent % NAMES]
            sock.sendto(qid.to_bytes(2, "big") + w[2:],
                        ("127.0.0.1", port))
            sent += 1
        data = sock.recv(65535)
        check(data, None)
        done += 1


def check(wire, index):
    """An answer must be NOERROR with the zone's address (for ``index``,
    when the name is known)."""
    import dns.message
    import dns.rcode
    m = dns.message.from_wire(wire)
    if m.rcode() != dns.rcode.NOERROR or not m.answer:
        raise SystemExit("bad answer: %s" % m)
    if index is not None:
        got = m.answer[0][0].address
        if got != address(index % NAMES):
            raise SystemExit("wrong address %s" % got)


def client_quic(port, n, inflight, alpn):
    """One QUIC connection (ALPN doq or h3), ``inflight`` streams at a
    time, each a query, on the tests' blocking aioquic client loop."""
    import dns.message
    from aioquic.h3.connection import H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic import events

    from tests.support import doq

    wires = []
    for i in range(NAMES):
        q = dns.message.make_query("n%d.bench.test." % i, "A")
        q.id = 0
        wires.append(q.to_wire())
    pending = {}                    # stream id -> [query index, bytes]
    state = {"sent": 0, "done": 0, "up": False, "h3": None}

    def send_more(qc):
        h3 = state["h3"]
        while state["sent"] < n and len(pending) < inflight:
            i = state["sent"]
            wire = wires[i % NAMES]
            sid = qc.get_next_available_stream_id()
            pending[sid] = [i, b""]
            if h3 is None:
                qc.send_stream_data(sid, doq.prefixed(wire),
                                    end_stream=True)
            else:
                h3.send_headers(sid, [
                    (b":method", b"POST"), (b":scheme", b"https"),
                    (b":authority", HOSTNAME.encode()),
                    (b":path", b"/dns-query"),
                    (b"content-type", b"application/dns-message")])
                h3.send_data(sid, wire, end_stream=True)
            state["sent"] += 1

    def data(sid, chunk, ended):
        pending[sid][1] += chunk
        if ended:
            i, wire = pending.pop(sid)
            check(wire if state["h3"] is not None else wire[2:], i)
            state["done"] += 1

    def on_event(qc, ev):
        if isinstance(ev, events.HandshakeCompleted):
            if alpn == "h3":
                state["h3"] = H3Connection(qc)
            state["up"] = True
        elif state["h3"] is not None and ev is not None:
            for hev in state["h3"].handle_event(ev):
                if (isinstance(hev, HeadersReceived)
                        and dict(hev.headers)[b":status"] != b"200"):
                    raise SystemExit("status %r" % hev.headers)
                data(hev.stream_id,
                     hev.data if isinstance(hev, DataReceived) else b"",
                     hev.stream_ended)
        elif isinstance(ev, events.StreamDataReceived):
            data(ev.stream_id, ev.data, ev.end_stream)
        elif ev is None and state["up"]:
            send_more(qc)
        return state["done"] >= n

    closed = doq.drive(port, [alpn], on_event, 120.0)
    if closed is not None or state["done"] < n:
        raise SystemExit("closed with %r after %d answers"
                         % (closed, state["done"]))


def client(kind, port, n, inflight):
    if kind == "udp":
        client_udp(port, n, inflight)
    else:
        client_quic(port, n, inflight, "doq" if kind == "doq" else "h3")


# -- the server process ----------------------------------------------------

def corefile(tmp, cert, key):
    zone = write_zone(tmp)
    text = ".:0 {\n bind 127.0.0.1\n%s}\n" % zone
    for scheme in ("quic", "https3"):
        text += ("%s://.:0 {\n bind 127.0.0.1\n tls %s %s\n%s}\n"
                 % (scheme, cert, key, zone))
    path = os.path.join(tmp, "Corefile")
    with open(path, "w") as fh:
        fh.write(text)
    return path


def run(reactor, app, a):
    from twisted.internet import defer, task

    ports = {"udp": app.port(transport="dns"),
             "doq": app.port(transport="quic"),
             "doh3": app.port(transport="https3")}
    results = {}
    for kind in a.kinds.split(","):
        best = None
        for _ in range(a.rounds):
            t0 = time.process_time()
            w0 = time.time()
            proc = subprocess.Popen(
                [sys.executable, SCRIPT, "--client",
                 kind, str(ports[kind]), "--queries", str(a.queries),
                 "--inflight", str(a.inflight)])
            while proc.poll() is None:
                yield task.deferLater(reactor, 0.01, lambda: None)
            if proc.returncode:
                raise SystemExit("%s client failed" % kind)
            cpu = time.process_time() - t0
            wall = time.time() - w0
            us = cpu / a.queries * 1e6
            if best is None or us < best[0]:
                best = (us, a.queries / wall)
        results[kind] = best
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    udp = results.get("udp", (None,))[0]
    for kind, (us, qps) in results.items():
        print("%-5s %7.1f µs server CPU per query  (%6.0f q/s%s)"
              % (kind, us, qps, ", x%.1f UDP" % (us / udp) if udp else ""))
    yield defer.succeed(None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--inflight", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="udp,doq,doh3",
                    help="which of udp, doq, doh3 (comma-separated)")
    ap.add_argument("--client", nargs=2, metavar=("KIND", "PORT"))
    a = ap.parse_args()
    if a.client:
        client(a.client[0], int(a.client[1]), a.queries, a.inflight)
        return
    from twisted.internet import defer, reactor, task

    from corednstw.core import logger
    from corednstw.service.app import App
    from tests.support.unbound import make_certs

    tmp = tempfile.mkdtemp(prefix="corednstw-quic-bench-")
    ca, cert, key = make_certs(tmp, (HOSTNAME,))
    os.chdir(tmp)
    logger.out = open(os.devnull, "w")
    app = App(corefile(tmp, cert, key), reactor=reactor, dns_port=0)
    app.config = app.load()
    app.startService()

    def go(_):
        return defer.inlineCallbacks(run)(reactor, app, a)
    d = task.deferLater(reactor, 0, lambda: None).addCallback(go)
    d.addErrback(lambda f: print(f.getTraceback()))
    d.addBoth(lambda _: app.stopService())
    d.addBoth(lambda _: reactor.stop())
    reactor.run()


if __name__ == "__main__":
    main()
