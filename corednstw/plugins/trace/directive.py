"""Parsing ``trace [zipkin|datadog] [ENDPOINT] { ... }``.

The options and their error texts are CoreDNS's.  Datadog is refused at
setup: see docs/plugins/trace.md for the libraries checked.
"""

from corednstw.plugins.trace.plugin import Trace

#: Endpoint types and their default endpoints.
PROVIDERS = {"zipkin": "localhost:9411", "datadog": "localhost:8126"}

DEFAULT_SERVICE = "coredns"


def normalize_endpoint(kind, endpoint):
    """(kind, URL): Zipkin endpoints that do not name an http URL become
    ``http://ENDPOINT/api/v2/spans``, as CoreDNS does."""
    if kind not in PROVIDERS:
        raise ValueError("tracing endpoint type '%s' is not supported"
                         % kind)
    endpoint = endpoint or PROVIDERS[kind]
    if kind == "zipkin" and "http" not in endpoint:
        endpoint = "http://%s/api/v2/spans" % endpoint
    return kind, endpoint


def _options(t):
    """The handlers of the block's lines, each setting a field of the
    Trace ``t`` (Go's parsers and texts, as CoreDNS reports them)."""
    def every(c):
        t.every = c.integer(c.one(), func="ParseUint")

    def service(c):
        t.service = c.one()

    def client_server(c):
        """Bare ``client_server`` turns it on."""
        args = c.between(0, 1)
        t.client_server = c.boolean(args[0]) if args else True

    def analytics_rate(c):
        """Bare ``datadog_analytics_rate`` resets it to 0."""
        args = c.between(0, 1)
        rate = c.number(args[0]) if args else 0.0
        if not 0.0 <= rate <= 1.0:
            raise c.error("datadog analytics rate must be between 0 and 1, "
                          "'%f' is not supported" % rate)
        t.analytics_rate = rate

    def max_backlog(c):
        t.max_backlog = c.integer(c.one())

    def max_batch(c):
        t.max_batch = c.integer(c.one())

    def batch_interval(c):
        t.batch_interval = c.duration(c.one())

    return {"every": every, "service": service,
            "client_server": client_server,
            "datadog_analytics_rate": analytics_rate,
            "zipkin_max_backlog_size": max_backlog,
            "zipkin_max_batch_size": max_batch,
            "zipkin_max_batch_interval": batch_interval}


def _local_endpoint(block):
    """CoreDNS names the block's first listen address and port in the
    spans' local endpoint (only when ``bind`` gives an address)."""
    hosts = block.bind or []
    if not hosts or not block.keys:
        return None
    return hosts[0], int(block.keys[0].port)


def setup(d, block):
    d.between(0, 2)
    kind = d.args[0].lower() if len(d.args) == 2 else "zipkin"
    endpoint = d.args[-1] if d.args else ""
    try:
        kind, url = normalize_endpoint(kind, endpoint)
    except ValueError as e:
        raise d.error(str(e)) from e
    t = Trace(kind, url, DEFAULT_SERVICE)
    d.read_options(_options(t))
    if kind == "datadog":
        raise d.error("tracing endpoint type 'datadog' is not supported "
                      "yet: use zipkin (see docs/plugins/trace.md)")
    t.local = _local_endpoint(block)
    return t
