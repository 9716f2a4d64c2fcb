"""Parsing of ``grpc FROM TO... { except; tls; tls_servername; policy;
fallthrough }`` as CoreDNS's grpc plugin reads it."""

import os

from corednstw.core import names
from corednstw.core.plugin import Fallthrough
from corednstw.plugins.forward.directive import (
    _is_ip,
    _resolv_conf,
    _split_host_port,
)
from corednstw.plugins.grpc.plugin import GRPC

MAX_UPSTREAMS = 15
POLICIES = ("random", "round_robin", "sequential")


def setup(d, block):
    if len(d.args) < 2:
        raise d.arg_error()
    g = GRPC()
    zs = names.normalize(d.args[0])
    if not zs:
        raise d.error("unable to normalize '%s'" % d.args[0])
    g.from_ = zs[0]
    for to in d.args[1:]:
        g.to.extend(_parse_to(d, to))
    if len(g.to) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d"
                      % (MAX_UPSTREAMS, len(g.to)))
    tls_args = None
    for c in d.children:
        if c.name == "except":
            if not c.args:
                raise c.arg_error()
            g.ignored = [z for a in c.args for z in names.normalize(a)]
        elif c.name == "tls":
            if len(c.args) > 3:
                raise c.arg_error()
            tls_args = [block.path(a) for a in c.args]
        elif c.name == "tls_servername":
            if len(c.args) != 1:
                raise c.arg_error()
            g.servername = c.args[0]
        elif c.name == "policy":
            if len(c.args) != 1:
                raise c.arg_error()
            if c.args[0] not in POLICIES:
                raise c.error("unknown policy '%s'" % c.args[0])
            g.policy = c.args[0]
        elif c.name == "fallthrough":
            g.fall = Fallthrough.parse(c.args)
        else:
            raise c.error("unknown property '%s'" % c.name)
    if tls_args is not None:
        try:
            g.credentials = _credentials(tls_args)
        except (OSError, ValueError) as e:
            raise d.error("could not load TLS files: %s" % e) from e
    return g


def _parse_to(d, to):
    """(host, port) pairs of one TO: an address (port 53 unless given) or
    a resolv.conf file, as CoreDNS's HostPortOrFile."""
    host, port = _split_host_port(to)
    if host is not None and _is_ip(host):
        return [(host, int(port) if port else 53)]
    if os.path.isfile(to):
        return _resolv_conf(d, to)
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
