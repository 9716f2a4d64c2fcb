"""dns64: synthesises AAAA records from A records (RFC 6147, CoreDNS's
dns64).

For an AAAA query (from an IPv6 client, or any client with
``allow_ipv4``) whose answer holds no AAAA record (or every answer, with
``translate_all``) and is not NXDOMAIN, the plugin looks the name's A
records up through the whole server and answers with each IPv4 address
embedded in the prefix (RFC 6052).
"""

import ipaddress

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core import request as rq
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import Response

DEFAULT_PREFIX = "64:ff9b::/96"

TRANSLATED = metrics.counter(
    "coredns_dns64_requests_translated_total",
    "Counter of DNS requests translated by dns64.", ("server",))


def to6(prefix, v4):
    """RFC 6052 embedding of 4 IPv4 bytes into ``prefix`` (an
    ipaddress.IPv6Network with a length of 32, 40, 48, 56, 64 or 96)."""
    n = prefix.prefixlen // 8
    pfx = prefix.network_address.packed
    v6 = bytearray(16)
    v6[:n] = pfx[:n]
    i, j = n, 0
    while i < 8 and j < 4:
        v6[i] = v4[j]
        i += 1
        j += 1
    if i == 8:
        i += 1
    while j < 4:
        v6[i] = v4[j]
        i += 1
        j += 1
    return bytes(v6)


class DNS64(Plugin):
    name = "dns64"

    def __init__(self):
        self.prefix = ipaddress.ip_network(DEFAULT_PREFIX)
        self.translate_all = False
        self.allow_ipv4 = False

    def serve(self, req):
        if (req.qtype != w.AAAA or req.qclass != w.CLASS_IN
                or (req.family == 1 and not self.allow_ipv4)):
            return self.next.serve(req)
        return then(self.next.serve(req), self._after, req)

    def _after(self, resp, req):
        if resp is None:
            return None
        orig = _sections(resp, req)
        if orig.rcode == w.NXDOMAIN and not orig.answer:
            return resp
        if not self.translate_all and any(
                rr.rtype == w.AAAA for rr in orig.answer):
            return resp
        app = req.block.server if req.block is not None else None
        if app is None:
            return Response(w.SERVFAIL)
        # CoreDNS looks the A records up under the lower-cased name (its
        # request.Name()) with the query's DO bit, and the answers keep the
        # owner names that lookup returns.
        d = app.lookup(req.qname, w.A, parent=req, do=req.do)
        d.addCallback(self._synthesize, req, orig)
        d.addErrback(lambda f: Response(w.SERVFAIL))
        return d

    def _synthesize(self, a_resp, req, orig):
        if a_resp is None:
            return Response(w.SERVFAIL)
        soa_ttl = 600
        for rr in orig.authority:
            if rr.rtype == w.SOA:
                soa_ttl = rr.ttl
        answer = []
        for rr in a_resp.answer:
            if rr.rtype != w.A:
                answer.append(rr)
                continue
            answer.append(w.RR(rr.name, w.AAAA, min(rr.ttl, soa_ttl),
                               to6(self.prefix, rr.rdata), rr.rclass))
        TRANSLATED.inc((req.server,))
        return Response(w.NOERROR, answer, list(a_resp.authority),
                        list(a_resp.additional), plugin="dns64",
                        tc=a_resp.tc)


def _sections(resp, req):
    """The response with decoded sections (raw answers are parsed)."""
    if resp.raw is None:
        return resp
    return rq.parse_response(resp.raw)


def _prefix(c, text):
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError as e:
        raise c.error("invalid CIDR address: %s" % text) from e
    if net.version != 6:
        raise c.error('invalid netmask %d IPv6 address: "%s"'
                      % (net.max_prefixlen, net))
    n = net.prefixlen
    if n % 8 or n < 32 or n > 96:
        raise c.error('invalid prefix length "%s"' % net)
    return net


def setup(d, block):
    """``dns64 [PREFIX] { prefix PREFIX; translate_all; allow_ipv4 }``;
    the flags take no value (any given is ignored, as before)."""
    p = DNS64()
    for prefix in d.between(0, 1):
        p.prefix = _prefix(d, prefix)
    d.read_options({
        "prefix": lambda c: setattr(p, "prefix", _prefix(c, c.one())),
        "translate_all": lambda c: setattr(p, "translate_all", True),
        "allow_ipv4": lambda c: setattr(p, "allow_ipv4", True),
    })
    return p

