"""Engines shared by several plugins (CoreDNS's plugin/pkg): upstream
exchange, response classification, authoritative zone data."""
