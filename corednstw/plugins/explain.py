"""explain: one query explained over HTTP, without a restart.

``explain [ADDRESS]`` (default 127.0.0.1:6054) serves
``GET /explain?name=NAME&type=TYPE[&client=IP][&proto=udp|tcp][&do=1]
[&server=LABEL]``: the query goes through the server as if it came from
``client`` (view and acl decide on it) over ``proto``, on the listener of
the block holding ``explain`` (or the one whose metrics label is
``server``, e.g. ``dns://:53``), and the answer is the trace of
dnsserver/explainer.py as JSON.

explain bypasses acl and view: they decide on ``client``, an address
the HTTP caller chooses.  So ADDRESS must be a loopback address unless
the block says ``allow_remote`` (``explain ADDRESS { allow_remote }``).

CoreDNS has no such directive (its ``debug`` takes no address); it is
registered as corednstw's own, placed right after ``debug``.
"""

import ipaddress
import json

from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core.directives import PluginEntry
from corednstw.core.interfaces import IHTTPEndpointOwner
from corednstw.core.plugin import Plugin
from corednstw.service import httpd

DEFAULT_ADDRESS = "127.0.0.1:6054"


class BadRequest(ValueError):
    """A query string that names no query (HTTP 400)."""


@implementer(IHTTPEndpointOwner)
class Explain(Plugin):
    name = "explain"
    in_chain = False

    def __init__(self, address):
        self.address = address

    def http_endpoints(self):
        return [(self.address, "/explain", ExplainResource(self))]

    def mux(self, label=None):
        """The listener to ask: labelled ``label``, or this block's."""
        server = self.block.server
        if label is None:
            for _, lst in server.listeners_of(self.block):
                return lst.mux
        for _, lst in server.listeners_of():
            if lst.mux.label == label:
                return lst.mux
        raise BadRequest("no listener %s" % (label or "for this block"))

    def run(self, args):
        """A Deferred of the trace for the query ``args`` describe."""
        name = _arg(args, "name")
        if not name:
            raise BadRequest("name is required")
        try:
            qtype = w.type_value(_arg(args, "type") or "A")
        except ValueError as e:
            raise BadRequest(str(e)) from e
        client = _arg(args, "client") or "127.0.0.1"
        try:
            ipaddress.ip_address(client)
        except ValueError as e:
            raise BadRequest("client: %s" % e) from e
        proto = _arg(args, "proto") or "udp"
        if proto not in ("udp", "tcp"):
            raise BadRequest("proto must be udp or tcp")
        mux = self.mux(_arg(args, "server"))
        # Imported on the first request: it brings in dnspython's message
        # module, and the directive's place is read at every start.
        from corednstw.dnsserver import explainer as tracing
        return tracing.explain(mux, name, qtype, client, proto,
                               do=_arg(args, "do") in ("1", "true"))


def _arg(args, key):
    values = args.get(key.encode())
    return values[0].decode("utf-8", "replace") if values else None


class ExplainResource(httpd.Page):
    """GET /explain: the trace as JSON (400 with an error otherwise)."""

    def __init__(self, plugin):
        self.plugin = plugin

    def respond(self, query):
        from urllib.parse import parse_qs
        try:
            d = self.plugin.run(parse_qs(query, keep_blank_values=True))
        except BadRequest as e:
            return 400, JSON, _json({"error": str(e)})
        return d.addCallbacks(
            lambda out: (200, JSON, _json(out)),
            lambda f: (500, JSON, _json({"error": f.getErrorMessage()})))


JSON = b"application/json"


def _json(obj):
    return (json.dumps(obj, indent=2) + "\n").encode()


def setup(d, block):
    address = httpd.address_arg(d, DEFAULT_ADDRESS, children=True)
    remote = False
    for c in d.children:
        if c.name != "allow_remote":
            raise c.error("unknown property '%s'" % c.name)
        if c.args:
            raise c.arg_error()
        remote = True
    if not remote and not _loopback(httpd.split_address(address, 0)[0]):
        raise d.error("%s is not a loopback address: explain lets whoever "
                      "reaches it ask any query as any client, past acl "
                      "and view; add allow_remote to serve it there"
                      % address)
    return Explain(address)


def _loopback(host):
    """True for a loopback IP address or ``localhost``; all interfaces
    (an empty host) and other names are not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


PLUGIN = PluginEntry("explain", setup, after="debug")
