"""The ``edns0`` field: set, append, replace or unset an EDNS0 option of
the query (local options with fixed or variable data, NSID, client
subnet), optionally reverted in the response.

Options are (code, data) pairs.  A *local* rule only sees options of
codes the DNS library CoreDNS uses has no type of its own for, as there;
``unset`` removes every option of the code.
"""

import ipaddress
import struct

from corednstw.core import goparse, request
from corednstw.plugins import metadata
from corednstw.plugins.rewrite.rule import Rule

SET, APPEND, REPLACE, UNSET = "set", "append", "replace", "unset"
ACTIONS = (SET, APPEND, REPLACE, UNSET)

NSID, SUBNET = 3, 8
# Option codes with a type of their own in miekg/dns: never "local".
_TYPED = frozenset((1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 15))

_H = struct.Struct("!H")

VARIABLES = ("{qname}", "{qtype}", "{client_ip}", "{client_port}",
             "{protocol}", "{server_ip}", "{server_port}")


class RemoveOption:
    """Revert of an added option: drop the first option of ``code``."""

    __slots__ = ("code",)
    message = False
    revert = True

    def __init__(self, code):
        self.code = code

    def record(self, resp, rr):
        pass

    def apply(self, opts):
        for i, (c, _) in enumerate(opts):
            if c == self.code:
                del opts[i]
                return


class RestoreOption:
    """Revert of a replaced option: put the old data back."""

    __slots__ = ("code", "data")
    message = False
    revert = True

    def __init__(self, code, data):
        self.code = code
        self.data = data

    def record(self, resp, rr):
        pass

    def apply(self, opts):
        for i, (c, _) in enumerate(opts):
            if c == self.code:
                opts[i] = (c, self.data)
                return


def _unset(opts, code):
    opts[:] = [o for o in opts if o[0] != code]


def _put(opts, code, data, action, revert, typed):
    """Edit ``opts`` for set/append/replace; the revert rules, or None
    when nothing was done.  ``typed`` options (NSID, subnet) stop the
    search at the first option of their code whatever the action."""
    for i, (c, old) in enumerate(opts):
        if c != code or (not typed and c in _TYPED):
            continue
        if action in (REPLACE, SET):
            opts[i] = (code, data)
            return [RestoreOption(code, old)] if revert else []
        if typed:
            return None
    if action in (APPEND, SET):
        opts.append((code, data))
        return [RemoveOption(code)] if revert else []
    return None


class LocalRule(Rule):

    def __init__(self, mode, action, code, data, revert):
        super().__init__(mode)
        self.action = action
        self.code = code
        self.data = data
        self.revert = revert

    def apply(self, st, hit):
        opts = st.options()
        if self.action == UNSET:
            _unset(opts, self.code)
            return []
        return _put(opts, self.code, self.data, self.action, self.revert,
                    False)


class NsidRule(Rule):
    """An empty NSID option (asks the next server for its NSID)."""

    def __init__(self, mode, action, revert):
        super().__init__(mode)
        self.action = action
        self.revert = revert

    def apply(self, st, hit):
        opts = st.options()
        if self.action == UNSET:
            _unset(opts, NSID)
            return []
        for i, (c, old) in enumerate(opts):
            if c == NSID and self.action in (REPLACE, SET):
                opts[i] = (NSID, b"")
                return [RestoreOption(NSID, old)] if self.revert else []
        if self.action in (APPEND, SET):
            opts.append((NSID, b""))
            return [RemoveOption(NSID)] if self.revert else []
        return None


class VariableRule(Rule):
    """A local option whose data comes from the query: its name, type,
    addresses, ports, protocol, or a metadata label."""

    def __init__(self, mode, action, code, variable, revert):
        super().__init__(mode)
        self.action = action
        self.code = code
        self.variable = variable
        self.revert = revert

    def apply(self, st, hit):
        data = variable_data(self.variable, st)
        if not data:
            return None
        opts = st.options()
        for i, (c, old) in enumerate(opts):
            if c == self.code and c not in _TYPED:
                if self.action not in (REPLACE, SET):
                    return None
                opts[i] = (c, data)
                return [RestoreOption(c, old)] if self.revert else []
        if self.action in (APPEND, SET):
            opts.append((self.code, data))
            return [RemoveOption(self.code)] if self.revert else []
        return None


class SubnetRule(Rule):
    """An EDNS0 client subnet option made from the client's address cut
    to the configured prefix length."""

    def __init__(self, mode, action, v4, v6, revert):
        super().__init__(mode)
        self.action = action
        self.v4 = v4
        self.v6 = v6
        self.revert = revert

    def apply(self, st, hit):
        opts = st.options()
        if self.action == UNSET:
            _unset(opts, SUBNET)
            return []
        data = self.ecs(st.req)
        if data is None:
            return None
        return _put(opts, SUBNET, data, self.action, self.revert, True)

    def ecs(self, req):
        """Wire data of the option for the query's client."""
        try:
            ip = ipaddress.ip_address(req.client.split("%")[0])
        except ValueError:
            return None
        if req.family == 1:
            bits = self.v4
            if isinstance(ip, ipaddress.IPv6Address):
                mapped = ip.ipv4_mapped
                if mapped is None:
                    return None
                ip = mapped
        else:
            bits = self.v6
            if ip.version == 4:
                ip = ipaddress.IPv6Address("::ffff:" + str(ip))
        net = ipaddress.ip_network("%s/%d" % (ip, bits), strict=False)
        addr = net.network_address.packed[:(bits + 7) // 8]
        return struct.pack("!HBB", req.family, bits, 0) + addr


def _ip_wire(family, host):
    """The address as CoreDNS's ipToWire writes it: 4 bytes for an IPv4
    query, 16 for IPv6; None when it has no such form."""
    if not host:
        return None
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
    if family == 1:
        if ip.version == 4:
            return ip.packed
        v4 = ip.ipv4_mapped
        return v4.packed if v4 is not None else None
    if ip.version == 4:
        return ipaddress.IPv6Address("::ffff:" + str(ip)).packed
    return ip.packed


def variable_data(variable, st):
    """Bytes for a ``{variable}``; None (the rule is skipped) when there
    is no value."""
    req = st.req
    if variable == "{qname}":
        return st.name.encode("utf-8")
    if variable == "{qtype}":
        return _H.pack(st.qtype)
    if variable == "{client_ip}":
        return _ip_wire(req.family, req.client)
    if variable == "{server_ip}":
        return _ip_wire(req.family, req.local[0] if req.local else None)
    if variable == "{client_port}":
        return _H.pack(req.port & 0xFFFF)
    if variable == "{server_port}":
        return _H.pack(req.local[1] & 0xFFFF) if req.local else None
    if variable == "{protocol}":
        return req.proto.encode("ascii")
    value = metadata.value(req, variable[1:-1])
    return value.encode("utf-8") if value else None


def _code(text):
    try:
        c = int(text, 0)
    except ValueError as e:
        raise ValueError(goparse.num_error(
            "ParseUint", text, "invalid syntax")) from e
    if not 0 <= c <= 0xFFFF:
        raise ValueError(goparse.num_error(
            "ParseUint", text, "value out of range"))
    return c


def _data(text):
    if text.startswith("0x"):
        try:
            return bytes.fromhex(text[2:])
        except ValueError as e:
            raise ValueError("encoding/hex: invalid byte in %r" % text) from e
    return text.encode("utf-8")


def _bits(text, limit, family):
    try:
        v = int(text, 0)
    except ValueError as e:
        raise ValueError(goparse.num_error(
            "ParseUint", text, "invalid syntax")) from e
    if v < 0:
        raise ValueError(goparse.num_error(
            "ParseUint", text, "invalid syntax"))
    if v > limit:
        raise ValueError("invalid %s bit mask length %d" % (family, v))
    return v


def _valid_variable(v):
    return v in VARIABLES or (v.startswith("{") and v.endswith("}")
                              and metadata.is_label(v[1:-1]))


def _unset_rule(mode, kind, args):
    if kind == "local":
        if len(args) != 3:
            raise ValueError("local unset action requires exactly two "
                             "arguments")
        return LocalRule(mode, UNSET, _code(args[2]), b"", False)
    if kind == "nsid":
        if len(args) != 2:
            raise ValueError("nsid unset action requires exactly one "
                             "argument")
        return NsidRule(mode, UNSET, False)
    if kind == "subnet":
        if len(args) != 2:
            raise ValueError("subnet unset action requires exactly one "
                             "argument")
        return SubnetRule(mode, UNSET, 0, 0, False)
    raise ValueError('invalid rule type "%s"' % kind)


def new_rule(mode, args):
    """A rule from the arguments after ``edns0``."""
    if len(args) < 2:
        raise ValueError("too few arguments for an EDNS0 rule")
    kind, action = args[0].lower(), args[1].lower()
    if action not in ACTIONS:
        raise ValueError('invalid action: "%s"' % action)
    if action == UNSET:
        return _unset_rule(mode, kind, args)
    revert = args[-1] == "revert"
    if revert:
        args = args[:-1]
    if kind == "local":
        if len(args) != 4:
            raise ValueError("EDNS0 local rules require three or four args")
        code = _code(args[2])
        if args[3].startswith("{") and args[3].endswith("}"):
            if not _valid_variable(args[3]):
                raise ValueError('unsupported variable name "%s"' % args[3])
            request.support_option(code)
            return VariableRule(mode, action, code, args[3], revert)
        data = _data(args[3])
        request.support_option(code)
        return LocalRule(mode, action, code, data, revert)
    if kind == "nsid":
        if len(args) != 2:
            raise ValueError("EDNS0 NSID rules can accept no more than one "
                             "arg")
        return NsidRule(mode, action, revert)
    if kind == "subnet":
        if len(args) != 4:
            raise ValueError("EDNS0 subnet rules require three or four args")
        return SubnetRule(mode, action, _bits(args[2], 32, "IPv4"),
                          _bits(args[3], 128, "IPv6"), revert)
    raise ValueError('invalid rule type "%s"' % kind)
