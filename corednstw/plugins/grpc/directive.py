"""Parsing of ``grpc FROM TO... { except; tls; tls_servername; policy;
fallthrough }`` as CoreDNS's grpc plugin reads it."""

import os

from corednstw.core import names
from corednstw.core.plugin import Fallthrough
from corednstw.engines.upstream.addresses import (
    POLICIES,
    is_ip,
    resolv_conf,
    split_host_port,
)
from corednstw.plugins.grpc.plugin import GRPC

MAX_UPSTREAMS = 15
#: A TO on a Unix socket: grpcio's target syntax, as CoreDNS's.
UNIX = "unix://"


def setup(d, block):
    args = d.between(2)
    g = GRPC()
    zs = names.normalize(args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % args[0])
    g.from_ = zs[0]
    for to in args[1:]:
        g.to.extend(_parse_to(d, to))
    if len(g.to) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d"
                      % (MAX_UPSTREAMS, len(g.to)))
    reader = _OptionReader(g, block)
    d.read_options(reader.handlers())
    if reader.tls_args is not None:
        try:
            g.credentials = _credentials(reader.tls_args)
        except (OSError, ValueError) as e:
            raise d.error("could not load TLS files: %s" % e) from e
    return g


class _OptionReader:
    """grpc's block options, one method per option line, read into the
    GRPC ``g``; the ``tls`` files are kept for the end of the block, when
    the credentials are made from them."""

    def __init__(self, g, block):
        self.g, self.block = g, block
        self.tls_args = None

    def handlers(self):
        """Option name -> reader: the ``opt_NAME`` methods."""
        return {n[4:]: getattr(self, n) for n in dir(self)
                if n.startswith("opt_")}

    def opt_except(self, c):
        """Names under FROM left to the next plugin (the last line wins,
        as in CoreDNS)."""
        self.g.ignored = [z for a in c.between(1)
                          for z in names.normalize(a)]

    def opt_tls(self, c):
        """``tls [CERT KEY] [CA]``, paths relative to the root."""
        self.tls_args = [self.block.path(a) for a in c.between(0, 3)]

    def opt_tls_servername(self, c):
        self.g.servername = c.one()

    def opt_policy(self, c):
        self.g.policy = c.choice(c.one(), POLICIES, "unknown policy '%s'")

    def opt_fallthrough(self, c):
        self.g.fall = Fallthrough.parse(c.args)


def _parse_to(d, to):
    """(host, port) pairs of one TO: an address (port 53 unless given), a
    resolv.conf file, or ``unix://PATH`` (a socket, port None), as
    CoreDNS's HostPortOrFile."""
    if to.startswith(UNIX):
        if len(to) == len(UNIX):
            raise d.error('invalid address: "%s"' % to)
        return [(to, None)]
    host, port = split_host_port(to)
    if host is not None and is_ip(host):
        return [(host, int(port) if port else 53)]
    if os.path.isfile(to):
        return resolv_conf(d, to)
    raise d.error('not an IP address or file: "%s"' % to)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _credentials(args):
    """grpcio channel credentials from ``tls [CERT KEY] [CA]`` (no CA:
    the system's roots)."""
    import grpc
    ca = _read(args[-1]) if len(args) in (1, 3) else None
    key = cert = None
    if len(args) >= 2:
        cert, key = _read(args[0]), _read(args[1])
    return grpc.ssl_channel_credentials(root_certificates=ca,
                                        private_key=key,
                                        certificate_chain=cert)
