"""Host names in forward's TO, resolved when the plugin starts (CoreDNS's
resolve.go).

With ``resolver`` the names are asked of those servers, in order: A then
AAAA of one server, the next server only when that one fails or knows
no address.  An answer with no address (NXDOMAIN, SERVFAIL, NODATA) is
not an error, only a network failure is.  Without ``resolver`` the
system's resolver is used (getaddrinfo in Twisted's thread pool: the
reactor never waits).

twisted.names is imported only when a name is asked of ``resolver``
servers: most Corefiles give addresses, and it is 5 ms of every start.
"""

import socket

from twisted.internet import defer, threads

#: Each lookup of a name (A or AAAA) waits this long for a server.
TIMEOUT = 2.0


class ResolveError(Exception):
    """A host name of TO gave no address."""


def dedup(hosts):
    """``hosts`` without repeats, first ones first."""
    seen = []
    for h in hosts:
        if h not in seen:
            seen.append(h)
    return seen


@defer.inlineCallbacks
def resolve(reactor, to, resolvers):
    """``to`` (transport, host, port, servername) with every host name
    replaced by one entry per address it has, in order."""
    out = []
    for trans, host, port, sni in to:
        if _is_ip(host):
            out.append((trans, host, port, sni))
            continue
        ips = yield lookup(reactor, host, resolvers)
        out.extend((trans, ip, port, sni) for ip in ips)
    return out


def lookup(reactor, name, resolvers):
    """Deferred list of the addresses of ``name``, or ResolveError."""
    if resolvers:
        d = _ask_servers(reactor, name, resolvers)
    else:
        d = _ask_system(reactor, name)

    def failed(f):
        raise ResolveError('failed to resolve "%s": %s'
                           % (name, f.getErrorMessage()))
    return d.addErrback(failed)


@defer.inlineCallbacks
def _ask_servers(reactor, name, resolvers):
    from twisted.names import client  # see the module docstring
    from twisted.names import dns as tdns
    last = None
    for server in resolvers:
        r = client.Resolver(servers=[server], reactor=reactor)
        ips = []
        try:
            ips.extend((yield _addresses(r, name, tdns.A)))
        except Exception as e:
            last = e
            continue
        try:
            ips.extend((yield _addresses(r, name, tdns.AAAA)))
        except Exception as e:
            if ips:
                return ips
            last = e
            continue
        if ips:
            return ips
    if last is not None:
        raise ResolveError('no addresses found for "%s": %s'
                           % (name, _text(last)))
    raise ResolveError('no addresses found for "%s"' % name)


@defer.inlineCallbacks
def _addresses(r, name, qtype):
    """The addresses in one answer of server ``r`` (none for an error
    rcode)."""
    from twisted.names import dns as tdns
    from twisted.names import error
    try:
        answers, _auth, _add = yield r.query(
            tdns.Query(name, qtype, tdns.IN), timeout=(TIMEOUT,))
    except (error.DomainError, error.AuthoritativeDomainError,
            error.DNSServerError, error.DNSNameError,
            error.DNSQueryRefusedError, error.DNSNotImplementedError,
            error.DNSFormatError):
        return []           # answers that only mean "no address here"
    return [rr.payload.dottedQuad() if qtype == tdns.A
            else socket.inet_ntop(socket.AF_INET6, rr.payload.address)
            for rr in answers if rr.type == qtype]


def _text(exc):
    from twisted.names import error
    if isinstance(exc, (defer.TimeoutError, error.DNSQueryTimeoutError)):
        return "i/o timeout"
    return str(exc) or exc.__class__.__name__


def _ask_system(reactor, name):
    def run():
        seen = []
        for _f, _t, _p, _c, addr in socket.getaddrinfo(
                name, None, 0, socket.SOCK_STREAM):
            if addr[0] not in seen:
                seen.append(addr[0])
        if not seen:
            raise ResolveError('no addresses found for "%s"' % name)
        return seen
    return threads.deferToThreadPool(reactor, reactor.getThreadPool(), run)


def _is_ip(host):
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except OSError:
            pass
    return False
