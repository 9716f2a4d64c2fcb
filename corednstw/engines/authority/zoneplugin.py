"""``ZonePlugin``: the serving logic shared by the file, auto and secondary
plugins (zone matching, answering from ZoneData, fallthrough, NOTIFY and
the transferer hook), plus their shared ``reload`` option."""

from typing import Optional

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import logger, names
from corednstw.core.interfaces import INotifier, ITransferer
from corednstw.core.plugin import Fallthrough, Plugin

from .zone import DELEGATION, NAME_ERROR, SERVER_FAILURE, SUCCESS


@implementer(ITransferer)
class ZonePlugin(Plugin):
    """Serving shared by file, auto and secondary: ``self.zone_map`` maps
    an origin to its ZoneData (or None until loaded), ``self.fall`` is the
    fallthrough, ``names`` the origins matched longest first."""

    fall: Optional[Fallthrough] = None
    #: auto clears AA on every delegation; file keeps it for alias answers.
    aa_on_alias_delegation = True
    #: file and secondary act on NOTIFY; auto answers it as a query.
    handles_notify = True

    def __init__(self):
        self.zone_map = {}
        self.names = []
        self.expired = set()

    def find_zone(self, qname):
        best = None
        for z in self.names:
            if names.in_zone(qname, z):
                if best is None or len(z) > len(best):
                    best = z
        return best

    def upstream(self, name, qtype, req):
        app = self.block.server if self.block is not None else None
        if app is None:
            return defer.succeed(None)
        return app.lookup(name, qtype, parent=req, do=req.do)

    def not_ours(self, req):
        """A name outside the zones goes on down the chain; at its end
        the server answers SERVFAIL ("no next plugin found", CoreDNS's
        plugin.NextOrFailure).  Only a name no block takes is REFUSED,
        by the mux."""
        return self.next.serve(req)

    def serve(self, req):
        origin = self.find_zone(req.qname)
        if origin is None:
            return self.not_ours(req)
        return self.serve_zone(req, origin, self.zone_map.get(origin))

    def serve_zone(self, req, origin, z):
        if z is None:
            return unwritten_error(w.SERVFAIL)
        if req.qtype == w.AXFR or req.qtype == w.IXFR:
            return unwritten_error(w.REFUSED)
        if req.opcode == w.OPCODE_NOTIFY and self.handles_notify:
            return self.notify_received(req, origin)
        if origin in self.expired:
            logger.error(self.name, "Zone %s is expired" % origin)
            return unwritten_error(w.SERVFAIL)
        out = z.lookup(req, self.upstream)
        if type(out) is tuple:
            return self._write(out, req)
        return out.addCallback(self._write, req)

    def notify_received(self, req, origin):
        logger.info(self.name, "Dropping notify from %s for %s" % (req.client,
                                                                origin))
        return drop()

    def _write(self, out, req):
        answer, ns, extra, result = out
        if not answer and result in (NAME_ERROR, SUCCESS) and (
                self.fall is not None and self.fall.through(req.qname)):
            return self.next.serve(req)
        rcode = w.NOERROR
        aa = True
        if result == NAME_ERROR:
            rcode = w.NXDOMAIN
        elif result == DELEGATION:
            if not answer or not self.aa_on_alias_delegation:
                aa = False
        elif result == SERVER_FAILURE:
            if not answer:
                return unwritten_error(w.SERVFAIL)
            rcode = w.SERVFAIL
        return self.respond(req, rcode, answer, ns, extra, aa=aa)

    # Transferer interface ---------------------------------------------------

    def transfer_records(self, zone, serial):
        """RR batches for an outgoing transfer of ``zone`` (see the
        transfer plugin), or None when this plugin does not hold it."""
        if self.find_zone(zone) != zone:
            return None
        z = self.zone_map.get(zone)
        if z is None or z.soa is None:
            return None
        return z.transfer(serial)

    def notify_peers(self, zone):
        """Tell the block's notifier (the transfer plugin) that ``zone``
        changed."""
        if self.block is None:
            return None
        for notifier in self.block.find(INotifier):
            return notifier.notify(zone)
        return None


def unwritten_error(rcode):
    """An error CoreDNS's file returns without writing: the server writes
    it, around the other plugins (see request.unwritten)."""
    from corednstw.core.request import Response
    return Response(rcode)


def drop():
    """An answer that writes nothing to the client (CoreDNS returns
    success without writing, e.g. for a NOTIFY it ignores): NoReply, which
    the plugins that rewrite answers pass on unchanged."""
    from corednstw.core.request import NoReply
    return NoReply()


def reload_option(c):
    """The ``reload DURATION`` option of file and auto, in seconds.  Read
    leniently (a bare number is seconds), with this parser's error texts
    rather than Go's, as before the typed readers."""
    text = c.between(1, error="reload duration value is expected")[0]
    return c.duration(text, strict=False)
