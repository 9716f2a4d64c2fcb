"""acl: allow, block, filter or drop queries by client address and type.

``acl [ZONES...] { allow|block|filter|drop [type QTYPE...] [net SOURCE...] }``.
Every ``acl`` of a block adds one rule (its zones and its policies) to a
single list.  For a query, the rules whose zones contain the name are tried
in order; in a rule the first policy whose types and networks match
decides: ``allow`` ends the search, ``block`` answers REFUSED and
``filter`` an empty NOERROR (both with an Extended DNS Error, Blocked or
Filtered, in an OPT record CoreDNS sets up as 4096 bytes with DO), ``drop``
sends nothing.  A query no policy decides is allowed.
"""

import functools
import ipaddress
import socket
import struct
from typing import Optional

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.plugin import Plugin, match, zones_from_args
from corednstw.core.request import NoReply, Response, encode

NONE, ALLOW, BLOCK, FILTER, DROP = range(5)
ACTIONS = {"allow": ALLOW, "block": BLOCK, "filter": FILTER, "drop": DROP}

EDE = 15
EDE_BLOCKED = 15
EDE_FILTERED = 17

BLOCKED = metrics.counter(
    "coredns_acl_blocked_requests_total",
    "Counter of DNS requests being blocked.", ("server", "zone", "view"))
FILTERED = metrics.counter(
    "coredns_acl_filtered_requests_total",
    "Counter of DNS requests being filtered.", ("server", "zone", "view"))
ALLOWED = metrics.counter(
    "coredns_acl_allowed_requests_total",
    "Counter of DNS requests being allowed.", ("server", "view"))
DROPPED = metrics.counter(
    "coredns_acl_dropped_requests_total",
    "Counter of DNS requests being dropped.", ("server", "zone", "view"))


@functools.lru_cache(maxsize=4096)
def address(text):
    """(version, integer) of a client address, ``::ffff:``-mapped ones as
    IPv4 and any ``%zone`` cut; None when it is no address.  Cached: the
    same clients ask again and again."""
    text = text.split("%", 1)[0]
    try:
        if ":" not in text:
            return 4, int.from_bytes(socket.inet_pton(socket.AF_INET, text),
                                     "big")
        raw = socket.inet_pton(socket.AF_INET6, text)
    except (OSError, ValueError):
        return None
    if raw[:12] == b"\x00" * 10 + b"\xff\xff":
        return 4, int.from_bytes(raw[12:], "big")
    return 6, int.from_bytes(raw, "big")


def parse_net(text):
    """(version, network, mask) of a CIDR (a bare address is a host
    route); ValueError when it is none.  Host bits are ignored."""
    net = ipaddress.ip_network(_normalized(text), strict=False)
    return net.version, int(net.network_address), int(net.netmask)


class Policy:
    """One ``allow|block|filter|drop`` line: None for "any type" and "any
    source"."""

    __slots__ = ("action", "qtypes", "nets")

    def __init__(self, action, qtypes, nets):
        self.action = action
        self.qtypes = qtypes
        self.nets = nets

    def matches(self, qtype, ip):
        if self.qtypes is not None and qtype not in self.qtypes:
            return False
        nets = self.nets
        if nets is None:
            return True
        version, value = ip
        for v, net, mask in nets:
            if v == version and value & mask == net:
                return True
        return False


class Rule:
    __slots__ = ("zones", "policies")

    def __init__(self, zones, policies):
        self.zones = zones
        self.policies = policies


class EDEResponse(Response):
    """REFUSED or NOERROR with an Extended DNS Error.  CoreDNS builds the
    answer with an OPT record of its own, so a client that asked without
    EDNS0 gets it as well (4096 bytes, DO set)."""

    __slots__ = ()

    def finish(self, req):
        wire = self.wire
        if wire is None:
            wire = encode(req, self)
            if req.edns is None:
                opt = self.opt
                assert opt is not None      # ede_response always sets it
                ar = struct.unpack_from("!H", wire, 10)[0] + 1
                wire = (wire[:10] + struct.pack("!H", ar) + wire[12:]
                        + w.opt_wire(opt.size, opt.ttl, opt.options))
            self.wire = wire
        return wire


def ede_response(rcode, info):
    r = EDEResponse(rcode, plugin="acl")
    r.opt = w.EDNS(4096, 0x8000, [(EDE, struct.pack("!H", info))])
    return r


class ACL(Plugin):
    name = "acl"
    once = False

    def __init__(self, rules):
        self.rules = rules

    def serve(self, req):
        qname = req.qname
        for rule in self.rules:
            zone = match(rule.zones, qname)
            if zone is None:
                continue
            action = self.decide(rule.policies, req)
            if action == ALLOW:
                break
            if action == NONE:
                continue
            labels = (req.server, zone, req.view)
            if action == DROP:
                DROPPED.inc(labels)
                return NoReply()
            if action == BLOCK:
                BLOCKED.inc(labels)
                return ede_response(w.REFUSED, EDE_BLOCKED)
            FILTERED.inc(labels)
            return ede_response(w.NOERROR, EDE_FILTERED)
        ALLOWED.inc((req.server, req.view))
        return self.next.serve(req)

    def decide(self, policies, req):
        """The action of the first policy matching the query."""
        ip = address(req.client)
        if ip is None:
            logger.error("acl", "Blocking request. Unable to parse source "
                         "address: %s" % req.client)
            return BLOCK
        qtype = req.qtype
        for p in policies:
            if p.matches(qtype, ip):
                return p.action
        return NONE


def _sections(c, tokens):
    """Split ``type ... net ...`` into (section, [tokens]) pairs."""
    out = []
    i = 0
    while i < len(tokens):
        section = tokens[i].lower()
        if section not in ("type", "net"):
            raise c.error("unexpected token %s; expect 'type | net'"
                          % _quote(tokens[i]))
        j = i + 1
        while j < len(tokens) and tokens[j].lower() not in ("type", "net"):
            j += 1
        if j == i + 1:
            raise c.error("no token specified in %s section"
                          % _quote(section))
        out.append((section, tokens[i + 1:j]))
        i = j
    return out


def _quote(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def _qtype(c, token):
    """A type by its mnemonic, as CoreDNS spells them (upper case)."""
    if token != token.upper() or token.startswith("TYPE"):
        raise c.error("unexpected token %s; expect legal QTYPE"
                      % _quote(token))
    try:
        return w.type_value(token)
    except ValueError as e:
        raise c.error("unexpected token %s; expect legal QTYPE"
                      % _quote(token)) from e


def parse_policy(c):
    """The Policy of one block line: its name is the action (in any case,
    so it is no named option ``read_options`` could look up)."""
    action = ACTIONS.get(c.name.lower())
    if action is None:
        raise c.error("unexpected token %s; expect 'allow', 'block', "
                      "'filter' or 'drop'" % _quote(c.name))
    qtypes: Optional[set[int]] = None
    nets: Optional[list[str]] = None
    for section, tokens in _sections(c, c.args):
        if section == "type":
            qtypes = set() if qtypes is None else qtypes
            for t in tokens:
                if t == "*":
                    qtypes.add(0)
                    break
                qtypes.add(_qtype(c, t))
        else:
            nets = [] if nets is None else nets
            for t in tokens:
                if t == "*":
                    nets.append("*")
                    break
                try:
                    nets.append(parse_net(t))
                except ValueError as e:
                    raise c.error("illegal CIDR notation %s"
                                  % _quote(_normalized(t))) from e
    if qtypes is not None and 0 in qtypes:
        qtypes = None
    if nets is not None and "*" in nets:
        nets = None
    return Policy(action, frozenset(qtypes) if qtypes else qtypes, nets)


def _normalized(t):
    if "/" in t:
        return t
    return t + ("/128" if ":" in t else "/32")


def setup(d, block):
    """Every line of the block is a policy, tried in Corefile order."""
    rule = Rule(zones_from_args(d.args, block),
                [parse_policy(c) for c in d.children])
    for p in block.plugins:
        if isinstance(p, ACL):
            # One plugin per block: later lines add rules to the first.
            p.rules.append(rule)
            return None
    return ACL([rule])
