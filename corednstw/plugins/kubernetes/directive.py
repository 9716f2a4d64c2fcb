"""Parsing the kubernetes directive and its options into a Kubernetes
plugin (CoreDNS's kubernetes setup.go), with the kubeconfig checks
client-go makes at setup."""

import os

from corednstw.core import logger
from corednstw.core.durations import parse_duration
from corednstw.core.plugin import Fallthrough, zones_from_args
from corednstw.plugins.kubernetes import selector as sel
from corednstw.plugins.kubernetes.names import is_reverse
from corednstw.plugins.kubernetes.plugin import Kubernetes

POD_MODES = ("disabled", "verified", "insecure")


def setup(d, block):
    zones = zones_from_args(d.args, block)
    if not any(not is_reverse(z) for z in zones):
        raise d.error("non-reverse zone name must be used")
    k = Kubernetes(zones)
    opts = k.conn_opts
    for c in d.children:
        name, args = c.name, c.args
        if name == "endpoint_pod_names":
            if args:
                raise c.arg_error()
            k.podnames = True
        elif name == "pods":
            if len(args) != 1:
                raise c.arg_error()
            if args[0] not in POD_MODES:
                raise d.error("wrong value for pods: %s,  must be one of: "
                              "disabled, verified, insecure" % args[0])
            k.pod_mode = args[0]
        elif name == "namespaces":
            if not args:
                raise c.arg_error()
            k.namespaces.update(args)
        elif name == "endpoint":
            if not args:
                raise c.arg_error()
            if len(args) > 1:
                logger.warning("kubernetes", "Multiple endpoints have been "
                            "deprecated, only the first specified endpoint "
                            "'%s' is used" % args[0])
            opts["endpoint"] = args[0]
        elif name == "tls":
            if len(args) != 3:
                raise c.arg_error()
            opts["tls"] = tuple(args)
        elif name in ("labels", "namespace_labels"):
            if not args:
                raise c.arg_error()
            text = " ".join(args)
            try:
                sel.parse(text)
            except sel.SelectorError as e:
                what = "label" if name == "labels" else "namespace_label"
                raise d.error("unable to parse %s selector value: '%s': %s"
                              % (what, text, e)) from e
            if name == "labels":
                k.labels = text
            else:
                k.namespace_labels = text
        elif name == "fallthrough":
            k.fall = Fallthrough.parse(args)
        elif name == "ttl":
            if not args:
                raise c.arg_error()
            try:
                t = int(args[0])
            except ValueError as e:
                raise d.error("invalid ttl %r" % args[0]) from e
            if t < 0 or t > 3600:
                raise d.error("ttl must be in range [0, 3600]: %d" % t)
            k.ttl = t
        elif name == "noendpoints":
            if args:
                raise c.arg_error()
            k.endpoints = False
        elif name == "zonal":
            if args:
                raise c.arg_error()
            k.zonal = True
        elif name == "ignore":
            if args:
                if args[0] != "empty_service":
                    raise d.error("unable to parse ignore value: '%s'"
                                  % args[0])
                k.ignore_empty = True
        elif name == "kubeconfig":
            if len(args) not in (1, 2):
                raise c.arg_error()
            opts["kubeconfig"] = args[0]
            opts["context"] = args[1] if len(args) == 2 else None
            problem = kubeconfig_error(*args)
            if problem:
                raise d.error(problem)
        elif name == "multicluster":
            k.multicluster = zones_from_args(args, _NoBlock)
        elif name == "startup_timeout":
            if not args:
                raise c.arg_error()
            try:
                k.startup_timeout = parse_duration(args[0])
            except ValueError as e:
                raise d.error("failed to parse startup_timeout: %s, %s"
                              % (args[0], e)) from e
        elif name in ("apiserver_qps", "apiserver_burst",
                      "apiserver_max_inflight"):
            if len(args) != 1:
                raise c.arg_error()
            try:
                v = float(args[0]) if name == "apiserver_qps" else int(args[0])
            except ValueError as e:
                raise d.error("invalid %s %r" % (name, args[0])) from e
            if v < 0:
                raise d.error("%s must be >= 0" % name)
            opts[{"apiserver_qps": "qps", "apiserver_burst": "burst",
                  "apiserver_max_inflight": "inflight"}[name]] = v
        else:
            raise d.error("unknown property '%s'" % name)
    if k.namespaces and k.namespace_labels:
        raise d.error("namespaces and namespace_labels cannot both be set")
    for z in k.multicluster:
        if z not in zones:
            raise d.error("is not authoritative for the multicluster zone %s "
                          "(authoritative zones: %s)" % (z, " ".join(zones)))
    if k.zonal and not k.endpoints:
        raise d.error("zonal requires the endpoint cache; remove "
                      "noendpoints")
    if not opts.get("endpoint") and not opts.get("kubeconfig"):
        if not (os.environ.get("KUBERNETES_SERVICE_HOST")
                and os.environ.get("KUBERNETES_SERVICE_PORT")):
            raise d.error("unable to load in-cluster configuration, "
                          "KUBERNETES_SERVICE_HOST and "
                          "KUBERNETES_SERVICE_PORT must be defined")
    return k


def kubeconfig_error(path, context=None):
    """Why a kubeconfig file cannot give a client configuration (what
    client-go reports when CoreDNS sets the plugin up), or None."""
    import yaml
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return "stat %s: no such file or directory" % path
    except OSError as e:
        return "error loading config file \"%s\": %s" % (path, e.strerror)
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
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


class _NoBlock:
    """multicluster without zones names none (not the block's keys)."""
    zones = ()
