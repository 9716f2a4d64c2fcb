"""whoami: tells clients the address, port and transport they came from.

This is the smallest complete plugin, and a model for writing one.  The
answer, as CoreDNS's whoami gives it:

* rcode NOERROR, AA set, an empty answer section;
* in the additional section, for the query name as asked (case kept):
  an A record of the client's address (AAAA for an IPv6 client), and an
  SRV record named ``_udp.<qname>`` or ``_tcp.<qname>`` whose port is the
  client's source port (priority and weight 0, target the root);
* TTL 0 everywhere, so no cache keeps an answer meant for one client.

Every query type gets the same answer.
"""

import functools

from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin

#: Label the SRV owner starts with, by transport ("udp" or "tcp").
_PREFIX = {"udp": "_udp.", "tcp": "_tcp."}
#: The longest query name (wire octets) that leaves room for that label.
MAX_QWIRE = 255 - 5


class Whoami(Plugin):
    """The plugin object: one per server block, shared by all queries.

    It answers every query itself, so it never calls ``self.next``.
    """

    name = "whoami"

    def serve(self, req):
        """Answer ``req`` (a core.request.Request) synchronously.

        Returning a Response, rather than a Deferred, keeps the query on
        the fast path.  Records are ``dnswire.RR``s with wire-form rdata
        from the dnswire builders; the server encodes the whole answer
        once, echoing the question and the client's EDNS0 as CoreDNS
        does.
        """
        name = req.name          # the query name, with the client's case
        qclass = req.qclass      # CoreDNS repeats the query's class
        rtype, rdata = address_rdata(req.client, req.family)
        address = w.RR(name, rtype, 0, rdata, qclass)
        # The SRV owner: _udp.example.org. below the root, _udp. for it.
        owner = _PREFIX[req.proto]
        if name != ".":
            owner += name
        if len(req.qwire) > MAX_QWIRE:
            # No room for the label: no valid SRV owner, only the address.
            return self.respond(req, additional=[address])
        service = w.RR(owner, w.SRV, 0, w.srv_rdata(0, 0, req.port, "."),
                       qclass)
        return self.respond(req, additional=[address, service])


@functools.lru_cache(maxsize=4096)
def address_rdata(client, family):
    """(type, rdata) of the client's address: A for IPv4 (``family`` 1,
    CoreDNS's numbering), AAAA for IPv6 (2).

    Cached: clients ask again and again from the same address, so the
    text-to-bytes conversion runs once per client, not once per query.
    """
    if family == 2:
        return w.AAAA, w.aaaa_rdata(client)
    return w.A, w.a_rdata(client)


def setup(d, block):
    """Build the plugin from its Corefile directive ``d`` (``whoami``
    takes no arguments)."""
    d.no_args()
    return Whoami()
