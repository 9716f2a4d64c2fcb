"""route53: zones served from AWS Route 53 record sets (CoreDNS's route53
plugin); see docs/plugins/route53.md."""

from .directive import setup

__all__ = ["setup"]
