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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from zope.interface import Attribute, Interface

if TYPE_CHECKING:
    from corednstw.core.dnswire import RR
    from corednstw.core.request import Pieces, Request

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


class INotifier(Interface):
    """Tells secondaries a zone changed (CoreDNS's transfer.Notify): the
    transfer plugin, for the zone plugins of its block (file, auto,
    secondary) to call after a reload of a zone."""

    def notify(zone: str) -> Any:
        """Send NOTIFY for ``zone`` to its peers; may return a Deferred."""


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
    it; two directives claiming one path on one address is a setup error.
    An owner may also have an ``http_tls`` attribute: None, or the TLS its
    addresses are served with (an object with ``source``, the file it was
    read from, and ``creator()``, an IOpenSSLServerConnectionCreator)."""

    def http_endpoints() -> list[tuple[str, str, Any]]:
        """A list of ``(address, path, resource)``: ``address`` as written in
        the Corefile (``:8080``, ``127.0.0.1:9153``), ``resource`` a page
        (an object with ``respond(query)``, see service/httpd.py: served
        by the small HTTP server) or a twisted.web resource (then the
        address is served by twisted.web)."""


class IAutoPather(Interface):
    """Gives the ``autopath`` plugin a client's search path (CoreDNS's
    autopath.AutoPather): ``autopath @NAME`` asks the block's plugin NAME
    for every query in autopath's zones."""

    def autopath(req: Request) -> Optional[list[str]]:
        """The search domains of the client that sent ``req`` (lower-case
        FQDNs, the last one ``""`` for the name as asked), or None when
        the query should not be completed on the server."""


class IKeptAnswers(Interface):
    """Hands the ``cache`` plugin the answers a plugin keeps until its data
    changes, already cut at their TTL fields (``request.Pieces``): a miss
    then stores and sends them without records being built, encoded or
    cut again.  The cache asks only the plugin right after it in the
    chain (nothing in between may change the answer) and only for a
    QUERY of a plain type; when it gets None it asks the chain as
    always, and hands back what it cut from the plugin's own answer
    (``keep_answer``)."""

    def kept_answer(req: Request) -> Any:
        """The answer ``serve(req)`` would give now, when the plugin gives
        it itself: cut (a ``Pieces``) when it can be, else the Response or
        Deferred ``serve`` gives (the work is done once, here); None when
        serve would pass the query on or wait (nothing done: the cache
        asks the chain).  The answer must not depend on the query's
        header flags: the cache asks with the client's query, where the
        chain would get a copy with AD set: the plugin must not pass the
        query on once it has taken it."""

    def keep_answer(req: Request, cut: Pieces) -> None:
        """``cut`` is the answer the plugin's ``serve`` has just given
        ``req`` (the cache cut it): kept for ``kept_answer`` when the
        plugin keeps that answer itself (else nothing)."""


#: The kinds of the headless groups ``IExternal.external_services`` gives
#: (CoreDNS's Endpoint and PortProtocol key suffixes): an endpoint's
#: records at the service name, or a named port's ``_port._proto``
#: records.
EXTERNAL_ENDPOINT = "endpoint"
EXTERNAL_PORT_PROTOCOL = "port.protocol"


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
        headless services grouped by (owner, kind), the kind
        EXTERNAL_ENDPOINT or EXTERNAL_PORT_PROTOCOL."""

    def external_serial(zone: str) -> int:
        """The SOA serial of the external zone: when its data last
        changed."""


class IListener(Interface):
    """One listening address of the running server, as a plugin sees it
    (``IServer.listeners_of``)."""

    host = Attribute("The address bound (None: every address).")
    port = Attribute("The port actually bound (a port-0 listener's number).")
    kind = Attribute("What is served: dns, tcp, tls, https, http, grpc, "
                     "quic or https3.")
    mux = Attribute("The block mux answering this listener's queries.")
    udp_protocol = Attribute(
        "The UDP protocol of a plain DNS listener (shed installs its "
        "bounded writer there), or None for stream-only transports.")


class IServer(Interface):
    """What a plugin may ask of the running server: the one way a plugin
    reaches the process (``block.server``).

    CoreDNS's plugins reach the same things through the caddy instance
    and dnsserver.Server: the reactor and clock, an upstream lookup that
    re-enters the server, the configuration being served, reload,
    readiness, the listeners of their block and the metrics of every
    process.  The App implements it; a multisocket supervisor and its
    workers implement it too, each for its own part.
    """

    reactor = Attribute("The Twisted reactor the server runs on.")
    config = Attribute("The configuration being served (core.config."
                       "Config), or None before the first start.")
    running = Attribute("True while the service is started.")
    lameduck = Attribute("True from a shutdown signal until the end: the "
                         "server still answers, /ready says 503.")

    def clock() -> float:
        """Monotonic seconds (query durations, timers)."""

    def lookup(name: str, qtype: int, qclass: int = 1,
               parent: Optional[Request] = None, do: bool = False) -> Any:
        """A Deferred of the Response the whole server gives for the
        question (CoreDNS's upstream), or of None when nothing answered
        or the loop guard (``parent.depth``) stopped it."""

    def parse(strict: bool = True) -> list[Any]:
        """The Corefile as it is now, parsed into server blocks;
        ``strict=False``: the grammar alone (reload's change check)."""

    def reload() -> bool:
        """Switch to the Corefile as it is now; False when the old
        configuration was kept (the service counts the failure)."""

    def is_ready(plugin: Any) -> bool:
        """The readiness ``ready`` reports for an IReadiness ``plugin``."""

    def not_ready() -> Sequence[str]:
        """Names ``ready`` lists beside the plugins': parts of the server
        itself that cannot answer yet (a supervisor's first workers)."""

    def listeners_of(block: Any = None) -> list[tuple[Any, IListener]]:
        """``((transport, host, port), listener)`` for every listener
        serving ``block`` (every listener when ``block`` is None)."""

    def http_port(address: Optional[str] = None) -> int:
        """The port an HTTP endpoint address was bound to (port 0 in
        tests); KeyError when none is open."""

    def gather_metrics() -> Any:
        """A Deferred of every process's metric values summed (a
        multisocket supervisor), or None when this process's own
        counters are the whole story."""
