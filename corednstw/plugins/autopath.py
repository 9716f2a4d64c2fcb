"""autopath: server-side search path completion (CoreDNS's autopath).

``autopath [ZONE...] RESOLV-CONF``: the search path comes from a
resolv.conf-like file, or, written ``@NAME``, from the block's plugin
NAME for each query (``@kubernetes``: the search path of the client's
pod, through ``IAutoPather``).

A query whose name ends in the client's first search domain is the first
try of a client walking its search path.  The server walks the rest of
it at once: the part left of that domain joined to each search domain in
turn, the last one empty (the name as the client would finally send it),
through the rest of the chain.  The first answer that is not NXDOMAIN
(NODATA stops the walk too) goes back to the client, led by a CNAME from
the name asked to the name found.  When every try is NXDOMAIN the answer
of the first try is sent and the client walks on by itself.
"""

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.interfaces import IAutoPather
from corednstw.core.plugin import Plugin, is_deferred, match, zones_from_args
from corednstw.core.request import (
    NoReply,
    RawResponse,
    Response,
    parse_response,
)
from corednstw.engines.system import read_search

NAME = "autopath"

SUCCESS = metrics.counter(
    "coredns_autopath_success_total",
    "Counter of requests that did autopath.", ("server",))


class AutoPath(Plugin):
    """The walk; ``search`` from a file, or ``pather`` (an IAutoPather
    found at start) per query."""

    name = NAME

    def __init__(self, zones, search, source=""):
        self.zones = zones
        self.search = search        # [] with ``@NAME``
        self.source = source        # NAME of ``@NAME``, or ""
        self.pather = None

    def start(self):
        """Find the ``@NAME`` plugin once every plugin exists (CoreDNS
        does this at start-up too); a block without it walks nothing."""
        if not self.source:
            return
        p = self.block.plugin(self.source)
        if p is None:
            return
        if not IAutoPather.providedBy(p):
            raise ValueError("plugin/autopath: %s does not implement the "
                             "AutoPather interface" % self.source)
        self.pather = p

    def serve(self, req):
        qname = req.qname
        if match(self.zones, qname) is None:
            return self.next.serve(req)
        search = self.search
        if self.pather is not None:
            search = self.pather.autopath(req)
        if not search or not _in_domain(qname, search[0]):
            return self.next.serve(req)
        first = search[0]
        if first not in ("", ".") and qname == first:
            # CoreDNS's TrimZone refuses to trim a name down to nothing.
            r = Response(w.SERVFAIL)
            r.error = ("plugin/autopath: trimzone: overshot qname: %sfor "
                       "zone %s" % (req.name, first))
            return r
        base = req.name[:len(req.name) - len(first) - 1]
        if first in ("", "."):
            base = req.name[:-1]
        return self._walk(req, search, base, 0, None)

    def _walk(self, req, search, base, i, first):
        """Try the search domains from ``i`` on; ``first`` holds the
        answer of the first try once there is one."""
        serve = self.next.serve
        while i < len(search):
            # The first try is the name asked: no copy of the request.
            resp = serve(req if i == 0 else
                         req.copy(qname=_join(base, search[i])))
            if is_deferred(resp):
                return resp.addCallback(self._resume, req, search, base, i,
                                        first)
            done, first = self._judge(resp, req, i, first)
            if done is not None:
                return done
            i += 1
        return _relabel(first)

    def _resume(self, resp, req, search, base, i, first):
        done, first = self._judge(resp, req, i, first)
        if done is not None:
            return done
        return self._walk(req, search, base, i + 1, first)

    def _judge(self, resp, req, i, first):
        """(the answer to send now or None, the first try's answer)."""
        if resp is not None and resp.error:
            return resp, first      # an error ends the walk as it is
        if i == 0:
            first = resp
        if resp is None or resp.rcode == w.NXDOMAIN:
            return None, first
        SUCCESS.inc((req.server,))
        if i == 0 and resp.raw is None and _owned(resp, req.qname):
            return _relabel(resp), first
        return cnamed(resp, req.name), first


def cnamed(resp, original):
    """``resp`` as the answer to ``original``: a CNAME from it to the
    owner of the first answer record that is not ``original`` leads the
    answer section (CoreDNS's cnamer).  A new Response: the one found may
    be shared (a cache's, a plugin's ready-made answer)."""
    if resp.raw is not None:
        parsed = parse_response(resp.raw)
        parsed.error = resp.error
        resp = parsed
    answer = list(resp.answer)
    low = original.lower()
    for rr in answer:
        if rr.name.lower() != low:
            answer.insert(0, w.RR(original, w.CNAME, rr.ttl,
                                  w.name_to_wire(rr.name)))
            break
    out = Response(resp.rcode, answer, list(resp.authority),
                   list(resp.additional), plugin=NAME, flags=resp.flags)
    out.opt = resp.opt
    out.error = resp.error
    return out


def _owned(resp, qname):
    """Every answer record is owned by ``qname``: cnamer adds nothing."""
    for rr in resp.answer:
        if rr.name.lower() != qname:
            return False
    return True


def _relabel(resp):
    """The first try's answer, sent by autopath (the plugin label of
    CoreDNS's metrics), without touching an object others may hold."""
    if resp is None or isinstance(resp, NoReply) or resp.plugin == NAME:
        return resp
    out: Response
    if resp.raw is not None:
        out = RawResponse.prebuilt(resp.raw, NAME)
    else:
        out = Response(resp.rcode, resp.answer, resp.authority,
                       resp.additional, plugin=NAME, flags=resp.flags)
        out.opt = resp.opt
    out.error = resp.error
    return out


def _in_domain(qname, first):
    """CoreDNS's firstInSearchPath: ``qname`` is, or is below, ``first``
    (an empty or root domain holds every name)."""
    if first in ("", "."):
        return True
    return names.in_zone(qname, first)


def _join(base, domain):
    if domain in ("", "."):
        return base + "."
    return base + "." + domain


def setup(d, block):
    """``autopath [ZONES...] RESOLV-CONF|@PLUGIN``: no block."""
    *zones, resolv = d.between(1, error="no resolv-conf specified")
    zones = zones_from_args(zones, block)
    d.no_block()
    if resolv.startswith("@"):
        return AutoPath(zones, [], resolv[1:])
    try:
        search = read_search(block.path(resolv))
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise d.error('failed to parse "%s": open %s: %s'
                      % (resolv, resolv, why)) from e
    return AutoPath(zones, search + [""])
