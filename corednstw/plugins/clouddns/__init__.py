"""clouddns: zones served from Google Cloud DNS record sets (CoreDNS's
clouddns plugin), read through the Cloud DNS REST API; see
docs/plugins/clouddns.md."""

from .directive import setup

__all__ = ["setup"]
