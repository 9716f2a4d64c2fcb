"""A tiny scriptable DNS server for tests of forward, cache, loop, dns64.

It listens on UDP and TCP (same port) on 127.0.0.1, counts every query it
receives and answers by simple rules that tests can change at any time:

- ``A`` queries: one A record (``address``, ``ttl``); ``AAAA``: ``aaaa``
  records if set, else NODATA with an SOA; names whose first label starts
  with ``nx``: NXDOMAIN with an SOA (``soa_ttl``/``soa_min``);
- ``rcode``: answer every query with that rcode (no records);
- ``drop``: receive (and count) but do not answer the next N queries;
- ``truncate``: answer UDP queries with TC set and no records;
- ``silent``: receive but never answer; ``held``: answer later, when
  ``release()`` is called;
- ``wrong_id`` / ``wrong_question``: reply with a different ID (then the
  right reply) / with another question name;
- ``handler(msg, proto)``: return a dnspython response to override all that;
- ``mangle(wire, proto)``: the bytes sent instead of the reply (None: send
  nothing), for upstreams that answer garbage.
"""

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import error, protocol, reactor
from twisted.protocols.basic import Int16StringReceiver


class Upstream:

    def __init__(self, address="192.0.2.1"):
        self.address = address
        self.aaaa = None
        self.ttl = 300
        self.soa_ttl = 3600
        self.soa_min = 60
        self.rcode = None
        self.truncate = False
        self.silent = False
        self.drop = 0
        self.held = False
        self.wrong_id = False
        self.wrong_question = False
        self.handler = None
        self.mangle = None
        self.queries = []        # (proto, qname lower, type text, message)
        self.replies = []        # the reply bytes sent, in order
        self.sources = []        # the (host, port) of each UDP query
        self.pending = []
        self.udp = self.tcp = None
        self.port = 0

    # -- life cycle -----------------------------------------------------------

    def start(self, port=None):
        port = self.port if port is None else port
        fac = protocol.ServerFactory()
        fac.protocol = lambda: _TCP(self)
        for _ in range(20):
            self.udp = reactor.listenUDP(port, _UDP(self),
                                         interface="127.0.0.1",
                                         maxPacketSize=65535)
            self.port = self.udp.getHost().port
            try:
                self.tcp = reactor.listenTCP(self.port, fac,
                                             interface="127.0.0.1")
            except error.CannotListenError:
                self.udp.stopListening()
                if port:
                    raise
                continue
            return self
        raise error.CannotListenError("127.0.0.1", 0, "no free port")

    def stop(self):
        out = []
        for p in (self.udp, self.tcp):
            if p is not None:
                out.append(p.stopListening())
        self.udp = self.tcp = None
        return out[0] if out else None

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def count(self, name=None, qtype=None, proto=None):
        """How many queries arrived (optionally for a name/type/proto)."""
        n = 0
        for p, q, t, _ in self.queries:
            if name is not None and q != name.lower():
                continue
            if qtype is not None and t != qtype:
                continue
            if proto is not None and p != proto:
                continue
            n += 1
        return n

    def release(self):
        pending, self.pending = self.pending, []
        for send, data in pending:
            send(data)

    # -- answering ------------------------------------------------------------

    def answer(self, data, proto, send):
        try:
            q = dns.message.from_wire(data)
        except Exception:
            return
        qn = q.question[0]
        self.queries.append((proto, str(qn.name).lower(),
                             dns.rdatatype.to_text(qn.rdtype), q))
        if self.silent:
            return
        if self.drop:
            self.drop -= 1
            return
        r = self.handler(q, proto) if self.handler else None
        if r is None:
            r = self._default(q, qn, proto)
        if self.wrong_question:
            r.question[0].name = dns.name.from_text("wrong.example.")
        wire = r.to_wire(max_size=65535)
        if self.mangle is not None:
            wire = self.mangle(wire, proto)
            if wire is None:
                return
        if self.wrong_id:
            bad = bytes([(data[0] + 1) & 0xFF]) + wire[1:]
            send(bad)
        self.replies.append(wire)
        if self.held:
            self.pending.append((send, wire))
            return
        send(wire)

    def _default(self, q, qn, proto):
        r = dns.message.make_response(q)
        r.flags |= dns.flags.RA
        if self.rcode is not None:
            r.set_rcode(self.rcode)
            return r
        if self.truncate and proto == "udp":
            r.flags |= dns.flags.TC
            return r
        name = qn.name
        first = (name.labels[0].decode("ascii", "replace").lower()
                 if name.labels else "")
        soa = dns.rrset.from_text(
            "example.", self.soa_ttl, "IN", "SOA",
            "ns.example. host.example. 1 7200 1800 86400 %d" % self.soa_min)
        if first.startswith("nx"):
            r.set_rcode(dns.rcode.NXDOMAIN)
            r.authority.append(soa)
        elif qn.rdtype == dns.rdatatype.A:
            r.answer.append(dns.rrset.from_text(name, self.ttl, "IN", "A",
                                                self.address))
        elif qn.rdtype == dns.rdatatype.AAAA and self.aaaa:
            r.answer.append(dns.rrset.from_text(name, self.ttl, "IN",
                                                "AAAA", self.aaaa))
        else:
            r.authority.append(soa)
        return r


class _UDP(protocol.DatagramProtocol):
    def __init__(self, up):
        self.up = up

    def datagramReceived(self, data, addr):
        self.up.sources.append(addr)

        def send(wire):
            if self.transport is not None:
                self.transport.write(wire, addr)
        self.up.answer(data, "udp", send)


class _TCP(Int16StringReceiver):
    MAX_LENGTH = 65535

    def __init__(self, up):
        self.up = up

    def stringReceived(self, data):
        def send(wire):
            if self.transport is not None and self.transport.connected:
                self.sendString(wire)
        self.up.answer(data, "tcp", send)
