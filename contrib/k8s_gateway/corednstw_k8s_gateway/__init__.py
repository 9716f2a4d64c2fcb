"""k8s_gateway: the external names of a Kubernetes cluster (the external
CoreDNS plugin k8s_gateway) as a corednstw add-on package.

Ingresses, Services of type LoadBalancer, Gateway API routes (through
their parent Gateways' addresses), DNSEndpoints of external-dns and
Nodes answer A, AAAA (and, DNSEndpoints, TXT) queries in the plugin's
zones; the apex has an SOA and NS records naming this server.  Watched
through corednstw's Kubernetes engine (``corednstw.engines.kubernetes``),
the same list/watch machinery as the kubernetes plugin.

The entry point ``k8s_gateway = corednstw_k8s_gateway:PLUGIN``
(pyproject.toml) registers the directive; upstream builds CoreDNS with
it in place of kubernetes and k8s_external, so it sits where kubernetes
sits in plugin.cfg.
"""

from corednstw.core.directives import PluginEntry, setup_from

__version__ = "0.1.0"

__all__ = ["PLUGIN", "setup"]

#: Imported when a Corefile uses the directive (see setup_from).
setup = setup_from("corednstw_k8s_gateway.directive:setup")

#: Upstream's build replaces the kubernetes line of plugin.cfg with
#: k8s_gateway: right before kubernetes, below cache and the rewriting
#: plugins; below prometheus, which counts its answers.
PLUGIN = PluginEntry("k8s_gateway", setup, before="kubernetes",
                     follows=("prometheus",))
