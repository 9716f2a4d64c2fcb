"""The chain as a twisted.names IResolver.

The server itself talks to chains through ``serve(request)``, which sees
the whole query.  Code that uses twisted.names (``lookupAddress`` and
friends) can use a configuration through ``ChainResolver``: each lookup is a
query through the server's own blocks (App.lookup), decoded into
twisted.names records.  This is not on any hot path.
"""

from twisted.internet import defer
from twisted.names import common, error
from twisted.names import dns as tdns

from corednstw.core.request import Request, encode, make_query


class ChainResolver(common.ResolverBase):
    """An IResolver answering from a running App's blocks."""

    def __init__(self, app):
        common.ResolverBase.__init__(self)
        self.app = app

    def _lookup(self, name, cls, type, timeout=None):
        if isinstance(name, bytes):
            name = name.decode("ascii")
        d = self.app.lookup(name if name.endswith(".") else name + ".",
                            type, cls)
        return d.addCallback(self._convert, name, cls, type)

    def _convert(self, resp, name, cls, type):
        if resp is None:
            return defer.fail(error.DNSServerError(name))
        req = Request(make_query(name, type, cls), "127.0.0.1", 0, "tcp")
        qd, an, ns, ar = req.parse_header()
        req.parse_question(an, ns, ar)
        msg = tdns.Message()
        msg.fromStr(encode(req, resp))
        if msg.rCode == tdns.OK:
            return (msg.answers, msg.authority, msg.additional)
        return defer.fail(_ERRORS.get(msg.rCode, error.DNSUnknownError)(msg))


_ERRORS = {
    tdns.EFORMAT: error.DNSFormatError,
    tdns.ESERVER: error.DNSServerError,
    tdns.ENAME: error.DomainError,
    tdns.ENOTIMP: error.DNSNotImplementedError,
    tdns.EREFUSED: error.DNSQueryRefusedError,
}
