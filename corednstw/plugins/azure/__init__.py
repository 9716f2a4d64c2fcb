"""azure: zones served from Azure DNS record sets (CoreDNS's azure
plugin), read through Azure's REST API; see docs/plugins/azure.md."""

from .directive import setup

__all__ = ["setup"]
