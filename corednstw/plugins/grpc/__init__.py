"""grpc: forward queries to upstreams over gRPC (CoreDNS's DnsService)."""

from corednstw.plugins.grpc.directive import setup

__all__ = ["setup"]
