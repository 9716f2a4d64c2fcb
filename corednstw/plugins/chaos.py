"""chaos: TXT answers in the CH class (version.bind, hostname.bind, ...).

``chaos [VERSION] [AUTHORS...]``.  Only CH-class TXT queries for the five
well-known names are answered; everything else goes to the next plugin.
The mux accepts non-IN classes only on listeners where a block has chaos.
"""

import random
import time

from corednstw import COREDNS_VERSION
from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin
from corednstw.core.request import Response
from corednstw.engines.system import hostname

#: The GitHub handles CoreDNS lists as its maintainers (its default
#: authors.bind answer).
OWNERS = (
    "Tantalor93", "bradbeam", "chrisohaver", "darshanime", "dilyevsky",
    "ekleiner", "greenpau", "houyuwushang", "ihac", "inigohu", "isolus",
    "jameshartig", "johnbelamaric", "miekg", "mqasimsarfraz", "nchrisdk",
    "nitisht", "pmoroney", "rajansandeep", "rdrozhdzh", "rtreffer",
    "snebel29", "stp-ip", "superq", "thevilledev", "varyoo", "ykhr53",
    "yongtang", "zouyee",
)

_VERSION_NAMES = frozenset(("version.bind.", "version.server."))
_HOST_NAMES = frozenset(("hostname.bind.", "id.server."))


def _trim(s):
    """A TXT character-string holds at most 255 bytes."""
    b = s.encode("utf-8")
    return b if len(b) < 256 else b[:255]


class Chaos(Plugin):
    name = "chaos"

    def __init__(self, version, authors):
        self.version = version
        self.authors = list(authors)
        self._version_rdata = w.txt_rdata(_trim(version))
        self._author_rdata = [w.txt_rdata(_trim(a)) for a in self.authors]

    def serve(self, req):
        if req.qclass != w.CLASS_CH or req.qtype != w.TXT:
            return self.next.serve(req)
        q = req.qname
        owner = req.name
        if q in _VERSION_NAMES:
            answer = [w.RR(owner, w.TXT, 0, self._version_rdata, w.CLASS_CH)]
        elif q in _HOST_NAMES:
            answer = [w.RR(owner, w.TXT, 0, w.txt_rdata(_trim(hostname())),
                           w.CLASS_CH)]
        elif q == "authors.bind.":
            # A fresh order every second, as CoreDNS seeds its shuffle with
            # the current Unix time.
            order = list(range(len(self._author_rdata)))
            random.Random(int(time.time())).shuffle(order)
            answer = [w.RR(owner, w.TXT, 0, self._author_rdata[i], w.CLASS_CH)
                      for i in order]
        else:
            return self.next.serve(req)
        return Response(w.NOERROR, answer, plugin=self.name)


def setup(d, block):
    """``chaos [VERSION] [AUTHORS...]``: no block."""
    d.no_block()
    args = d.args
    if not args:
        return Chaos("CoreDNS-" + COREDNS_VERSION, OWNERS)
    if len(args) == 1:
        return Chaos(args[0], OWNERS)
    return Chaos(args[0], sorted(set(args[1:])))
