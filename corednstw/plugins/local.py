"""local: answers for localhost and the loopback reverse zones, so such
queries never leave the server.

Zones: localhost., 0.in-addr.arpa., 127.in-addr.arpa., 255.in-addr.arpa.;
names under .localhost. and (``localhost_prefix on``, the default) names
starting with ``localhost.`` get loopback A/AAAA answers.  As in CoreDNS
the answers carry no AA bit and ip6.arpa is not intercepted.
"""

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.plugin import Plugin, match
from corednstw.core.request import Response

LOCALHOST_COUNT = metrics.counter(
    "coredns_local_localhost_requests_total",
    "Counter of special localhost subdomain requests.")

TTL = 604800
ZONES = ("localhost.", "0.in-addr.arpa.", "127.in-addr.arpa.",
         "255.in-addr.arpa.")
_APEXES = frozenset(ZONES)
_LOOPBACK_PTR = "1.0.0.127.in-addr.arpa."

_A = w.a_rdata("127.0.0.1")
_AAAA = w.aaaa_rdata("::1")
_NS = w.name_to_wire("localhost.")
_SOA = w.soa_rdata("localhost.", "root.localhost.", 1, 0, 0, 0, TTL)
_LC = len("localhost.")


def _soa(owner):
    return [w.RR(owner, w.SOA, TTL, _SOA)]


class Local(Plugin):
    name = "local"

    def __init__(self, localhost_prefix=True):
        self.localhost_prefix = localhost_prefix

    def serve(self, req):
        q = req.qname
        if len(q) > _LC and (q.endswith(".localhost.") or (
                self.localhost_prefix and q.startswith("localhost."))):
            if logger.debug_enabled:
                logger.debug(self.name, "Intercepting localhost query for %s "
                          "%s, from %s" % (_go_quote(q),
                                           w.type_text(req.qtype),
                                           req.client))
            LOCALHOST_COUNT.inc()
            return self._localhost(req)
        zone = match(ZONES, q)
        if zone is None:
            return self.next.serve(req)
        name = req.name
        # The zone as the client spelled it.
        zone = name[len(name) - len(zone):]
        qtype = req.qtype
        answer = []
        authority = []
        rcode = w.NOERROR
        if q in _APEXES:
            if qtype == w.A and q == "localhost.":
                answer = [w.RR(name, w.A, TTL, _A)]
            elif qtype == w.AAAA and q == "localhost.":
                answer = [w.RR(name, w.AAAA, TTL, _AAAA)]
            elif qtype == w.SOA:
                answer = _soa(name)
            elif qtype == w.NS:
                answer = [w.RR(name, w.NS, TTL, _NS)]
            else:
                authority = _soa(name)
        elif q == _LOOPBACK_PTR:
            if qtype == w.PTR:
                answer = [w.RR(name, w.PTR, TTL, _NS)]
            else:
                authority = _soa(zone)
        else:
            authority = _soa(zone)
            rcode = w.NXDOMAIN
        return Response(rcode, answer, authority, plugin=self.name)

    def _localhost(self, req):
        name = req.name
        qtype = req.qtype
        if qtype == w.A:
            return Response(w.NOERROR, [w.RR(name, w.A, TTL, _A)],
                            plugin=self.name)
        if qtype == w.AAAA:
            return Response(w.NOERROR, [w.RR(name, w.AAAA, TTL, _AAAA)],
                            plugin=self.name)
        return Response(w.NOERROR, authority=_soa(name), plugin=self.name)


def setup(d, block):
    d.no_args()
    local = Local()
    d.read_options({
        "localhost_prefix": lambda c: setattr(local, "localhost_prefix",
                                              _on_off(c)),
    })
    return local


def _on_off(c):
    """``on`` or ``off``; CoreDNS quotes a refused value as Go's %q does,
    which the choice reader's plain ``%s`` cannot, so it is checked here."""
    text = c.one()
    if text not in ("on", "off"):
        raise c.error("localhost_prefix expects 'on' or 'off', got %s"
                      % _go_quote(text))
    return text == "on"


def _go_quote(s):
    """Go's %q for plain strings."""
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
