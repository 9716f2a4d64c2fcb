"""The upstream addresses of a Corefile, as CoreDNS's plugin/pkg/parse
reads them for forward and grpc: ``host:port`` split the way their
setup splits it, IP addresses, and the nameservers of a resolv.conf
file named in place of an address; and the policies that order the
upstreams."""

import ipaddress
import os

from corednstw.core import names

#: The orders forward and grpc try their upstreams in.
POLICIES = ("random", "round_robin", "sequential")


def split_host_port(s):
    """(host, port) of ``host``, ``host:port``, ``[v6]`` or
    ``[v6]:port`` (port None when not given, a string of digits when
    given); (None, None) for anything else (a path, a malformed port)."""
    if s.startswith("["):
        end = s.find("]")
        if end == -1:
            return None, None
        host = s[1:end]
        rest = s[end + 1:]
        if rest.startswith(":") and rest[1:].isdigit():
            return host, rest[1:]
        return (host, None) if not rest else (None, None)
    if s.count(":") == 1:
        h, p = s.split(":")
        if p.isdigit():
            return h, p
        return None, None
    return s, None


def is_ip(s):
    """An IPv4 or IPv6 address, an IPv6 ``%zone`` allowed."""
    try:
        ipaddress.ip_address(s.split("%")[0])
        return True
    except ValueError:
        return False


def resolv_conf(d, path):
    """(address, 53) of each nameserver line of the resolv.conf file
    ``path`` that names an IP address (its ``%zone`` dropped); the
    directive ``d``'s error when the file cannot be read."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    host = parts[1].split("%")[0]
                    if is_ip(host):
                        out.append((host, 53))
    except OSError as e:
        raise d.error('failed to open file "%s": %s' % (path, e)) from e
    return out


def host_port_or_file(d, to):
    """(transport, host, port) tuples of one address argument, as
    CoreDNS's parse.HostPortOrFile reads it for the plugins that take
    plain addresses (alternate, fanout): ``[scheme://]IP[:port]`` (the
    scheme's default port when none is given) or a resolv.conf-style file
    (its nameservers, port 53).  Host names are refused, with CoreDNS's
    words; the caller decides which transports it takes."""
    trans, rest = names.split_transport(to)
    if not rest:
        raise d.error('invalid address: "%s"' % to)
    host, port = split_host_port(rest)
    if host is not None and is_ip(host):
        default = int(names.DEFAULT_PORTS.get(trans) or 53)
        return [(trans, host, int(port) if port else default)]
    servers = resolv_conf(d, rest) if os.path.isfile(rest) else []
    if not servers:
        raise d.error('not an IP address or file: "%s"' % rest)
    return [("dns", h, p) for h, p in servers]
