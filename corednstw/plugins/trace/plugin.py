"""The trace plugin: a root span per sampled query, a child per plugin.

Sampling is a counter: one query in ``every``.  A query that is not
sampled costs one increment and one modulo.  For a sampled query the
plugin places a ``_Hop`` in front of every later plugin of its chain (the
``next`` links are swapped for the synchronous part of that one query and
put back before ``serve`` returns), so the other queries never pass
through a hop.  Twisted runs one query at a time on the reactor thread,
which is what makes the swap safe.  A plugin that calls ``next`` only
after an asynchronous step is not shown as a span of its own: its time is
in the span of the plugin before it.
"""

import random
import time

from twisted.python.failure import Failure

from corednstw.core import dnswire as w
from corednstw.core.plugin import END, Plugin, is_deferred
from corednstw.plugins.metadata import set_value
from corednstw.plugins.trace.zipkin import Reporter

ROOT_SPAN = "servedns"
METADATA_TRACE_ID = "trace/traceid"

TAG_NAME = "coredns.io/name"
TAG_TYPE = "coredns.io/type"
TAG_RCODE = "coredns.io/rcode"
TAG_PROTO = "coredns.io/proto"
TAG_REMOTE = "coredns.io/remote"


#: Span and trace ids need to be unique, not secret (zipkin-go draws
#: them from math/rand too); this is twice as fast as os.urandom.
_random = random.Random()


def _new_id(bits=64):
    """A random id of ``bits`` bits in hex (16 digits for a span)."""
    return "%0*x" % (bits // 4, _random.getrandbits(bits))


class Span:
    """One span in Zipkin's v2 model, timed in microseconds."""

    __slots__ = ("trace_id", "id", "parent", "name", "kind", "start",
                 "tags")

    def __init__(self, trace_id, name, parent=None, kind=None):
        self.trace_id = trace_id
        self.id = _new_id()
        self.parent = parent
        self.name = name
        self.kind = kind
        self.tags = {}
        self.start = time.time_ns() // 1000

    def child(self, name):
        return Span(self.trace_id, name, self.id)

    def finish(self, endpoint):
        """The span as Zipkin v2 JSON data, ended now."""
        out = {"traceId": self.trace_id, "id": self.id, "name": self.name,
               "timestamp": self.start,
               "duration": max(1, time.time_ns() // 1000 - self.start),
               "localEndpoint": endpoint}
        if self.parent:
            out["parentId"] = self.parent
        if self.kind:
            out["kind"] = self.kind
        if self.tags:
            out["tags"] = self.tags
        return out


class _Hop:
    """Stands in front of one plugin while a sampled query runs: times it
    as a child of the span of whoever called it."""

    __slots__ = ("inner", "trace")

    def __init__(self, inner, trace):
        self.inner = inner
        self.trace = trace

    def serve(self, req):
        t = self.trace
        stack = t.stack
        span = stack[-1].child(self.inner.name)
        stack.append(span)
        try:
            result = self.inner.serve(req)
        except Exception:
            span.tags["error"] = "true"
            t.report(span)
            raise
        finally:
            stack.pop()
        return _when_done(result, t.finish_hop, span)


def _when_done(result, fn, *args):
    """``fn(result, *args)`` now, or when the Deferred fires either way
    (a failure is passed through after ``fn`` saw it)."""
    if is_deferred(result):
        return result.addBoth(fn, *args)
    return fn(result, *args)


class Trace(Plugin):
    name = "trace"

    def __init__(self, kind, url, service):
        self.kind = kind
        self.url = url
        self.service = service
        self.every = 1
        self.client_server = False
        self.analytics_rate = 0.0
        self.max_backlog = 0
        self.max_batch = 0
        self.batch_interval = 0.0
        self.local = None
        self.count = 0
        self.stack = []
        self.reporter = None
        self.endpoint = {}
        self._links: tuple[Plugin, ...] = ()

    # -- life cycle -----------------------------------------------------------

    def start(self):
        self.endpoint = {"serviceName": self.service}
        if self.local is not None:
            host, port = self.local
            self.endpoint["ipv6" if ":" in host else "ipv4"] = host
            self.endpoint["port"] = port
        self.reporter = Reporter(self.reactor, self.url, self.max_backlog,
                                 self.max_batch, self.batch_interval)
        self.reporter.start()
        self._links = self._chain_after()

    def stop(self):
        if self.reporter is not None:
            return self.reporter.stop()

    def _chain_after(self):
        """The plugins whose ``next`` gets a hop: this one and every later
        plugin of the chain but the last."""
        links = []
        p: Plugin = self
        while p.next is not END and p.next is not None:
            links.append(p)
            p = p.next
        return tuple(links)

    # -- the request path -----------------------------------------------------

    def serve(self, req):
        n = self.count + 1
        self.count = n
        every = self.every
        if not every or n % every or self.stack or self.reporter is None:
            return self.next.serve(req)
        return self._traced(req)

    def _traced(self, req):
        """Run the chain for one sampled query with hops in place."""
        root = Span(_new_id(128), ROOT_SPAN, kind="SERVER")
        set_value(req, METADATA_TRACE_ID, root.trace_id)
        self.stack.append(root)
        links = self._links
        nexts = [p.next for p in links]
        for p in links:
            # A hop stands in for the next plugin during this one query:
            # it serves as the plugin does (Plugin.next is typed Plugin).
            p.next = _Hop(p.next, self)  # type: ignore[assignment]
        try:
            result = self.next.serve(req)
        except Exception:
            self._tag(root, req, w.SERVFAIL)
            root.tags["error"] = "true"
            self.report(root)
            raise
        finally:
            for p, following in zip(links, nexts):
                p.next = following
            self.stack.pop()
        return _when_done(result, self._finish_root, root, req)

    def _finish_root(self, resp, root, req):
        failed = resp is None or isinstance(resp, Failure)
        self._tag(root, req, w.SERVFAIL if failed else resp.rcode)
        if isinstance(resp, Failure):
            root.tags["error"] = "true"
        self.report(root)
        return resp

    def finish_hop(self, resp, span):
        if isinstance(resp, Failure):
            span.tags["error"] = "true"
        self.report(span)
        return resp

    @staticmethod
    def _tag(span, req, rcode):
        """CoreDNS's tags: name as asked, type, protocol, client, rcode."""
        span.tags.update({
            TAG_NAME: req.name, TAG_TYPE: w.type_text(req.qtype),
            TAG_PROTO: req.proto, TAG_REMOTE: req.client,
            TAG_RCODE: w.rcode_text(rcode)})

    def report(self, span):
        if self.reporter is not None:
            self.reporter.report(span.finish(self.endpoint))
