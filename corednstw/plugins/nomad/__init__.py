"""nomad: services of Nomad's service catalogue as A, AAAA and SRV
records (CoreDNS's nomad plugin); see docs/plugins/nomad.md."""

from .directive import setup

__all__ = ["setup"]
