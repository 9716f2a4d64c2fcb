"""minimal: drop the authority and additional sections of positive answers.

Only answers CoreDNS's response typing calls NOERROR lose them; denials
(NXDOMAIN, NODATA), errors, delegations and transfers pass unchanged.  The
OPT record is not part of a section here: it is added at encoding time, as
CoreDNS's server adds it after the plugin has written.
"""

import struct
import time

from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import Response, parse_response

_SIG_TIMES = struct.Struct("!II")


_YEAR68 = 1 << 31


def _quot(a, b):
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _sig_expired(rr, now):
    """An RRSIG outside its validity period (miekg's ValidityPeriod, with
    the 32-bit serial arithmetic of RFC 4034 section 3.1.5)."""
    expiration, inception = _SIG_TIMES.unpack_from(rr.rdata, 8)
    now = int(now)
    ti = inception + _quot(inception - now, _YEAR68) * _YEAR68
    te = expiration + _quot(expiration - now, _YEAR68) * _YEAR68
    return not (ti <= now <= te)


def positive(resp, req, now=None):
    """True when CoreDNS's response.Typify says NOERROR (a plain positive
    answer: not a denial, error, delegation, transfer or update)."""
    if req.opcode != w.OPCODE_QUERY or req.qtype in (w.AXFR, w.IXFR):
        return False
    rcode = resp.rcode
    do = resp.opt.do if resp.opt is not None else req.do
    if do:
        now = time.time() if now is None else now
        for section in (resp.answer, resp.authority, resp.additional):
            for rr in section:
                if rr.rtype == w.RRSIG and len(rr.rdata) >= 16 and \
                        _sig_expired(rr, now):
                    return False
    if resp.answer and rcode == w.NOERROR:
        return True
    if rcode != w.NOERROR:
        return False
    for rr in resp.authority:
        if rr.rtype == w.SOA or rr.rtype == w.NS:
            return False   # NODATA or a delegation
    return True


class Minimal(Plugin):
    name = "minimal"

    def serve(self, req):
        return then(self.next.serve(req), self._minimize, req)

    def _minimize(self, resp, req):
        if resp is None:
            return None
        if resp.raw is not None:
            if not _raw_has_extra(resp.raw):
                return resp
            full = parse_response(resp.finish(req), req)
            full.plugin = resp.plugin
            resp = full
        elif not resp.authority and not resp.additional:
            return resp
        if not positive(resp, req):
            return resp
        out = Response(resp.rcode, resp.answer, plugin=resp.plugin,
                       flags=resp.flags)
        # An OPT the answer carried (from an upstream) stays: CoreDNS's
        # server re-adds the request's OPT after minimal wrote.
        out.opt = resp.opt
        return out


def _raw_has_extra(raw):
    """Authority records, or additional records besides the OPT."""
    qd, an, ns, ar = struct.unpack_from("!HHHH", raw, 4)
    if ns or ar > 1:
        return True
    if not ar:
        return False
    try:
        off = 12
        for _ in range(qd):
            off = w.read_name(raw, off)[1] + 4
        for _ in range(an):
            off = w.skip_rr(raw, off)[0]
        return w.skip_rr(raw, off)[1] != w.OPT
    except (w.FormatError, struct.error):
        return True


def setup(d, block):
    d.no_args()
    d.no_block()
    return Minimal()
