"""secondary: zones transferred in from a primary (CoreDNS's secondary).

``secondary [ZONES...] { transfer from ADDRESS...; fallthrough [ZONES...] }``.
On start every zone is fetched by AXFR over TCP from the primaries in
order; until one succeeds the zone answers SERVFAIL and the transfer is
retried after 250ms, doubling up to 10s.  Then the SOA timers run: every
``refresh`` (plus up to 5s of jitter) the primaries' SOA serial is checked
over TCP and a newer zone transferred; a failed check is retried every
``retry`` (plus up to 2s); when ``expire`` passes without a successful
check the zone answers SERVFAIL.  A NOTIFY from a primary is answered and
triggers the check at once.  Lookups follow corednstw.engines.authority.
"""

import random

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.durations import format_duration
from corednstw.core.plugin import Fallthrough, zones_from_args
from corednstw.core.request import make_query, parse_response
from corednstw.engines import authority
from corednstw.engines.transfer import parse_peer

TIMEOUT = 10.0
FIRST_RETRY = 0.25
MAX_RETRY = 10.0


class TransferError(Exception):
    pass


# -- a small TCP client for SOA checks and AXFR -------------------------------

class _XfrStream(Int16StringReceiver):
    """Sends one query and feeds each reply message to ``on_message``,
    which returns True when the transfer is complete."""

    MAX_LENGTH = 65535

    def __init__(self, query, msgid, on_message, d):
        self.query = query
        self.msgid = msgid
        self.on_message = on_message
        self.d = d

    def connectionMade(self):
        self.sendString(self.query)

    def stringReceived(self, data):
        if self.d.called:
            return
        transport = self.transport
        assert transport is not None    # data comes over a connection
        try:
            if len(data) < 12 or w.unpack_header(data)[0] != self.msgid:
                raise TransferError("id mismatch")
            done = self.on_message(data)
        except Exception as e:
            self.d.errback(e if isinstance(e, TransferError)
                           else TransferError(str(e)))
            transport.loseConnection()
            return
        if done:
            self.d.callback(None)
            transport.loseConnection()

    def connectionLost(self, reason=protocol.connectionDone):
        if not self.d.called:
            self.d.errback(TransferError("connection closed: %s"
                                         % reason.getErrorMessage()))


def xfr_stream(reactor, peer, query, msgid, on_message, timeout=TIMEOUT):
    """Run one TCP zone transfer stream with ``peer`` (host, port); a
    Deferred."""
    d: defer.Deferred[None] = defer.Deferred()
    factory = protocol.ClientFactory.forProtocol(
        lambda: _XfrStream(query, msgid, on_message, d))

    class _Factory(protocol.ClientFactory):
        def buildProtocol(self, addr):
            return factory.buildProtocol(addr)

        def clientConnectionFailed(self, connector, reason):
            if not d.called:
                d.errback(TransferError(reason.getErrorMessage()))

    host, port = peer
    connector = reactor.connectTCP(host, port, _Factory(), timeout=timeout)

    def expire():
        if not d.called:
            d.errback(TransferError("i/o timeout"))
            connector.disconnect()
    timer = reactor.callLater(timeout, expire)

    def done(r):
        if timer.active():
            timer.cancel()
        return r
    return d.addBoth(done)


def axfr(reactor, peer, zone, timeout=TIMEOUT):
    """Fetch ``zone`` from ``peer`` by AXFR: a Deferred of its RRs (the
    closing SOA dropped)."""
    msgid = random.randint(0, 0xFFFF)
    query = make_query(zone, w.AXFR, msgid=msgid, rd=False)
    rrs: list[w.RR] = []
    state = {"soa": 0}

    def on_message(data):
        resp = parse_response(data)
        if resp.rcode != w.NOERROR:
            raise TransferError("bad xfr rcode: %d" % resp.rcode)
        for rr in resp.answer:
            if not rrs and rr.rtype != w.SOA:
                raise TransferError("first record is not a SOA")
            if rr.rtype == w.SOA:
                state["soa"] += 1
                if state["soa"] > 1:
                    return True
            rrs.append(rr)
        return False
    return xfr_stream(reactor, peer, query, msgid, on_message,
                    timeout).addCallback(lambda _: rrs)


def soa_serial(reactor, peer, zone, timeout=TIMEOUT):
    """The SOA serial ``peer`` serves for ``zone`` (asked over TCP), or
    None when it answers without one."""
    msgid = random.randint(0, 0xFFFF)
    query = make_query(zone, w.SOA, msgid=msgid, rd=False)
    found = []

    def on_message(data):
        resp = parse_response(data)
        if resp.rcode != w.NOERROR:
            return True        # no serial (not an error, as in CoreDNS)
        for rr in resp.answer:
            if rr.rtype == w.SOA:
                found.append(authority.soa_serial(rr))
                break
        return True
    return xfr_stream(reactor, peer, query, msgid, on_message,
                    timeout).addCallback(lambda _: found[0] if found else None)


# -- the plugin ---------------------------------------------------------------

class SecondaryZone:
    """Transfer state of one origin."""

    def __init__(self, origin, primaries):
        self.origin = origin
        self.primaries = primaries
        self.retry_active = False
        self.timers = []
        self.busy = False


def _hp(peer):
    host, port = peer
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class Secondary(authority.ZonePlugin):
    name = "secondary"
    once = False

    #: Random extra delay before refresh (5s) and retry (2s) checks.
    jitter = staticmethod(lambda limit: random.uniform(0, limit))

    def __init__(self):
        authority.ZonePlugin.__init__(self)
        self.secondaries = {}
        self.fall = Fallthrough()
        self.running = False

    def add(self, origin, primaries):
        if origin not in self.names:
            self.names.append(origin)
            self.zone_map[origin] = None
            self.secondaries[origin] = SecondaryZone(origin, [])
        self.secondaries[origin].primaries.extend(primaries)

    def serve_zone(self, req, origin, z):
        if z is None:
            if req.opcode == w.OPCODE_NOTIFY:
                return self.notify_received(req, origin)
            z = authority.ZoneData(origin)   # not transferred yet: SERVFAIL
        return authority.ZonePlugin.serve_zone(self, req, origin, z)

    # -- life cycle -----------------------------------------------------------

    def start(self):
        self.running = True
        for sz in self.secondaries.values():
            self._initial(sz, FIRST_RETRY)

    def stop(self):
        self.running = False
        for sz in self.secondaries.values():
            self._cancel(sz)

    def _cancel(self, sz):
        for t in sz.timers:
            if t.active():
                t.cancel()
        sz.timers = []

    def _later(self, sz, delay, fn, *args):
        if self.running:
            sz.timers.append(self.reactor.callLater(delay, fn, *args))

    def _initial(self, sz, delay):
        def failed(f):
            logger.warning(self.name, "All '%s' masters failed to transfer, "
                        "retrying in %s: %s" % (sz.origin,
                                                format_duration(delay),
                                                f.getErrorMessage()))
            self._later(sz, delay, self._initial, sz, min(delay * 2,
                                                          MAX_RETRY))
        d = self.transfer_in(sz)
        d.addCallbacks(lambda _: self._restart(sz), failed)

    def _restart(self, sz):
        """After a successful check: the refresh and expire timers anew."""
        self._cancel(sz)
        sz.retry_active = False
        z = self.zone_map.get(sz.origin)
        if z is None or z.soa is None:
            return
        _, refresh, retry, expire, _ = authority.soa_timers(z.soa)
        sz.retry = max(retry, 1)
        self._later(sz, max(refresh, 1) + self.jitter(5.0), self._check, sz,
                    False)
        self._later(sz, max(expire, 1), self._expire, sz)

    def _expire(self, sz):
        if sz.retry_active:
            self.expired.add(sz.origin)
        self._later(sz, max(authority.soa_timers(
            self.zone_map[sz.origin].soa)[3], 1), self._expire, sz)

    def _check(self, sz, retrying):
        """Refresh (or retry) tick: transfer when the primary is newer."""
        d = self.check(sz)

        def ok(_):
            self._restart(sz)

        def failed(f):
            logger.warning(self.name, "Failed %s check %s" % (
                "retry" if retrying else "refresh", f.getErrorMessage()))
            sz.retry_active = True
            self._later(sz, sz.retry + self.jitter(2.0), self._check, sz,
                        True)
        d.addCallbacks(ok, failed)

    # -- transfers ------------------------------------------------------------

    @defer.inlineCallbacks
    def should_transfer(self, sz):
        """True when a primary serves a newer serial than ours.  Primaries
        are asked in order until one gives a serial; when none does, the
        error of the last one asked (if it failed to answer) is raised."""
        serial = None
        err = None
        for peer in sz.primaries:
            err = None
            try:
                serial = yield soa_serial(self.reactor, peer, sz.origin)
            except Exception as e:
                err = e
                continue
            if serial is not None:
                break
        if serial is None:
            if err is not None:
                raise err
            return False
        z = self.zone_map.get(sz.origin)
        if z is None or z.soa is None:
            return True
        return authority.serial_less(z.serial, serial)

    @defer.inlineCallbacks
    def check(self, sz):
        """Transfer ``sz`` if a primary is newer (errors propagate)."""
        newer = yield self.should_transfer(sz)
        if newer:
            yield self.transfer_in(sz)
        return newer

    @defer.inlineCallbacks
    def transfer_in(self, sz):
        """AXFR from the first primary that gives a good zone; swaps it in
        and notifies our own secondaries."""
        if sz.busy:
            raise TransferError("transfer already running")
        sz.busy = True
        err = None
        try:
            for peer in sz.primaries:
                try:
                    rrs = yield axfr(self.reactor, peer, sz.origin)
                    data = authority.from_records(sz.origin, rrs)
                except Exception as e:
                    logger.error(self.name,
                                 "Failed to transfer `%s' from %s: %s"
                                 % (sz.origin, _hp(peer), e))
                    err = e
                    continue
                self.zone_map[sz.origin] = data
                self.expired.discard(sz.origin)
                logger.info(self.name, "Transferred: %s from %s" % (sz.origin,
                                                                 _hp(peer)))
                self.notify_peers(sz.origin)
                return data
        finally:
            sz.busy = False
        raise err or TransferError("no primaries")

    # -- NOTIFY ---------------------------------------------------------------

    def notify_received(self, req, origin):
        sz = self.secondaries.get(origin)
        if sz is None or not any(p[0] == req.client for p in sz.primaries):
            return authority.ZonePlugin.notify_received(self, req, origin)
        logger.info(self.name, "Notify from %s for %s: checking transfer" % (
            req.client, origin))
        if self.running:
            self.reactor.callLater(0, self._notified, sz, req.client)
        return self.respond(req, w.NOERROR, aa=True)

    def _notified(self, sz, client):
        def done(newer):
            if not newer:
                logger.info(self.name, "Notify from %s for %s: no SOA serial "
                         "increase seen" % (client, sz.origin))
            else:
                self._restart(sz)

        def failed(f):
            logger.warning(self.name,
                           "Notify from %s for %s: transfer failed: "
                           "%s" % (client, sz.origin, f.getErrorMessage()))
        self.check(sz).addCallbacks(done, failed)


def _primaries(c):
    """``transfer from ADDRESS...``: the primaries to transfer from (no
    ``*``: each is asked by address)."""
    if c.between(1)[0] != "from":
        raise c.error("unknown property %s" % c.args[0])
    primaries = []
    for a in c.between(2)[1:]:
        if a == "*":
            raise c.error("can't use '*' in transfer from")
        try:
            primaries.append(parse_peer(a))
        except ValueError as e:
            raise c.error("not an IP address or file: %s" % a) from e
    return primaries


def _catalog(c):
    """Named, so that it is refused as unsupported, not unknown."""
    raise c.error("catalog zones are not supported yet")


def setup(d, block):
    origins = zones_from_args(d.args, block)
    primaries = []
    fall = None

    def fallthrough(c):
        nonlocal fall
        fall = Fallthrough.parse(c.args)

    d.read_options({"transfer": lambda c: primaries.extend(_primaries(c)),
                    "fallthrough": fallthrough, "catalog": _catalog})
    if not primaries:   # a transfer line names one at least
        raise d.error("secondary zones require a transfer from property")
    existing = block.plugin("secondary")
    plugin = existing if existing is not None else Secondary()
    if fall is not None:
        plugin.fall = fall
    for origin in origins:
        plugin.add(origin, primaries)
    return None if existing is not None else plugin
