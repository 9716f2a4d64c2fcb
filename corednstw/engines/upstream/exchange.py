"""One-shot exchanges: one query on a fresh socket, for health checks,
loop probes, tests, and anything else outside a plugin's query path.
"""

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.engines.upstream.errors import UpstreamError


class _OneShotUDP(protocol.DatagramProtocol):
    """Fires ``d`` with the first datagram carrying the query's ID."""

    def __init__(self, wire, d):
        self.wire = wire
        self.d = d

    def send(self):
        try:
            self.transport.write(self.wire)
        except OSError as e:
            self._done(None, UpstreamError(str(e)))

    def datagramReceived(self, data, addr):
        if data[:2] == self.wire[:2]:
            self._done(data)

    def connectionRefused(self):
        self._done(None, UpstreamError("connection refused"))

    def _done(self, data, exc=None):
        if self.d.called:
            return
        if exc is not None:
            self.d.errback(exc)
        else:
            self.d.callback(data)


class _OneShotStream(Int16StringReceiver):
    """Fires ``d`` with the first message if it carries the query's ID;
    hangs up after one message either way."""

    MAX_LENGTH = 65535

    def __init__(self, wire, d):
        self.wire = wire
        self.d = d

    def connectionMade(self):
        self.sendString(self.wire)

    def stringReceived(self, data):
        if data[:2] == self.wire[:2] and not self.d.called:
            self.d.callback(data)
        self.transport.loseConnection()

    def connectionLost(self, reason):
        if not self.d.called:
            self.d.errback(UpstreamError(reason.getErrorMessage()))


def exchange(reactor, host, port, wire, proto="udp", timeout=2.0,
             tls=None, source=None):
    """Send one query on a fresh socket; Deferred firing with the reply
    bytes or failing with UpstreamError (timeout, refused, closed)."""
    d = defer.Deferred()
    cleanup = []
    if proto == "udp":
        proto_obj = _OneShotUDP(wire, d)
        iface = source or ("::" if ":" in host else "")
        try:
            lp = reactor.listenUDP(0, proto_obj, interface=iface,
                                   maxPacketSize=65535)
            lp.connect(host, port)
        except Exception as e:
            return defer.fail(UpstreamError(str(e)))
        cleanup.append(lp.stopListening)
        proto_obj.send()
    else:
        conn = _OneShotStream(wire, d)
        fac = protocol.ClientFactory.forProtocol(lambda: conn)
        fac.clientConnectionFailed = lambda c, r: (
            d.called or d.errback(UpstreamError(r.getErrorMessage())))
        bind = (source, 0) if source else None
        if tls is not None:
            c = reactor.connectSSL(host, port, fac, tls, timeout=timeout,
                                   bindAddress=bind)
        else:
            c = reactor.connectTCP(host, port, fac, timeout=timeout,
                                   bindAddress=bind)
        cleanup.append(c.disconnect)
    timer = reactor.callLater(timeout, lambda: d.called or d.errback(
        UpstreamError("i/o timeout")))

    def done(result):
        if timer.active():
            timer.cancel()
        for fn in cleanup:
            try:
                fn()
            except Exception:
                pass
        return result
    return d.addBoth(done)
