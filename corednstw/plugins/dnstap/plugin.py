"""The dnstap plugin: taps client queries and responses in the chain and
offers forwarders the IForwarderTap interface."""

import time

from zope.interface import implementer

from corednstw.core.interfaces import IForwarderTap
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import NoReply
from corednstw.plugins.dnstap.framestream import NAME
from corednstw.plugins.dnstap.message import (
    CLIENT_QUERY,
    CLIENT_RESPONSE,
    FORWARDER_QUERY,
    FORWARDER_RESPONSE,
    encode_message,
    envelope_head,
    envelope_tail,
)


def _now():
    return time.time_ns()


@implementer(IForwarderTap)
class Dnstap(Plugin):
    """One ``dnstap`` line: a tap in the chain and its output."""

    name = NAME
    once = False

    def __init__(self, output, full, identity, version, extra):
        self.output = output
        self.full = full
        self.identity = identity
        self.version = version
        self.extra_format = extra
        self.head = envelope_head(identity, version)
        self._extra = None          # compiled pieces when it has placeholders
        self._extra_const = None
        if extra:
            self._compile_extra(extra)

    def _compile_extra(self, fmt):
        from corednstw.plugins.log import compile_format, unanswered
        pieces = compile_format(fmt)
        if all(isinstance(p, str) for p in pieces):
            self._extra_const = "".join(pieces).encode()
            return
        # No response is known to the replacer here: CoreDNS writes "-"
        # for the response placeholders in dnstap's extra.
        self._extra = unanswered(pieces)

    def extra(self, req):
        if self._extra_const is not None:
            return self._extra_const
        if self._extra is None or req is None:
            return None
        from corednstw.plugins.log import render
        return render(self._extra, req, None, 0.0).encode()

    def tap(self, message, req=None):
        """Send one encoded dnstap.Message (TapMessageWithMetadata)."""
        self.output.send(self.head + envelope_tail(message,
                                                   self.extra(req)))

    # -- the chain ------------------------------------------------------------

    def serve(self, req):
        qtime = _now()
        self.tap(encode_message(
            CLIENT_QUERY, req.proto, (req.client, req.port), None, qtime,
            None, req.data if self.full else None), req)
        return then(self.next.serve(req), self._response, req, qtime)

    def _response(self, resp, req, qtime):
        if resp is None or resp.__class__ is NoReply:
            return resp     # nothing written to the client
        rmsg = resp.finish(req) if self.full else None
        self.tap(encode_message(
            CLIENT_RESPONSE, req.proto, (req.client, req.port), None, qtime,
            _now(), None, rmsg), req)
        return resp

    # -- the interface for forwarders -----------------------------------------

    def tap_forwarder_query(self, req, upstream, wire=None, proto="udp",
                            local=None, start=None):
        """A FORWARDER_QUERY: ``req`` (for extra), ``upstream`` (host,
        port), ``wire`` the query bytes sent (kept only with ``full``),
        ``proto`` 'udp' or 'tcp', ``local`` our (host, port) of that
        socket if known, ``start`` the send time in ns (default now)."""
        if start is None:
            start = _now()
        self.tap(encode_message(
            FORWARDER_QUERY, proto, local, upstream, start, None,
            wire if self.full else None), req)
        return start

    def tap_forwarder_response(self, req, upstream, wire=None, proto="udp",
                               local=None, start=None):
        """A FORWARDER_RESPONSE for the reply ``wire`` from ``upstream``;
        ``start`` is the query's send time in ns (from
        ``tap_forwarder_query``)."""
        self.tap(encode_message(
            FORWARDER_RESPONSE, proto, local, upstream, start, _now(), None,
            wire if self.full else None), req)

    # -- life cycle -----------------------------------------------------------

    def start(self):
        self.output.start(self.reactor)

    def stop(self):
        return self.output.stop()
