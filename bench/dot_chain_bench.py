#!/usr/bin/env python3
"""Microseconds of server CPU per DNS over TLS query, in process.

    .venv/bin/python bench/dot_chain_bench.py [--workload file|whoami|...]
        [--queries 100000] [--per-read 7] [--connections 20]
        [--immediate] [--repeat 5] [--echo] [--profile out.prof]

The DoT connection protocol (tlsstream.DoTProtocol) over a real loopback
TCP socket, behind the mux of one of bench/compare.py's workloads (as
bench/chain_bench.py builds it).  A client ``ssl.SSLObject`` encrypts
the queries beforehand, each in its own TLS record as dnsperf sends them,
``--per-read`` records per read (dnsperf -c 20 -q 200 brings 6-7 per
read), on each of ``--connections`` connections in turn, the reads of
all of them making one turn of the reactor (served together, as the
server does, or each at once with ``--immediate``).  The timed part is
the server's: decrypting, framing, the chain, encrypting and the
``send`` of the answers (thread CPU time, the client's draining of its
sockets left out).  ``--echo`` replaces the chain with a mux that sends
back the query at once (the transport's share alone).  Prints the best
of ``--repeat`` runs.
"""

import argparse
import cProfile
import os
import socket
import ssl
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chain_bench  # noqa: E402
import compare  # noqa: E402
from transports_bench import certificate  # noqa: E402
from twisted.internet import task  # noqa: E402
from twisted.internet.address import IPv4Address  # noqa: E402

from corednstw.dnsserver import tlsstream  # noqa: E402
from corednstw.dnsserver.stream import DNSStreamFactory, Timeouts  # noqa
from corednstw.dnsserver.tlsconfig import ServerTLS  # noqa: E402


class Bottom:
    """The TCP transport's part DoTProtocol uses, over a real socket."""

    def __init__(self, sock):
        self.socket = sock
        self.dataBuffer = b""
        self._tempDataLen = 0
        self.offset = 0
        self.connected = 1
        self.disconnecting = False
        self.disconnected = False
        self.bufferSize = 0

    def writeSomeData(self, data):
        return self.socket.send(data)

    def write(self, data):
        self.socket.setblocking(True)
        self.socket.sendall(data)
        self.socket.setblocking(False)

    def getPeer(self):
        return IPv4Address("TCP", "127.0.0.1", 40000)

    def setTcpNoDelay(self, on):
        pass

    def registerProducer(self, producer, streaming):
        pass

    def unregisterProducer(self):
        pass

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def loseConnection(self):
        self.disconnecting = True

    abortConnection = loseConnection


class Echo:
    """A mux answering every query with itself, at once."""

    label = "echo"

    def handle(self, data, client, port, proto, local, send):
        send(data)


def connect(mux, ctx, clock):
    """(server protocol, client SSLObject, client socket) after the
    handshake."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    lst.close()
    for s in (srv, cli):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    srv.setblocking(False)
    factory = DNSStreamFactory(mux, ("127.0.0.1", 853), Timeouts())
    proto = factory.adopt(tlsstream.DoTProtocol(mux, ("127.0.0.1", 853),
                                      factory.timeouts, ctx))
    proto.callLater = clock.callLater
    proto.makeConnection(Bottom(srv))
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    cin, cout = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = cctx.wrap_bio(cin, cout)
    cli.settimeout(2)
    while True:
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            pass
        if cout.pending:
            proto.dataReceived(cout.read())
            clock.advance(0)
        cin.write(cli.recv(65536))
    if cout.pending:
        proto.dataReceived(cout.read())
        clock.advance(0)
    return proto, client, cout, cli


def run(mux, ctx, queries, count, per_read, connections=1):
    """Thread CPU seconds of the server side of ``count`` queries."""
    clock = task.Clock()
    conns = [connect(mux, ctx, clock) for _ in range(connections)]
    n = len(queries)
    turns = []
    j = 0
    while j < count:
        turn = []
        for proto, client, cout, cli in conns:
            for _ in range(per_read):
                q = queries[j % n]
                j += 1
                client.write(len(q).to_bytes(2, "big") + q)
            turn.append((proto.dataReceived, cout.read()))
        turns.append(turn)
    for c in conns:
        c[3].setblocking(False)
    cpu = time.thread_time
    spent = 0.0
    advance = clock.advance
    for turn in turns:
        start = cpu()
        for feed, data in turn:
            feed(data)
        advance(0)
        spent += cpu() - start
        for c in conns:
            try:
                while c[3].recv(1 << 20):
                    pass
            except BlockingIOError:
                pass
    for proto, _, _, cli in conns:
        proto.transport.disconnecting = True
        proto.setTimeout(None)
        cli.close()
        proto.transport.socket.close()
    return spent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="file",
                    choices=[n + suffix for n in ("whoami", "file", "kubeadm")
                             for suffix in ("", "-noprom")])
    ap.add_argument("--queries", type=int, default=100000)
    ap.add_argument("--per-read", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--immediate", action="store_true",
                    help="each read served at once (tlsstream.ROUND off)")
    ap.add_argument("--echo", action="store_true")
    ap.add_argument("--profile", help="write cProfile statistics here")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dot-chain-bench-")
    wl = compare.WORKLOADS[args.workload]
    mux = Echo() if args.echo else chain_bench.build(wl(), work)
    queries = chain_bench.wires(wl())
    cert, key = certificate(work)
    ctx = ServerTLS(cert, key).ssl_context()
    tlsstream.ROUND = not args.immediate
    shape = (args.per_read, args.connections)
    run(mux, ctx, queries, len(queries) * 2, *shape)   # warm up
    best = min(run(mux, ctx, queries, args.queries, *shape)
               for _ in range(args.repeat))
    print("%s%s over DoT, %d per read, %d connections%s: %.2f us/query "
          "(best of %d x %d)"
          % (args.workload, " (echo)" if args.echo else "", args.per_read,
             args.connections, ", immediate" if args.immediate else "",
             best / args.queries * 1e6, args.repeat, args.queries))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(run, mux, ctx, queries, args.queries, *shape)
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
