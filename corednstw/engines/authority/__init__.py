"""Authoritative zone data and CoreDNS's lookup rules (plugin/file).

Shared by the file, auto and secondary plugins:

- ``zone``: ``ZoneData`` and ``Node``, one zone's records keyed by wire
  name, and the lookup (delegations, DNAME, CNAME chains, wildcards,
  NXDOMAIN/NODATA, additional processing, pre-signed DNSSEC data);
- ``parse``: building a ZoneData from a master file or transferred records;
- ``server``: ``ZonePlugin``, the serving plugin base, and the ``reload``
  option;
- ``serial``: SOA serial and timer helpers;
- ``wire``: wire-form name helpers.
"""

from .parse import from_records, go_quote, parse_file
from .serial import serial_less, soa_serial, soa_timers
from .wire import canonical_key, covered, is_sub, labels, name_end, wire_text
from .zone import (
    DELEGATION,
    NAME_ERROR,
    NO_DATA,
    SERVER_FAILURE,
    SUCCESS,
    Node,
    ZoneData,
    ZoneError,
)
from .zoneplugin import ZonePlugin, drop, reload_option

__all__ = [
    "DELEGATION", "NAME_ERROR", "NO_DATA", "SERVER_FAILURE", "SUCCESS",
    "Node", "ZoneData", "ZoneError", "ZonePlugin", "canonical_key",
    "covered", "drop", "from_records", "go_quote", "is_sub", "labels",
    "name_end", "parse_file", "reload_option", "serial_less", "soa_serial",
    "soa_timers", "wire_text",
]
