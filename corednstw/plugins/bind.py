"""bind: the addresses (or interfaces) a server block listens on.

``bind ADDRESS|IFACE ... [{ except ADDRESS|IFACE ... }]``.  Interface names
expand to their addresses; ``except`` removes addresses.  Repeated bind
lines add up, as in CoreDNS.
"""

import ipaddress
import socket

from corednstw.core import goparse
from corednstw.core.plugin import Plugin


class Bind(Plugin):
    name = "bind"
    in_chain = False
    once = False
    #: every address the block listens on (also block.bind)
    addresses: list[str]


def interface_addresses(name):
    """IPv4 and IPv6 addresses of interface ``name`` ([] if none)."""
    out = []
    try:
        import fcntl
        import struct
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                 struct.pack("256s", name[:15].encode()))
            out.append(socket.inet_ntoa(packed[20:24]))
        finally:
            s.close()
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == name:
                    h = parts[0]
                    addr = ":".join(h[i:i + 4] for i in range(0, 32, 4))
                    ip = ipaddress.ip_address(addr)
                    if ip.is_link_local:
                        out.append("%s%%%s" % (ip, name))
                    else:
                        out.append(str(ip))
    except OSError:
        pass
    return out


def _known_interfaces():
    try:
        return {n for _, n in socket.if_nameindex()}
    except OSError:
        return set()


def _expand(d, items):
    """Addresses for each argument: an IP as is, an interface expanded."""
    ifaces = None
    out = []
    for a in items:
        try:
            out.append(str(ipaddress.ip_address(a.split("%")[0])) +
                       ("%" + a.split("%")[1] if "%" in a else ""))
            continue
        except ValueError:
            pass
        if ifaces is None:
            ifaces = _known_interfaces()
        if a not in ifaces:
            raise d.error("not a valid IP address or interface name: %s"
                          % goparse.quote(a))
        out.extend(interface_addresses(a))
    return out


def setup(d, block):
    """``bind ADDRESS|IFACE... [{ except ADDRESS|IFACE... }]``."""
    addrs = _expand(d, d.between(1))
    excluded = []

    # An unknown option is reported at the bind line, as in CoreDNS.
    d.read_options({
        "except": lambda c: excluded.extend(_expand(d, c.between(1))),
    }, unknown_here=True)
    current = block.bind or []
    for a in addrs:
        if a not in current and a not in excluded:
            current.append(a)
    if not current:
        raise d.error("no address left to bind after 'except'")
    block.bind = current
    p = Bind()
    p.addresses = current
    return p
