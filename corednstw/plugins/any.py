"""any: a short HINFO answer to every ANY query (RFC 8482)."""

from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin
from corednstw.core.request import Response

_HINFO = w.txt_rdata("ANY obsoleted", "See RFC 8482")
TTL = 8482


class Any(Plugin):
    name = "any"
    passes_answers = True

    def serve(self, req):
        if req.qtype != w.ANY:
            return self.next.serve(req)
        return Response(w.NOERROR, [w.RR(req.name, w.HINFO, TTL, _HINFO)],
                        plugin=self.name)


def setup(d, block):
    """``any``: no arguments, no block."""
    d.no_args()
    d.no_block()
    return Any()
