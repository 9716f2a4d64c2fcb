"""The dnssec plugin object: signs what the rest of the chain answers.

As CoreDNS's dnssec: a DNSKEY query for one of the zones is answered here
(the keys, renamed to the zone, signed when DO is set); any other query in
the zones goes on down the chain and, when DO is set, the answer is signed
on its way back: every RRset of the three sections gets its RRSIGs, a
denial gets a black-lie NSEC (NXDOMAIN becomes NOERROR), a delegation its
signed DS or an NSEC proving there is none.  Signatures carry an original
TTL of 3600, are valid from three hours before signing to eight days
after, and are cached (see cache.py).  With both KSKs and ZSKs among the
keys, DNSKEY sets are signed by the KSKs and everything else by the ZSKs;
otherwise every key signs everything.
"""

import struct
import time

from twisted.internet import task

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.plugin import Plugin, match, then
from corednstw.core.request import NoReply, Response, parse_response
from corednstw.engines import response as rt
from corednstw.engines.dnssec.signer import ORIG_TTL, rrsig

from . import blacklies
from .cache import CLEAN_INTERVAL, SignatureCache, rrset_key, validity

#: Zone transfers pass unsigned (their records are the zone's own).
_TRANSFERS = frozenset((w.AXFR, w.IXFR))

CACHE_SIZE = metrics.gauge(
    "coredns_dnssec_cache_entries",
    "The number of elements in the dnssec cache.", ("server", "type"),
    merge="sum")
CACHE_HITS = metrics.counter(
    "coredns_dnssec_cache_hits_total", "The count of cache hits.",
    ("server",))
CACHE_MISSES = metrics.counter(
    "coredns_dnssec_cache_misses_total", "The count of cache misses.",
    ("server",))


class Dnssec(Plugin):
    """On-the-fly signing for ``zones`` with ``keys`` (keys.Key)."""

    name = "dnssec"

    def __init__(self, zones, keys, capacity):
        self.zones = zones
        self.zone_set = frozenset(zones)
        self.keys = keys
        ksks = [k for k in keys if k.is_ksk()]
        zsks = [k for k in keys if k.is_zsk()]
        self.split = bool(ksks) and bool(zsks)
        #: Keys signing DNSKEY sets, and keys signing everything else.
        self.key_signers = ksks if self.split else list(keys)
        self.data_signers = zsks if self.split else list(keys)
        self.cache = SignatureCache(capacity)
        #: Wall clock in seconds; tests replace it to move time.
        self.now = time.time
        self._loop = None

    # -- life cycle ---------------------------------------------------------

    def start(self):
        """Sweep out signatures near expiry every eight hours."""
        if self.reactor is None:
            return
        self._loop = task.LoopingCall(self.clean)
        self._loop.clock = self.reactor
        self._loop.start(CLEAN_INTERVAL, now=False)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def clean(self):
        dropped = self.cache.clean(self.now())
        if dropped:
            logger.debug(self.name, "dropped %d signatures near expiry"
                         % dropped)

    # -- serving ------------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        zone = match(self.zones, qname)
        if zone is None:
            return self.next.serve(req)
        if req.qtype == w.DNSKEY and qname in self.zone_set:
            return self.dnskey_answer(req, qname)
        if not req.do or req.qtype in _TRANSFERS:
            return self.next.serve(req)
        return then(self.next.serve(req), self._signed, req, zone)

    def dnskey_answer(self, req, zone):
        """The zone's DNSKEY set, and its signatures when DO is set."""
        answer = [k.dnskey(zone) for k in self.keys]
        if req.do:
            answer += self.sign_rrset(answer, zone, ORIG_TTL, req.server,
                                      self.now())
        return self.respond(req, answer=answer)

    def _signed(self, resp, req, zone):
        if resp is None or isinstance(resp, NoReply):
            return resp
        out = _writable(resp)
        if out is resp:
            return resp     # undecodable: passed on as it is
        self.sign_response(req, out, zone, self.now())
        CACHE_SIZE.set((req.server, "signature"), len(self.cache))
        return out

    # -- signing ------------------------------------------------------------

    def sign_rrset(self, rrs, signer, ttl, server, now):
        """The RRSIGs over ``rrs`` by ``signer``: from the cache while
        they stay valid for two more days, else made (and cached)."""
        key = rrset_key(rrs)
        sigs = self.cache.get(key, now)
        if sigs is not None:
            CACHE_HITS.inc((server,))
            return sigs
        CACHE_MISSES.inc((server,))
        signers = self.data_signers
        if rrs[0].rtype == w.DNSKEY:
            signers = self.key_signers
        inception, expiration = validity(now)
        sigs = [rrsig(k, rrs, signer, ttl, inception, expiration)
                for k in signers]
        if sigs:
            self.cache.set(key, sigs, inception, expiration)
        return sigs

    def sign_response(self, req, resp, zone, now):
        """Add signatures (and black lies) to ``resp`` in place, as
        CoreDNS's Dnssec.Sign does for the response type of ``resp``."""
        ns_types = {rr.rtype for rr in resp.authority}
        mt = rt.typify_parts(req.opcode, req.qtype, resp.rcode,
                             len(resp.answer), ns_types)
        if mt == rt.DELEGATION:
            self._sign_delegation(req, resp, zone, mt, now)
        elif mt == rt.NAMEERROR or mt == rt.NODATA:
            self._sign_denial(req, resp, zone, mt, now)
        else:
            server = req.server
            for section in (resp.answer, resp.authority, resp.additional):
                section.extend(self._section_sigs(section, server, now))

    def _black_lie(self, req, zone, mt, ttl, now):
        """The signatures and the NSEC denying ``req``'s type (or [])."""
        nsec = blacklies.nsec(req.name, req.qtype, req.qname == zone, mt,
                              ttl)
        if nsec is None:
            return []
        return self.sign_rrset([nsec], zone, ttl, req.server, now) + [nsec]

    def _sign_delegation(self, req, resp, zone, mt, now):
        ns = resp.authority
        if not ns:
            return
        ttl = ns[0].ttl
        ds = [rr for rr in ns if rr.rtype == w.DS]
        if ds:
            ns.extend(self.sign_rrset(ds, zone, ttl, req.server, now))
        else:
            ns.extend(self._black_lie(req, zone, mt, ttl, now))

    def _sign_denial(self, req, resp, zone, mt, now):
        ns = resp.authority
        if len(ns) != 1 or ns[0].rtype != w.SOA:
            return      # already signed, or not an answer from a zone
        ttl = ns[0].ttl
        ns.extend(self.sign_rrset(ns[:1], zone, ttl, req.server, now))
        ns.extend(self._black_lie(req, zone, mt, ttl, now))
        if len(ns) > 1:
            resp.rcode = w.NOERROR
            if req.qtype == w.NSEC:
                # The NSEC answers the question itself; no SOA then.
                resp.answer = ns[-2:]
                resp.authority = []

    def _section_sigs(self, rrs, server, now):
        """The RRSIGs for every RRset of a section owned in our zones."""
        if not rrs:
            return []
        if len(rrs) == 1:
            sets = {(rrs[0].name, rrs[0].rtype): rrs}
        else:
            sets = {}
            for rr in rrs:
                k = (rr.name, rr.rtype)
                group = sets.get(k)
                if group is None:
                    sets[k] = [rr]
                else:
                    group.append(rr)
        out = []
        zones = self.zones
        for (name, t), group in sets.items():
            if t == w.RRSIG or t == w.OPT:
                continue
            signer = match(zones, name.lower())
            if signer is not None:
                out += self.sign_rrset(group, signer, group[0].ttl, server,
                                       now)
        return out


def _writable(resp):
    """A Response of our own with the same contents: sections as lists we
    may extend (a RawResponse decoded), since the plugin that wrote
    ``resp`` may keep and reuse it."""
    if resp.raw is not None and not (resp.answer or resp.authority
                                     or resp.additional):
        try:
            out = parse_response(resp.raw)
        except (w.FormatError, struct.error, ValueError):
            return resp
    else:
        out = Response(resp.rcode, list(resp.answer), list(resp.authority),
                       list(resp.additional), flags=resp.flags)
        out.opt = resp.opt
    out.plugin = resp.plugin
    out.error = resp.error
    return out
