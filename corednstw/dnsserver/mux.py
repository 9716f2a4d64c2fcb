"""The block mux: one per listening address, bytes in, bytes out.

A ``Mux`` routes each query to the server block with the longest matching
zone and runs that block's chain.  The malformed-input rules are those of
CoreDNS on miekg/dns: an unreadable header or a response is ignored;
opcodes other than QUERY and NOTIFY get NOTIMP; a wrong section count or an
unparsable question gets FORMERR (the query's header only, as miekg writes
it), an unreadable later record FORMERR with the question; a bare header (no
question) gets SERVFAIL; a question cut after its name or type has
type/class 0; record counts past the end of the message are ignored.
"""

import errno
import struct
import sys
import traceback

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.names import label_end
from corednstw.core.plugin import END, is_deferred
from corednstw.core.request import (
    LATE,
    RecordError,
    Request,
    Response,
    encode,
    remember,
)

_HDR = struct.Struct("!HHHHHH")

# Errors sending a datagram that mean "the kernel is busy": drop the answer
# (the client retries), never a traceback per packet.
_SEND_DROP = frozenset((errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS,
                        errno.ECONNREFUSED, errno.EHOSTUNREACH,
                        errno.ENETUNREACH, errno.EPERM, errno.EINTR))


#: Header bits miekg's reject reply keeps from the query (AA and Z cleared).
_KEPT = w.TC | w.RD | w.RA | w.AD | w.CD

_CLASS_IN = w.CLASS_IN
_DS = w.DS
_UNKNOWN = object()


def header_only(req, rcode, opcode, question=b""):
    """miekg's reject reply: the query's own header with QR, the rcode and
    no records; ``question`` when it was read before a later record
    failed."""
    flags = (w.QR | (opcode << 11) | (req.flags & _KEPT) | rcode)
    return _HDR.pack(req.id, flags, 1 if question else 0, 0, 0,
                     0) + question


def no_question(req):
    """CoreDNS's answer to a message that is only a header (miekg reads
    it as one without a question): SERVFAIL, as SetRcode builds it."""
    keep = (w.RD | w.CD) if req.opcode == w.OPCODE_QUERY else 0
    flags = w.QR | (req.opcode << 11) | (req.flags & keep) | w.SERVFAIL
    return _HDR.pack(req.id, flags, 0, 0, 0, 0)


def badvers(req):
    """EDNS version other than 0: BADVERS with an OPT of version 0."""
    data = req.data
    keep = (w.RD | w.CD) if req.opcode == w.OPCODE_QUERY else 0
    flags = w.QR | (req.opcode << 11) | (req.flags & keep)
    out = (_HDR.pack(req.id, flags, 1, 0, 0, 1) + data[12:req.qend]
           + w.opt_wire(0, (w.BADVERS >> 4) << 24))
    return out


def _stacktrace(req):
    """Print tracebacks of failures: ``debug``, or errors' ``stacktrace``."""
    b = req.block
    return b is not None and (b.debug or b.settings.get("stacktrace", False))


class Mux:
    """Routes the queries of one listening address to server blocks.

    ``zones`` maps a zone to the (zone, block) pairs serving it on this
    address, in Corefile order (several when bind/view filters differ).
    """

    #: Routes remembered by query name (see ``_remember``); as many as
    #: request.NAMES_KEPT, for the same reason.
    ROUTES_KEPT = 32768

    def __init__(self, server, label, zones, chaos=False):
        self.server = server
        self.label = label
        self.zones = zones
        self.chaos = chaos
        self.inflight = 0
        #: query name -> route (not DS), None where a block filters
        self._routes = None
        if not any(block.filters for entries in zones.values()
                   for _, block in entries):
            self._routes = {}

    # -- routing --------------------------------------------------------------

    def route(self, req):
        """The (zone, block) for ``req``: CoreDNS's longest-suffix walk.

        DS queries keep walking so the parent's block answers; the root zone
        is tried last; None means REFUSED (also for a matching zone whose
        block has no plugin on the request path, as CoreDNS's nil chain).
        """
        q = req.qname
        zones = self.zones
        if len(zones) == 1 and "." in zones:
            q = "."     # only the root zone here: no suffix walk to do
        ds = req.qtype == w.DS
        found = None
        while q != ".":
            entries = zones.get(q)
            if entries is not None:
                for entry in entries:
                    block = entry[1]
                    if block.chain is END:
                        return None     # a zone without plugins: REFUSED
                    if block.filters and not block.accepts(req):
                        continue
                    if not ds:
                        return entry
                    found = entry
                    break
            i = q.find(".")
            if i > 0 and q[i - 1] == "\\":
                i = label_end(q, i)     # an escaped dot is in a label
            q = q[i + 1:] or "."
        if found is not None:
            return found
        entries = zones.get(".")
        if entries is not None:
            for entry in entries:
                block = entry[1]
                if block.chain is END:
                    continue
                if not block.filters or block.accepts(req):
                    return entry
        return None

    # -- the request path -----------------------------------------------------

    def handle(self, data, client, port, proto, local, send, depth=0):
        """Answer one query; ``send(bytes)`` writes to the client.
        ``depth`` counts nested internal lookups (App.lookup's loop guard).
        Returns False when the message is ignored (no answer will come),
        a Deferred firing once the answer is written (or the chain chose
        to write none) when it comes later, else None (answered, or not,
        already, or over UDP an answer the chain hands to the late slot,
        ``Request.late``, when it comes)."""
        if len(data) < 12:
            return False
        req = Request(data, client, port, proto, local, self.label)
        if depth:
            req.depth = depth
        # Request.parse_header written out: one call less.
        req.id, flags, qd, an, ns, ar = _HDR.unpack_from(data)
        req.flags = flags
        req.opcode = (flags >> 11) & 0xF
        req.arcount = ar
        if flags & 0xF800:      # QR, or an opcode other than QUERY
            if flags & w.QR:
                return False
            op = req.opcode
            if op != w.OPCODE_NOTIFY:
                send(header_only(req, w.NOTIMP, op))
                return
        if qd != 1 or an > 1 or ns > 1 or ar > 2:
            send(header_only(req, w.FORMERR, 0))
            return
        if len(data) == 12:
            self._no_question(req, send)
            return
        try:
            req.parse_question(an, ns, ar)
        except RecordError:
            send(header_only(req, w.FORMERR, 0, data[12:req.qend]))
            return
        except w.FormatError:
            send(header_only(req, w.FORMERR, 0))
            return
        if req.qclass != _CLASS_IN and not self.chaos:
            self._drop(req, w.REFUSED, send)
            return
        edns = req.edns
        if edns is not None and edns.ttl & 0xFF0000:
            send(badvers(req))
            return
        routes = self._routes
        if routes is not None and req.qtype != _DS:
            entry = routes.get(req.qname, _UNKNOWN)
            if entry is _UNKNOWN:
                entry = self._remember(req)
        else:
            entry = self.route(req)
        if entry is None:
            self._drop(req, w.REFUSED, send)
            return
        req.zone, block = entry
        req.block = block
        req.view = block.view
        req.start = self.server.clock()
        if proto == "udp":
            # The late slot: no caller waits for a Deferred over UDP.
            req.late = self
            req.reply = send
        self.inflight += 1
        try:
            resp = block.chain.serve(req)
        except Exception:
            self.inflight -= 1
            self._panic(req, send)
            return
        if not isinstance(resp, Response):
            if resp is LATE:
                return None     # the plugin calls ``deliver`` itself
            if is_deferred(resp):
                return resp.addCallbacks(self._deliver, self._failed,
                                         callbackArgs=(req, send),
                                         errbackArgs=(req, send))
        self._deliver(resp, req, send)

    def _remember(self, req):
        """``route`` for a query that is not DS, remembered by name (only
        where no block filters its queries: then the name decides)."""
        return remember(self._routes, req.qname, self.route(req),
                        self.ROUTES_KEPT)

    def _deliver(self, resp, req, send):
        """Write ``resp``, the chain's answer to ``req`` (also the late
        slot's ``deliver``)."""
        self.inflight -= 1
        if resp is None:
            resp = Response(w.SERVFAIL)
        try:
            wire = resp.wire
            if wire is None:
                if type(resp) is Response:  # its finish, one call less
                    wire = resp.wire = encode(req, resp)
                else:
                    wire = resp.finish(req)
        except Exception:
            self._panic(req, send)
            return
        if not wire:
            return          # the plugin chose to write nothing
        sign = req.sign
        if sign is not None:
            wire = sign(wire)
        send(wire)
        more = resp.more
        if more:            # further messages (zone transfers over TCP)
            for m in more:
                send(m if sign is None else sign(m))

    deliver = _deliver

    def deliver_wire(self, wire, req):
        """The late slot's short way: ``deliver`` for a plain answer whose
        client bytes ``wire`` are made (no Response, nothing more)."""
        self.inflight -= 1
        sign = req.sign
        req.reply(wire if sign is None else sign(wire))

    def _failed(self, failure, req, send):
        self.inflight -= 1
        logger.error("", "Recovered from panic in server: %r %s" % (
            self.label, failure.getErrorMessage()))
        if _stacktrace(req):
            logger.raw(failure.getTraceback().rstrip("\n"))
        metrics.PANICS.inc()
        self._drop(req, w.SERVFAIL, send)

    def _panic(self, req, send):
        """A plugin raised: log as CoreDNS does, count, answer SERVFAIL
        (counted under zone "dropped", as errorAndMetricsFunc does)."""
        exc = sys.exc_info()[1]
        logger.error("", "Recovered from panic in server: %r %s" % (
            self.label, exc))
        if _stacktrace(req):
            logger.raw(traceback.format_exc().rstrip("\n"))
        metrics.PANICS.inc()
        try:
            self._drop(req, w.SERVFAIL, send)
        except Exception:
            pass

    def _no_question(self, req, send):
        """No question: SERVFAIL, counted under zone "dropped"."""
        req.qtype = 0
        wire = no_question(req)
        metrics.report(self.label, req, metrics.DROPPED, "", w.SERVFAIL, "",
                    len(wire), 0.0)
        send(wire)

    def _drop(self, req, rcode, send):
        """Answer ``rcode`` outside any chain (no block takes the query, or
        a plugin panicked); counted under zone "dropped"."""
        wire = Response(rcode).finish(req)
        metrics.report(self.label, req, metrics.DROPPED, "", rcode, "",
                       len(wire), 0.0)
        send(wire)


def client_address(addr):
    """(address, port) with ``::ffff:`` mapped addresses turned into IPv4."""
    host = addr[0]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, addr[1]
