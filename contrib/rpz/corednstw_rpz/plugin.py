"""rpz's query path: the policy zones consulted in order, the first match
wins.

Within one zone a client-address trigger comes before a QNAME trigger,
which comes before an answer-address trigger, which comes before a
name-server-name trigger (the RPZ draft's order).  The triggers that
need no answer (client address, QNAME) are looked up in every zone
first; when a zone before the first of those matches (or any zone, when
none matches) has answer-address or name-server-name triggers, the query
is answered by the rest of the chain and its addresses and name servers
are checked against those zones, in order.  Every hit writes a log line
and counts in ``coredns_rpz_hits_total``.

Policy zones from a primary are kept by ``Transfers``: the secondary
plugin's transfers (AXFR, here IXFR first), SOA timers and NOTIFY
handling, each new version of a zone compiled into its policy and swapped
in whole.
"""

import ipaddress

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics, names
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import NoReply, Response
from corednstw.engines import authority
from corednstw.plugins.secondary import FIRST_RETRY, Secondary
from corednstw_rpz.policy import (
    DROP,
    IP,
    NODATA,
    NXDOMAIN,
    PASSTHRU,
    TCP_ONLY,
    from_records,
)

HITS = metrics.counter(
    "coredns_rpz_hits_total",
    "Counter of queries a response policy zone trigger matched.",
    ("server", "policy", "trigger", "action"))

SERIAL = metrics.gauge(
    "coredns_rpz_policy_serial",
    "SOA serial of the transferred response policy zone in force.",
    ("policy",))

TRANSFERS = metrics.counter(
    "coredns_rpz_transfers_total",
    "Counter of the response policy zone versions transferred in and "
    "applied.",
    ("policy",))


#: The records of the last transfer of each policy zone, by origin and
#: primaries: a reloaded configuration starts with them (and checks the
#: primaries at once) rather than with no policy until a transfer ends.
_KEPT: dict = {}


class Transfers(Secondary):
    """The policy zones transferred from primaries.  Unlike a secondary
    zone, an expired policy zone stays in force: the primaries being
    unreachable does not lift the policy (a warning says so)."""

    name = "rpz"
    incremental = True

    def __init__(self, installed):
        Secondary.__init__(self)
        self.installed = installed

    def start(self):
        self.running = True
        for sz in self.secondaries.values():
            kept = _KEPT.get((sz.origin, tuple(sz.primaries)))
            if kept is None:
                self._initial(sz, FIRST_RETRY)
                continue
            sz.records = kept
            self.zone_map[sz.origin] = authority.from_records(sz.origin,
                                                              kept)
            self._compile(None, sz)
            self._restart(sz)           # the SOA timers of what we hold
            self._check(sz, False)

    def transfer_in(self, sz):
        return Secondary.transfer_in(self, sz).addCallback(self._compile,
                                                           sz)

    def _compile(self, data, sz):
        _KEPT[(sz.origin, tuple(sz.primaries))] = sz.records
        zone = from_records(sz.origin, sz.records)
        for why in zone.problems:
            logger.warning(self.name, "policy %s: trigger left out: %s"
                           % (sz.origin, why))
        self.installed(zone)
        return data

    def notify_peers(self, zone):
        """Policy zones are not served: there is nobody to notify."""
        return None

    def _expire(self, sz):
        if sz.retry_active and sz.origin not in self.expired:
            logger.warning(self.name, "policy %s: expired (no primary "
                           "answered), the last one transferred (serial %s)"
                           " stays in force" % (
                               sz.origin, self.zone_map[sz.origin].serial))
        Secondary._expire(self, sz)


class RPZ(Plugin):
    """The policy zones of a server block, in Corefile order."""

    name = "rpz"

    def __init__(self, zones, policies, transfers=None):
        self.zones = zones
        #: The Zone of each policy, in Corefile order; a transferred
        #: one is empty until its first transfer, then swapped whole.
        self.policies = policies
        self.transfers = transfers

    def start(self):
        for z in self.policies:
            self._skipped(z)
        if self.transfers is not None:
            self.transfers.reactor = self.reactor
            self.transfers.block = self.block
            self.transfers.start()

    def stop(self):
        if self.transfers is not None:
            self.transfers.stop()

    @staticmethod
    def _skipped(z):
        if z.skipped:
            logger.warning("rpz", "policy %s: %d rpz-nsip triggers ignored "
                           "(not supported)" % (z.name, z.skipped))

    def installed(self, zone):
        """A transferred policy zone replaces the one in force."""
        for i, z in enumerate(self.policies):
            if z.name == zone.name:
                self.policies[i] = zone
        SERIAL.set((zone.name,), zone.serial or 0)
        TRANSFERS.inc((zone.name,))
        self._skipped(zone)

    def serve(self, req):
        if req.opcode == w.OPCODE_NOTIFY and self.transfers is not None \
                and req.qname in self.transfers.secondaries:
            return self.transfers.notify_received(req, req.qname)
        if self.match_zone(req.qname) is None:
            return self.next.serve(req)
        before = None
        policies = self.policies
        for i, z in enumerate(policies):
            hit = z.client(req.client) or z.qname(req.qname)
            if hit is not None:
                before = (i, hit)
                break
        upto = before[0] if before is not None else len(policies)
        by_answer = [z for z in policies[:upto] if z.by_answer]
        if not by_answer:
            if before is None:
                return self.next.serve(req)
            return self.apply(req, before[1], None)
        return then(self.next.serve(req), self._answered, req, by_answer,
                    before)

    def _answered(self, resp, req, zones, before):
        if isinstance(resp, Response):
            addrs = _addresses(resp)
            servers = None
            for z in zones:
                hit = z.answer(addrs) if addrs and z.ips else None
                if hit is None and (z.nsdnames or z.nsdwild):
                    if servers is None:
                        servers = _servers(resp, req.qname)
                    hit = z.nsdname(servers)
                if hit is not None:
                    return self.apply(req, hit, resp)
        if before is None:
            return resp
        return self.apply(req, before[1], resp)

    def apply(self, req, hit, resp):
        """The answer ``hit``'s action gives (``resp``: the chain's
        answer, when it was asked already)."""
        action = hit.action
        kind = action.kind
        HITS.inc((req.server, hit.zone.name, hit.kind, kind))
        logger.info("rpz", "%s %s: %s %s/%s for %s (%s)" % (
            hit.zone.name, kind, hit.kind, req.qname,
            w.type_text(req.qtype), req.client, action.trigger))
        if kind == PASSTHRU:
            return resp if resp is not None else self.next.serve(req)
        if kind == DROP:
            return NoReply()
        # Unbound's flags: RA as asked, AA for the triggers it answers
        # itself (client address, QNAME, name server name), not for
        # answer addresses.
        flags = (w.RA if req.rd else 0) | (w.AA if hit.kind != IP else 0)
        if kind == TCP_ONLY:
            if req.proto != "udp":
                return resp if resp is not None else self.next.serve(req)
            return Response(w.NOERROR, tc=True, plugin="rpz", flags=flags)
        if kind == NXDOMAIN:
            return Response(w.NXDOMAIN, plugin="rpz", flags=flags)
        if kind == NODATA:
            return Response(w.NOERROR, plugin="rpz", flags=flags)
        return self._local(req, action, flags)

    def _local(self, req, action, flags):
        """The trigger's own records: those of the question's type, else
        its CNAME (its target looked up through the server and added, as
        Unbound does), else NODATA."""
        records = action.records
        rtype = req.qtype
        found = records.get(rtype)
        if found is None and rtype != w.CNAME:
            found = records.get(w.CNAME)
            rtype = w.CNAME
        if found is None:
            return Response(w.NOERROR, plugin="rpz", flags=flags)
        ttl, rdatas = found
        answer = [w.RR(req.name, rtype, ttl, rd) for rd in rdatas]
        if rtype != w.CNAME or req.qtype == w.CNAME:
            return Response(w.NOERROR, answer, plugin="rpz", flags=flags)
        target = w.read_name(rdatas[0], 0)[0]
        d = self.block.server.lookup(target, req.qtype, parent=req)

        def chased(up):
            rcode = w.NOERROR
            if isinstance(up, Response):
                answer.extend(up.answer)
                rcode = up.rcode
            return Response(rcode, answer, plugin="rpz", flags=flags)
        return d.addCallback(chased)


def _addresses(resp):
    """The A and AAAA addresses in an answer section."""
    out = []
    if resp.raw is None:
        for rr in resp.answer:
            if rr.rtype == w.A or rr.rtype == w.AAAA:
                out.append(ipaddress.ip_address(rr.rdata))
        return out
    raw = resp.raw
    an = (raw[6] << 8) | raw[7]
    if not an:
        return out
    try:
        off = 12
        for _ in range((raw[4] << 8) | raw[5]):
            off = w.skip_question(raw, off)
        for _o, rtype, _c, _t, rd, end in w.iter_records(raw, off, an):
            if rtype == w.A or rtype == w.AAAA:
                out.append(ipaddress.ip_address(raw[rd:end]))
    except (w.FormatError, ValueError):
        pass
    return out


def _servers(resp, qname):
    """The name servers an answer names, in its order: the NS records of
    its authority section (the zone it came from, or a delegation), and
    those of its answer section owned by the query name or a name above
    it (an NS question).  Lower-cased FQDNs."""
    out = []
    if resp.raw is None:
        for rr in resp.answer:
            if rr.rtype == w.NS and _above(rr.name.lower(), qname):
                out.append(w.read_name(rr.rdata, 0)[0].lower())
        for rr in resp.authority:
            if rr.rtype == w.NS:
                out.append(w.read_name(rr.rdata, 0)[0].lower())
        return out
    raw = resp.raw
    an = (raw[6] << 8) | raw[7]
    ns = (raw[8] << 8) | raw[9]
    try:
        off = 12
        for _ in range((raw[4] << 8) | raw[5]):
            off = w.skip_question(raw, off)
        for i, (o, rtype, _c, _t, rd, _e) in enumerate(
                w.iter_records(raw, off, an + ns)):
            if rtype == w.NS and (i >= an or _above(
                    w.read_name(raw, o)[0].lower(), qname)):
                out.append(w.read_name(raw, rd)[0].lower())
    except (w.FormatError, ValueError):
        pass
    return out


def _above(owner, qname):
    """``owner`` is ``qname`` or a name above it."""
    return names.in_zone(qname, owner)
