"""Kubernetes query names: splitting the part left of the zone (CoreDNS's
parse.go, recordRequest) and reading addresses out of reverse names."""

import ipaddress

# Outcomes of a lookup besides a list of entries.
NAME_ERROR = "nxdomain"


class Request:
    """A parsed query name (CoreDNS's recordRequest)."""

    __slots__ = ("port", "protocol", "endpoint", "cluster", "service",
                 "namespace", "kind", "zone", "prefer")

    def __init__(self):
        self.port = self.protocol = self.endpoint = self.cluster = ""
        self.service = self.namespace = self.kind = self.zone = ""
        self.prefer = False


def parse_request(base, multicluster, zonal):
    """Split the part of the name left of the zone; NAME_ERROR if it
    cannot be a Kubernetes name."""
    r = Request()
    if base == "" or base == "svc" or base == "pod":
        return r
    segs = base.split(".")
    last = len(segs) - 1
    r.kind = segs[last]
    if r.kind != "pod" and r.kind != "svc":
        return NAME_ERROR
    last -= 1
    if last < 0:
        return r
    r.namespace = segs[last]
    last -= 1
    if last < 0:
        return r
    r.service = segs[last]
    last -= 1
    if last < 0:
        return r
    if last == 0:
        r.endpoint = segs[0]
    elif last == 1:
        if (not multicluster or segs[1].startswith("_")
                or segs[0].startswith("_")):
            r.protocol = _strip(segs[1])
            r.port = _strip(segs[0])
        else:
            r.cluster = segs[1]
            r.endpoint = segs[0]
    else:
        if (not zonal or multicluster or segs[last] != "_zone"
                or r.kind != "svc"):
            return NAME_ERROR
        d = segs[last - 1]
        if d == "prefer":
            r.prefer = True
        elif d != "pin":
            return NAME_ERROR
        r.zone = ".".join(segs[:last - 1])
    return r


def _strip(s):
    return s[1:] if s.startswith("_") else s


def port_ok(r, p):
    """The port name and protocol asked for (if any) match ``p``."""
    return ((not r.port or r.port == p[0])
            and (not r.protocol or r.protocol == p[1]))


def reverse_address(qname):
    """The address of a complete reverse name, or "" (CoreDNS's
    dnsutil.ExtractAddressFromReverse)."""
    if qname.endswith(".in-addr.arpa."):
        labels = qname[:-len(".in-addr.arpa.")].split(".")
        if len(labels) != 4:
            return ""
        text = ".".join(reversed(labels))
    elif qname.endswith(".ip6.arpa."):
        labels = qname[:-len(".ip6.arpa.")].split(".")
        if len(labels) != 32:
            return ""
        nib = "".join(reversed(labels))
        text = ":".join(nib[i:i + 4] for i in range(0, 32, 4))
    else:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return ""


def is_reverse(name):
    return name.endswith(".in-addr.arpa.") or name.endswith(".ip6.arpa.")
