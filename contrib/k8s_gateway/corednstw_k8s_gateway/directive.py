"""Reading the ``k8s_gateway`` stanza, with upstream's words for each
refusal.

    k8s_gateway [ZONES...] {
        resources [RESOURCES...]
        ingressClasses [CLASSES...]
        gatewayClasses [CLASSES...]
        serviceLabelSelectors SELECTOR [SELECTOR...]
        ttl TTL
        apex APEX
        secondary SECONDARY
        kubeconfig KUBECONFIG [CONTEXT]
        fallthrough [ZONES...]
        nodeAddressType InternalIP|ExternalIP
    }
"""

from corednstw.core.plugin import Fallthrough, zones_from_args
from corednstw.engines.kubernetes import selector
from corednstw_k8s_gateway.plugin import K8sGateway


def setup(d, block):
    gw = K8sGateway(zones_from_args(d.args, block))
    d.read_options({
        "fallthrough": lambda c: setattr(gw, "fall",
                                         Fallthrough.parse(c.args)),
        "secondary": lambda c: setattr(gw, "secondary", c.between(1)[0]),
        "resources": lambda c: _resources(c, gw),
        "ttl": lambda c: setattr(gw, "ttl", c.integer(
            c.between(1)[0], lo=0, hi=3600,
            range_error="ttl must be in range [0, 3600]: %d")),
        "apex": lambda c: setattr(gw, "apex", c.between(1)[0]),
        "kubeconfig": lambda c: _kubeconfig(c, gw),
        "ingressClasses": lambda c: setattr(gw, "ingress_classes", c.between(
            1, error="Incorrectly formatted 'ingressClasses' parameter")),
        "gatewayClasses": lambda c: setattr(gw, "gateway_classes", c.between(
            1, error="Incorrectly formatted 'gatewayClasses' parameter")),
        "serviceLabelSelectors": lambda c: _selectors(c, gw),
        "nodeAddressType": lambda c: setattr(gw, "node_address_type",
                                             _node_address_type(c)),
    }, unknown="Unknown property '%s'")
    return gw


def _resources(c, gw):
    """The resources in the order they are asked (the first that knows a
    name answers); a later line replaces an earlier one."""
    if not c.args:
        raise c.error("Incorrectly formatted 'resource' parameter")
    gw.resources = list(c.args)


def _kubeconfig(c, gw):
    """``kubeconfig FILE [CONTEXT]``: as upstream, a context is taken
    only when it is the second and last argument."""
    args = c.between(1)
    gw.conn_opts = {"kubeconfig": args[0]}
    if len(args) == 2:
        gw.conn_opts["context"] = args[1]


def _selectors(c, gw):
    """Each selector is a watch of its own; checked now, so a typo is a
    Corefile error."""
    if not c.args:
        raise c.error("serviceLabelSelectors requires at least one "
                      "argument (a label selector string)")
    for text in c.args:
        if text == "":
            raise c.error("serviceLabelSelectors does not accept empty "
                          "strings")
        try:
            selector.parse(text)
        except selector.SelectorError as e:
            raise c.error('invalid serviceLabelSelectors "%s": %s'
                          % (text, e)) from None
        gw.service_selectors.append(text)


def _node_address_type(c):
    value = c.one()
    if value not in ("InternalIP", "ExternalIP"):
        raise c.error("nodeAddressType must be 'InternalIP' or "
                      "'ExternalIP', got: %s" % value)
    return value
