"""SOA serial helpers: reading the serial and timers out of SOA rdata and
comparing serials in RFC 1982 arithmetic (zone transfers, secondary)."""

import struct

_SOA_TAIL = struct.Struct("!IIIII")


def soa_serial(rr):
    return _SOA_TAIL.unpack_from(rr.rdata, len(rr.rdata) - 20)[0]


def soa_timers(rr):
    """(serial, refresh, retry, expire, minimum) of a SOA record."""
    return _SOA_TAIL.unpack_from(rr.rdata, len(rr.rdata) - 20)


def serial_less(a, b):
    """RFC 1982: serial ``a`` is older than ``b``."""
    if a < b:
        return b - a <= 0x7FFFFFFF
    return a - b > 0x7FFFFFFF
