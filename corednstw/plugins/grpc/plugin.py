"""grpc: the query to an upstream's ``coredns.dns.DnsService/Query``.

The calls are made with grpcio: its channel runs on grpcio's own threads,
so a call is started with ``future()`` from the reactor (it does not
block) and its completion comes back to the reactor thread with
``callFromThread``: one hand-off per answer, and the reactor never waits.
An upstream that fails (an RPC error, or an answer that is not DNS) passes
the query to the next one in the policy's order, all within one 5 s
deadline; when none answers, the client gets SERVFAIL, or the next plugin
where ``fallthrough`` says so.  As CoreDNS's: a NOT_FOUND status is
NXDOMAIN; an answer to another question gets the client FORMERR; NXDOMAIN
goes on to the next plugin where ``fallthrough`` says so.  Metrics as
CoreDNS's, counted for calls that answered: coredns_grpc_requests_total
{to}, coredns_grpc_responses_total{rcode, to} and
coredns_grpc_request_duration_seconds{to}.
"""

import random
import time
from typing import Optional

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.plugin import Plugin
from corednstw.core.request import RawResponse, Response
from corednstw.dnsserver.grpcdns import METHOD, decode_packet, encode_packet
from corednstw.engines.upstream import replies

#: How long a query may take over all its attempts (CoreDNS's grpc
#: gives each query one 5 s deadline that every attempt shares).
TIMEOUT = 5.0
#: The largest DNS message an answer may carry.
MAX_DNS = 65535

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
    """One TO: a grpcio channel and the unary call on it.  ``port`` None:
    ``host`` is a whole target (``unix:///run/dns.sock``)."""

    def __init__(self, host, port, credentials, servername):
        import grpc
        if port is None:
            self.label = host
        else:
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
        return names.takes(qname, self.from_, self.ignored)

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
        d: defer.Deferred[Optional[Response]] = defer.Deferred()
        deadline = time.monotonic() + TIMEOUT
        self._try(req, self.ordered(), d, None, deadline)
        return d

    def _try(self, req, left, d, error, deadline):
        """Ask the next upstream within what is left of the query's one
        deadline (CoreDNS's 5 s covers every attempt)."""
        now = time.monotonic()
        if not left or now >= deadline:
            self._failed(req, d, error or "no healthy gRPC proxies")
            return
        up = left[0]
        reactor = self.reactor
        fut = up.call.future(req.data, timeout=deadline - now)
        fut.add_done_callback(lambda f: reactor.callFromThread(
            self._done, f, req, up, left[1:], d, now, deadline))

    def _done(self, fut, req, up, left, d, start, deadline):
        try:
            reply = _reply(fut, req)
        except Exception as e:  # grpc.RpcError, or an upstream's junk
            self._try(req, left, d, "%s: %s" % (up.label, _why(e)),
                      deadline)
            return
        # As CoreDNS: the three families count only calls that answered.
        rcode = reply.rcode if isinstance(reply, Response) else \
            reply[3] & 0xF
        REQUESTS.inc((up.label,))
        RESPONSES.inc((w.rcode_text(rcode), up.label))
        DURATION.observe((up.label,), time.monotonic() - start)
        if not isinstance(reply, Response):
            if not replies.matches(req, reply):
                d.callback(Response(w.FORMERR, plugin=self.name))
                return
            reply = RawResponse.prebuilt(reply, self.name)
        if (rcode == w.NXDOMAIN and self.fall is not None
                and self.fall.through(req.qname)):
            self._next(req, d)
            return
        d.callback(reply)

    def _failed(self, req, d, error):
        """Every upstream failed: the next plugin where fallthrough says
        so, else SERVFAIL."""
        if self.fall is not None and self.fall.through(req.qname):
            self._next(req, d)
            return
        r = Response(w.SERVFAIL, plugin=self.name)
        r.error = error
        d.callback(r)

    def _next(self, req, d):
        nxt = self.next.serve(req)
        if isinstance(nxt, defer.Deferred):
            nxt.chainDeferred(d)
        else:
            d.callback(nxt)


def _reply(fut, req):
    """The upstream's answer as wire bytes; a Response for NOT_FOUND
    (CoreDNS's client turns that status into NXDOMAIN); an exception for
    a failed call or bytes that are not a DNS message."""
    import grpc
    try:
        data = fut.result()
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return Response(w.NXDOMAIN, plugin="grpc")
        raise
    if len(data) > MAX_DNS or not replies.readable(data):
        raise ValueError("not a DNS answer")
    return data


def _why(exc):
    details = getattr(exc, "details", None)
    if callable(details):
        return details() or str(exc)
    return str(exc)
