"""The one ordered list of directives (CoreDNS 1.14 plugin.cfg, plus
``proxy`` of CoreDNS 1.0-1.4 right after ``forward``, where 1.4 had it).

A request passes the plugins of its server block in this order, whatever
order the Corefile writes them in.  A directive is implemented by the module
``corednstw.plugins.<name>`` (dashes become underscores); a name in this list
whose module does not exist yet is "not supported yet".
"""

import importlib

ORDER = (
    "root", "metadata", "geoip", "cancel", "proxyproto", "quic",
    "grpc_server", "https", "https3", "timeouts", "multisocket", "reload",
    "nsid", "bufsize", "bind", "debug", "trace", "ready", "health", "pprof",
    "shed", "prometheus", "errors", "log", "dnstap", "local", "dns64", "any",
    "chaos", "loadbalance", "tsig", "rewrite", "autopath", "acl", "cache",
    "header", "dnssec", "tls", "minimal", "template", "transfer", "hosts",
    "route53", "azure", "clouddns", "k8s_external", "kubernetes", "file",
    "auto", "secondary", "etcd", "loop", "forward", "proxy", "grpc",
    "erratic", "whoami", "on", "sign", "view", "nomad",
)

_POSITION = {name: i for i, name in enumerate(ORDER)}


def known(name):
    """True when ``name`` is a CoreDNS directive (built or not)."""
    return name in _POSITION


def position(name):
    """Index of ``name`` in the chain order (KeyError for unknown names)."""
    return _POSITION[name]


def load(name):
    """Return the module implementing directive ``name``, or None if it is
    not built yet.  Import errors inside an existing module propagate."""
    modname = "corednstw.plugins." + name.replace("-", "_")
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name == modname:
            return None
        raise


def supported(name):
    """True when the directive is known and its module exists."""
    return known(name) and load(name) is not None
