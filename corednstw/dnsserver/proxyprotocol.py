"""The PROXY protocol (versions 1 and 2) in front of every listener of a
block with ``proxyproto``: the chain sees the client the header names.

On TCP (plain DNS, DoT, DoH) the header opens the connection, before TLS;
``ProxyFactory`` reads it and only then builds the protocol underneath,
whose peer is the header's source.  On UDP each datagram may start with a
version 2 header (``ProxyMux`` strips it in front of the block mux); with
``udp_session_tracking`` a header-only datagram names the client of the
datagrams that follow from the same proxy address.

The policy is CoreDNS's (go-proxyproto's): per source address, ``use`` the
header, ``ignore`` it (read and dropped), ``reject`` a connection or
datagram that carries one, or ``skip`` reading (the bytes go on as they
are).  A malformed header ends the connection or drops the datagram.
"""

import collections
import ipaddress
import socket
import struct

from twisted.internet import address
from twisted.protocols import policies
from zope.interface import directlyProvides, providedBy

from corednstw.core import logger

V1_SIG = b"PROXY "
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
V1_MAX = 107
#: How long a connection may take to send its header (go-proxyproto's
#: default read header timeout).
HEADER_TIMEOUT = 10.0
#: Sessions kept by udp_session_tracking unless told otherwise.
MAX_SESSIONS = 10240

POLICIES = ("use", "ignore", "reject", "skip")

_V2_HEAD = struct.Struct("!12sBBH")
_STREAM, _DGRAM = 1, 2


class ProxyError(ValueError):
    """A header that starts like one but cannot be read."""


class Header:
    """What a header says: ``source`` (host, port) or None (LOCAL and
    UNKNOWN keep the connection's own address); ``version``; ``dgram`` for
    a version 2 header of a UDP flow."""

    __slots__ = ("source", "version", "dgram")

    def __init__(self, source, version, dgram=False):
        self.source = source
        self.version = version
        self.dgram = dgram


def parse(data):
    """(Header or None, bytes consumed) for the start of ``data``.

    None with 0 consumed: not a header.  None with -1: too short to tell
    yet (a prefix of a signature, or an unfinished header).  ProxyError
    for a malformed one."""
    if data.startswith(V2_SIG):
        return _parse_v2(data)
    if data.startswith(V1_SIG):
        return _parse_v1(data)
    if V2_SIG.startswith(data[:12]) or V1_SIG.startswith(data[:6]):
        return None, -1
    return None, 0


def _parse_v1(data):
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(data) >= V1_MAX:
            raise ProxyError("v1 header too long")
        return None, -1
    parts = data[:end].decode("ascii", "replace").split(" ")
    if len(parts) >= 2 and parts[1] == "UNKNOWN":
        return Header(None, 1), end + 2
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyError("invalid v1 header")
    try:
        src = ipaddress.ip_address(parts[2])
        dst = ipaddress.ip_address(parts[3])
        sport, dport = int(parts[4]), int(parts[5])
    except ValueError as e:
        raise ProxyError("invalid v1 header") from e
    want = 4 if parts[1] == "TCP4" else 6
    if src.version != want or dst.version != want or not (
            0 <= sport <= 65535 and 0 <= dport <= 65535):
        raise ProxyError("invalid v1 header")
    return Header((str(src), sport), 1), end + 2


def _parse_v2(data):
    if len(data) < _V2_HEAD.size:
        return None, -1
    _, vercmd, fam, length = _V2_HEAD.unpack_from(data)
    end = _V2_HEAD.size + length
    if vercmd >> 4 != 2:
        raise ProxyError("unsupported version %d" % (vercmd >> 4))
    if len(data) < end:
        return None, -1
    cmd = vercmd & 0xF
    if cmd == 0:                # LOCAL: the proxy's own connection
        return Header(None, 2), end
    if cmd != 1:
        raise ProxyError("unknown command %d" % cmd)
    af, proto = fam >> 4, fam & 0xF
    body = data[_V2_HEAD.size:end]
    if af == 1 and len(body) >= 12:
        host = socket.inet_ntop(socket.AF_INET, body[:4])
        port = struct.unpack_from("!H", body, 8)[0]
    elif af == 2 and len(body) >= 36:
        host = socket.inet_ntop(socket.AF_INET6, body[:16])
        port = struct.unpack_from("!H", body, 32)[0]
    elif af == 0:
        return Header(None, 2, proto == _DGRAM), end
    else:
        raise ProxyError("invalid v2 address block")
    if proto not in (_STREAM, _DGRAM):
        raise ProxyError("unknown v2 transport %d" % proto)
    return Header((host, port), 2, proto == _DGRAM), end


class Policy:
    """The ``proxyproto`` directive: allowed networks and the policy for
    every other source."""

    def __init__(self, nets=(), default="ignore", default_set=False,
                 ttl=0.0, max_sessions=0):
        self.nets = list(nets)
        self.default = default
        self.default_set = default_set
        self.ttl = ttl
        self.max_sessions = max_sessions or MAX_SESSIONS

    def decide(self, host):
        """use, ignore, reject or skip for a connection from ``host``."""
        if not self.nets:
            return self.default if self.default_set else "use"
        try:
            ip = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            return "reject"
        if getattr(ip, "ipv4_mapped", None):
            ip = ip.ipv4_mapped
        for net in self.nets:
            if ip.version == net.version and ip in net:
                return "use"
        return self.default


def _mapped(host):
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    return host


# -- TCP ----------------------------------------------------------------------

class ProxyReader(policies.ProtocolWrapper):
    """Reads the header of one connection, then hands the connection (and
    the bytes after the header) to the protocol underneath, built only
    then: a connection that never sends a header leaves nothing behind
    there."""

    def __init__(self, factory):
        super().__init__(factory, None)
        self.buffer = b""
        self.source = None
        self.timer = None

    def makeConnection(self, transport):
        # ProtocolWrapper's, without connecting a wrapped protocol yet.
        directlyProvides(self, providedBy(transport))
        self.connected = 1
        self.transport = transport
        self.factory.registerProtocol(self)
        peer = transport.getPeer()
        self.decision = self.factory.policy.decide(_mapped(peer.host))
        if self.decision == "skip":
            self._attach(b"")
            return
        self.timer = self.factory.call_later(HEADER_TIMEOUT, self._expired)

    def dataReceived(self, data):
        if self.wrappedProtocol is not None:
            self.wrappedProtocol.dataReceived(data)
            return
        self.buffer += data
        try:
            header, used = parse(self.buffer)
        except ProxyError as e:
            self._refuse("invalid PROXY header: %s" % e)
            return
        if used < 0:
            return
        if header is not None and self.decision == "reject":
            self._refuse("PROXY header from a source not allowed")
            return
        if header is not None and self.decision == "use":
            self.source = header.source
        rest, self.buffer = self.buffer[used:], b""
        self._attach(rest)

    def _attach(self, rest):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        proto = self.factory.wrappedFactory.buildProtocol(self.getPeer())
        if proto is None:
            self.transport.loseConnection()
            return
        self.wrappedProtocol = proto
        proto.makeConnection(self)
        if rest:
            proto.dataReceived(rest)

    def _refuse(self, why):
        logger.debug("proxyproto", why)
        self.transport.abortConnection()

    def _expired(self):
        self.timer = None
        self.transport.abortConnection()

    def getPeer(self):
        peer = self.transport.getPeer()
        if self.source is None:
            return peer
        host, port = self.source
        cls = address.IPv6Address if ":" in host else address.IPv4Address
        return cls("TCP", host, port)

    def connectionLost(self, reason):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.factory.unregisterProtocol(self)
        if self.wrappedProtocol is not None:
            self.wrappedProtocol.connectionLost(reason)
        self.wrappedProtocol = None


class ProxyFactory(policies.WrappingFactory):
    """Puts a ProxyReader in front of every connection of ``wrapped``."""

    protocol = ProxyReader

    def __init__(self, wrapped, policy, reactor):
        super().__init__(wrapped)
        self.policy = policy
        self.reactor = reactor

    def buildProtocol(self, addr):
        return self.protocol(self)

    def call_later(self, delay, fn):
        return self.reactor.callLater(delay, fn)


# -- UDP ----------------------------------------------------------------------

class ProxyMux:
    """Stands in front of a block mux for a UDP listener: strips a version
    2 header off each datagram and passes the header's client on (the
    answer still goes to the proxy, through ``send``)."""

    def __init__(self, mux, policy, clock):
        self.mux = mux
        self.policy = policy
        self.clock = clock
        self.sessions = collections.OrderedDict()
        self.invalid = logger.Limited("proxyproto", clock=clock)

    def __getattr__(self, name):
        return getattr(self.mux, name)

    def handle(self, data, client, port, proto, local, send, depth=0):
        decision = self.policy.decide(client)
        if decision == "skip":
            return self.mux.handle(data, client, port, proto, local, send)
        try:
            header, used = parse(data)
            if used < 0:
                raise ProxyError("truncated header")
            if header is not None and (header.version != 2
                                       or not header.dgram):
                raise ProxyError("only v2 UDP headers are accepted on UDP")
        except ProxyError as e:
            self.invalid.warning("dropping invalid Proxy Protocol packet "
                                 "from %s: %s" % (client, e))
            return False
        payload = data[used:]
        if decision == "reject" and header is not None:
            return False
        if decision == "use":
            source = self._source(header, client, port, payload)
            if source is False:
                return False
            if source is not None:
                client, port = _mapped(source[0]), source[1]
        return self.mux.handle(payload, client, port, proto, local, send)

    def _source(self, header, client, port, payload):
        """The client a datagram stands for; False for a header-only
        datagram that only opens a tracked session."""
        tracking = self.policy.ttl > 0
        key = (client, port)
        if header is not None:
            if tracking and header.source is not None:
                self._remember(key, header.source)
                if not payload:
                    return False
            return header.source
        if tracking:
            return self._recall(key)
        return None

    def _remember(self, key, source):
        self.sessions.pop(key, None)
        self.sessions[key] = (source, self.clock() + self.policy.ttl)
        while len(self.sessions) > self.policy.max_sessions:
            self.sessions.popitem(last=False)

    def _recall(self, key):
        entry = self.sessions.get(key)
        if entry is None:
            return None
        source, expires = entry
        now = self.clock()
        if now > expires:
            del self.sessions[key]
            return None
        self.sessions.move_to_end(key)
        self.sessions[key] = (source, now + self.policy.ttl)
        return source
