"""nsid: the server's identifier in the NSID EDNS0 option (RFC 5001).

``nsid [DATA]`` (default: the host name).  Only queries that carry an NSID
option get one back; its payload is DATA's bytes (dig shows them in hex).
"""

from corednstw.core import dnswire as w
from corednstw.core import request
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import (
    NoReply,
    Response,
    parse_response,
    unwritten,
)
from corednstw.engines.system import hostname

NSID = 3


class Nsid(Plugin):
    name = "nsid"

    def __init__(self, data):
        self.data = data
        self.payload = data.encode("utf-8")

    def serve(self, req):
        edns = req.edns
        if edns is None or edns.option(NSID) is None:
            return self.next.serve(req)
        return then(self.next.serve(req), self._add, req)

    def _add(self, resp, req):
        if resp is None or resp.wire == b"" or isinstance(resp, NoReply):
            return resp     # nothing is sent, nothing to add to
        if unwritten(resp):
            return resp     # written by the server, around the plugins
        if resp.raw is not None:
            # An upstream's message: decode it so its OPT can be changed.
            out = parse_response(resp.finish(req), req)
            out.plugin = resp.plugin
        else:
            out = Response(resp.rcode, resp.answer, resp.authority,
                           resp.additional, plugin=resp.plugin,
                           flags=resp.flags)
            out.opt = resp.opt
        edns = req.edns
        if out.opt is not None:
            options = list(out.opt.options)
        else:
            options = [o for o in edns.options
                       if o[0] in request.SUPPORTED_OPTIONS]
        item = (NSID, self.payload)
        for i, (code, _) in enumerate(options):
            if code == NSID:
                options[i] = item
                break
        else:
            options.append(item)
        out.opt = w.EDNS(edns.size, edns.ttl, options)
        return out


def setup(d, block):
    d.no_block()
    return Nsid(" ".join(d.args) if d.args else hostname())
