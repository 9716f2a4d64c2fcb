"""The interface holding node-cache's local addresses.

As node-cache: a dummy interface (``nodelocaldns`` by default) created
with the addresses, addresses re-added when the interface exists, the
interface deleted on exit.  Where the kernel has no dummy driver (``ip
link add ... type dummy`` answers "Unknown device type"), the addresses
go on the loopback interface instead, which the kernel treats the same way
for local delivery, and only the addresses added here are removed on exit.
Done with ``ip`` (iproute2, in the image) rather than a netlink library.
"""

import ipaddress
import subprocess

from corednstw.core import logger

LOOPBACK = "lo"


class NetifError(Exception):
    pass


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True,
                           check=False)


def _prefix(ip):
    return "%s/%d" % (ip, ipaddress.ip_address(ip).max_prefixlen)


class Netif:
    def __init__(self, ips, name):
        self.ips = list(ips)
        self.name = name
        #: The addresses put on loopback (no dummy driver), ours to remove.
        self.on_loopback = []
        self.no_dummy = False

    def exists(self):
        return _ip("link", "show", "dev", self.name).returncode == 0

    def _add_addresses(self, dev):
        """Add each address to ``dev``; the ones that were not there."""
        added = []
        for ip in self.ips:
            r = _ip("addr", "add", _prefix(ip), "dev", dev)
            if r.returncode == 0:
                added.append(ip)
            elif "File exists" not in r.stderr \
                    and "already assigned" not in r.stderr:
                raise NetifError(r.stderr.strip())
        return added

    def ensure(self):
        """Make sure the addresses are held; whether the interface was
        there already (NetifError when it could not be set up)."""
        if self.no_dummy:
            self.on_loopback += self._add_addresses(LOOPBACK)
            return True
        if self.exists():
            self._add_addresses(self.name)
            return True
        r = _ip("link", "add", self.name, "type", "dummy")
        if r.returncode != 0:
            if "Unknown device type" not in r.stderr \
                    and "not supported" not in r.stderr:
                raise NetifError(r.stderr.strip())
            self.no_dummy = True
            logger.warning("", "Kernel has no dummy interfaces (%s): "
                           "holding %s on %s instead of %s"
                           % (r.stderr.strip(), " ".join(self.ips),
                              LOOPBACK, self.name))
            self.on_loopback += self._add_addresses(LOOPBACK)
            return True     # said above: not "Added interface"
        self._add_addresses(self.name)
        up = _ip("link", "set", self.name, "up")
        if up.returncode != 0:
            raise NetifError(up.stderr.strip())
        return False

    def remove(self):
        """Delete the interface (or the loopback addresses added here)."""
        while self.on_loopback:
            ip = self.on_loopback.pop()
            r = _ip("addr", "del", _prefix(ip), "dev", LOOPBACK)
            if r.returncode != 0:
                raise NetifError(r.stderr.strip())
        if self.no_dummy:
            return
        r = _ip("link", "del", self.name)
        if r.returncode != 0:
            raise NetifError(r.stderr.strip())
