"""DNS wire format: the few parts of it the hot path needs, by hand.

Twisted's ``dns.Message`` and dnspython's ``dns.message`` both decode every
section into objects; that costs more than our whole per-query budget.  This
module reads the header, the question and the OPT record straight from the
bytes and writes responses from records whose rdata is already wire-encoded.
Everything else (zone files, exotic rdata) goes through dnspython, with wire
bytes as the interchange.

Why one module of this size: it is the one place that knows the wire
format (constants, names, records, rdata builders, the record walker);
every other module imports it as ``w``, and splitting it would only
spread those names over several imports on hot paths.
"""

import functools
import ipaddress
import socket
import struct

import dns.rcode
import dns.rdataclass
import dns.rdatatype

# Header flag bits (second 16-bit word of the header).
QR = 0x8000
AA = 0x0400
TC = 0x0200
RD = 0x0100
RA = 0x0080
AD = 0x0020
CD = 0x0010

OPCODE_QUERY = 0
OPCODE_NOTIFY = 4

NOERROR = 0
FORMERR = 1
SERVFAIL = 2
NXDOMAIN = 3
NOTIMP = 4
REFUSED = 5
NOTAUTH = 9
BADVERS = 16

CLASS_IN = 1
CLASS_CH = 3
CLASS_ANY = 255

A = 1
NS = 2
CNAME = 5
SOA = 6
PTR = 12
HINFO = 13
MX = 15
TXT = 16
AAAA = 28
SRV = 33
DNAME = 39
OPT = 41
DS = 43
RRSIG = 46
NSEC = 47
DNSKEY = 48
NSEC3 = 50
SVCB = 64
HTTPS = 65
IXFR = 251
AXFR = 252
ANY = 255

MIN_UDP_SIZE = 512
MAX_MSG_SIZE = 65535

_HEADER = struct.Struct("!HHHHHH")
_RRHEAD = struct.Struct("!HHIH")
_H = struct.Struct("!H")
_HH = struct.Struct("!HH")
_HHH = struct.Struct("!HHH")


class FormatError(Exception):
    """The query cannot be parsed: the server answers FORMERR."""


# -- names -----------------------------------------------------------------

_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   b"0123456789-_*/+=:~^!#$%&'`|{}<>?,[]")


def _label_text(label):
    """Presentation form of one label, with CoreDNS's (miekg) escapes."""
    if all(c in _PLAIN for c in label):
        return label.decode("ascii")
    out = []
    for c in label:
        if c in _PLAIN:
            out.append(chr(c))
        elif c in b'.;\\()"@ ':
            out.append("\\" + chr(c))
        else:
            out.append("\\%03d" % c)
    return "".join(out)


def read_name(data, off):
    """Decode the (possibly compressed) name at ``off``.

    Returns (text, end) where text is the FQDN in presentation form with its
    case kept and end is the offset just past the name in the original
    position.  Raises FormatError on loops, bad pointers and overruns.
    """
    labels = []
    end = None
    hops = 0
    length = len(data)
    total = 0
    while True:
        if off >= length:
            raise FormatError("name overruns message")
        n = data[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0 == 0xC0:
            if off + 1 >= length:
                raise FormatError("truncated pointer")
            if end is None:
                end = off + 2
            hops += 1
            if hops > 127:
                raise FormatError("compression loop")
            off = ((n & 0x3F) << 8) | data[off + 1]
            continue
        if n & 0xC0:
            raise FormatError("bad label type")
        total += n + 1
        if total > 254:
            raise FormatError("name too long")
        labels.append(data[off + 1:off + 1 + n])
        off += 1 + n
        if off > length:
            raise FormatError("label overruns message")
    if end is None:
        end = off
    if not labels:
        return ".", end
    return ".".join(_label_text(lb) for lb in labels) + ".", end


@functools.lru_cache(maxsize=65536)
def name_to_wire(name):
    """Uncompressed wire form of presentation name ``name`` (case kept).

    Accepts names with or without the final dot; handles ``\\.`` and
    ``\\DDD`` escapes.  Cached: plugins call it with the same few names.
    """
    if name in (".", ""):
        return b"\x00"
    if "\\" not in name:
        parts = name.rstrip(".").split(".")
        out = bytearray()
        for p in parts:
            b = p.encode("utf-8") if not p.isascii() else p.encode("ascii")
            if not b or len(b) > 63:
                raise ValueError("bad label in %r" % name)
            out.append(len(b))
            out += b
        out.append(0)
        if len(out) > 255:
            raise ValueError("name too long: %r" % name)
        return bytes(out)
    import dns.name
    return dns.name.from_text(name).to_wire()


def wire_labels(wire):
    """Offsets of each label start in an uncompressed wire name."""
    offs = []
    i = 0
    while wire[i]:
        offs.append(i)
        i += wire[i] + 1
    return offs


def reverse_name(ip):
    """The in-addr.arpa./ip6.arpa. name of an address (text)."""
    import ipaddress
    return ipaddress.ip_address(ip).reverse_pointer + "."


# -- type and rcode names ----------------------------------------------------

@functools.lru_cache(maxsize=None)
def type_text(t):
    """Mnemonic of a type number as CoreDNS prints it (TYPE123 if unknown)."""
    return dns.rdatatype.to_text(t)


@functools.lru_cache(maxsize=None)
def class_text(c):
    return dns.rdataclass.to_text(c)


_RCODE_NAMES = {
    0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP",
    5: "REFUSED", 6: "YXDOMAIN", 7: "YXRRSET", 8: "NXRRSET", 9: "NOTAUTH",
    10: "NOTZONE", 16: "BADSIG", 17: "BADKEY", 18: "BADTIME", 19: "BADMODE",
    20: "BADNAME", 21: "BADALG", 22: "BADTRUNC", 23: "BADCOOKIE",
}


def rcode_text(rc):
    """Rcode mnemonic as CoreDNS's metrics and logs print it."""
    name = _RCODE_NAMES.get(rc)
    if name is None:
        return str(rc)
    return name


def type_value(text):
    """Type number from a mnemonic (or TYPEnnn); ValueError if unknown."""
    try:
        return dns.rdatatype.from_text(text.upper())
    except Exception as e:
        raise ValueError("unknown type %r" % text) from e


def rcode_value(text):
    """Rcode number from a mnemonic; ValueError if unknown."""
    up = text.upper()
    for k, v in _RCODE_NAMES.items():
        if v == up:
            return k
    try:
        return int(dns.rcode.from_text(up))
    except Exception as e:
        raise ValueError("unknown rcode %r" % text) from e


# -- records -----------------------------------------------------------------

class RR:
    """One resource record with wire-form rdata.

    ``name`` is the owner in presentation form (any case); ``rdata`` is the
    uncompressed wire rdata.  Kept small (slots) because answers are built
    per query on some paths.
    """

    __slots__ = ("name", "rtype", "rclass", "ttl", "rdata")

    def __init__(self, name, rtype, ttl, rdata, rclass=CLASS_IN):
        self.name = name
        self.rtype = rtype
        self.rclass = rclass
        self.ttl = ttl
        self.rdata = rdata

    def __repr__(self):
        return "<RR %s>" % self.to_text()

    def __eq__(self, other):
        return (isinstance(other, RR) and self.rtype == other.rtype
                and self.rclass == other.rclass and self.ttl == other.ttl
                and self.rdata == other.rdata
                and self.name.lower() == other.name.lower())

    def __hash__(self):
        return hash((self.name.lower(), self.rtype, self.rdata))

    def copy(self, name=None, ttl=None):
        return RR(self.name if name is None else name, self.rtype,
                  self.ttl if ttl is None else ttl, self.rdata, self.rclass)

    def rdata_obj(self):
        """The rdata as a dnspython object (slow; for logs and tests)."""
        import dns.rdata
        return dns.rdata.from_wire(self.rclass, self.rtype, self.rdata, 0,
                                   len(self.rdata))

    def rdata_text(self):
        return self.rdata_obj().to_text()

    def to_text(self):
        """Zone-file line, as CoreDNS's log and tests print records."""
        return "%s\t%d\t%s\t%s\t%s" % (
            self.name, self.ttl, class_text(self.rclass),
            type_text(self.rtype), self.rdata_text())

    @classmethod
    def from_text(cls, name, rtype, ttl, text, rclass=CLASS_IN, origin=None):
        """Build from presentation rdata (uses dnspython; not for hot
        paths)."""
        import dns.name
        import dns.rdata
        if isinstance(rtype, str):
            rtype = type_value(rtype)
        org = dns.name.from_text(origin) if origin else dns.name.root
        rd = dns.rdata.from_text(rclass, rtype, text, origin=org,
                                 relativize=False)
        return cls(name, rtype, ttl, rdata_wire(rd), rclass)

    @classmethod
    def from_dnspython(cls, name, ttl, rd):
        """From a dnspython rdata object and an owner (text or dns.name)."""
        return cls(str(name), rd.rdtype, ttl, rdata_wire(rd), rd.rdclass)


def rdata_wire(rd):
    """Uncompressed, case-kept wire form of a dnspython rdata."""
    return rd.to_wire()


def a_rdata(ip, _pton=socket.inet_pton, _af=socket.AF_INET):
    """A rdata of an IPv4 address in text (plugins build these per
    query, hence the bound names)."""
    return _pton(_af, ip)


def aaaa_rdata(ip, _pton=socket.inet_pton, _af=socket.AF_INET6):
    """AAAA rdata of an IPv6 address in text."""
    return _pton(_af, ip)


def ip_rdata(ip, _pton=socket.inet_pton, _af=socket.AF_INET):
    """(canonical text, A or AAAA, rdata) of an address in text, or None
    when it is none (a host name)."""
    if ":" not in ip:
        # IPv4: inet_pton is as strict as ipaddress (four decimal octets,
        # no leading zeros), so a text it accepts is already canonical.
        try:
            return ip, A, _pton(_af, ip)
        except (OSError, TypeError):
            return None
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if a.version == 4:
        return str(a), A, a.packed
    return str(a), AAAA, a.packed


_HHH_ROOT = struct.Struct("!HHHx")      # SRV rdata whose target is the root


def srv_rdata(priority, weight, port, target):
    """SRV rdata; ``target`` is a presentation name ("." for none, the
    usual case, skips the name cache)."""
    if target == ".":
        return _HHH_ROOT.pack(priority, weight, port)
    return _HHH.pack(priority, weight, port) + name_to_wire(target)


def soa_rdata(mname, rname, serial, refresh, retry, expire, minimum):
    return (name_to_wire(mname) + name_to_wire(rname)
            + struct.pack("!IIIII", serial, refresh, retry, expire, minimum))


def txt_rdata(*strings):
    out = bytearray()
    for s in strings:
        b = s.encode("utf-8") if isinstance(s, str) else s
        while True:
            chunk, b = b[:255], b[255:]
            out.append(len(chunk))
            out += chunk
            if not b:
                break
    return bytes(out)


# -- EDNS0 -------------------------------------------------------------------

class EDNS:
    """The OPT record of a query (RFC 6891)."""

    __slots__ = ("size", "ttl", "options")

    def __init__(self, size, ttl, options):
        self.size = size
        self.ttl = ttl          # ext-rcode(8) | version(8) | DO + Z (16)
        self.options = options  # list of (code, bytes)

    @property
    def version(self):
        return (self.ttl >> 16) & 0xFF

    @property
    def do(self):
        return bool(self.ttl & 0x8000)

    def option(self, code):
        for c, v in self.options:
            if c == code:
                return v
        return None


def parse_options(rdata):
    opts = []
    i = 0
    n = len(rdata)
    while i < n:
        if i + 4 > n:
            raise FormatError("truncated EDNS option")
        code, olen = _HH.unpack_from(rdata, i)
        i += 4
        if i + olen > n:
            raise FormatError("truncated EDNS option")
        opts.append((code, bytes(rdata[i:i + olen])))
        i += olen
    return opts


def _check_subnet(value):
    """EDNS Client Subnet (RFC 7871) as miekg reads it: family 0 only
    with a zero prefix, a prefix and scope no longer than the family's
    address; the address itself is cut or padded, not checked."""
    if len(value) < 4:
        return False
    family = (value[0] << 8) | value[1]
    if family == 0:
        return value[2] == 0
    bits = {1: 32, 2: 128}.get(family)
    return bits is not None and value[2] <= bits and value[3] <= bits


def _check_domain(value):
    try:
        read_name(value, 0)
    except FormatError:
        return False
    return True


#: Options miekg refuses to unpack when malformed (its EDNS0_* unpack
#: errors), which fails the whole query: FORMERR.
_OPTION_CHECKS = {
    1: lambda v: len(v) >= 18,              # LLQ
    2: lambda v: len(v) in (4, 8),          # UL
    8: _check_subnet,                       # ECS
    9: lambda v: len(v) == 0 or len(v) >= 4,    # EXPIRE
    11: lambda v: len(v) in (0, 2),         # TCP-KEEPALIVE
    15: lambda v: len(v) >= 2,              # EDE
    18: _check_domain,                      # REPORTING
    19: lambda v: len(v) >= 2,              # ZONEVERSION
}


def check_options(options):
    """FormatError when a query's option is one miekg cannot read."""
    for code, value in options:
        check = _OPTION_CHECKS.get(code)
        if check is not None and not check(value):
            raise FormatError("malformed EDNS0 option %d" % code)


def opt_wire(size, ttl, options=()):
    """Wire form of an OPT record."""
    rd = b"".join(_HH.pack(c, len(v)) + v for c, v in options)
    return b"\x00" + _RRHEAD.pack(OPT, size, ttl, len(rd)) + rd


def skip_name(data, off, before=None):
    """Offset just past the (possibly compressed) name at ``off``, without
    decoding it (pointers are not followed).  For walking messages quickly;
    FormatError on overruns.  With ``before``, a compression pointer must
    point below that offset (back into what came before: no loops)."""
    length = len(data)
    while True:
        if off >= length:
            raise FormatError("name overruns message")
        n = data[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            if off + 1 >= length:
                raise FormatError("truncated pointer")
            if before is not None and (
                    ((n & 0x3F) << 8) | data[off + 1]) >= before:
                raise FormatError("bad compression pointer")
            return off + 2
        if n & 0xC0:
            raise FormatError("bad label type")
        off += n + 1


def skip_rr(data, off):
    """Offset past the RR at ``off`` plus its (type, class, ttl, rdata).

    The owner name is skipped, not decoded (this walks every record of
    cached and forwarded answers); a compression pointer must point back
    into what came before, which rules out loops.
    """
    off = skip_name(data, off, off)
    if off + 10 > len(data):
        raise FormatError("truncated RR")
    rtype, rclass, ttl, rdlen = _RRHEAD.unpack_from(data, off)
    off += 10
    end = off + rdlen
    if end > len(data):
        raise FormatError("rdata overruns message")
    return end, rtype, rclass, ttl, data[off:end]


def skip_question(data, off):
    """Offset past the question (name, type, class) at ``off``.

    An uncompressed name of legal length (every question seen in
    practice) is stepped over label by label without decoding; anything
    else goes through read_name, so its checks and errors apply.
    """
    start = off
    length = len(data)
    while True:
        if off >= length:
            return read_name(data, start)[1] + 4
        n = data[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0:
            return read_name(data, start)[1] + 4
        off += n + 1
    if off - start > 255:
        return read_name(data, start)[1] + 4
    return off + 4


def iter_records(data, off, count, backward=True):
    """Walk ``count`` resource records starting at ``off``.

    Yields ``(owner, rtype, rclass, ttl, rdata, end)`` per record: the
    offsets of its owner name and of its rdata, its header fields, and the
    offset just past it (where the next record starts).  Nothing is
    copied or decoded, so every reader of a whole message (cache's store
    step, log's classification, loadbalance's check) shares one walk.
    FormatError when a record overruns the message.  ``backward``: owner
    compression pointers must point back into what came before (which
    rules out loops); without it any pointer is stepped over.
    """
    length = len(data)
    unpack = _RRHEAD.unpack_from
    for _ in range(count):
        hdr = skip_name(data, off, off if backward else None)
        rd = hdr + 10
        if rd > length:
            raise FormatError("truncated RR")
        rtype, rclass, ttl, rdlen = unpack(data, hdr)
        end = rd + rdlen
        if end > length:
            raise FormatError("rdata overruns message")
        yield off, rtype, rclass, ttl, rd, end
        off = end


# -- message encoding -----------------------------------------------------

#: Where the names sit in the rdata of the types that hold any, as miekg
#: packs them: type -> (compress, prefix, count): ``count`` names follow
#: ``prefix`` fixed bytes.  miekg compresses the names of RFC 1035's types
#: only (``compress`` true); the others are written whole but still
#: offered to later names as compression targets (an SRV target to the
#: owner of its address record).  NAPTR (35) is walked by hand.
RDATA_NAMES = {
    NS: (True, 0, 1), 3: (True, 0, 1), 4: (True, 0, 1), CNAME: (True, 0, 1),
    SOA: (True, 0, 2), 7: (True, 0, 1), 8: (True, 0, 1), 9: (True, 0, 1),
    PTR: (True, 0, 1), 14: (True, 0, 2), MX: (True, 2, 1),
    17: (False, 0, 2), 18: (False, 2, 1), 21: (False, 2, 1),
    23: (False, 0, 1), 24: (False, 18, 1), 26: (False, 2, 2),
    SRV: (False, 6, 1), 35: (False, 4, 1), 36: (False, 2, 1),
    DNAME: (False, 0, 1), RRSIG: (False, 18, 1), NSEC: (False, 0, 1),
    58: (False, 0, 2), SVCB: (False, 2, 1), HTTPS: (False, 2, 1),
    107: (False, 2, 1),
}


def _rdata_name_start(rtype, rdata, prefix):
    """Offset of the first name in ``rdata`` (NAPTR's follows three
    character strings)."""
    if rtype != 35:
        return prefix
    off = prefix
    for _ in range(3):
        off += rdata[off] + 1
    return off


@functools.lru_cache(maxsize=65536)
def _name_parts(wire):
    """(suffix, label) pairs of an uncompressed wire name, root left out:
    what compressing it looks up and writes, worked out once per name."""
    parts = []
    i = 0
    while wire[i]:
        n = wire[i] + 1
        parts.append((wire[i:], wire[i:i + n]))
        i += n
    return tuple(parts)


@functools.lru_cache(maxsize=65536)
def _rdata_parts(rtype, rdata):
    """``rdata`` split around its names for compression: (compress,
    head, ((name's _name_parts, bytes after it), ...)); None when it does
    not have the layout its type promises (then it is sent as it is)."""
    compress, prefix, count = RDATA_NAMES[rtype]
    try:
        off = _rdata_name_start(rtype, rdata, prefix)
        head = rdata[:off]
        names = []
        for i in range(count):
            end = off
            while rdata[end]:
                end += rdata[end] + 1
            end += 1
            names.append([_name_parts(rdata[off:end]), b""])
            off = end
        if off > len(rdata):
            return None
    except IndexError:
        return None
    names[-1][1] = rdata[off:]
    return compress, head, tuple(tuple(n) for n in names)


def put_name(buf, wire, comp, compress=True):
    """Append uncompressed wire name ``wire`` to ``buf``, compressing
    against ``comp`` (wire suffix -> offset) and registering the suffixes
    it writes.  Without ``compress`` the name is written whole but its new
    suffixes are still registered (miekg's packDomainName).

    Matching is exact, case included, as miekg/dns compresses: a record
    whose owner differs from the question only in case keeps its own case
    (CoreDNS answers ``mIeK.NL.`` from a zone with ``miek.nl.``).
    """
    for suffix, label in _name_parts(wire):
        ptr = comp.get(suffix)
        if ptr is None:
            off = len(buf)
            if off < 0x3FFF:
                comp[suffix] = off
        elif compress:
            buf += _H.pack(0xC000 | ptr)
            return
        buf += label
    buf.append(0)


def put_rr(buf, rr, comp):
    """Append ``rr`` compressed against ``comp`` (owner and rdata)."""
    put_name(buf, name_to_wire(rr.name), comp)
    put_rdata(buf, rr, comp)


def put_rdata(buf, rr, comp, _pack=_RRHEAD.pack, _get=RDATA_NAMES.get):
    """Append the type, class, TTL and rdata of ``rr`` (its owner already
    written), the names inside the rdata as miekg packs them, the rdata
    length patched afterwards.  Runs per record of every answer too big
    to send uncompressed, hence put_name inline."""
    rdata = rr.rdata
    rtype = rr.rtype
    parts = (_rdata_parts(rtype, rdata)
             if rdata and _get(rtype) is not None else None)
    if parts is None:
        buf += _pack(rtype, rr.rclass, rr.ttl & 0xFFFFFFFF, len(rdata))
        buf += rdata
        return
    head = len(buf)
    buf += _pack(rtype, rr.rclass, rr.ttl & 0xFFFFFFFF, 0)
    compress, fixed, names = parts
    buf += fixed
    for name, after in names:
        for suffix, label in name:
            ptr = comp.get(suffix)
            if ptr is None:
                off = len(buf)
                if off < 0x3FFF:
                    comp[suffix] = off
            elif compress:
                buf += _H.pack(0xC000 | ptr)
                break
            buf += label
        else:
            buf.append(0)
        buf += after
    _H.pack_into(buf, head + 8, len(buf) - head - 10)


def question_comp(qwire, base=12):
    """Compression map seeded with every suffix of the question name."""
    return {qwire[i:]: base + i for i in wire_labels(qwire)}


# -- message expansion ------------------------------------------------------

def expand_name(data, off):
    """The name at ``off`` as uncompressed wire bytes (pointers followed)
    and the offset just past it; FormatError as read_name."""
    out = bytearray()
    end = None
    hops = 0
    length = len(data)
    while True:
        if off >= length:
            raise FormatError("name overruns message")
        n = data[off]
        if n == 0:
            out.append(0)
            return bytes(out), off + 1 if end is None else end
        if n & 0xC0 == 0xC0:
            if off + 1 >= length:
                raise FormatError("truncated pointer")
            if end is None:
                end = off + 2
            hops += 1
            if hops > 127:
                raise FormatError("compression loop")
            off = ((n & 0x3F) << 8) | data[off + 1]
            continue
        if n & 0xC0:
            raise FormatError("bad label type")
        if off + 1 + n > length:
            raise FormatError("label overruns message")
        if len(out) + n + 1 > 254:
            # Over 255 bytes with the root's zero: stop now, not after
            # copying up to 127 laps of a pointer loop.
            raise FormatError("name too long")
        out += data[off:off + 1 + n]
        off += 1 + n


def expand_rdata(data, start, rdlen, rtype):
    """The rdata at ``start`` with its names expanded (so it can be moved
    or measured uncompressed, as miekg unpacks it)."""
    end = start + rdlen
    spec = RDATA_NAMES.get(rtype)
    if spec is None or not rdlen:
        return data[start:end]
    try:
        off = start + _rdata_name_start(rtype, data[start:end], spec[1])
        out = bytearray(data[start:off])
        for _ in range(spec[2]):
            name, off = expand_name(data, off)
            out += name
    except (FormatError, IndexError) as e:
        raise FormatError("bad rdata of type %d" % rtype) from e
    if off > end:
        raise FormatError("rdata overruns its length")
    out += data[off:end]
    return bytes(out)


def expand_message(data):
    """``data`` with every compression pointer expanded (owners and the
    names inside rdata), trailing bytes dropped: the uncompressed form
    CoreDNS writes when an answer fits.  FormatError if it cannot be
    walked."""
    try:
        qd, an, ns, ar = _HEADER.unpack_from(data, 0)[2:]
    except struct.error as e:
        raise FormatError("short header") from e
    out = bytearray(data[:12])
    off = 12
    length = len(data)
    for _ in range(qd):
        name, off = expand_name(data, off)
        if off + 4 > length:
            raise FormatError("truncated question")
        out += name
        out += data[off:off + 4]
        off += 4
    for _ in range(an + ns + ar):
        name, off = expand_name(data, off)
        if off + 10 > length:
            raise FormatError("truncated RR")
        rtype, rclass, ttl, rdlen = _RRHEAD.unpack_from(data, off)
        start = off + 10
        off = start + rdlen
        if off > length:
            raise FormatError("rdata overruns message")
        rdata = expand_rdata(data, start, rdlen, rtype)
        out += name
        out += _RRHEAD.pack(rtype, rclass, ttl, len(rdata))
        out += rdata
    return bytes(out)


def header(msgid, flags, qd, an, ns, ar):
    return _HEADER.pack(msgid, flags, qd, an, ns, ar)


def unpack_header(data):
    return _HEADER.unpack_from(data, 0)
