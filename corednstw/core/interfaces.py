"""The hooks the core and plugins call on each other, declared in one place.

A plugin that offers a hook says so with ``@implementer(IHook)`` on its
class; whoever needs it asks the block: ``block.find(IHook)`` returns the
block's plugins that provide it, in chain order.  Nothing is looked up by
method-name strings, and no plugin imports another to find it (CoreDNS's
plugins find each other by Go interface the same way).

Why zope.interface and not typing.Protocol: the lookup happens at run time
(``providedBy`` on plugin objects, at setup and start, never per query), and
a Protocol is a static-typing device whose ``runtime_checkable`` form only
checks that method names exist.  zope.interface is Twisted's own idiom
(IResolver, IProtocol), it is already installed with Twisted, a declaration
is explicit (a plugin does not provide a hook by accident of naming), and
``zope.interface.verify.verifyObject`` lets tests check an implementation
against the declaration.

See docs/development.md for an example of each hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from zope.interface import Attribute, Interface

if TYPE_CHECKING:
    from corednstw.core.dnswire import RR
    from corednstw.core.request import Request

#: An address as a socket gives it: (host, port).
Address = tuple[str, int]


class IReadiness(Interface):
    """Reports readiness to the ``ready`` plugin (CoreDNS's ready.Readiness).

    /ready answers 200 only when every provider in the configuration says
    True; the names of those that do not are listed in the 503 body.
    """

    def ready() -> bool:
        """True once the plugin can answer (e.g. its data is synced)."""


class IMetadataProvider(Interface):
    """Fills metadata for the ``metadata`` plugin (CoreDNS's
    metadata.Provider).  Called once per query in the metadata plugin's
    zones, before the rest of the chain runs."""

    def metadata(req: Request) -> None:
        """Set values with ``plugins.metadata.set_value(req, key, value)``;
        a value may be a callable evaluated when first read."""


class ITransferer(Interface):
    """Holds zones the ``transfer`` plugin can send out (CoreDNS's
    transfer.Transferer)."""

    def transfer_records(zone: str,
                         serial: int) -> Optional[list[list[RR]]]:
        """Batches of ``dnswire.RR`` lists for an AXFR of ``zone`` (the
        first and last record the SOA), or for IXFR when ``serial`` is
        current a single SOA; None when this plugin does not hold ``zone``."""


class IForwarderTap(Interface):
    """Receives the messages a forwarder exchanges with its upstreams
    (dnstap's FORWARDER_QUERY / FORWARDER_RESPONSE)."""

    full = Attribute("True when the tap keeps message bytes: only then "
                     "does a forwarder pass the reply's ``wire``.")

    def tap_forwarder_query(req: Request, upstream: Address,
                            wire: Optional[bytes] = None, proto: str = "udp",
                            local: Optional[Address] = None,
                            start: Optional[int] = None) -> int:
        """A query sent to ``upstream`` (host, port); returns the send time
        (ns) to pass back with the response."""

    def tap_forwarder_response(req: Request, upstream: Address,
                               wire: Optional[bytes] = None,
                               proto: str = "udp",
                               local: Optional[Address] = None,
                               start: Optional[int] = None) -> None:
        """The reply ``wire`` received from ``upstream``."""


class IInheritable(Interface):
    """Takes over the state of its predecessor across a reload (a
    kubernetes watch and store survive an unchanged block)."""

    def inherit(old: Any) -> bool:
        """``old`` is the same directive, with the same arguments, in a block
        with the same zones, from the configuration being replaced.  Return
        True when its state was taken (the old plugin is then not stopped)."""


class IFedData(Interface):
    """Keeps data from a watch that, under ``multisocket``, only the
    supervisor runs: its stores are fed there and every change is sent on
    to the workers, which answer from their copy (forked with the
    process) and hold no watch of their own."""

    def fed_stores() -> list[Any]:
        """The stores the watches fill: objects with ``feed(op, kind,
        events)``, a ``taps`` list of callables given every feed, and
        ``after_fork()``."""

    def worker_init() -> None:
        """In a freshly forked worker, before ``start``: forget the
        watches (their threads stayed in the supervisor) and start
        nothing that would open them again."""


class IZoneAdder(Interface):
    """Learns zones that appear at run time (CoreDNS's AddZone: ``auto``
    tells ``prometheus`` which zone label to use for new zones)."""

    def add_zone(zone: str) -> None:
        """``zone``, a lower-case FQDN, is now served by this block."""


class ILameduck(Interface):
    """Delays shutdown: the server keeps answering (and /health says OK)
    for ``lameduck`` seconds after SIGTERM.  The longest one wins."""

    lameduck = Attribute("Seconds to keep serving after a shutdown signal.")


class IHTTPEndpointOwner(Interface):
    """Serves HTTP paths (health, ready, prometheus, ...).  The
    configuration binds each address once and mounts every owner's paths on
    it; two directives claiming one path on one address is a setup error."""

    def http_endpoints() -> list[tuple[str, str, Any]]:
        """A list of ``(address, path, resource)``: ``address`` as written in
        the Corefile (``:8080``, ``127.0.0.1:9153``), ``resource`` a
        twisted.web resource."""


class IAutoPather(Interface):
    """Gives the ``autopath`` plugin a client's search path (CoreDNS's
    autopath.AutoPather): ``autopath @NAME`` asks the block's plugin NAME
    for every query in autopath's zones."""

    def autopath(req: Request) -> Optional[list[str]]:
        """The search domains of the client that sent ``req`` (lower-case
        FQDNs, the last one ``""`` for the name as asked), or None when
        the query should not be completed on the server."""


class IExternal(Interface):
    """Names services outside the cluster for the ``k8s_external`` plugin
    (CoreDNS's external.Externaler, implemented by kubernetes).  A
    service is a tuple ``(host, port, target, ttl)``: an address or a
    host name, a port (-1: none), the FQDN its address records live at,
    a TTL."""

    def external(req: Request, zone: str,
                 headless: bool) -> tuple[list[Any], int]:
        """(services, rcode) for ``req`` in the external ``zone``: the
        services of ``service.namespace``, of an endpoint or a
        ``_port._proto`` name below it, or of an address's reverse name
        (then ``host`` is ``service.namespace``); rcode is NOERROR or
        NXDOMAIN."""

    def external_address(zone: str, headless: bool) -> list[RR]:
        """Address records of this server as seen from outside (the
        external IPs of the services in front of it); their owner names
        are the caller's to set."""

    def external_services(zone: str, headless: bool) -> tuple[
            list[Any], dict[Any, list[Any]]]:
        """For a transfer: (owner, service) pairs of every service with
        external addresses, and (with ``headless``) the endpoints of
        headless services grouped by (owner, kind)."""

    def external_serial(zone: str) -> int:
        """The SOA serial of the external zone: when its data last
        changed."""
