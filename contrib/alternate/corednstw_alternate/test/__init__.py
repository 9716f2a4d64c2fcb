"""Tests of the alternate package: ``trial corednstw_alternate``."""
