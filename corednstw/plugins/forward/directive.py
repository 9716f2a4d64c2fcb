"""forward's Corefile stanza: the TO addresses (IPs, ``tls://``,
``https://``, resolv.conf files, host names), the options, and the TLS
client settings; one engine ``Upstream`` per upstream.

Host names are resolved while the Corefile is read (``resolve``), as
CoreDNS 1.14 does: one without an address refuses the Corefile.
"""

import os

from corednstw.core import dnswire as w
from corednstw.core import logger, names
from corednstw.core.durations import format_duration
from corednstw.engines.upstream import (
    DEFAULT_EXPIRE,
    DEFAULT_READ_TIMEOUT,
    HC_INTERVAL,
    Upstream,
)
from corednstw.engines.upstream.addresses import (
    POLICIES,
    is_ip,
    resolv_conf,
    split_host_port,
)
from corednstw.engines.upstream.tlsfiles import load_client_tls
from corednstw.plugins.forward.plugin import Forward
from corednstw.plugins.forward.resolve import ResolveError, dedup, resolve

MAX_UPSTREAMS = 15
DEFAULT_PORTS = {"dns": 53, "tls": 853, "https": 443}


def setup(d, block):
    """The Forward of one ``forward FROM TO... { options }`` directive."""
    f = Forward()
    args = d.between(2)
    zs = names.normalize(args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % args[0])
    if len(zs) > 1:
        logger.warning("forward", "Unsupported CIDR notation: '%s' expands "
                       "to multiple zones. Using only '%s'."
                       % (args[0], zs[0]))
    f.from_ = zs[0]
    opts = _Options()
    d.read_options(_OptionReader(f, opts, block).handlers())
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
    maker = UpstreamMaker(d, opts, f.force_tcp)
    if any(trans != "dns" for trans, _h, _p, _s in seen):
        maker.load_tls()
    try:
        seen = dedup(resolve(seen, opts.resolvers))
    except ResolveError as e:
        raise d.error(str(e)) from e
    f.upstreams = [maker.make(*h) for h in seen]
    return f


class UpstreamMaker:
    """Makes the engine ``Upstream`` of one upstream with the stanza's
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
        p = Upstream(_label("dns", host, port), host, port, trans)
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
            try:
                p.tls = tls_options(self.material, p.servername,
                                    trans == "https")
            except ValueError as e:
                raise self.d.error(str(e)) from e
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


def _flag(attr):
    """The reader of an option without arguments that turns the
    Forward's ``attr`` on."""
    def read(self, c):
        c.no_args()
        setattr(self.f, attr, True)
    return read


class _OptionReader:
    """forward's block options, one method per option line, read into
    the Forward ``f`` and the upstreams' options ``o``.  The checks and
    their words are CoreDNS's parseBlock; split per option so that each
    one's rule reads on its own."""

    def __init__(self, f, o, block):
        self.f, self.o, self.block = f, o, block

    def handlers(self):
        """Option name -> reader: the ``opt_NAME`` methods."""
        return {n[4:]: getattr(self, n) for n in dir(self)
                if n.startswith("opt_")}

    def opt_except(self, c):
        """Names under FROM left to the next plugin; the line may repeat,
        each adds to the list."""
        for a in c.between(1):
            self.f.ignored.extend(names.normalize(a))

    def opt_max_fails(self, c):
        """Failed checks in a row before an upstream is down: a 32-bit
        unsigned number, refused with Go's ParseUint error as CoreDNS
        returns it."""
        self.f.maxfails = c.integer(c.one(), func="ParseUint", bits=32)

    def opt_max_connect_attempts(self, c):
        """A cap on the upstreams one query tries (unset: twice their
        number); read like ``max_fails``."""
        self.f.max_attempts = c.integer(c.one(), func="ParseUint", bits=32)

    def opt_health_check(self, c):
        """``health_check DURATION [no_rec] [domain NAME]``: the interval
        resets the probe's name to the root, the flags after it change it.
        """
        args = c.between(1)
        dur = c.duration(args[0])
        if dur < 0:
            # Go prints the duration as nanoseconds here (%d).
            raise c.error("health_check can't be negative: %d"
                          % round(dur * 1e9))
        self.o.hc_interval = dur
        self.o.hc_domain = "."
        rest = args[1:]
        while rest:
            self._health_check_flag(c, rest.pop(0), rest)

    def _health_check_flag(self, c, flag, rest):
        """One flag after the interval (``domain`` takes the next token
        from ``rest``)."""
        if flag == "no_rec":
            self.o.hc_rd = False
        elif flag == "domain":
            if not rest:
                raise c.arg_error()
            dom = rest.pop(0)
            if not names.is_domain_name(dom):
                raise c.error("health_check: invalid domain name %s" % dom)
            self.o.hc_domain = names.normalize_name(dom)
        else:
            raise c.error("health_check: unknown option %s" % flag)

    opt_force_tcp = _flag("force_tcp")
    opt_prefer_udp = _flag("prefer_udp")
    opt_next_on_nodata = _flag("next_on_nodata")
    opt_failfast_all_unhealthy_upstreams = _flag("failfast")

    def opt_tls(self, c):
        """``tls [CERT KEY] [CA]``, paths relative to the root; the files
        must exist now (they are read once the upstreams are known)."""
        self.o.tls_args = [self.block.path(a) for a in c.between(0, 3)]
        for a in self.o.tls_args:
            if not os.path.exists(a):
                raise c.error("open %s: no such file or directory" % a)

    def opt_tls_servername(self, c):
        self.o.servername = c.one()

    def opt_expire(self, c):
        """How long an unused connection to an upstream is kept."""
        self.o.expire = self._not_negative(c)

    def opt_max_age(self, c):
        """The longest any connection lives, used or not (checked against
        ``expire`` once the block is read)."""
        self.o.max_age = self._not_negative(c)

    @staticmethod
    def _not_negative(c):
        """A duration of zero or more; a negative one is refused printed
        as Go prints it, which may differ from what was written."""
        dur = c.duration(c.one())
        if dur < 0:
            raise c.error("%s can't be negative: %s" % (c.name, _godur(dur)))
        return dur

    def opt_max_idle_conns(self, c):
        self.o.max_idle = c.integer(
            c.one(), lo=0, range_error="max_idle_conns can't be negative: %d")

    def opt_read_timeout(self, c):
        """How long to wait for an upstream's answer; zero would fail
        every query, so CoreDNS wants it positive."""
        dur = c.duration(c.one())
        if dur <= 0:
            raise c.error("read_timeout must be positive: %s" % _godur(dur))
        self.o.read_timeout = dur

    def opt_policy(self, c):
        """How upstreams are ordered per query; CoreDNS reads the first
        argument only."""
        self.f.policy = c.choice(c.between(1)[0], POLICIES,
                                 "unknown policy '%s'")

    def opt_max_concurrent(self, c):
        self.f.max_concurrent = c.integer(
            c.one(), lo=0, range_error="max_concurrent can't be negative: %d")

    def opt_next(self, c):
        """Rcodes after which the next plugin is tried; lines add up."""
        self.f.next_rcodes = self.f.next_rcodes + _rcodes(c, c.between(1))

    def opt_failover(self, c):
        """Rcodes after which the next upstream is tried (never NOERROR:
        that would retry every answer); lines add up."""
        self.f.failover_rcodes = self.f.failover_rcodes + _rcodes(
            c, c.between(1), failover=True)

    def opt_source_address(self, c):
        """The local address queries leave from, read as Go's ParseIP (an
        IPv4-mapped address binds as the IPv4 one)."""
        self.o.source = str(c.ip(c.one()))

    def opt_doh_method(self, c):
        method = c.one()
        if method not in ("GET", "POST"):
            raise c.error("doh_method must be either POST or GET")
        self.o.doh_method = method

    def opt_resolver(self, c):
        """Where host names in TO are looked up (instead of the system)."""
        self.o.resolvers = [_resolver(c, a) for a in c.between(1)]


def _resolver(c, arg):
    """(ip, port) of a ``resolver`` address: an IP or IP:port."""
    host, port = split_host_port(arg)
    if host is None or not is_ip(host) or "%" in host or (
            port is not None and not 0 <= int(port) < 65536):
        raise c.error('resolver must be an IP address or IP:port: "%s"'
                      % arg)
    return host, int(port) if port else 53


def _parse_to(d, to):
    """(transport, host, port, servername) tuples for one TO argument; a
    host name stays a name here (``resolve`` looks it up)."""
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
    host, port = split_host_port(rest)
    if host is None or not is_ip(host):
        # Not an address: a resolv.conf-style file, else a host name.
        path = rest
        if os.path.isfile(path):
            return [("dns", h, p, "") for h, p in resolv_conf(d, path)]
        if host is not None and _is_hostname(host):
            return [(trans, host.rstrip(".").lower(),
                     int(port) if port else default, sni)]
        raise d.error('not an IP address, file, or valid domain: "%s"'
                      % to)
    return [(trans, host, int(port) if port else default, sni)]


def _is_hostname(s):
    return "/" not in s and "%" not in s and names.is_domain_name(s)


def tls_options(material, servername, http):
    """Twisted client TLS options: CoreDNS's tls argument forms
    (``material``: trust root and client certificate), TLS 1.2 at least,
    the server certificate verified against ``servername``; ALPN offers
    HTTP/1.1 to a DNS-over-HTTPS server."""
    from twisted.internet import ssl
    trust, client = material
    try:
        return ssl.optionsForClientTLS(
            servername, trustRoot=trust, clientCertificate=client,
            acceptableProtocols=[b"http/1.1"] if http else None,
            extraCertificateOptions={
                "raiseMinimumTo": ssl.TLSVersion.TLSv1_2})
    except UnicodeError as e:
        # A name IDNA cannot encode ("dns.quad?.net"): a Corefile error
        # of the caller's line, never a crash.
        raise ValueError("invalid TLS server name %r: %s"
                         % (servername, e)) from e


