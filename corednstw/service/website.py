"""twisted.web for the HTTP endpoints with twisted.web resources on their
address (pprof's pages, prometheus's page behind a web configuration's
guard, a plugin's own resource): a Site whose root dispatches on the
exact path, the ``httpd.Page`` endpoints adapted.  Loaded only for such
an address; the others are served by ``httpd``'s small server."""

import sys
from typing import Any

from corednstw.service import httpd


def _import_web():
    """twisted.web's server without its HTTP/2 channel, unless something
    loaded twisted.web.http already.

    twisted.web.http imports its HTTP/2 channel, and so the h2 package,
    whenever h2 is installed: a third of the start's imports, for
    endpoints that never speak HTTP/2 (they offer no ALPN, over TLS
    neither)."""
    if "twisted.web.http" not in sys.modules:
        sys.modules["twisted.web._http2"] = None     # type: ignore
        try:
            import twisted.web.http  # noqa: F401
        finally:
            del sys.modules["twisted.web._http2"]


_import_web()

from twisted.web import resource, server  # noqa: E402


class PageResource(resource.Resource):
    """An ``httpd.Page`` as a twisted.web resource (GET and HEAD)."""

    isLeaf = True

    def __init__(self, page):
        resource.Resource.__init__(self)
        self.page = page

    def render_GET(self, request):
        query = request.uri.partition(b"?")[2]
        got = self.page.respond(query)
        if not isinstance(got, httpd.Deferred):
            return _put(request, got)
        gone: list[Any] = []
        request.notifyFinish().addErrback(gone.append)

        def write(answer):
            if not gone:
                request.write(_put(request, answer))
                request.finish()

        def failed(f):
            from twisted.python import log
            log.err(f, "HTTP endpoint %s" % request.path.decode("latin-1"))
            if not gone:
                request.setResponseCode(500)
                request.finish()
        got.addCallbacks(write, failed)
        return server.NOT_DONE_YET

    render_HEAD = render_GET


def _put(request, answer):
    """The status and headers of ``answer`` set; its body."""
    request.setResponseCode(answer[0])
    request.setHeader(b"content-type", answer[1])
    return answer[2]


def as_resource(r):
    """``r`` as a twisted.web resource (a Page adapted)."""
    return PageResource(r) if isinstance(r, httpd.Page) else r


class Root(resource.Resource):
    """Dispatches exact paths to the registered resources; 404 otherwise."""

    def __init__(self, table):
        resource.Resource.__init__(self)
        self.paths = {p: as_resource(r) for p, r in table.items()}

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


class QuietSite(server.Site):
    """No access log: CoreDNS does not log probe and scrape requests."""

    noisy = False

    def log(self, request):
        pass


def site(table):
    """A Site serving ``table`` (path bytes -> page or resource)."""
    s = QuietSite(Root(table))
    s.displayTracebacks = False
    return s


def update(s, table):
    """Give the Site ``s`` of ``site`` a new table."""
    s.resource.paths = Root(table).paths
