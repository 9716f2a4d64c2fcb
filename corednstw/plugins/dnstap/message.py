"""The protobuf encoding of dnstap messages (dnstap.proto).

The few fields we write are encoded by hand: the protobuf wire format of
bytes, varints and fixed32 is simple, and this keeps a tap to a few
microseconds per query with no runtime dependency (the tests decode every
frame with the protobuf library to check the encoding).
"""

import socket
import struct

# dnstap.Message.Type values.
AUTH_QUERY, AUTH_RESPONSE = 1, 2
RESOLVER_QUERY, RESOLVER_RESPONSE = 3, 4
CLIENT_QUERY, CLIENT_RESPONSE = 5, 6
FORWARDER_QUERY, FORWARDER_RESPONSE = 7, 8
# SocketFamily and SocketProtocol values.
INET, INET6 = 1, 2
UDP, TCP = 1, 2

_FIXED32 = struct.Struct("<I")


def varint(n):
    """Protobuf base-128 varint of a non-negative integer."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_bytes(key, data):
    return key + varint(len(data)) + data


# Field keys (field number << 3 | wire type) of dnstap.Message ...
_K_TYPE = b"\x08"
_K_FAMILY = b"\x10"
_K_PROTOCOL = b"\x18"
_K_QADDR = b"\x22"
_K_RADDR = b"\x2a"
_K_QPORT = b"\x30"
_K_RPORT = b"\x38"
_K_QSEC = b"\x40"
_K_QNSEC = b"\x4d"
_K_QMSG = b"\x52"
_K_RSEC = b"\x60"
_K_RNSEC = b"\x6d"
_K_RMSG = b"\x72"
# ... and of dnstap.Dnstap.
_K_IDENTITY = b"\x0a"
_K_VERSION = b"\x12"
_K_EXTRA = b"\x1a"
_K_MESSAGE = b"\x72"
_DNSTAP_MESSAGE = b"\x78\x01"       # type = MESSAGE


def _ip(host):
    """(family, address bytes): IPv4 and IPv4-mapped IPv6 as 4 bytes."""
    if ":" in host:
        if host.startswith("::ffff:") and "." in host:
            return INET, socket.inet_aton(host[7:])
        return INET6, socket.inet_pton(socket.AF_INET6, host.split("%")[0])
    return INET, socket.inet_aton(host)


def encode_message(mtype, proto=None, query=None, response=None,
                   qtime=None, rtime=None, qmsg=None, rmsg=None):
    """A dnstap.Message.

    ``query``/``response``: (host, port) of the two ends (the socket
    family comes from whichever is given, the response end last, as
    CoreDNS's setters do); ``proto``: 'udp' or 'tcp'; times are
    nanoseconds since the epoch; ``qmsg``/``rmsg`` the DNS wire messages.
    """
    out = [_K_TYPE, bytes((mtype,))]
    fam = None
    qa = ra = None
    if query is not None:
        fam, qa = _ip(query[0])
    if response is not None:
        fam, ra = _ip(response[0])
    if fam is not None:
        out.append(_K_FAMILY + bytes((fam,)))
    if proto is not None:
        out.append(_K_PROTOCOL + (b"\x02" if proto == "tcp" else b"\x01"))
    if qa is not None:
        out.append(_field_bytes(_K_QADDR, qa))
    if ra is not None:
        out.append(_field_bytes(_K_RADDR, ra))
    if query is not None:
        out.append(_K_QPORT + varint(query[1]))
    if response is not None:
        out.append(_K_RPORT + varint(response[1]))
    if qtime is not None:
        sec, nsec = divmod(qtime, 1000000000)
        out.append(_K_QSEC + varint(sec) + _K_QNSEC + _FIXED32.pack(nsec))
    if qmsg is not None:
        out.append(_field_bytes(_K_QMSG, qmsg))
    if rtime is not None:
        sec, nsec = divmod(rtime, 1000000000)
        out.append(_K_RSEC + varint(sec) + _K_RNSEC + _FIXED32.pack(nsec))
    if rmsg is not None:
        out.append(_field_bytes(_K_RMSG, rmsg))
    return b"".join(out)


def encode_dnstap(message, identity=b"", version=b"", extra=None):
    """A dnstap.Dnstap of type MESSAGE wrapping an encoded Message."""
    return envelope_head(identity, version) + envelope_tail(message, extra)


def envelope_head(identity, version):
    """The constant start of every Dnstap a tap writes."""
    out = b""
    if identity:
        out += _field_bytes(_K_IDENTITY, identity)
    if version:
        out += _field_bytes(_K_VERSION, version)
    return out


def envelope_tail(message, extra):
    out = b""
    if extra:
        out = _field_bytes(_K_EXTRA, extra)
    return out + _field_bytes(_K_MESSAGE, message) + _DNSTAP_MESSAGE
