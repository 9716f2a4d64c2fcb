"""Parsing the kubernetes directive and its options into a Kubernetes
plugin (CoreDNS's kubernetes setup.go), with the kubeconfig checks
client-go makes at setup, and the options of CoreDNS 1.x since removed
(``resyncperiod``, ``upstream``, ``transfer to``) accepted with a
deprecation notice."""

import os

from corednstw.core import logger
from corednstw.core.plugin import Fallthrough, zones_from_args
from corednstw.engines.kubernetes import selector as sel
from corednstw.engines.transfer import parse_peer
from corednstw.plugins.kubernetes import upstream as up
from corednstw.plugins.kubernetes.names import is_reverse
from corednstw.plugins.kubernetes.plugin import Kubernetes

POD_MODES = ("disabled", "verified", "insecure")

UPSTREAM_GONE = ("upstream was removed in CoreDNS 1.7.0: ExternalName "
                 "targets are resolved through the server itself; remove it")
UPSTREAM_ADDRESSES = (" (its addresses are still asked here, as CoreDNS "
                      "1.3 did)")
RESYNC_GONE = ("resyncperiod was removed in CoreDNS 1.7.0 and is ignored: "
               "no longer needed, the watches keep the data current; "
               "remove it")
TRANSFER_GONE = ("transfer in kubernetes was removed in CoreDNS 1.8.0: use "
                 "the transfer plugin (transfer ZONE { to ADDRESS... })")


def setup(d, block):
    """The plugin of one ``kubernetes`` directive.  An option's error
    names the option's own line, so a user finds it in a long block."""
    zones = zones_from_args(d.args, block)
    if not any(not is_reverse(z) for z in zones):
        raise d.error("non-reverse zone name must be used")
    k = Kubernetes(zones)
    d.read_options({name: (lambda c, f=option: f(c, k, block))
                    for name, option in OPTIONS.items()})
    _check(d, k, zones)
    _default_scheme(k.conn_opts)
    return k


def _check(d, k, zones):
    """Rules across options, reported at the directive's line."""
    if k.namespaces and k.namespace_labels:
        raise d.error("namespaces and namespace_labels cannot both be set")
    for z in k.multicluster:
        if z not in zones:
            raise d.error("is not authoritative for the multicluster zone %s "
                          "(authoritative zones: %s)" % (z, " ".join(zones)))
    if k.zonal and not k.endpoints:
        raise d.error("zonal requires the endpoint cache; remove "
                      "noendpoints")
    opts = k.conn_opts
    if not opts.get("endpoint") and not opts.get("kubeconfig"):
        if not (os.environ.get("KUBERNETES_SERVICE_HOST")
                and os.environ.get("KUBERNETES_SERVICE_PORT")):
            raise d.error("unable to load in-cluster configuration, "
                          "KUBERNETES_SERVICE_HOST and "
                          "KUBERNETES_SERVICE_PORT must be defined")


def _default_scheme(opts):
    """An endpoint written host:port gets client-go's default scheme:
    https when ``tls`` gives certificates, http otherwise (CoreDNS 1.x
    Corefiles often name ``kubectl proxy`` as 127.0.0.1:8001)."""
    endpoint = opts.get("endpoint")
    if endpoint and "://" not in endpoint:
        scheme = "https://" if opts.get("tls") else "http://"
        opts["endpoint"] = scheme + endpoint


# -- the options, one function each: (line, plugin, block) --------------------

def _endpoint_pod_names(c, k, block):
    c.no_args()
    k.podnames = True


def _pods(c, k, block):
    k.pod_mode = c.choice(c.one(), POD_MODES, "wrong value for pods: %s,  "
                          "must be one of: disabled, verified, insecure")


def _namespaces(c, k, block):
    k.namespaces.update(c.between(1))


def _endpoint(c, k, block):
    """Only the first endpoint is used, as in CoreDNS (with its warning
    when there are more)."""
    args = c.between(1)
    if len(args) > 1:
        logger.warning("kubernetes", "Multiple endpoints have been "
                       "deprecated, only the first specified endpoint "
                       "'%s' is used" % args[0])
    k.conn_opts["endpoint"] = args[0]


def _tls(c, k, block):
    k.conn_opts["tls"] = tuple(c.exactly(3))


def _labels(c, k, block):
    """labels and namespace_labels: a selector, checked now so a typo
    fails the configuration rather than every watch."""
    text = " ".join(c.between(1))
    try:
        sel.parse(text)
    except sel.SelectorError as e:
        what = "label" if c.name == "labels" else "namespace_label"
        raise c.error("unable to parse %s selector value: '%s': %s"
                      % (what, text, e)) from e
    if c.name == "labels":
        k.labels = text
    else:
        k.namespace_labels = text


def _fallthrough(c, k, block):
    k.fall = Fallthrough.parse(c.args)


def _ttl(c, k, block):
    """Seconds, 0 to 3600; the first argument counts, as in CoreDNS."""
    text = c.between(1)[0]
    k.ttl = c.integer(text, lo=0, hi=3600, error="invalid ttl {text!r}",
                      range_error="ttl must be in range [0, 3600]: %d")


def _noendpoints(c, k, block):
    c.no_args()
    k.endpoints = False


def _zonal(c, k, block):
    c.no_args()
    k.zonal = True


def _ignore(c, k, block):
    """``ignore empty_service``; CoreDNS accepts the option bare, as a
    no-op."""
    if c.args:
        c.choice(c.args[0], ("empty_service",),
                 "unable to parse ignore value: '%s'")
        k.ignore_empty = True


def _kubeconfig(c, k, block):
    """``kubeconfig PATH [CONTEXT]``, checked now as client-go checks it
    when CoreDNS sets the plugin up."""
    args = c.between(1, 2)
    k.conn_opts["kubeconfig"] = args[0]
    k.conn_opts["context"] = args[1] if len(args) == 2 else None
    problem = kubeconfig_error(*args)
    if problem:
        raise c.error(problem)


def _multicluster(c, k, block):
    # without zones it names none (not the block's keys)
    k.multicluster = zones_from_args(c.args, block) if c.args else []


def _startup_timeout(c, k, block):
    """A duration (a bare number counts as seconds)."""
    text = c.between(1)[0]
    k.startup_timeout = c.duration(
        text, strict=False,
        error="failed to parse startup_timeout: {text}, {reason}")


def _apiserver(c, k, block):
    """The API client's limits: apiserver_qps (a float), apiserver_burst
    and apiserver_max_inflight (integers), none negative."""
    name = c.name
    text = c.one()
    invalid = "invalid " + name + " {text!r}"
    if name == "apiserver_qps":
        v = c.number(text, error=invalid)
    else:
        v = c.integer(text, error=invalid)
    if v < 0:
        raise c.error("%s must be >= 0" % name)
    k.conn_opts[{"apiserver_qps": "qps", "apiserver_burst": "burst",
                 "apiserver_max_inflight": "inflight"}[name]] = v


# -- options of CoreDNS 1.0 to 1.7 since removed ------------------------------

def _resyncperiod(c, k, block):
    """Parsed as 1.5 did, then ignored: the informers' periodic resync
    only replayed the cache; our watches need none."""
    text = c.between(1)[0]
    c.duration(text, error="unable to parse resync duration value: "
               "'{text}': {reason}")
    c.deprecated(RESYNC_GONE)


def _upstream(c, k, block):
    """Without addresses: through the server itself (what every CoreDNS
    release since 1.4 does anyway).  With addresses: through them, as
    1.1 to 1.3 did."""
    if not c.args:
        k.upstream = None
        c.deprecated(UPSTREAM_GONE)
        return
    try:
        servers = up.parse_servers(c.args, up.file_finder(c, block))
    except (ValueError, OSError) as e:
        raise c.error(str(e)) from e
    if not servers:
        raise c.error("no nameservers found in %s" % " ".join(c.args))
    k.upstream = up.Upstream(servers)
    c.deprecated(UPSTREAM_GONE + UPSTREAM_ADDRESSES)


def _transfer(c, k, block):
    """``transfer to ADDRESS...``: the kubernetes zones may be transferred
    to these addresses, as a transfer plugin with them would allow."""
    args = c.between(1)
    if args[0] == "from":
        raise c.error("can't use `transfer from` when not being a "
                      "secondary")
    if args[0] != "to" or len(args) < 2:
        raise c.arg_error()
    for h in args[1:]:
        if h == "*":
            k.transfer_to.append(h)
            continue
        try:
            k.transfer_to.append(parse_peer(h))
        except ValueError as e:
            raise c.error("must specify an IP address: `%s'" % h) from e
    c.deprecated(TRANSFER_GONE)


OPTIONS = {
    "endpoint_pod_names": _endpoint_pod_names,
    "pods": _pods,
    "namespaces": _namespaces,
    "endpoint": _endpoint,
    "tls": _tls,
    "labels": _labels,
    "namespace_labels": _labels,
    "fallthrough": _fallthrough,
    "ttl": _ttl,
    "noendpoints": _noendpoints,
    "zonal": _zonal,
    "ignore": _ignore,
    "kubeconfig": _kubeconfig,
    "multicluster": _multicluster,
    "startup_timeout": _startup_timeout,
    "apiserver_qps": _apiserver,
    "apiserver_burst": _apiserver,
    "apiserver_max_inflight": _apiserver,
    "resyncperiod": _resyncperiod,
    "upstream": _upstream,
    "transfer": _transfer,
}


def kubeconfig_error(path, context=None):
    """Why a kubeconfig file cannot give a client configuration (what
    client-go reports when CoreDNS sets the plugin up), or None."""
    from corednstw.engines.kubernetes import kubeconfig
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return "stat %s: no such file or directory" % path
    except OSError as e:
        return "error loading config file \"%s\": %s" % (path, e.strerror)
    try:
        cfg = kubeconfig.load(text)
    except kubeconfig.yaml_error() as e:   # (evaluated on an error only)
        why = str(e).replace("\n", " ")
        return "error loading config file \"%s\": yaml: %s" % (path, why)
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        return ("error loading config file \"%s\": couldn't get version/kind;"
                " json parse error" % path)
    name = context or cfg.get("current-context") or ""
    contexts = {c.get("name"): c.get("context") or {}
                for c in cfg.get("contexts") or () if isinstance(c, dict)}
    if not name:
        return ("invalid configuration: no configuration has been provided")
    if name not in contexts:
        return ("invalid configuration: context was not found for "
                "specified context: %s" % name)
    cluster = contexts[name].get("cluster")
    clusters = {c.get("name"): c.get("cluster") or {}
                for c in cfg.get("clusters") or () if isinstance(c, dict)}
    if cluster not in clusters:
        return ("invalid configuration: cluster \"%s\" not found"
                % (cluster or ""))
    if not clusters[cluster].get("server"):
        return "invalid configuration: cluster has no server defined"
    return None
