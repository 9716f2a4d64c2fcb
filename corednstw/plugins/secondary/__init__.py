"""secondary: zones transferred in from a primary (CoreDNS's secondary).

``secondary [ZONES...] { transfer from ADDRESS...; catalog [MEMBER-ZONES...];
fallthrough [ZONES...] }``.
On start every zone is fetched by AXFR over TCP from the primaries in
order; until one succeeds the zone answers SERVFAIL and the transfer is
retried after 250ms, doubling up to 10s.  Then the SOA timers run: every
``refresh`` (plus up to 5s of jitter) the primaries' SOA serial is checked
over TCP and a newer zone transferred; a failed check is retried every
``retry`` (plus up to 2s); when ``expire`` passes without a successful
check the zone answers SERVFAIL.  A NOTIFY from a primary is answered and
triggers the check at once.  Lookups follow corednstw.engines.authority.

With ``catalog`` a zone is an RFC 9432 catalog (see .catalog): after each
transfer of it the member zones it lists (within MEMBER-ZONES, if named)
are added, transferred from the same primaries and kept up to date like
the others, and the members it no longer lists are dropped.
"""

import random
from typing import Any

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int16StringReceiver

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.durations import format_duration
from corednstw.core.interfaces import IZoneAdder
from corednstw.core.names import normalize
from corednstw.core.plugin import Fallthrough, match, zones_from_args
from corednstw.core.request import make_query, parse_response
from corednstw.engines import authority
from corednstw.engines.transfer import parse_peer

from .catalog import parse as parse_catalog

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


def ixfr(reactor, peer, zone, soa, timeout=TIMEOUT):
    """Ask ``peer`` for the changes to ``zone`` since our ``soa`` (IXFR
    over TCP, RFC 1995): a Deferred of the records as sent, the first SOA
    included.  A lone SOA (up to date, or no increment to give), an
    AXFR-style answer (the whole zone, closed by the SOA) and the
    incremental form (old SOA, deletions, new SOA, additions, repeated)
    each end where their form says; ``apply_ixfr`` reads them."""
    import struct
    msgid = random.randint(0, 0xFFFF)
    query = bytearray(make_query(zone, w.IXFR, msgid=msgid, rd=False))
    query[8:10] = b"\x00\x01"                   # NSCOUNT: our SOA
    query += w.name_to_wire(zone) + struct.pack(
        "!HHIH", w.SOA, w.CLASS_IN, soa.ttl, len(soa.rdata)) + soa.rdata
    rrs: list[w.RR] = []
    state = {"phase": "start", "serial": None}

    def on_message(data):
        resp = parse_response(data)
        if resp.rcode != w.NOERROR:
            raise TransferError("bad xfr rcode: %d" % resp.rcode)
        for rr in resp.answer:
            if not rrs:
                if rr.rtype != w.SOA:
                    raise TransferError("first record is not a SOA")
                state["serial"] = authority.soa_serial(rr)
                rrs.append(rr)
                continue
            rrs.append(rr)
            phase = state["phase"]
            if rr.rtype != w.SOA:
                if phase == "start":
                    state["phase"] = "axfr"
                continue
            last = authority.soa_serial(rr) == state["serial"]
            if phase == "axfr" or (last and phase in ("start", "add")):
                return True
            state["phase"] = "add" if phase == "del" else "del"
        return len(rrs) == 1
    return xfr_stream(reactor, peer, bytes(query), msgid, on_message,
                      timeout).addCallback(lambda _: rrs)


def _rr_key(rr):
    return (rr.name.lower(), rr.rtype, rr.rclass, rr.rdata)


def apply_ixfr(base, rrs):
    """The zone's records after the IXFR answer ``rrs`` (from ``ixfr``),
    ``base`` being the records it had (its SOA first); None when the
    answer is a lone SOA.  TransferError when the changes do not apply
    (another serial, a deletion of a record we do not have): the caller
    then transfers the whole zone."""
    if len(rrs) == 1:
        return None
    if rrs[1].rtype != w.SOA or len(rrs) == 2:
        return rrs[:-1]                         # AXFR-style: the whole zone
    current = {_rr_key(rr): rr for rr in base[1:]}
    serial = authority.soa_serial(base[0])
    i = 1
    try:
        while i < len(rrs) - 1:
            old = rrs[i]
            if authority.soa_serial(old) != serial:
                raise TransferError("IXFR does not start from serial %d"
                                    % serial)
            i += 1
            while rrs[i].rtype != w.SOA:
                if current.pop(_rr_key(rrs[i]), None) is None:
                    raise TransferError("IXFR deletes a record we do not "
                                        "hold: %s" % rrs[i].to_text())
                i += 1
            serial = authority.soa_serial(rrs[i])
            i += 1
            while rrs[i].rtype != w.SOA:
                current[_rr_key(rrs[i])] = rrs[i]
                i += 1
    except IndexError:
        raise TransferError("IXFR ends within a change") from None
    if serial != authority.soa_serial(rrs[0]):
        raise TransferError("IXFR ends at serial %d" % serial)
    return [rrs[0]] + list(current.values())


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
        #: The records of the last transfer, SOA first (kept only when
        #: the plugin asks for increments).
        self.records = None
        self.retry_active = False
        self.timers = []
        self.busy = False


def _hp(peer):
    host, port = peer
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class Secondary(authority.ZonePlugin):
    name = "secondary"
    once = False

    #: Ask a primary for the changes (IXFR) once a zone is held, falling
    #: back to AXFR.  secondary itself transfers whole zones, as CoreDNS.
    incremental = False

    #: Random extra delay before refresh (5s) and retry (2s) checks.
    jitter = staticmethod(lambda limit: random.uniform(0, limit))

    def __init__(self):
        authority.ZonePlugin.__init__(self)
        self.secondaries = {}
        self.fall = Fallthrough()
        self.running = False
        #: catalog origin -> the member zones accepted ([]: any)
        self.catalog_zones: dict[str, list[str]] = {}
        #: catalog origin -> {member zone: Member} of its last transfer
        self.catalogs: dict[str, dict] = {}
        #: catalog origin -> the member zones it added
        self.catalog_members: dict[str, set[str]] = {}
        #: member zone -> (catalog origin, member ID)
        self.dynamic: dict[str, tuple[str, str]] = {}

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
        """Run ``fn`` after ``delay`` while ``sz`` is still served (a
        member zone its catalog dropped schedules nothing more)."""
        if self.running and self._current(sz):
            sz.timers.append(self.reactor.callLater(delay, fn, *args))

    def _current(self, sz):
        """Whether ``sz`` is still the state of its zone (a catalog may
        have dropped or replaced it)."""
        return self.secondaries.get(sz.origin) is sz

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
                how = ""
                try:
                    rrs = None
                    if self.incremental and sz.records is not None:
                        rrs = yield self._increment(peer, sz)
                        how = " (IXFR)" if rrs is not None else ""
                    if rrs is None:
                        rrs = yield axfr(self.reactor, peer, sz.origin)
                    data = authority.from_records(sz.origin, rrs)
                    members = None
                    if sz.origin in self.catalog_zones:
                        members = parse_catalog(sz.origin, rrs)
                except Exception as e:
                    logger.error(self.name,
                                 "Failed to transfer `%s' from %s: %s"
                                 % (sz.origin, _hp(peer), e))
                    err = e
                    continue
                if not self._current(sz):
                    return data     # dropped by its catalog meanwhile
                self.zone_map[sz.origin] = data
                if self.incremental:
                    sz.records = rrs
                self.expired.discard(sz.origin)
                logger.info(self.name, "Transferred: %s from %s%s" % (
                    sz.origin, _hp(peer), how))
                self.notify_peers(sz.origin)
                if members is not None:
                    self.apply_catalog(sz.origin, members)
                return data
        finally:
            sz.busy = False
        raise err or TransferError("no primaries")

    @defer.inlineCallbacks
    def _increment(self, peer, sz):
        """The zone's records after an IXFR from ``peer``, or None when
        the whole zone is to be asked for (no increment given, or one
        that does not apply: logged)."""
        try:
            rrs = yield ixfr(self.reactor, peer, sz.origin, sz.records[0])
            return apply_ixfr(sz.records, rrs)
        except TransferError as e:
            logger.warning(self.name, "IXFR of `%s' from %s failed, asking "
                           "for AXFR: %s" % (sz.origin, _hp(peer), e))
            return None

    # -- catalog zones (RFC 9432) ---------------------------------------------

    def apply_catalog(self, origin, members):
        """Serve the members catalog ``origin`` lists now, drop those it no
        longer lists.  A zone served otherwise (configured, or a member of
        another catalog) is left alone, unless that catalog hands it over
        to this one (its ``coo`` property names ``origin``)."""
        accept = self.catalog_zones.get(origin) or []
        listed = set()
        rejected = 0
        for m in members:
            if accept and match(accept, m.zone) is None:
                rejected += 1
                continue
            listed.add(m.zone)
            if m.zone not in self.secondaries:
                self._add_member(m, origin)
                logger.info(self.name, "Added catalog member zone %s from "
                            "catalog %s" % (m.zone, origin))
                continue
            owner = self.dynamic.get(m.zone)
            if owner is None:
                self._skip(m.zone, origin)
            elif owner[0] == origin:
                if owner[1] != m.id:
                    self._add_member(m, origin)
                    logger.info(self.name, "Reset catalog member zone %s "
                                "from %s after member ID changed from %s to "
                                "%s" % (m.zone, origin, owner[1], m.id))
            else:
                self._migrate(m, origin, owner)
        for zone in sorted(self.catalog_members.get(origin, set()) - listed):
            if self.dynamic.get(zone, ("",))[0] == origin:
                self._remove_member(zone)
                logger.info(self.name, "Removed catalog member zone %s from "
                            "catalog %s" % (zone, origin))
        self.catalogs[origin] = {m.zone: m for m in members}
        self.catalog_members[origin] = listed
        if rejected:
            logger.warning(self.name, "Skipped %d member zones from catalog "
                           "%s: outside configured member zones"
                           % (rejected, origin))
        logger.info(self.name, "Parsed catalog zone %s with %d member zones"
                    % (origin, len(members)))

    def _skip(self, zone, origin):
        logger.warning(self.name, "Skipping catalog member zone %s from %s: "
                       "zone already exists" % (zone, origin))

    def _migrate(self, m, origin, owner):
        """A member of another catalog: taken over only when that catalog
        says it moves here; its data kept when both catalogs (and the zone
        as served) agree on the member ID."""
        source = self.catalogs.get(owner[0], {}).get(m.zone)
        if source is None or source.coo != origin:
            self._skip(m.zone, origin)
            return
        self.catalog_members.get(owner[0], set()).discard(m.zone)
        if owner[1] == source.id == m.id:
            self._add_member(m, origin, keep=self.zone_map.get(m.zone))
            logger.info(self.name, "Migrated catalog member zone %s from "
                        "catalog %s to %s, preserving state for member ID "
                        "%s" % (m.zone, owner[0], origin, source.id))
        else:
            self._add_member(m, origin)
            logger.info(self.name, "Migrated catalog member zone %s from "
                        "catalog %s to %s with state reset after member "
                        "identity changed from %s to %s"
                        % (m.zone, owner[0], origin, source.id, m.id))

    def _add_member(self, m, origin, keep=None):
        """Serve member ``m`` of catalog ``origin`` (anew: a zone it
        replaces is forgotten, its timers stopped), transferred from the
        catalog's primaries."""
        old = self.secondaries.get(m.zone)
        if old is not None:
            self._cancel(old)
        sz = SecondaryZone(m.zone, list(self.secondaries[origin].primaries))
        self.secondaries[m.zone] = sz
        if m.zone not in self.names:
            self.names.append(m.zone)
            if self.block is not None:
                for p in self.block.find(IZoneAdder):
                    p.add_zone(m.zone)
        self.zone_map[m.zone] = keep
        self.expired.discard(m.zone)
        self.dynamic[m.zone] = (origin, m.id)
        if self.running:
            self._initial(sz, FIRST_RETRY)

    def _remove_member(self, zone):
        self._cancel(self.secondaries.pop(zone))
        self.names.remove(zone)
        self.zone_map.pop(zone, None)
        self.expired.discard(zone)
        del self.dynamic[zone]

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


def _member_zones(c):
    """``catalog [MEMBER-ZONES...]``: the member zones accepted, each with
    the names below it ([]: any)."""
    zones = []
    for a in c.args:
        normalized = normalize(a)
        if not normalized:
            raise c.error('invalid catalog member zone "%s"' % a)
        zones.extend(normalized)
    return zones


def _merge(have, zones):
    """Another ``catalog`` line: the union, where a bare one (any zone)
    wins over every list."""
    if have is not None and (not have or not zones):
        return []
    merged = list(have or [])
    merged.extend(z for z in zones if z not in merged)
    return merged


def setup(d, block):
    origins = zones_from_args(d.args, block)
    primaries = []
    # The options read: "fall" a Fallthrough, "catalog" the member zones.
    opts: dict[str, Any] = {}
    d.read_options({
        "transfer": lambda c: primaries.extend(_primaries(c)),
        "fallthrough": lambda c: opts.update(fall=Fallthrough.parse(c.args)),
        "catalog": lambda c: opts.update(catalog=_merge(
            opts.get("catalog"), _member_zones(c)))})
    if not primaries:   # a transfer line names one at least
        raise d.error("secondary zones require a transfer from property")
    existing = block.plugin("secondary")
    plugin = existing if existing is not None else Secondary()
    if "fall" in opts:
        plugin.fall = opts["fall"]
    catalog = opts.get("catalog")
    for origin in origins:
        plugin.add(origin, primaries)
        if catalog is not None:
            plugin.catalog_zones[origin] = _merge(
                plugin.catalog_zones.get(origin), catalog)
    return None if existing is not None else plugin
