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
    """``udp_session_tracking DURATION [MAX_SESSIONS]``: how long a UDP
    client's header is remembered, and for how many clients at most."""
    args = c.between(1, 2)
    policy.ttl = c.duration(args[0], error='udp_session_tracking: invalid '
                            'duration "{text}": {reason}')
    if len(args) == 2:
        # CoreDNS words a bad count and a non-positive one alike.
        error = ('udp_session_tracking: invalid max sessions "{text}": '
                 'must be a positive integer')
        policy.max_sessions = c.integer(args[1], lo=1, error=error,
                                        range_error=error)


def _default(c, policy):
    """``default use|ignore|reject|skip`` (any case): the policy of the
    sources ``allow`` does not list."""
    value = c.one().lower()
    if value not in proxyprotocol.POLICIES:
        raise c.arg_error()
    policy.default = value
    policy.default_set = True


def setup(d, block):
    if "proxyproto" in block.settings:
        raise d.error("proxy protocol already configured for this server "
                      "instance")
    d.no_args()
    policy = proxyprotocol.Policy()
    d.read_options({
        "allow": lambda c: policy.nets.extend(_cidr(c, a) for a in c.args),
        "default": lambda c: _default(c, policy),
        "udp_session_tracking": lambda c: _session_tracking(c, policy),
    }, unknown="unknown option '%s'")
    block.settings["proxyproto"] = policy
    return ProxyProto(policy)
