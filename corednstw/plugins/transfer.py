"""transfer: outgoing zone transfers (AXFR, IXFR with AXFR fallback) and
NOTIFY, for the plugins of the block that hold zones (CoreDNS's transfer).

``transfer [ZONES...] { to ADDRESS...; source ADDRESS }``.  Transfers
are answered over TCP only (UDP gets REFUSED) and only to the ``to``
addresses (``*``: anyone); others get REFUSED.  The records come from the
first plugin of the block implementing the Transferer interface; the
engine (``engines.transfer``) describes it, the batching of the records
and the NOTIFYs.
"""

from zope.interface import implementer

from corednstw.core.interfaces import INotifier, ITransferer
from corednstw.core.plugin import Plugin, zones_from_args
from corednstw.engines.transfer import Outgoing, parse_peer


@implementer(INotifier)
class Transfer(Plugin):
    """Every ``transfer`` directive of a block, as one plugin."""

    name = "transfer"
    passes_answers = True
    once = False

    def __init__(self):
        self.outgoing = Outgoing()

    def stop(self):
        self.outgoing.stop()

    def transferers(self):
        if self.block is None:
            return []
        return self.block.find(ITransferer)

    def serve(self, req):
        resp = self.outgoing.answer(req, self.transferers)
        return self.next.serve(req) if resp is None else resp

    def notify(self, zone):
        """NOTIFY the peers of ``zone`` (what a zone plugin of the block
        calls when the zone changed)."""
        return self.outgoing.notify(self.reactor, zone)


def _peers(c):
    """``to ADDRESS...``: the secondaries allowed to transfer (``*`` for
    any), NOTIFYs going to every one with an address."""
    peers = []
    for h in c.between(1):
        if h == "*":
            peers.append(h)
            continue
        try:
            peers.append(parse_peer(h))
        except ValueError as e:
            raise c.error("not an IP address or file: %s" % h) from e
    return peers


def setup(d, block):
    zones = zones_from_args(d.args, block)
    to = []
    source = None

    def set_source(c):
        """``source ADDRESS``, once: the address NOTIFYs are sent from."""
        nonlocal source
        text = c.one()
        if source is not None:
            raise c.error("source already specified")
        source = str(c.ip(text, 'invalid source address "%s"'))

    d.read_options({"to": lambda c: to.extend(_peers(c)),
                    "source": set_source},
                   unknown='unknown property "%s"')
    if not to:
        raise d.error("'to' is required")
    existing = block.plugin("transfer")
    plugin = existing if existing is not None else Transfer()
    plugin.outgoing.allow(zones, to, source)
    return None if existing is not None else plugin

