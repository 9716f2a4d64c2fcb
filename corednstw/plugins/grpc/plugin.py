"""grpc: the query to an upstream's ``coredns.dns.DnsService/Query``.

The calls are made with grpcio: its channel runs on grpcio's own threads,
so a call is started with ``future()`` from the reactor (it does not
block) and its completion comes back to the reactor thread with
``callFromThread``: one hand-off per answer, and the reactor never waits.
An upstream that fails (an RPC error, or an answer that is not DNS) passes
the query to the next one in the policy's order; when none answers, the
client gets SERVFAIL.  NXDOMAIN goes on to the next plugin where
``fallthrough`` says so.  Metrics as CoreDNS's: coredns_grpc_requests_total
{to}, coredns_grpc_responses_total{rcode, to} and
coredns_grpc_request_duration_seconds{to}.
"""

import random
import time

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics
from corednstw.core.grpc import METHOD, decode_packet, encode_packet
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Response

#: How long one upstream may take (CoreDNS's grpc uses its request
#: context: the client's, bounded by the server's 5 s write timeout).
TIMEOUT = 5.0

REQUESTS = metrics.counter(
    "coredns_grpc_requests_total",
    "Counter of requests made per upstream.", ("to",))
RESPONSES = metrics.counter(
    "coredns_grpc_responses_total",
    "Counter of requests made per upstream.", ("rcode", "to"))
DURATION = metrics.histogram(
    "coredns_grpc_request_duration_seconds",
    "Histogram of the time each request took.", ("to",),
    metrics.TIME_BUCKETS)


class Upstream:
    """One TO: a grpcio channel and the unary call on it."""

    def __init__(self, host, port, credentials, servername):
        import grpc
        self.label = "%s:%d" % (host if ":" not in host else
                                "[%s]" % host, port)
        options = []
        if servername:
            options.append(("grpc.ssl_target_name_override", servername))
        if credentials is None:
            self.channel = grpc.insecure_channel(self.label, options)
        else:
            self.channel = grpc.secure_channel(self.label, credentials,
                                               options)
        self.call = self.channel.unary_unary(
            METHOD.decode(), request_serializer=encode_packet,
            response_deserializer=decode_packet)

    def close(self):
        self.channel.close()


class GRPC(Plugin):
    name = "grpc"

    def __init__(self):
        self.from_ = "."
        self.to = []
        self.ignored = []
        self.credentials = None
        self.servername = ""
        self.policy = "random"
        self.fall = None
        self.upstreams = []
        self.robin = 0

    def start(self):
        self.upstreams = [Upstream(h, p, self.credentials, self.servername)
                          for h, p in self.to]

    def stop(self):
        for u in self.upstreams:
            u.close()
        self.upstreams = []

    def match(self, qname):
        f = self.from_
        if not (f == "." or qname == f or qname.endswith("." + f)):
            return False
        return qname == f or not any(
            ig == "." or qname == ig or qname.endswith("." + ig)
            for ig in self.ignored)

    def ordered(self):
        """The upstreams in the order the policy tries them."""
        ups = self.upstreams
        n = len(ups)
        if n == 1 or self.policy == "sequential":
            return list(ups)
        if self.policy == "round_robin":
            self.robin += 1
            i = self.robin % n
            return [ups[i]] + ups[:i] + ups[i + 1:]
        return random.sample(ups, n)

    def serve(self, req):
        if not self.match(req.qname) or not self.upstreams:
            return self.next.serve(req)
        d = defer.Deferred()
        self._try(req, self.ordered(), d, None)
        return d

    def _try(self, req, left, d, error):
        if not left:
            r = Response(w.SERVFAIL, plugin=self.name)
            r.error = error or "no upstream answered"
            d.callback(r)
            return
        up = left[0]
        REQUESTS.inc((up.label,))
        start = time.monotonic()
        reactor = self.reactor
        fut = up.call.future(req.data, timeout=TIMEOUT)
        fut.add_done_callback(lambda f: reactor.callFromThread(
            self._done, f, req, up, left[1:], d, start))

    def _done(self, fut, req, up, left, d, start):
        DURATION.observe((up.label,), time.monotonic() - start)
        try:
            data = fut.result()
        except Exception as e:      # grpc.RpcError, or an upstream's junk
            self._try(req, left, d, "%s: %s" % (up.label, _why(e)))
            return
        if len(data) < 12:
            self._try(req, left, d, "%s: not a DNS answer" % up.label)
            return
        rcode = data[3] & 0xF
        RESPONSES.inc((w.rcode_text(rcode), up.label))
        if (rcode == w.NXDOMAIN and self.fall is not None
                and self.fall.through(req.qname)):
            nxt = self.next.serve(req)
            if isinstance(nxt, defer.Deferred):
                nxt.chainDeferred(d)
            else:
                d.callback(nxt)
            return
        d.callback(RawResponse.prebuilt(data, self.name))


def _why(exc):
    details = getattr(exc, "details", None)
    if callable(details):
        return details() or str(exc)
    return str(exc)
