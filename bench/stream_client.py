#!/usr/bin/env python3
"""A load client for the transports dnsperf does not speak.

    .venv/bin/python bench/stream_client.py --transport doh-h1|grpc|doq
        --port PORT --queries FILE [--seconds 10] [--connections 10]
        [--inflight 10]

dnsperf 2.10 loads UDP, TCP, DoT and DoH over HTTP/2; this client loads
DNS over HTTPS on HTTP/1.1 (``POST /dns-query``, keep-alive, one request
at a time per connection), gRPC (grpcio's asyncio unary call of
``/coredns.dns.DnsService/Query`` over h2c) and DNS over QUIC (aioquic,
ALPN ``doq``, one bidirectional stream per query, message ID 0) for
``--seconds`` seconds, with ``--inflight`` queries outstanding on each
of ``--connections`` connections.  It is the same client for both
servers, so its cost cancels out of a comparison of the servers' CPU
per query; it prints its own CPU seconds so that a run where the client
was the limit can be told apart.

Every answer is checked: the first answer to each question is printed
(hex, ID zeroed) for the caller to check in full, and every later answer
to the same question must be the same bytes (the answers of the
workloads that use this client do not change between queries).  Prints
one JSON line: sent, completed, errors, mismatches, cpu, wall, first.
"""

import argparse
import asyncio
import json
import os
import ssl
import struct
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def wires(path):
    """The queries of ``path`` (``NAME TYPE`` a line) as DNS messages
    with ID 0 and the RD bit, as dnsperf sends them."""
    import dns.message
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                name, rtype = line.split()
                q = dns.message.make_query(name, rtype)
                q.id = 0
                out.append(q.to_wire())
    return out


class Tally:
    """Counts shared by every connection of a run."""

    def __init__(self, queries):
        self.queries = queries
        self.sent = self.completed = self.errors = self.mismatches = 0
        self.first = {}
        self.next = 0

    def question(self):
        """The index of the next query to send (round robin)."""
        i = self.next
        self.next = (i + 1) % len(self.queries)
        self.sent += 1
        return i

    def answer(self, i, wire):
        """Record the answer ``wire`` to query ``i``."""
        if len(wire) < 12:
            self.errors += 1
            return
        body = b"\0\0" + wire[2:]
        first = self.first.get(i)
        if first is None:
            self.first[i] = body
        elif first != body:
            self.mismatches += 1
        self.completed += 1


def tls_context(alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols([alpn])
    return ctx


async def doh_h1(port, tally, end, inflight):
    """One keep-alive HTTP/1.1 connection, requests one after another
    (``inflight`` is not used: HTTP/1.1 without pipelining, so
    ``--connections`` alone sets the concurrency)."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls_context("http/1.1"))
    head = ("POST /dns-query HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            "Content-Type: application/dns-message\r\n"
            "Accept: application/dns-message\r\n"
            "Content-Length: " % port).encode()
    try:
        while time.monotonic() < end:
            i = tally.question()
            q = tally.queries[i]
            writer.write(head + b"%d\r\n\r\n" % len(q) + q)
            header = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in header.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length)
            if not header.startswith(b"HTTP/1.1 200"):
                tally.errors += 1
                continue
            tally.answer(i, body)
    finally:
        writer.close()


async def grpc_calls(port, tally, end, inflight, channels):
    """``inflight`` concurrent unary calls on one channel."""
    import grpc

    from corednstw.dnsserver.grpcdns import (
        METHOD,
        decode_packet,
        encode_packet,
    )
    channel = grpc.aio.insecure_channel(
        "127.0.0.1:%d" % port, options=[("grpc.use_local_subchannel_pool",
                                         1)])
    channels.append(channel)
    call = channel.unary_unary(METHOD.decode(),
                               request_serializer=encode_packet,
                               response_deserializer=decode_packet)

    async def one():
        while time.monotonic() < end:
            i = tally.question()
            try:
                wire = await call(tally.queries[i], timeout=5)
            except grpc.RpcError:
                tally.errors += 1
                continue
            tally.answer(i, wire)

    await asyncio.gather(*(one() for _ in range(inflight)))


async def doq(port, tally, end, inflight):
    """One QUIC connection, ``inflight`` streams open at a time."""
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import StreamDataReceived

    class Client(QuicConnectionProtocol):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.waiting = {}
            self.data = {}

        def quic_event_received(self, event):
            if isinstance(event, StreamDataReceived):
                got = self.data.get(event.stream_id, b"") + event.data
                self.data[event.stream_id] = got
                if event.end_stream:
                    del self.data[event.stream_id]
                    fut = self.waiting.pop(event.stream_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(got)

        async def ask(self, wire):
            sid = self._quic.get_next_available_stream_id()
            fut = asyncio.get_running_loop().create_future()
            self.waiting[sid] = fut
            self._quic.send_stream_data(
                sid, struct.pack("!H", len(wire)) + wire, end_stream=True)
            self.transmit()
            return await asyncio.wait_for(fut, 5)

    config = QuicConfiguration(is_client=True, alpn_protocols=["doq"],
                               verify_mode=ssl.CERT_NONE,
                               max_stream_data=1 << 20)
    async with connect("127.0.0.1", port, configuration=config,
                       create_protocol=Client) as client:
        async def one():
            while time.monotonic() < end:
                i = tally.question()
                try:
                    got = await client.ask(tally.queries[i])
                except (asyncio.TimeoutError, ConnectionError):
                    tally.errors += 1
                    continue
                tally.answer(i, got[2:])

        await asyncio.gather(*(one() for _ in range(inflight)))


async def run(args, tally, t0):
    end = t0 + args.seconds
    channels = []
    if args.transport == "doh-h1":
        jobs = [doh_h1(args.port, tally, end, args.inflight)
                for _ in range(args.connections)]
    elif args.transport == "grpc":
        jobs = [grpc_calls(args.port, tally, end, args.inflight, channels)
                for _ in range(args.connections)]
    else:
        jobs = [doq(args.port, tally, end, args.inflight)
                for _ in range(args.connections)]
    try:
        await asyncio.gather(*jobs)
    finally:
        for channel in channels:
            await channel.close()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--transport", required=True,
                    choices=("doh-h1", "grpc", "doq"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--inflight", type=int, default=10)
    args = ap.parse_args(argv)
    tally = Tally(wires(args.queries))
    # The libraries are loaded before the clock starts.
    if args.transport == "grpc":
        import grpc  # noqa: F401

        import corednstw.dnsserver.grpcdns  # noqa: F401
    elif args.transport == "doq":
        import aioquic.asyncio  # noqa: F401
    cpu, t0 = time.process_time(), time.monotonic()
    asyncio.run(run(args, tally, t0))
    wall = time.monotonic() - t0
    print(json.dumps({
        "sent": tally.sent, "completed": tally.completed,
        "errors": tally.errors, "mismatches": tally.mismatches,
        "cpu": time.process_time() - cpu, "wall": wall,
        "first": {str(i): w.hex() for i, w in tally.first.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
