"""proxyproto: take the client address from a PROXY protocol header.

``proxyproto { allow CIDR...; default use|ignore|reject|skip;
udp_session_tracking DURATION [MAX_SESSIONS] }`` (CoreDNS 1.14).  Without
``allow`` every source may send a header (``use``, unless ``default``
says otherwise); with it, the listed networks ``use`` the header and the
other sources get ``default`` (``ignore`` unless set).  The policy goes to
``block.settings["proxyproto"]``; every listener of the block applies it
(core/proxyprotocol.py).
"""

import ipaddress

from corednstw.core.durations import parse_duration
from corednstw.core.plugin import Plugin
from corednstw.dnsserver import proxyprotocol


class ProxyProto(Plugin):
    name = "proxyproto"
    in_chain = False
    once = False

    def __init__(self, policy):
        self.policy = policy


def _cidr(c, text):
    """A network as Go's net.ParseCIDR reads it (the prefix length is
    required; host bits are allowed)."""
    try:
        if "/" not in text:
            raise ValueError(text)
        return ipaddress.ip_network(text, strict=False)
    except ValueError as e:
        raise c.error("%s: invalid CIDR address: %s" % (text, text)) from e


def _session_tracking(c, policy):
    if not 1 <= len(c.args) <= 2:
        raise c.arg_error()
    try:
        policy.ttl = parse_duration(c.args[0])
    except ValueError as e:
        raise c.error('udp_session_tracking: invalid duration "%s": '
                      'time: invalid duration "%s"'
                      % (c.args[0], c.args[0])) from e
    if len(c.args) == 2:
        try:
            n = int(c.args[1])
        except ValueError:
            n = 0
        if n <= 0:
            raise c.error('udp_session_tracking: invalid max sessions "%s": '
                          'must be a positive integer' % c.args[1])
        policy.max_sessions = n


def setup(d, block):
    if "proxyproto" in block.settings:
        raise d.error("proxy protocol already configured for this server "
                      "instance")
    if d.args:
        raise d.arg_error()
    policy = proxyprotocol.Policy()
    for c in d.children:
        if c.name == "allow":
            policy.nets.extend(_cidr(c, a) for a in c.args)
        elif c.name == "default":
            if len(c.args) != 1 or c.args[0].lower() not in \
                    proxyprotocol.POLICIES:
                raise c.arg_error()
            policy.default = c.args[0].lower()
            policy.default_set = True
        elif c.name == "udp_session_tracking":
            _session_tracking(c, policy)
        else:
            raise c.error("unknown option '%s'" % c.name)
    block.settings["proxyproto"] = policy
    return ProxyProto(policy)
