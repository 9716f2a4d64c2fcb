"""A listening address of the running server, and how it is opened.

``open_listener`` opens what one (transport, address, port) of a
configuration needs: UDP and TCP for plain DNS, TCP alone for DoT, DoH and
gRPC, UDP for DoQ and DoH3, with the PROXY protocol reader in front when a
block asks for it.  A ``Listener`` holds those ports and switches them to a
reload's mux.  The App (service/app.py) and the multisocket supervisor and
workers all open listeners through here.
"""

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import config as configlib
from corednstw.core.interfaces import IListener
from corednstw.dnsserver import sockets
from corednstw.dnsserver.mux import Mux
from corednstw.dnsserver.stream import Timeouts

#: Plugins whose presence opens a listener to classes other than IN
#: (CoreDNS's EnableChaos).
ENABLE_CHAOS = frozenset(("chaos", "forward", "proxy"))


def build_muxes(server, cfg):
    """One Mux per listener of ``cfg`` (no sockets yet); ``server`` is
    what the muxes re-enter and read the clock from."""
    muxes = {}
    for (transport, host, port), entries in cfg.listeners.items():
        zones = {}
        chaos = False
        for zone, block in entries:
            zones.setdefault(zone, []).append((zone, block))
            if any(p.name in ENABLE_CHAOS for p in block.plugins):
                chaos = True
        label = configlib.server_label(transport, host, port)
        muxes[(transport, host, port)] = Mux(server, label, zones,
                                                    chaos)
    return muxes


def open_listener(reactor, lk, host, mux, entries, clock, bound=None):
    """Open the sockets of listener ``lk`` on ``host``: UDP and TCP for
    plain DNS, TCP alone for the other transports (a tls:// block
    without a certificate is plain DNS over TCP); the PROXY protocol
    in front when a block of the listener asks for it.  ``bound``:
    plain DNS's (udp, tcp) pair already bound, to adopt.

    The modules of the other transports (TLS, gRPC, QUIC, HTTP/2 and
    HTTP/3, the PROXY protocol) are imported only by a listener that
    uses them: together they are about a fifth of the start-up."""
    transport, _, port = lk
    kind, tls = kind_of(transport, entries)
    limits = _timeouts(entries)
    policy = proxy_policy(entries)
    wrap = None
    if policy is not None:
        from corednstw.dnsserver import proxyprotocol  # only behind PROXY
        def wrap(factory):
            return proxyprotocol.ProxyFactory(factory, policy, reactor)
    opener = _OPENERS.get(kind)
    if opener is not None:
        lst = opener(reactor, host, int(port), mux, limits, tls,
                     entries, wrap)
        lst.kind = kind
    else:
        udp, tcp, actual = sockets.listen(
            reactor, host, int(port), mux, limits,
            udp=transport not in configlib.STREAM_ONLY, bound=bound)
        lst = Listener(mux, udp, tcp, host, actual, kind=kind)
        if wrap is not None:
            tcp.factory = wrap(tcp.factory)
    lst.proxied = policy is not None
    lst.clock = clock
    lst.set_policy(policy)
    return lst

@implementer(IListener)
class Listener:
    """One listening address: UDP and TCP for plain DNS (``udp`` None:
    TCP alone).  ``stream`` is the factory of the DNS connections (it holds
    the mux, the limits and closes them all); ``kind`` what is served
    (dns, tcp, tls, https, http); ``creator`` makes the TLS connections."""

    proxied = False
    clock = None

    def __init__(self, mux, udp, tcp, host, port, stream=None, kind="dns",
                 creator=None):
        self.mux = mux
        self.udp = udp
        self.tcp = tcp
        self.host = host
        self.port = port
        self.stream = stream if stream is not None else tcp.factory
        self.kind = kind
        self.creator = creator

    @property
    def udp_protocol(self):
        """The DNSDatagramProtocol of a plain DNS listener, else None."""
        return self.udp.protocol if self.udp is not None else None

    def switch(self, mux, entries):
        """Send the next queries to ``mux`` (a reload's); new connections
        get the new limits and certificate of ``entries``."""
        self.mux = mux
        if self.udp is not None:
            self.udp.protocol.mux = mux
        self.stream.mux = mux
        self.set_policy(proxy_policy(entries))
        self.stream.timeouts = _timeouts(entries)
        if self.creator is not None:
            self.creator.tls = kind_of(self.kind, entries)[1]
        if self.kind in ("https", "http"):
            self.stream.limit = _max_connections(entries)

    def set_policy(self, policy):
        """Apply the proxyproto policy: UDP datagrams pass a ProxyMux
        before the block mux; the TCP reader (set up when the listener
        was opened) takes the new policy for its next connections."""
        if policy is None or self.kind in ("quic", "https3"):
            return
        from corednstw.dnsserver import proxyprotocol  # only behind PROXY
        if self.udp is not None:
            self.udp.protocol.mux = proxyprotocol.ProxyMux(self.mux, policy,
                                                        self.clock)
        factory = self.tcp.factory
        while factory is not None:
            if isinstance(factory, proxyprotocol.ProxyFactory):
                factory.policy = policy
                break
            factory = getattr(factory, "wrappedFactory", None)

    def stop(self):
        """Stop listening (open TCP connections are closed separately);
        fires when both ports are closed."""
        ds = [defer.maybeDeferred(p.stopListening)
              for p in (self.udp, self.tcp) if p is not None]
        return defer.gatherResults(ds)


def _open_tls(reactor, host, port, mux, limits, tls, entries, wrap):
    from corednstw.dnsserver import dot  # only for tls://
    tcp, stream, creator, actual = dot.listen_tls(
        reactor, host, port, mux, limits, tls, wrap)
    return Listener(mux, None, tcp, host, actual, stream, creator=creator)


def _open_grpc(reactor, host, port, mux, limits, tls, entries, wrap):
    from corednstw.dnsserver import grpcdns  # only for grpc://
    opts = entries[0][1].settings.get("grpc_server") or {}
    tcp, front, creator, actual = grpcdns.listen_grpc(
        reactor, host, port, mux, limits, tls,
        opts.get("max_streams", grpcdns.DEFAULT_MAX_STREAMS),
        opts.get("max_connections", grpcdns.DEFAULT_MAX_CONNECTIONS), wrap)
    return Listener(mux, None, tcp, host, actual, front, creator=creator)


def _open_quic(reactor, host, port, mux, limits, tls, entries, wrap):
    from corednstw.dnsserver import doq  # only for quic://
    udp, front, actual = doq.listen_quic(
        reactor, host, port, mux, limits, tls,
        entries[0][1].settings.get("quic") or doq.Settings())
    return Listener(mux, udp, None, host, actual, front, creator=front)


def _open_https3(reactor, host, port, mux, limits, tls, entries, wrap):
    from corednstw.dnsserver import doh3, doq  # only for https3://
    udp, front, actual = doh3.listen_https3(
        reactor, host, port, mux, limits, tls,
        entries[0][1].settings.get("https3") or doq.Settings(
            doh3.DEFAULT_MAX_STREAMS, doq.DEFAULT_WORKER_POOL,
            doh3.DEFAULT_MAX_CONNECTIONS))
    return Listener(mux, udp, None, host, actual, front, creator=front)


def _open_https(reactor, host, port, mux, limits, tls, entries, wrap):
    from corednstw.dnsserver import doh  # only for https:// (DoH)
    tcp, front, creator, actual = doh.listen_https(
        reactor, host, port, mux, limits, tls, _max_connections(entries),
        wrap)
    return Listener(mux, None, tcp, host, actual, front, creator=creator)


#: Listener kind -> its opener; plain DNS (UDP and TCP) is ``_listen``'s.
_OPENERS = {
    "tls": _open_tls, "grpc": _open_grpc, "quic": _open_quic,
    "https3": _open_https3, "https": _open_https, "http": _open_https,
}


def kind_of(transport, entries):
    """(kind, tls settings) of a listener from the blocks it serves: the
    certificate is the last one a block of the listener sets (CoreDNS
    takes one of them).  tls:// without one is plain TCP ("tcp")."""
    tls = None
    for _, block in entries:
        tls = block.settings.get("tls") or tls
    if transport == "tls":
        return ("tls" if tls is not None else "tcp"), tls
    if transport == "https":
        # With and without a certificate are different listeners.
        return ("https" if tls is not None else "http"), tls
    return transport, tls


def proxy_policy(entries):
    """The proxyproto policy of a listener: the last block's that sets
    one (CoreDNS keeps the last of the group), or None."""
    policy = None
    for _, block in entries:
        policy = block.settings.get("proxyproto") or policy
    return policy


def _max_connections(entries):
    """The https directive's max_connections of the listener's first
    block (as CoreDNS reads it), else the default."""
    from corednstw.dnsserver import doh  # only for https:// (DoH)
    values = entries[0][1].settings.get("https") or {}
    return values.get("max_connections", doh.DEFAULT_MAX_CONNECTIONS)

def _timeouts(entries):
    """TCP limits of a listener: the timeouts plugin's values (from any
    block on it), else CoreDNS's defaults (read 3s, write 5s, idle 10s,
    unlimited queries per connection)."""
    limits = Timeouts()
    for _, block in entries:
        t = block.settings.get("timeouts")
        if t:
            limits.read = t.get("read", limits.read)
            limits.write = t.get("write", limits.write)
            limits.idle = t.get("idle", limits.idle)
            limits.max_queries = t.get("maxtcpqueries", limits.max_queries)
    return limits
