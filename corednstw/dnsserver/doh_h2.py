"""DNS over HTTPS on HTTP/2, on the listeners' own HTTP/2 server
(``http2``).

A DoH listener needs little of HTTP/2: one path, GET or POST, a small
answer.  Each finished stream goes to the listener's
``DoHResource.query`` (the same rules, statuses and metrics as HTTP/1.1)
and the answer is one HEADERS frame (fields encoded without Huffman or
indexing, cached) and one DATA frame.  Of a client's headers only
``:method`` and ``:path`` are read (anything else, valid or not, is
ignored; a request without them gets 404/400), as before with ``h2``'s
validation turned off.
"""

import time
from email.utils import formatdate

from corednstw.dnsserver import doh, hpack_codec
from corednstw.dnsserver import http2 as h2server

_encode = hpack_codec.encode_field


class DoHH2(h2server.H2Server):
    """One HTTP/2 connection of a DoH listener."""

    #: A request body is kept up to this size (the rest is counted only).
    MAX_BODY = doh.MAX_MESSAGE

    def _request(self, headers):
        return doh.StreamRequest(headers)

    def _data(self, st, data):
        st.req.add(data, self.MAX_BODY)

    def _ended(self, st):
        def reply(status, headers, payload):
            self._reply(st, status, headers, payload)
        st.req.ask(self.resource, self.client, reply)

    def _forget(self, req):
        if req.gone is not None:
            req.gone()

    def _too_large(self, st):
        """Go's answer to a header list over the limit."""
        body = b"<h1>HTTP Error 431</h1><p>Request Header Field(s) Too " \
               b"Large</p>"
        self._reply(st, 431, [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", b"%d" % len(body))], body)

    def _reply(self, st, status, headers, payload, trailers=None):
        block = [_encode(b":status", b"%d" % status)]
        block += [_encode(n, v) for n, v in headers]
        block.append(_encode(b"date", _date()))
        self.respond(st, b"".join(block), payload, trailers)


_date_cache = [0, b""]


def _date():
    """The Date header Go's server sends, formatted once a second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0] = now
        _date_cache[1] = formatdate(now, usegmt=True).encode()
    return _date_cache[1]
