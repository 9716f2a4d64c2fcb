"""Host names in forward's TO, resolved while the Corefile is read, as
CoreDNS 1.14's resolve.go does: a name that gives no address refuses the
Corefile (``failed to resolve "NAME": ...``), at start, on reload and
under ``--check`` alike.

With ``resolver`` the names are asked of those servers, in order: A then
AAAA of one server, the next server only when that one fails or knows
no address.  An answer with no address (NXDOMAIN, SERVFAIL, NODATA) is
not an error, only a network failure is.  Without ``resolver`` the
system's resolver (getaddrinfo) is asked.  Both wait, as CoreDNS's setup
waits: a reload with host names holds the event loop until they are
resolved (2 seconds per server and type at most with ``resolver``).

dnspython is imported only when a name is asked of ``resolver``'s
servers: ``dns.query`` brings in its QUIC and HTTPS clients (aioquic,
httpx), a tenth of a second of start-up that a Corefile whose TO holds
only addresses, as kubeadm's, must not pay.
"""

import socket

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


def resolve(to, resolvers):
    """``to`` (transport, host, port, servername) with every host name
    replaced by one entry per address it has, in order; ResolveError for
    a name without one."""
    out = []
    for trans, host, port, sni in to:
        if is_ip(host):
            out.append((trans, host, port, sni))
            continue
        out.extend((trans, ip, port, sni) for ip in lookup(host, resolvers))
    return out


def lookup(name, resolvers):
    """The addresses of ``name``, or ResolveError."""
    try:
        if resolvers:
            return _ask_servers(name, resolvers)
        return _ask_system(name)
    except (ResolveError, OSError, UnicodeError) as e:
        # UnicodeError: a name the IDNA codec cannot encode.
        raise ResolveError('failed to resolve "%s": %s' % (name, _text(e))) \
            from e


def _ask_servers(name, resolvers):
    import dns.exception
    import dns.rdatatype
    last = None
    for server in resolvers:
        ips = []
        try:
            ips.extend(_addresses(server, name, dns.rdatatype.A))
        except (OSError, dns.exception.DNSException) as e:
            last = e
            continue
        try:
            ips.extend(_addresses(server, name, dns.rdatatype.AAAA))
        except (OSError, dns.exception.DNSException) as e:
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


def _addresses(server, name, qtype):
    """The addresses in one answer of ``server`` (ip, port): none for an
    error rcode, as miekg's Exchange returns those answers."""
    import dns.message
    import dns.query
    q = dns.message.make_query(name.rstrip(".") + ".", qtype)
    r = dns.query.udp(q, server[0], timeout=TIMEOUT, port=server[1])
    return [rd.address for rrset in r.answer if rrset.rdtype == qtype
            for rd in rrset]


def _ask_system(name):
    seen = []
    for _f, _t, _p, _c, addr in socket.getaddrinfo(name, None, 0,
                                                   socket.SOCK_STREAM):
        if addr[0] not in seen:
            seen.append(addr[0])
    if not seen:
        raise ResolveError('no addresses found for "%s"' % name)
    return seen


def _text(exc):
    if isinstance(exc, ResolveError):
        return str(exc)
    import dns.exception
    if isinstance(exc, dns.exception.Timeout):
        return "i/o timeout"
    if isinstance(exc, socket.gaierror):
        return "lookup: %s" % exc.strerror
    return str(exc) or exc.__class__.__name__


def is_ip(host):
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except OSError:
            pass
    return False
