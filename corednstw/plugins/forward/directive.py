"""forward's Corefile stanza: the TO addresses (IPs, ``tls://``,
``https://``, resolv.conf files, host names), the options, and the TLS
client settings; one engine ``Proxy`` per upstream.

Host names are resolved when the plugin starts (``resolve``): their
upstreams are made then, by the same ``ProxyMaker`` as the others.
"""

import ipaddress
import os

from corednstw.core import dnswire as w
from corednstw.core import logger, names
from corednstw.core.durations import format_duration, parse_duration
from corednstw.engines.upstream import (
    DEFAULT_EXPIRE,
    DEFAULT_READ_TIMEOUT,
    HC_INTERVAL,
    Proxy,
)
from corednstw.engines.upstream.tlsfiles import load_client_tls
from corednstw.plugins.forward.plugin import Forward
from corednstw.plugins.forward.resolve import dedup

MAX_UPSTREAMS = 15
DEFAULT_PORTS = {"dns": 53, "tls": 853, "https": 443}


def setup(d, block):
    """The Forward of one ``forward FROM TO... { options }`` directive."""
    f = Forward()
    args = list(d.args)
    if len(args) < 2:
        raise d.arg_error()
    zs = names.normalize(args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % args[0])
    if len(zs) > 1:
        logger.warning("forward", "Unsupported CIDR notation: '%s' expands "
                       "to multiple zones. Using only '%s'."
                       % (args[0], zs[0]))
    f.from_ = zs[0]
    opts = _Options()
    for c in d.children:
        _parse_option(d, c, f, opts, block)
    if opts.max_age and opts.max_age < opts.expire:
        raise d.error("max_age (%s) must not be less than expire (%s)"
                      % (format_duration(opts.max_age),
                         format_duration(opts.expire)))
    hosts = []
    for to in args[1:]:
        hosts.extend(_parse_to(d, to))
    seen = dedup(hosts)
    if not seen:
        raise d.error("no valid upstream addresses found")
    if len(seen) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d"
                      % (MAX_UPSTREAMS, len(seen)))
    for trans, host, port, sni in seen:
        if trans != "dns" and sni and opts.servername:
            raise d.error(
                "both forward ('%s') and proxy level ('%s') TLS servernames "
                "are set for upstream proxy '%s'" % (
                    opts.servername, sni, _label(trans, host, port)))
    maker = ProxyMaker(d, opts, f.force_tcp)
    if any(trans != "dns" for trans, _h, _p, _s in seen):
        maker.load_tls()
    if any(not _is_ip(host) for _t, host, _p, _s in seen):
        # Host names: their upstreams are made once resolved, at start.
        f.to = seen
        f.resolvers = opts.resolvers
        f.make_proxy = maker.make
        return f
    f.proxies = [maker.make(*h) for h in seen]
    return f


class ProxyMaker:
    """Makes the engine ``Proxy`` of one upstream with the stanza's
    options; the TLS files are read once, at setup."""

    def __init__(self, d, opts, force_tcp):
        self.d = d
        self.opts = opts
        self.force_tcp = force_tcp
        self.material = None

    def load_tls(self):
        """Read the ``tls`` files now, so that a bad one is a Corefile
        error even for upstreams made later."""
        try:
            self.material = load_client_tls(self.opts.tls_args or [])
        except Exception as e:
            raise self.d.error("tls: %s" % e) from e

    def make(self, trans, host, port, sni):
        opts = self.opts
        p = Proxy(_label("dns", host, port), host, port, trans)
        p.expire = opts.expire
        p.max_age = opts.max_age
        p.max_idle = opts.max_idle
        p.read_timeout = opts.read_timeout
        p.hc_interval = opts.hc_interval
        p.hc_domain = opts.hc_domain
        p.hc_rd = opts.hc_rd
        p.source = opts.source
        p.doh_method = opts.doh_method
        if self.force_tcp and trans == "dns":
            p.hc_proto = "tcp"
        if trans != "dns":
            p.servername = sni or opts.servername or host
            p.tls = tls_options(self.material, p.servername,
                                 trans == "https")
        return p


class _Options:
    def __init__(self):
        self.expire = DEFAULT_EXPIRE
        self.max_age = 0.0
        self.max_idle = 0
        self.read_timeout = DEFAULT_READ_TIMEOUT
        self.hc_interval = HC_INTERVAL
        self.hc_domain = "."
        self.hc_rd = True
        self.source = None
        self.tls_args = None
        self.servername = ""
        self.doh_method = "POST"
        self.resolvers = None


def _label(trans, host, port):
    h = "[%s]" % host if ":" in host else host
    return ("tls://" if trans == "tls" else "") + "%s:%d" % (h, port)


def _godur(seconds):
    """A duration as Go's time.Duration prints it ("-1s", "1m30s")."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    return format_duration(seconds)


def _duration(d, c, text, what):
    try:
        return parse_duration(text, strict=True)
    except ValueError as e:
        raise c.error(str(e)) from e


def _uint(c, text):
    try:
        n = int(text, 10)
    except ValueError as e:
        raise c.error('strconv.ParseUint: parsing "%s": invalid syntax'
                      % text) from e
    if n < 0 or n >= 1 << 32:
        raise c.error('strconv.ParseUint: parsing "%s": invalid syntax' % text)
    return n


def _int(c, text):
    try:
        return int(text, 10)
    except ValueError as e:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax'
                      % text) from e


def _rcodes(c, args, failover=False):
    out = []
    for a in args:
        try:
            rc = w.rcode_value(a)
        except ValueError as e:
            raise c.error("%s is not a valid rcode" % a) from e
        if failover and rc == w.NOERROR:
            raise c.error("NoError cannot be used in failover")
        out.append(rc)
    return tuple(out)


def _parse_option(d, c, f, o, block):
    name, args = c.name, list(c.args)

    def want(n):
        if len(args) != n:
            raise c.arg_error()

    if name == "except":
        if not args:
            raise c.arg_error()
        for a in args:
            f.ignored.extend(names.normalize(a))
    elif name == "max_fails":
        want(1)
        f.maxfails = _uint(c, args[0])
    elif name == "max_connect_attempts":
        want(1)
        f.max_attempts = _uint(c, args[0])
    elif name == "health_check":
        if not args:
            raise c.arg_error()
        dur = _duration(d, c, args[0], name)
        if dur < 0:
            # Go prints the duration as nanoseconds here (%d).
            raise c.error("health_check can't be negative: %d"
                          % round(dur * 1e9))
        o.hc_interval = dur
        o.hc_domain = "."
        rest = args[1:]
        while rest:
            opt = rest.pop(0)
            if opt == "no_rec":
                o.hc_rd = False
            elif opt == "domain":
                if not rest:
                    raise c.arg_error()
                dom = rest.pop(0)
                if not names.is_domain_name(dom):
                    raise c.error("health_check: invalid domain name %s"
                                  % dom)
                o.hc_domain = names.normalize_name(dom)
            else:
                raise c.error("health_check: unknown option %s" % opt)
    elif name == "force_tcp":
        want(0)
        f.force_tcp = True
    elif name == "prefer_udp":
        want(0)
        f.prefer_udp = True
    elif name == "tls":
        if len(args) > 3:
            raise c.arg_error()
        o.tls_args = [block.path(a) for a in args]
        for a in o.tls_args:
            if not os.path.exists(a):
                raise c.error("open %s: no such file or directory" % a)
    elif name == "tls_servername":
        want(1)
        o.servername = args[0]
    elif name in ("expire", "max_age"):
        want(1)
        dur = _duration(d, c, args[0], name)
        if dur < 0:
            raise c.error("%s can't be negative: %s" % (name, _godur(dur)))
        setattr(o, name, dur)
    elif name == "max_idle_conns":
        want(1)
        n = _int(c, args[0])
        if n < 0:
            raise c.error("max_idle_conns can't be negative: %d" % n)
        o.max_idle = n
    elif name == "read_timeout":
        want(1)
        dur = _duration(d, c, args[0], name)
        if dur <= 0:
            raise c.error("read_timeout must be positive: %s"
                          % _godur(dur))
        o.read_timeout = dur
    elif name == "policy":
        if not args:
            raise c.arg_error()
        if args[0] not in ("random", "round_robin", "sequential"):
            raise c.error("unknown policy '%s'" % args[0])
        f.policy = args[0]
    elif name == "max_concurrent":
        want(1)
        n = _int(c, args[0])
        if n < 0:
            raise c.error("max_concurrent can't be negative: %d" % n)
        f.max_concurrent = n
    elif name == "next":
        if not args:
            raise c.arg_error()
        f.next_rcodes = f.next_rcodes + _rcodes(c, args)
    elif name == "next_on_nodata":
        want(0)
        f.next_on_nodata = True
    elif name == "failfast_all_unhealthy_upstreams":
        want(0)
        f.failfast = True
    elif name == "failover":
        if not args:
            raise c.arg_error()
        f.failover_rcodes = f.failover_rcodes + _rcodes(c, args, True)
    elif name == "source_address":
        want(1)
        try:
            ip = ipaddress.ip_address(args[0])
            # An IPv4-mapped address binds as the IPv4 address (Go's net.IP).
            o.source = str(getattr(ip, "ipv4_mapped", None) or ip)
        except ValueError as e:
            raise c.error("invalid IP address: %s" % args[0]) from e
    elif name == "doh_method":
        want(1)
        if args[0] not in ("GET", "POST"):
            raise c.error("doh_method must be either POST or GET")
        o.doh_method = args[0]
    elif name == "resolver":
        if not args:
            raise c.arg_error()
        o.resolvers = [_resolver(c, a) for a in args]
    else:
        raise c.error("unknown property '%s'" % name)


def _resolver(c, arg):
    """(ip, port) of a ``resolver`` address: an IP or IP:port."""
    host, port = _split_host_port(arg)
    if host is None or not _is_ip(host) or "%" in host or (
            port is not None and not 0 <= int(port) < 65536):
        raise c.error('resolver must be an IP address or IP:port: "%s"'
                      % arg)
    return host, int(port) if port else 53


def _parse_to(d, to):
    """(transport, host, port, servername) tuples for one TO argument; a
    host name stays a name here (resolved at start)."""
    trans, rest = names.split_transport(to)
    if trans not in ("dns", "tls", "https"):
        raise d.error("'%s' is not supported as a destination protocol in "
                      "forward: %s" % (trans, to))
    if not rest:
        raise d.error('invalid address: "%s"' % to)
    if trans == "https" and "/" in rest:
        raise d.error("paths are not allowed in HTTPS upstream addresses "
                      "(the /dns-query path is used by default): %s" % to)
    sni = ""
    if trans != "dns" and "%" in rest:
        pct = rest.rfind("%")
        host_part, tail = rest[:pct], rest[pct + 1:]
        if ":" in tail:
            colon = tail.rfind(":")
            sni, port_part = tail[:colon].rstrip("]"), tail[colon:]
            rest = host_part + ("]" if host_part.startswith("[") else "") \
                + port_part
        else:
            sni = tail
            rest = host_part + ("]" if host_part.startswith("[") else "")
    default = DEFAULT_PORTS[trans]
    host, port = _split_host_port(rest)
    if host is None or not _is_ip(host):
        # Not an address: a resolv.conf-style file, else a host name.
        path = rest
        if os.path.isfile(path):
            return [("dns", h, p, "") for h, p in _resolv_conf(d, path)]
        if host is not None and _is_hostname(host):
            return [(trans, host.rstrip(".").lower(),
                     int(port) if port else default, sni)]
        raise d.error('not an IP address, file, or valid domain: "%s"'
                      % to)
    return [(trans, host, int(port) if port else default, sni)]


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
    host, port = _split_host_port(rest)
    if host is not None and _is_ip(host):
        default = int(names.DEFAULT_PORTS.get(trans) or 53)
        return [(trans, host, int(port) if port else default)]
    servers = _resolv_conf(d, rest) if os.path.isfile(rest) else []
    if not servers:
        raise d.error('not an IP address or file: "%s"' % rest)
    return [("dns", h, p) for h, p in servers]


def _split_host_port(s):
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


def _is_ip(s):
    try:
        ipaddress.ip_address(s.split("%")[0])
        return True
    except ValueError:
        return False


def _is_hostname(s):
    return "/" not in s and "%" not in s and names.is_domain_name(s)


def _resolv_conf(d, path):
    """The nameserver lines of a resolv.conf (port 53)."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    host = parts[1].split("%")[0]
                    if _is_ip(host):
                        out.append((host, 53))
    except OSError as e:
        raise d.error('failed to open file "%s": %s' % (path, e)) from e
    return out


def tls_options(material, servername, http):
    """Twisted client TLS options: CoreDNS's tls argument forms
    (``material``: trust root and client certificate), TLS 1.2 at least,
    the server certificate verified against ``servername``; ALPN offers
    HTTP/1.1 to a DNS-over-HTTPS server."""
    from twisted.internet import ssl
    trust, client = material
    return ssl.optionsForClientTLS(
        servername, trustRoot=trust, clientCertificate=client,
        acceptableProtocols=[b"http/1.1"] if http else None,
        extraCertificateOptions={"raiseMinimumTo": ssl.TLSVersion.TLSv1_2})


