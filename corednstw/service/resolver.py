"""The chain as a twisted.names IResolver: corednstw inside a Twisted
program.

The server itself talks to chains through ``serve(request)``, which sees
the whole query.  Code that uses twisted.names (``lookupAddress`` and
friends) can use a Corefile's chain through ``ChainResolver``: each lookup
is a query through the configuration's own blocks (``IServer.lookup``,
with every plugin of the chain: rewrite, cache, file, forward, ...),
decoded into twisted.names records.  ``ChainResolver.from_corefile``
builds such a chain from a Corefile without opening any DNS socket::

    from corednstw.service.resolver import ChainResolver

    @defer.inlineCallbacks
    def main(reactor):
        resolver = yield ChainResolver.from_corefile(
            "example.org {\\n    file db.example.org\\n}\\n")
        answers, _, _ = yield resolver.lookupAddress("www.example.org")
        yield resolver.stop()

This is not on any hot path: a lookup decodes the answer with Twisted's
message parser.  See docs/embedding.md.
"""

from twisted.internet import defer
from twisted.names import common, error
from twisted.names import dns as tdns

from corednstw.core.request import Request, encode, make_query


class ChainResolver(common.ResolverBase):
    """An IResolver answering from a server's blocks (an IServer: a
    running App, or one built in process by ``from_corefile``)."""

    def __init__(self, server, owned=False):
        common.ResolverBase.__init__(self)
        self.server = server
        self._owned = owned

    @classmethod
    def from_corefile(cls, text=None, path=None, reactor=None):
        """A Deferred of a ChainResolver over the Corefile ``text`` (or
        the file ``path``): every plugin set up and started as the server
        does, HTTP endpoints (prometheus, health, ...) left closed and no
        DNS socket opened; queries enter the chain through its block mux.
        ``stop()`` stops the plugins.  A broken Corefile fails the
        Deferred with the CorefileError the server would print."""
        from corednstw.service.app import App
        app = App(path, reactor=reactor, text=text)
        try:
            d = app.start_in_process()
        except Exception:
            return defer.fail()
        return defer.maybeDeferred(lambda: d).addCallback(
            lambda _: cls(app, owned=True))

    def stop(self):
        """Stop the plugins of a chain ``from_corefile`` started (a
        resolver over someone else's server leaves it running)."""
        if not self._owned:
            return defer.succeed(None)
        return defer.maybeDeferred(self.server.stop_in_process)

    def _lookup(self, name, cls, type, timeout=None):
        if isinstance(name, bytes):
            name = name.decode("ascii")
        d = self.server.lookup(name if name.endswith(".") else name + ".",
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
