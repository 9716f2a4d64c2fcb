"""Tests of the fanout package: ``trial corednstw_fanout``."""
