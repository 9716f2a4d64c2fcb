"""Tests of the rrl package: ``trial corednstw_rrl``."""
