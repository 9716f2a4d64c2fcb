"""Tests of the rpz package: ``trial corednstw_rpz``."""
