"""rpz's query path: the policy zones consulted in order, the first match
wins.

Within one zone a client-address trigger comes before a QNAME trigger,
which comes before an answer-address trigger (the RPZ draft's order).
The triggers that need no answer (client address, QNAME) are looked up
in every zone first; when a zone before the first of those matches (or
any zone, when none matches) has answer-address triggers, the query is
answered by the rest of the chain and its addresses are checked against
those zones, in order.  Every hit writes a log line and counts in
``coredns_rpz_hits_total``.
"""

import ipaddress

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import NoReply, Response
from corednstw_rpz.policy import (
    DROP,
    IP,
    NODATA,
    NXDOMAIN,
    PASSTHRU,
    TCP_ONLY,
)

HITS = metrics.counter(
    "coredns_rpz_hits_total",
    "Counter of queries a response policy zone trigger matched.",
    ("server", "policy", "trigger", "action"))


class RPZ(Plugin):
    """The policy zones of a server block, in Corefile order."""

    name = "rpz"

    def __init__(self, zones, policies):
        self.zones = zones
        self.policies = policies

    def start(self):
        for z in self.policies:
            if z.skipped:
                logger.warning("rpz", "policy %s: %d rpz-nsdname/rpz-nsip "
                               "triggers ignored (not supported)"
                               % (z.name, z.skipped))

    def serve(self, req):
        if self.match_zone(req.qname) is None:
            return self.next.serve(req)
        before = None
        for i, z in enumerate(self.policies):
            hit = z.client(req.client) or z.qname(req.qname)
            if hit is not None:
                before = (i, hit)
                break
        upto = before[0] if before is not None else len(self.policies)
        by_answer = [z for z in self.policies[:upto] if z.ips]
        if not by_answer:
            if before is None:
                return self.next.serve(req)
            return self.apply(req, before[1], None)
        return then(self.next.serve(req), self._answered, req, by_answer,
                    before)

    def _answered(self, resp, req, zones, before):
        if resp is not None:
            addrs = _addresses(resp)
            if addrs:
                for z in zones:
                    hit = z.answer(addrs)
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
        # itself (client address, QNAME), not for answer addresses.
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
