"""HTTP endpoints (metrics, health, ready) shared per listen address.

Several plugins may serve on one address (``prometheus :9153`` in many
blocks, health and ready on their own ports); each address gets one
twisted.web Site whose root dispatches on the exact path.
"""

import socket
import sys


def _import_web():
    """twisted.web's server without its HTTP/2 channel, unless something
    loaded twisted.web.http already.

    twisted.web.http imports its HTTP/2 channel, and so the h2 package,
    whenever h2 is installed: a third of the start's imports, for
    endpoints that never speak HTTP/2 (they offer no ALPN, over TLS
    neither).  DoH turns it on (``enable_h2``)."""
    if "twisted.web.http" not in sys.modules:
        sys.modules["twisted.web._http2"] = None     # type: ignore
        try:
            import twisted.web.http  # noqa: F401
        finally:
            del sys.modules["twisted.web._http2"]


_import_web()

from twisted.internet import error, protocol  # noqa: E402
from twisted.web import resource, server  # noqa: E402


def enable_h2():
    """Let twisted.web's channel speak HTTP/2 when ALPN picks it, as it
    does when it loads h2 itself (nothing without h2 installed)."""
    from twisted.web import http
    if http.H2_ENABLED:
        return
    try:
        from twisted.web._http2 import H2Connection
    except ImportError:
        return
    setattr(http, "H2Connection", H2Connection)
    http.H2_ENABLED = True


class Root(resource.Resource):
    """Dispatches exact paths to the registered resources; 404 otherwise."""

    def __init__(self, paths):
        resource.Resource.__init__(self)
        self.paths = {p.encode() if isinstance(p, str) else p: r
                      for p, (r, _owner) in paths.items()}

    def getChild(self, name, request):
        r = self.paths.get(request.path)
        if r is not None:
            return r
        return resource.NoResource()

    def render(self, request):
        r = self.paths.get(request.path)
        if r is not None:
            return r.render(request)
        return resource.NoResource().render(request)


class Text(resource.Resource):
    """A plain-text endpoint computed by ``fn() -> (status, body)``."""

    isLeaf = True

    def __init__(self, fn):
        resource.Resource.__init__(self)
        self.fn = fn

    def render_GET(self, request):
        status, body = self.fn()
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return body.encode() if isinstance(body, str) else body

    render_HEAD = render_GET


def address_arg(d, default, children=False):
    """The optional ADDRESS argument of prometheus, health and ready:
    at most one argument; no block unless ``children`` is allowed.  As
    CoreDNS, the address must split as Go's net.SplitHostPort splits it
    (``bla`` has no port); what it names is looked up when listening."""
    if len(d.args) > 1:
        raise d.arg_error()
    if d.children and not children:
        raise d.error("unknown property '%s'" % d.children[0].name)
    if not d.args:
        return default
    d.host_port(d.args[0])
    return d.args[0]


def split_address(address, default_port):
    """(host, port) from ':8080', '127.0.0.1:8080', '[::1]:8080' or ''.
    A port may be a service name (``localhost:http``), as Go's listener
    looks it up; ValueError when it names none."""
    if not address:
        return "", default_port
    if address.startswith("["):
        host, _, port = address[1:].partition("]")
        port = port.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    elif ":" in address:
        return address, default_port
    else:
        host, port = address, ""
    if not port:
        return host, default_port
    if port.isdigit():
        return host, int(port)
    try:
        return host, socket.getservbyname(port, "tcp")
    except OSError as e:
        raise ValueError("lookup tcp/%s: unknown port" % port) from e


class QuietSite(server.Site):
    """No access log: CoreDNS does not log probe and scrape requests."""

    noisy = False

    def log(self, request):
        pass


class Endpoint(protocol.Factory):
    """The factory of one address: the Site, spoken over TLS when the
    address has a TLS configuration (``prometheus { tls FILE }``).  A
    reload swaps the paths and the TLS settings in place, so the port
    stays bound; open connections keep what they were made with."""

    def __init__(self, paths, tls=None):
        self.site = QuietSite(Root(paths))
        self.site.displayTracebacks = False
        self.update(paths, tls)

    def update(self, paths, tls):
        self.site.resource.paths = Root(paths).paths
        self.tls = tls
        self.wrapped = None
        if tls is not None:
            # twisted.protocols.tls (pyOpenSSL) only for an address on TLS
            from twisted.protocols.tls import TLSMemoryBIOFactory
            self.wrapped = TLSMemoryBIOFactory(tls.creator(), False,
                                               self.site)

    def doStart(self):
        self.site.doStart()

    def doStop(self):
        self.site.doStop()

    def buildProtocol(self, addr):
        if self.wrapped is None:
            return self.site.buildProtocol(addr)
        return self.wrapped.buildProtocol(addr)


def serve(reactor, address, paths, tls=None):
    """Listen on ``address`` ("host:port") with the given path table, over
    TLS with ``tls`` (a webconfig.WebTLS); CannotListenError when its port
    names no service."""
    try:
        host, port = split_address(address, 0)
    except ValueError as e:
        raise error.CannotListenError(address, None, e) from e
    return reactor.listenTCP(port, Endpoint(paths, tls), interface=host)


def update(port, paths, tls=None):
    """Give a listening ``port`` of ``serve`` new paths and TLS."""
    port.factory.update(paths, tls)
