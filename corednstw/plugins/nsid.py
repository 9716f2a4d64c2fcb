"""nsid: the server's identifier in the NSID EDNS0 option (RFC 5001).

``nsid [DATA]`` (default: the host name).  Only queries that carry an NSID
option get one back; its payload is DATA's bytes (dig shows them in hex).
"""

import struct

from corednstw.core import dnswire as w
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
            # An upstream's message: decode it so its OPT can be changed
            # (that OPT, or none: finish would add the query's echo).
            out = parse_response(resp.finish(req), req)
            out.plugin = resp.plugin
            out.opt = _own_opt(resp.raw, out.opt)
        else:
            out = Response(resp.rcode, resp.answer, resp.authority,
                           resp.additional, plugin=resp.plugin,
                           flags=resp.flags)
            out.opt = resp.opt
        edns = req.edns
        # An answer without an OPT record gets a new one holding NSID
        # alone, as CoreDNS's SetEdns0: the query's other options (COOKIE,
        # EXPIRE, KEEPALIVE) are not echoed then.
        options = list(out.opt.options) if out.opt is not None else []
        item = (NSID, self.payload)
        for i, (code, _) in enumerate(options):
            if code == NSID:
                options[i] = item
                break
        else:
            options.append(item)
        out.opt = w.EDNS(edns.size, edns.ttl, options)
        return out


def _own_opt(raw, opt):
    """``opt`` when the upstream's message ``raw`` carries an OPT record
    itself, else None."""
    try:
        return opt if parse_response(raw).opt is not None else None
    except (w.FormatError, struct.error, ValueError):
        return opt


def setup(d, block):
    d.no_block()
    return Nsid(" ".join(d.args) if d.args else hostname())
