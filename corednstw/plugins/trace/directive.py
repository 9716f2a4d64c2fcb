"""Parsing ``trace [zipkin|datadog] [ENDPOINT] { ... }``.

The options and their error texts are CoreDNS's.  Datadog is refused at
setup: see docs/plugins/trace.md for the libraries checked.
"""

from corednstw.core.durations import parse_duration
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


def _uint(c, text):
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0 or not text.isdigit():
        raise c.error('strconv.ParseUint: parsing "%s": invalid syntax'
                      % text)
    return value


def _int(c, text):
    try:
        return int(text, 10)
    except ValueError as e:
        raise c.error('strconv.Atoi: parsing "%s": invalid syntax'
                      % text) from e


def _bool(c, text):
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise c.error('strconv.ParseBool: parsing "%s": invalid syntax' % text)


def _one(c):
    if len(c.args) != 1:
        raise c.arg_error()
    return c.args[0]


def _option(t, c):
    """Apply one line of the block to the Trace ``t``."""
    if c.name == "every":
        t.every = _uint(c, _one(c))
    elif c.name == "service":
        t.service = _one(c)
    elif c.name == "client_server":
        if len(c.args) > 1:
            raise c.arg_error()
        t.client_server = _bool(c, c.args[0]) if c.args else True
    elif c.name == "datadog_analytics_rate":
        if len(c.args) > 1:
            raise c.arg_error()
        rate = 0.0
        if c.args:
            try:
                rate = float(c.args[0])
            except ValueError as e:
                raise c.error('strconv.ParseFloat: parsing "%s": invalid '
                              "syntax" % c.args[0]) from e
        if not 0.0 <= rate <= 1.0:
            raise c.error("datadog analytics rate must be between 0 and 1, "
                          "'%f' is not supported" % rate)
        t.analytics_rate = rate
    elif c.name == "zipkin_max_backlog_size":
        t.max_backlog = _int(c, _one(c))
    elif c.name == "zipkin_max_batch_size":
        t.max_batch = _int(c, _one(c))
    elif c.name == "zipkin_max_batch_interval":
        text = _one(c)
        try:
            t.batch_interval = parse_duration(text)
        except ValueError as e:
            raise c.error('time: invalid duration "%s"' % text) from e
    else:
        raise c.error("unknown property '%s'" % c.name)


def _local_endpoint(block):
    """CoreDNS names the block's first listen address and port in the
    spans' local endpoint (only when ``bind`` gives an address)."""
    hosts = block.bind or []
    if not hosts or not block.keys:
        return None
    return hosts[0], int(block.keys[0].port)


def setup(d, block):
    if len(d.args) > 2:
        raise d.arg_error()
    kind = d.args[0].lower() if len(d.args) == 2 else "zipkin"
    endpoint = d.args[-1] if d.args else ""
    try:
        kind, url = normalize_endpoint(kind, endpoint)
    except ValueError as e:
        raise d.error(str(e)) from e
    t = Trace(kind, url, DEFAULT_SERVICE)
    for c in d.children:
        _option(t, c)
    if kind == "datadog":
        raise d.error("tracing endpoint type 'datadog' is not supported "
                      "yet: use zipkin (see docs/plugins/trace.md)")
    t.local = _local_endpoint(block)
    return t
