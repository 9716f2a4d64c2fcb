#!/usr/bin/env python3
"""The CPU cost of one small TLS record each way, pyOpenSSL beside the
standard library's ssl, both over memory BIOs (no sockets).

    .venv/bin/python bench/tls_record_bench.py [--records 20000]
        [--size 60] [--rounds 3]

A DNS over TLS query and its answer are one small record each way.
Twisted's TLS transport (``TLSMemoryBIOProtocol``) runs pyOpenSSL over
memory BIOs: for every read it writes the ciphertext into the
connection's BIO and calls ``recv`` until OpenSSL wants more (pyOpenSSL
raises WantReadError for that), and for every write it calls ``send``
and reads the ciphertext back from the BIO.  This script does the same
server-side steps for ``--records`` records of ``--size`` bytes with
each library (TLS 1.3, the same certificate; the client side of each
pair is the same library, outside the timing) and prints the server's
microseconds of CPU per record received and answered, best of
``--rounds``.  It isolates the library's per-record cost from the rest
of a DoT query (the reactor, the length framing, the DNS work).
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transports_bench import certificate  # noqa: E402


def drain(read, want):
    """Every record ``read`` gives until the library raises ``want`` (it
    needs more ciphertext)."""
    got = []
    try:
        while True:
            got.append(read(65536))
    except want:
        return got


def pyopenssl_pair(cert, key):
    from OpenSSL import SSL
    sctx = SSL.Context(SSL.TLS_METHOD)
    sctx.use_certificate_file(cert)
    sctx.use_privatekey_file(key)
    cctx = SSL.Context(SSL.TLS_METHOD)
    server = SSL.Connection(sctx, None)
    server.set_accept_state()
    client = SSL.Connection(cctx, None)
    client.set_connect_state()
    want = (SSL.WantReadError,)

    def pump(src, dst):
        moved = False
        while True:
            try:
                data = src.bio_read(65536)
            except want:
                return moved
            dst.bio_write(data)
            moved = True

    def step(conn):
        try:
            conn.do_handshake()
        except want:
            pass
    for _ in range(10):
        step(client)
        pump(client, server)
        step(server)
        pump(server, client)

    def client_send(data):
        client.send(data)
        return pump_out(client)

    def pump_out(conn):
        return b"".join(drain(conn.bio_read, want))

    def client_recv(wire):
        client.bio_write(wire)
        drain(client.recv, want)

    def serve(wire):
        """What the server does per record: ciphertext in, plaintext
        out, the answer in, ciphertext out (as TLSMemoryBIOProtocol)."""
        server.bio_write(wire)
        server.send(drain(server.recv, want)[0])
        return pump_out(server)
    return client_send, serve, client_recv


def stdlib_pair(cert, key):
    import ssl
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    sin, sout = ssl.MemoryBIO(), ssl.MemoryBIO()
    cin, cout = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = sctx.wrap_bio(sin, sout, server_side=True)
    client = cctx.wrap_bio(cin, cout)
    for _ in range(10):
        for conn in (client, server):
            try:
                conn.do_handshake()
            except ssl.SSLWantReadError:
                pass
        sin.write(cout.read())
        cin.write(sout.read())
    want = ssl.SSLWantReadError

    def client_send(data):
        client.write(data)
        return cout.read()

    def client_recv(wire):
        cin.write(wire)
        drain(client.read, want)

    def serve(wire):
        sin.write(wire)
        server.write(drain(server.read, want)[0])
        return sout.read()
    return client_send, serve, client_recv


def measure(make, cert, key, records, size):
    client_send, serve, client_recv = make(cert, key)
    payload = os.urandom(size)
    wires = [client_send(payload) for _ in range(records)]
    answers = []
    t = time.process_time()
    for wire in wires:
        answers.append(serve(wire))
    spent = time.process_time() - t
    for a in answers:
        client_recv(a)
    return spent / records * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="tls-record-bench-")
    cert, key = certificate(work)
    best = {"pyOpenSSL": [], "ssl": []}
    for _ in range(args.rounds):
        for name, make in (("pyOpenSSL", pyopenssl_pair),
                           ("ssl", stdlib_pair)):
            best[name].append(measure(make, cert, key, args.records,
                                      args.size))
    for name, runs in best.items():
        print("%-9s %.2f us per record in and out (best of %d; all: %s)"
              % (name, min(runs), args.rounds,
                 ", ".join("%.2f" % r for r in runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
