"""proxy's Corefile stanza, as CoreDNS 1.0-1.4 read it:

    proxy FROM TO... {
        policy random|least_conn|round_robin|sequential|first
        fail_timeout DURATION
        max_fails INTEGER
        health_check PATH:PORT [DURATION]
        except IGNORED_NAMES...
        spray
        protocol dns [force_tcp]
    }

TO is ``IP``, ``IP:port``, ``[IPv6]:port`` or a resolv.conf-style file
(its nameservers, port 53).  Several proxy directives in one block share
one plugin, which picks the stanza with the longest matching FROM.
"""

import ipaddress
import os
import weakref

from corednstw.core import logger, names
from corednstw.core.config import Config
from corednstw.engines.upstream import Upstream, hostport
from corednstw.plugins.proxy import policy
from corednstw.plugins.proxy.health import check_url
from corednstw.plugins.proxy.plugin import READ_TIMEOUT, Group, ProxyPlugin

#: 1.4 refused more upstreams than this in one directive.
MAX_UPSTREAMS = 15

DEPRECATION = ("proxy was removed in CoreDNS 1.5.0; it runs here as "
               "CoreDNS 1.4 documented it, for old Corefiles: use forward "
               "(forward FROM TO...) instead")

#: Configurations already warned about (one line per build).
_warned: weakref.WeakSet[Config] = weakref.WeakSet()


def setup(d, block):
    """The group of one ``proxy`` directive, added to the block's proxy
    plugin (a new one for the first directive, None for the others)."""
    _deprecation(block)
    g = _group(d, block)
    for p in block.plugins:
        if isinstance(p, ProxyPlugin):
            p.groups.append(g)
            return None
    plugin = ProxyPlugin()
    plugin.groups.append(g)
    return plugin


def _deprecation(block):
    """One warning per configuration build, whatever the number of proxy
    directives: the line ``--check`` and a start both show."""
    cfg = block.config
    if cfg in _warned:
        return
    _warned.add(cfg)
    logger.warning("proxy", DEPRECATION)


def _group(d, block):
    args = list(d.args)
    if len(args) < 2:
        raise d.arg_error()
    zs = names.normalize(args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % args[0])
    g = Group(zs[0])
    hosts = []
    for to in args[1:]:
        hosts.extend(_parse_to(d, block, to))
    if len(hosts) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d"
                      % (MAX_UPSTREAMS, len(hosts)))
    _read_options(d, g)
    for host, port in hosts:
        name = hostport(host, port)
        p = Upstream(name, host, port, "dns", "proxy")
        p.read_timeout = READ_TIMEOUT
        url = check_url(host, g.hc_port, g.hc_path) if g.hc_path else ""
        g.hosts.append(policy.Host(name, p, url))
    return g


# -- options ------------------------------------------------------------------

def _read_options(d, g):
    """The block's options into the group; 1.4 read the first argument
    of an option and ignored any after it."""
    d.read_options({
        "policy": lambda c: setattr(g, "policy", _policy(c)),
        "fail_timeout": lambda c: setattr(g, "fail_timeout",
                                          c.duration(c.between(1)[0])),
        "max_fails": lambda c: setattr(g, "max_fails",
                                       c.integer(c.between(1)[0])),
        "health_check": lambda c: _health_check(c, g),
        "except": lambda c: setattr(g, "ignored", _except(c)),
        "spray": lambda c: setattr(g, "spray", True),
        "protocol": lambda c: setattr(g, "force_tcp", _force_tcp(c)),
    })


def _policy(c):
    """A new policy object of the name; 1.4 refused an unknown name as
    an argument error after it."""
    name = c.between(1)[0]
    if name not in policy.POLICIES:
        raise c.arg_error(name)
    return policy.POLICIES[name]()


def _health_check(c, g):
    """``health_check PATH:PORT [INTERVAL]`` (every 4s by default)."""
    args = c.between(1)
    path, port = _split_host_port(args[0])
    if path is None:
        raise c.error("address %s: missing port in address" % args[0])
    g.hc_path, g.hc_port = path, port
    g.hc_interval = 4.0
    if len(args) > 1:
        g.hc_interval = c.duration(args[1])
        if g.hc_interval <= 0:
            raise c.error("non-positive interval for health_check: %s"
                          % args[1])


def _except(c):
    """The names proxy leaves to the next plugins."""
    return [z for a in c.between(1) for z in names.normalize(a)]


def _force_tcp(c):
    """``protocol dns [force_tcp]``: whether to query over TCP.  The
    other protocols of 1.4 are refused, saying what to use instead."""
    args = c.between(1)
    kind = args[0]
    if kind == "dns":
        if len(args) > 1 and args[1:] != ["force_tcp"]:
            raise c.error("only force_tcp allowed as parameter to dns")
        return len(args) > 1
    if kind == "grpc":
        raise c.error("protocol grpc needs the gRPC transport, which is "
                      "not built yet")
    if kind == "https_google":
        raise c.error("protocol https_google was removed in CoreDNS 1.2.0 "
                      "itself; use forward with a DNS-over-TLS upstream "
                      "(forward . tls://8.8.8.8 { tls_servername "
                      "dns.google })")
    raise c.error("invalid protocol: %s" % kind)


# -- upstreams ----------------------------------------------------------------

def _parse_to(d, block, to):
    """(host, port) pairs for one TO: an address, or the nameservers of a
    resolv.conf-style file."""
    trans, rest = names.split_transport(to)
    if trans != "dns":
        raise d.error("%s: proxy speaks plain DNS only; use forward for "
                      "%s:// upstreams" % (to, trans))
    host, port = _split_host_port(rest)
    if host is not None and _is_ip(host):
        if not port.isdigit() or int(port) > 65535:
            raise d.error('invalid port in "%s"' % to)
        return [(_ip(host), int(port))]
    if host is None and _is_ip(rest):
        return [(_ip(rest), 53)]
    path = _find_file(d, block, rest)
    if path is None:
        raise d.error('not an IP address or file: "%s"' % rest)
    servers = _resolv_conf(d, path)
    if not servers:
        raise d.error('no nameservers found in "%s"' % rest)
    return servers


def _split_host_port(s):
    """Go's net.SplitHostPort: (host, port), or (None, None) when ``s``
    has no port or is not host:port."""
    if s.startswith("["):
        end = s.find("]")
        if end == -1 or not s[end + 1:].startswith(":"):
            return None, None
        return s[1:end], s[end + 2:]
    if s.count(":") != 1:
        return None, None
    host, port = s.split(":")
    return host, port


def _is_ip(s):
    try:
        ipaddress.ip_address(s.split("%")[0])
        return True
    except ValueError:
        return False


def _ip(s):
    return str(ipaddress.ip_address(s.split("%")[0]))


def _find_file(d, block, name):
    """The file ``name`` names: as given (from the working directory, as
    1.4 opened it), else under the block's root, else beside the
    Corefile."""
    candidates = [name, block.path(name)]
    if not os.path.isabs(name) and d.file:
        candidates.append(os.path.join(os.path.dirname(d.file), name))
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def _resolv_conf(d, path):
    """The nameserver addresses of a resolv.conf, in order, port 53."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver" \
                        and _is_ip(parts[1]):
                    out.append((_ip(parts[1]), 53))
    except OSError as e:
        raise d.error('failed to open file "%s": %s' % (path, e)) from e
    return out
