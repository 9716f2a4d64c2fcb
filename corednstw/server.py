"""Listeners and the block mux: bytes in, bytes out.

One ``Mux`` per listening address routes each query to the server block with
the longest matching zone and runs that block's chain.  The malformed-input
rules are those of CoreDNS on miekg/dns: an unreadable header or a response
is ignored; opcodes other than QUERY and NOTIFY get NOTIMP; a wrong section
count or an unparsable question gets FORMERR (header only, as miekg writes
it).  Sockets are created here with SO_REUSEPORT and adopted by the reactor.
"""

import errno
from functools import partial
import socket
import struct
import sys
import traceback

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver
from twisted.protocols.policies import TimeoutMixin

from corednstw import dnswire as w
from corednstw import log
from corednstw import vars
from corednstw.request import Request, Response

_HDR = struct.Struct("!HHHHHH")

# Errors sending a datagram that mean "the kernel is busy": drop the answer
# (the client retries), never a traceback per packet.
_SEND_DROP = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS,
                        errno.ECONNREFUSED, errno.EHOSTUNREACH,
                        errno.ENETUNREACH, errno.EPERM, errno.EINTR))


def header_only(req, rcode, opcode):
    """miekg's reject reply: the query's header with QR and rcode, no
    sections (not even the question)."""
    flags = (w.QR | (opcode << 11) | (req.flags & (w.RD | w.CD)) | rcode)
    return _HDR.pack(req.id, flags, 0, 0, 0, 0)


def badvers(req):
    """EDNS version other than 0: BADVERS with an OPT of version 0."""
    data = req.data
    flags = w.QR | (req.opcode << 11) | (req.flags & (w.RD | w.CD))
    out = (_HDR.pack(req.id, flags, 1, 0, 0, 1) + data[12:req.qend]
           + w.opt_wire(0, (w.BADVERS >> 4) << 24))
    return out


def _stacktrace(req):
    """Print tracebacks of failures: ``debug``, or errors' ``stacktrace``."""
    b = req.block
    return b is not None and (b.debug or b.settings.get("stacktrace", False))


class Mux:
    """Routes the queries of one listening address to server blocks.

    ``zones`` maps a zone to the (zone, block) pairs serving it on this
    address, in Corefile order (several when bind/view filters differ).
    """

    def __init__(self, app, label, zones, chaos=False):
        self.app = app
        self.label = label
        self.zones = zones
        self.chaos = chaos
        self.inflight = 0

    # -- routing --------------------------------------------------------------

    def route(self, req):
        """The (zone, block) for ``req``: CoreDNS's longest-suffix walk.

        DS queries keep walking so the parent's block answers; the root zone
        is tried last; None means REFUSED.
        """
        q = req.qname
        zones = self.zones
        ds = req.qtype == w.DS
        found = None
        while q != ".":
            entries = zones.get(q)
            if entries is not None:
                for entry in entries:
                    block = entry[1]
                    if block.filters and not block.accepts(req):
                        continue
                    if not ds:
                        return entry
                    found = entry
                    break
            i = q.find(".")
            q = q[i + 1:] or "."
        if found is not None:
            return found
        entries = zones.get(".")
        if entries is not None:
            for entry in entries:
                if not entry[1].filters or entry[1].accepts(req):
                    return entry
        return None

    # -- the request path -----------------------------------------------------

    def handle(self, data, client, port, proto, local, send, depth=0):
        """Answer one query; ``send(bytes)`` writes to the client.
        ``depth`` counts nested internal lookups (App.lookup's loop guard)."""
        if len(data) < 12:
            return
        req = Request(data, client, port, proto, local, self.label)
        if depth:
            req.depth = depth
        qd, an, ns, ar = req.parse_header()
        if req.flags & w.QR:
            return
        op = req.opcode
        if op != w.OPCODE_QUERY and op != w.OPCODE_NOTIFY:
            send(header_only(req, w.NOTIMP, op))
            return
        if qd != 1 or an > 1 or ns > 1 or ar > 2:
            send(header_only(req, w.FORMERR, 0))
            return
        try:
            req.parse_question(an, ns, ar)
        except w.FormatError:
            send(header_only(req, w.FORMERR, 0))
            return
        if req.qclass != w.CLASS_IN and not self.chaos:
            self._drop(req, w.REFUSED, send)
            return
        if req.edns is not None and req.edns.ttl & 0xFF0000:
            send(badvers(req))
            return
        entry = self.route(req)
        if entry is None:
            self._drop(req, w.REFUSED, send)
            return
        req.zone, block = entry
        req.block = block
        req.view = block.view
        req.start = self.app.clock()
        self.inflight += 1
        try:
            result = block.chain.serve(req)
        except Exception:
            self.inflight -= 1
            self._panic(req, send)
            return
        if isinstance(result, defer.Deferred):
            result.addCallbacks(self._deliver, self._failed,
                                callbackArgs=(req, send),
                                errbackArgs=(req, send))
            return
        self._deliver(result, req, send)

    def _deliver(self, resp, req, send):
        self.inflight -= 1
        if resp is None:
            resp = Response(w.SERVFAIL)
        try:
            wire = resp.wire
            if wire is None:
                wire = resp.finish(req)
        except Exception:
            self._panic(req, send)
            return
        if not wire:
            return          # the plugin chose to write nothing
        send(wire)
        more = resp.more
        if more:            # further messages (zone transfers over TCP)
            for m in more:
                send(m)

    def _failed(self, failure, req, send):
        self.inflight -= 1
        log.error("", "Recovered from panic in server: %r %s" % (
            self.label, failure.getErrorMessage()))
        if _stacktrace(req):
            failure.printTraceback(file=sys.__stdout__)
        vars.PANICS.inc()
        send(Response(w.SERVFAIL).finish(req))

    def _panic(self, req, send):
        """A plugin raised: log as CoreDNS does, count, answer SERVFAIL."""
        exc = sys.exc_info()[1]
        log.error("", "Recovered from panic in server: %r %s" % (
            self.label, exc))
        if _stacktrace(req):
            traceback.print_exc(file=sys.__stdout__)
        vars.PANICS.inc()
        try:
            send(Response(w.SERVFAIL).finish(req))
        except Exception:
            pass

    def _drop(self, req, rcode, send):
        """Refuse a query no block takes; counted under zone "dropped"."""
        wire = Response(rcode).finish(req)
        vars.report(self.label, req, vars.DROPPED, "", rcode, "", len(wire),
                    0.0)
        send(wire)


# -- protocols ---------------------------------------------------------------

def _client(addr):
    """(address, port) with ``::ffff:`` mapped addresses turned into IPv4."""
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, addr[1]


class DNSDatagramProtocol(protocol.DatagramProtocol):
    """UDP: one datagram, one query; replies sent with sendto directly."""

    def __init__(self, mux, local):
        self.mux = mux
        self.local = local
        self._sendto = None

    def startProtocol(self):
        self._sendto = self.transport.socket.sendto

    def datagramReceived(self, data, addr):
        host = addr[0]
        if host.startswith("::ffff:") and "." in host:
            host = host[7:]
        self.mux.handle(data, host, addr[1], "udp", self.local,
                        partial(self._send, addr))

    def _send(self, addr, wire):
        try:
            self._sendto(wire, addr)
        except OSError as e:
            if e.errno not in _SEND_DROP:
                log.error("", "UDP write to %s failed: %s" % (addr[0], e))


class DNSStreamProtocol(Int16StringReceiver, TimeoutMixin):
    """TCP: length-framed queries, pipelined; idle timeout between them."""

    MAX_LENGTH = 65535

    def __init__(self, mux, local, timeouts):
        self.mux = mux
        self.local = local
        self.read_timeout, self.idle_timeout = timeouts
        self.host = None
        self.port = 0

    def connectionMade(self):
        peer = self.transport.getPeer()
        self.host, self.port = _client((peer.host, peer.port))
        self.setTimeout(self.read_timeout)

    def stringReceived(self, data):
        self.setTimeout(self.idle_timeout)
        # The factory's mux, not one kept per connection: after a reload
        # an open connection's next query goes to the new configuration.
        self.factory.mux.handle(data, self.host, self.port, "tcp",
                                self.local, self._send)

    def _send(self, wire):
        if self.transport is None or self.transport.disconnecting:
            return
        if len(wire) > 65535:
            wire = wire[:65535]
        self.sendString(wire)

    def lengthLimitExceeded(self, length):
        self.transport.loseConnection()

    def timeoutConnection(self):
        self.transport.abortConnection()

    def connectionLost(self, reason):
        self.setTimeout(None)


class DNSStreamFactory(protocol.ServerFactory):
    def __init__(self, mux, local, timeouts=(3.0, 10.0)):
        self.mux = mux
        self.local = local
        self.timeouts = timeouts

    def buildProtocol(self, addr):
        p = DNSStreamProtocol(self.mux, self.local, self.timeouts)
        p.factory = self
        return p


# -- sockets -----------------------------------------------------------------

#: Socket buffer size asked for UDP listeners (the kernel caps it at
#: net.core.rmem_max / wmem_max).
UDP_BUFFER = 4 * 1024 * 1024


def _family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _socket(host, port, kind):
    fam = _family(host)
    s = socket.socket(fam, kind)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if kind == socket.SOCK_DGRAM:
            # Room for bursts: a full receive queue drops queries silently.
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    s.setsockopt(socket.SOL_SOCKET, opt, UDP_BUFFER)
                except OSError:
                    pass
        if fam == socket.AF_INET6 and host == "::":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind((host, port))
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


def default_host():
    """'::' (dual stack) when the kernel has IPv6, else '0.0.0.0'."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::", 0))
        s.close()
        return "::"
    except OSError:
        return "0.0.0.0"


def listen(reactor, host, port, mux, timeouts=(3.0, 10.0)):
    """Open UDP and TCP on host:port (port 0: one free port for both).

    Returns (udp_port, tcp_port, actual_port).  The reactor adopts sockets
    we made, because listenUDP/listenTCP cannot set SO_REUSEPORT.
    """
    for _ in range(20):
        u = _socket(host, port, socket.SOCK_DGRAM)
        actual = u.getsockname()[1]
        try:
            t = _socket(host, actual, socket.SOCK_STREAM)
        except OSError as e:
            u.close()
            if port == 0 and e.errno == errno.EADDRINUSE:
                continue
            raise
        break
    else:
        raise OSError(errno.EADDRINUSE, "no free port for UDP and TCP")
    try:
        t.listen(1024)
        local = (host, actual)
        udp = reactor.adoptDatagramPort(u.fileno(), _family(host),
                                        DNSDatagramProtocol(mux, local),
                                        maxPacketSize=65535)
        tcp = reactor.adoptStreamPort(t.fileno(), _family(host),
                                      DNSStreamFactory(mux, local, timeouts))
    finally:
        u.close()
        t.close()
    return udp, tcp, actual
