"""``upstream ADDRESS...``: ExternalName targets resolved through fixed
resolvers, as the kubernetes plugin of CoreDNS 1.1 to 1.3 did (its
upstream package over proxy.NewLookup).  Later releases ignore the
addresses and resolve through the server itself, as the plugin does when
``upstream`` names none.

The addresses are IPs, IP:port or resolv.conf-style files (their
nameservers, port 53), CoreDNS's parse.HostPortOrFile.
"""

import os
import random

from twisted.internet import defer

from corednstw.core.request import make_query, parse_response
from corednstw.engines.transfer import parse_peer
from corednstw.engines.upstream import UpstreamError, exchange, new_id

#: How long one resolver has to answer before the next one is asked.
TIMEOUT = 2.0


class Upstream:
    """The resolvers of ``upstream ADDRESS...``, asked in random order
    (1.3's lookup proxy used the random policy) until one answers."""

    def __init__(self, servers):
        self.servers = list(servers)

    @defer.inlineCallbacks
    def lookup(self, reactor, name, qtype):
        """A Deferred firing with the first resolver's reply as a
        Response; UpstreamError when none answered."""
        why = "no upstream host"
        for host, port in random.sample(self.servers, len(self.servers)):
            try:
                reply = yield _ask(reactor, host, port, name, qtype)
            except UpstreamError as e:
                why = str(e)
                continue
            return parse_response(reply)
        raise UpstreamError("unreachable backend: %s" % why)


@defer.inlineCallbacks
def _ask(reactor, host, port, name, qtype):
    """One resolver's reply: over UDP, again over TCP when truncated."""
    for proto in ("udp", "tcp"):
        wire = make_query(name, qtype, msgid=new_id())
        reply = yield exchange(reactor, host, port, wire, proto=proto,
                               timeout=TIMEOUT)
        if not _same_question(wire, reply):
            raise UpstreamError("reply does not match the question")
        if not reply[2] & 0x02:
            return reply
    return reply


def _same_question(query, reply):
    """The reply answers the query's question (CoreDNS's request.Match)."""
    q = query[12:]
    return (len(reply) >= 12 + len(q) and bool(reply[2] & 0x80)
            and reply[4:6] == b"\x00\x01"
            and reply[12:12 + len(q)].lower() == q.lower())


def parse_servers(args, find):
    """(host, port) pairs of ``upstream``'s addresses; ``find(name)`` is
    the path of a file named ``name`` or None.  ValueError with
    CoreDNS's message for anything else."""
    out = []
    for a in args:
        try:
            out.append(parse_peer(a))
            continue
        except ValueError:
            pass
        path = find(a)
        if path is None:
            raise ValueError('not an IP address or file: "%s"' % a)
        out.extend(_nameservers(path))
    return out


def _nameservers(path):
    """The nameserver lines of a resolv.conf-style file, port 53."""
    out = []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 2 or parts[0] != "nameserver":
                continue
            try:
                out.append(parse_peer(parts[1].split("%")[0]))
            except ValueError:
                continue
    return out


def file_finder(d, block):
    """``find`` for parse_servers: the name as given (from the working
    directory), else under the block's root, else beside the Corefile."""
    def find(name):
        candidates = [name, block.path(name)]
        if not os.path.isabs(name) and d.file:
            candidates.append(os.path.join(os.path.dirname(d.file), name))
        for path in candidates:
            if os.path.isfile(path):
                return path
        return None
    return find

