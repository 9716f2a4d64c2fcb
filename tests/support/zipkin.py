"""A Zipkin collector for tests: takes v2 JSON batches over HTTP."""

import json

from twisted.internet import reactor
from twisted.web import resource, server


class Spans(resource.Resource):
    """POST /api/v2/spans: every span received is kept in ``spans``."""

    isLeaf = True

    def __init__(self):
        resource.Resource.__init__(self)
        self.spans = []
        self.batches = 0
        self.paths = []
        self.status = 202

    def render_POST(self, request):
        self.paths.append(request.path.decode())
        self.batches += 1
        self.spans.extend(json.loads(request.content.read()))
        request.setResponseCode(self.status)
        return b""


def start(testcase):
    """Listen on 127.0.0.1 (a free port); returns (collector, port)."""
    spans = Spans()
    site = server.Site(spans)
    site.noisy = False
    port = reactor.listenTCP(0, site, interface="127.0.0.1")
    testcase.addCleanup(port.stopListening)
    return spans, port.getHost().port
