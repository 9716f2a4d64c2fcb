"""trace: a Zipkin span per sampled query, a child span per plugin."""

from corednstw.plugins.trace.directive import setup

__all__ = ["setup"]
