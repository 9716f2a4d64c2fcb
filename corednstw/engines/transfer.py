"""Outgoing zone transfers (AXFR, IXFR with AXFR fallback) and NOTIFY:
the engine of the transfer plugin, which kubernetes's ``transfer to``
(CoreDNS 1.7 and before) drives as well.

``Outgoing`` holds what ``transfer`` directives allow (zones, peers, a
source address for NOTIFY).  ``answer(req, transferers)`` answers an
AXFR or IXFR: over TCP only (UDP gets REFUSED), to the allowed peers
only (``*``: anyone; others get REFUSED), with the records of the first
Transferer that holds the zone::

    def transfer_records(self, zone, serial):
        # None: not authoritative for zone (the next one is asked).
        # Otherwise a list of RR batches: for serial 0 (AXFR) or a serial
        # older than ours, the SOA first, every record, the SOA last; for
        # a serial equal to ours (IXFR, up to date) one batch [SOA].

Records are sent in messages of whole RRs, a new message starting before
the batch would pass 63,000 bytes (CoreDNS's limit).  When the tsig plugin
verified the request, the server signs every message with its signer
(``req.sign``), each over the MAC of the one before.  ``notify(reactor,
zone)`` sends NOTIFY over UDP to every peer that is not ``*`` (3 tries),
unsigned as CoreDNS sends it.  ``parse_peer`` reads a peer address, as
transfer, secondary and kubernetes write them.
"""

import ipaddress

from twisted.internet import defer, protocol
from twisted.python.failure import Failure

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.plugin import match
from corednstw.core.request import Response, encode, make_query

#: A transfer message is flushed before its records pass this many bytes.
BATCH_BYTES = 63000
NOTIFY_TRIES = 3
NOTIFY_TIMEOUT = 2.0


class StreamResponse(Response):
    """A response followed by further messages on the same TCP stream.

    ``more`` holds them encoded but unsigned: the server passes each
    through the request's signer in order, since each MAC covers the
    previous one."""

    def __init__(self, *args, **kw):
        Response.__init__(self, *args, **kw)
        self.more = []


class Xfr:
    """One ``transfer`` directive: its zones, peers and source address."""

    def __init__(self, zones, to, source):
        self.zones = zones
        self.to = to            # "*" or (host, port)
        self.source = source

    def allowed(self, client):
        for h in self.to:
            if h == "*" or h[0] == client:
                return True
        return False


def rr_len(rr):
    """Uncompressed wire length of an RR (miekg's dns.Len)."""
    return len(w.name_to_wire(rr.name)) + 10 + len(rr.rdata)


def batches(records):
    """Split RR batches into message-sized lists (CoreDNS's rule)."""
    out = []
    cur = []
    size = 0
    for batch in records:
        for rr in batch:
            n = rr_len(rr)
            if cur and size + n > BATCH_BYTES:
                out.append(cur)
                cur = []
                size = 0
            cur.append(rr)
            size += n
    if cur:
        out.append(cur)
    return out


class Outgoing:
    """The transfers the ``transfer`` directives of a block allow, their
    answers and their NOTIFYs (logged as CoreDNS's transfer plugin logs
    them)."""

    name = "transfer"

    def __init__(self):
        self.xfrs = []
        self.pending = set()

    def allow(self, zones, to, source=None):
        """Transfers of ``zones`` to the peers ``to`` ((host, port) or
        ``*``), NOTIFYs sent from ``source``."""
        self.xfrs.append(Xfr(zones, to, source))

    def stop(self):
        """Give up the NOTIFYs still under way."""
        for d in list(self.pending):
            d.cancel()
        self.pending.clear()

    def longest(self, name):
        best, bz = None, ""
        for x in self.xfrs:
            z = match(x.zones, name)
            if z is not None and (len(z) > len(bz) or (len(z) == len(bz)
                                                      and z > bz)):
                best, bz = x, z
        return best

    def answer(self, req, transferers):
        """The response to an AXFR or IXFR ``req``, the records asked of
        ``transferers()`` (called only then); None when it is no transfer
        or none of ours, or no Transferer holds the zone (the next plugin
        answers it)."""
        qtype = req.qtype
        if qtype != w.AXFR and qtype != w.IXFR:
            return None
        if req.proto != "tcp":
            return Response(w.REFUSED, plugin=self.name)
        x = self.longest(req.qname)
        if x is None:
            return None
        if not x.allowed(req.client):
            return Response(w.REFUSED, plugin=self.name)
        serial = 0
        if qtype == w.IXFR:
            serial = _ixfr_serial(req)
            if serial is None:
                return Response(w.SERVFAIL, plugin=self.name)
        records = None
        for p in transferers():
            records = p.transfer_records(req.qname, serial)
            if records is not None:
                break
        if records is None:
            return None
        msgs = batches(records)
        first = msgs[0][0] if msgs and msgs[0] else None
        soa = first if first is not None and first.rtype == w.SOA else None
        count = sum(len(m) for m in msgs)
        if count == 1 and soa is not None:
            logger.info(self.name,
                        'Outgoing noop, incremental transfer for up '
                        'to date zone "%s" to %s for %d SOA serial' % (
                            req.name, req.client, _serial(soa)))
            return Response(w.NOERROR, [soa], plugin=self.name)
        resp = StreamResponse(w.NOERROR, msgs[0] if msgs else [], aa=True,
                              plugin=self.name)
        for m in msgs[1:]:
            resp.more.append(encode(req, Response(w.NOERROR, m, aa=True)))
        logger.info(self.name,
                    'Outgoing transfer of %d records of zone "%s" to '
                    '%s for %d SOA serial' % (count, req.name, req.client,
                                              _serial(soa) if soa else 0))
        return resp

    def notify(self, reactor, zone):
        """Send NOTIFY for ``zone`` to the peers; a Deferred that fires
        when every peer answered or gave up (failures are logged)."""
        x = self.longest(zone)
        if x is None:
            return defer.succeed(None)
        ds = []
        for h in x.to:
            if h == "*":
                continue
            d = send_notify(reactor, zone, h, x.source)
            self.pending.add(d)
            d.addBoth(self._settled, d)
            ds.append(d)
        return defer.DeferredList(ds)

    def _settled(self, result, d):
        self.pending.discard(d)
        if isinstance(result, Failure):
            if not result.check(defer.CancelledError):
                logger.warning(self.name, "Failed sending notifies: %s"
                               % result.getErrorMessage())
        return None


def _serial(soa):
    from corednstw.engines.authority import soa_serial
    return soa_serial(soa)


def _ixfr_serial(req):
    """The serial of the SOA in an IXFR query's authority section."""
    try:
        msg = req.message()
    except Exception:
        return None
    if len(msg.authority) != 1:
        return None
    rrset = msg.authority[0]
    if rrset.rdtype != w.SOA or len(rrset) != 1:
        return None
    return rrset[0].serial


class NotifyError(Exception):
    pass


class _NotifyClient(protocol.DatagramProtocol):
    def __init__(self, reactor, data, addr, msgid, tries, timeout):
        self.reactor = reactor
        self.data = data
        self.addr = addr
        self.msgid = msgid
        self.tries = tries
        self.timeout = timeout
        self.d = defer.Deferred(self._cancel)
        self.timer = None
        self.rcode = None

    def _cancel(self, d):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()

    def startProtocol(self):
        self._send()

    def _send(self):
        self.tries -= 1
        try:
            self.transport.write(self.data, self.addr)
        except OSError as e:
            self._fail(str(e))
            return
        self.timer = self.reactor.callLater(self.timeout, self._timeout)

    def datagramReceived(self, data, addr):
        if len(data) < 12 or self.d.called:
            return
        msgid, flags = w.unpack_header(data)[:2]
        if msgid != self.msgid or not flags & w.QR:
            return
        self.timer.cancel()
        rcode = flags & 0xF
        if rcode == w.NOERROR:
            self.d.callback(None)
        elif self.tries > 0:
            self.rcode = rcode
            self._send()
        else:
            self._fail('rcode was "%s"' % w.rcode_text(rcode))

    def _timeout(self):
        if self.d.called:
            return
        if self.tries > 0:
            self._send()
        elif self.rcode is not None:
            self._fail('rcode was "%s"' % w.rcode_text(self.rcode))
        else:
            self._fail('"i/o timeout"')

    def _fail(self, why):
        if not self.d.called:
            self.d.errback(NotifyError(why))


def send_notify(reactor, zone, peer, source=None, tries=NOTIFY_TRIES,
                timeout=NOTIFY_TIMEOUT):
    """NOTIFY ``zone`` to ``peer`` (host, port) over UDP."""
    import random
    host, port = peer
    msgid = random.randint(0, 0xFFFF)
    data = bytearray(make_query(zone, w.SOA, msgid=msgid, rd=False))
    flags = (w.OPCODE_NOTIFY << 11) | w.AA
    data[2:4] = flags.to_bytes(2, "big")
    client = _NotifyClient(reactor, bytes(data), (host, port), msgid, tries,
                           timeout)
    iface = source or ("::" if ":" in host else "")
    try:
        port_ = reactor.listenUDP(0, client, interface=iface)
    except Exception as e:
        return defer.fail(NotifyError(str(e)))

    def done(r):
        port_.stopListening()
        return r

    def why(f):
        if f.check(defer.CancelledError):
            return f
        raise NotifyError('notify for zone "%s" was not accepted by "%s": %s'
                          % (zone, _hp(host, port), f.getErrorMessage()))
    return client.d.addBoth(done).addErrback(why)


def _hp(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def parse_peer(text, default_port=53):
    """'1.2.3.4', '1.2.3.4:5300', '::1', '[::1]:5300' -> (host, port);
    ValueError for anything that is not an IP address."""
    host, port = text, default_port
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("bad address %s" % text)
        host = text[1:end]
        rest = text[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError("bad address %s" % text)
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, p = text.split(":")
        port = int(p)
    ipaddress.ip_address(host)
    if not 0 < port < 65536:
        raise ValueError("bad port in %s" % text)
    return host, port
