"""What plugins read of the host they run on: its name (chaos's
hostname.bind, nsid's default) and the search list of its resolv.conf
(autopath, kubernetes's pod search paths)."""

import socket

from corednstw.core.names import normalize


def hostname():
    """The host's name as Go's os.Hostname gives it, ``localhost`` when
    there is none."""
    try:
        return socket.gethostname() or "localhost"
    except OSError:
        return "localhost"


def read_search(path):
    """The search list of a resolv.conf file, as miekg/dns reads it
    (the last ``search`` or ``domain`` line wins), normalised to
    lower-case FQDNs.  Raises OSError."""
    search = []
    with open(path) as f:
        for line in f:
            if line[:1] in (";", "#"):
                continue
            fields = line.split()
            if not fields:
                continue
            if fields[0] == "domain":
                search = fields[1:2]
            elif fields[0] == "search":
                search = fields[1:]
    out = []
    for s in search:
        out.extend(normalize(s) or [s])
    return out
