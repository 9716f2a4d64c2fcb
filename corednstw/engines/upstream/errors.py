"""How an exchange with an upstream fails, and how the failure is told.

``UpstreamError`` ends one attempt (timeout, refused, closed);
``CachedClosed`` tells the caller the attempt never really happened (a
pooled connection the peer had closed), so a retry costs nothing.
"""


class UpstreamError(Exception):
    """The exchange with one upstream failed (timeout, refused, closed)."""


class CachedClosed(UpstreamError):
    """A reused connection was closed by the peer: retry on a new one."""


def error_text(exc, proxy, conn):
    """The error as CoreDNS's net package words it, with both ends of the
    socket when known ("read udp 127.0.0.1:4242->10.0.0.1:53: i/o
    timeout")."""
    text = str(exc) if isinstance(exc, UpstreamError) else repr(exc)
    local = conn.local() if conn is not None else None
    if local is None:
        return text
    net = "udp" if conn.proto == "udp" else "tcp"
    if text == "connection refused":
        text = "read: connection refused"
    return "read %s %s->%s: %s" % (net, hostport(*local),
                                   hostport(proxy.host, proxy.port), text)


def hostport(host, port):
    """``host:port`` as Go writes it, IPv6 hosts in brackets."""
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)
