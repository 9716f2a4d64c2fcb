"""A query as the chain sees it, and the answer a plugin gives back.

``Request`` is parsed straight from the bytes: header, question and OPT only
(see dnswire for why).  A full message is decoded lazily for the plugins that
need one.  ``Response`` holds sections of ``dnswire.RR`` and is turned into
bytes once, at the end of the chain (or earlier by middleware that needs the
size), with CoreDNS's EDNS echo and truncation rules.

Why one module of this size: ``Request``, ``Response`` and their codec
(``encode``, truncation, EDNS echo, compression) are the per-query hot
path; keeping them together lets the encoder read both classes' slots and
the module's prebuilt structs as plain globals, without cross-module
lookups on every query.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

from corednstw.core import dnswire as w

if TYPE_CHECKING:
    from corednstw.core.config import Block

#: (host, port) of a socket; host None when bound to every address.
Address = tuple[Optional[str], int]

_HEADER = struct.Struct("!HHHHHH")
_QTAIL = struct.Struct("!HH")
#: A question's type and class, then an OPT's type, size and TTL.
_QOPT = struct.Struct("!HH3xHI")
_H = struct.Struct("!H")
_RRHEAD = struct.Struct("!HHIH")
_QPTR = b"\xc0\x0c"

#: Query header bits an answer copies, by opcode: miekg's SetReply copies
#: RD and CD for QUERY only.
_REPLY_BITS = (w.RD | w.CD,) + (0,) * 15

#: EDNS0 option codes echoed from the query into the answer's OPT, as
#: CoreDNS does: NSID, EXPIRE, COOKIE, TCP-KEEPALIVE and PADDING, plus
#: what plugins register with ``support_option``.
SUPPORTED_OPTIONS = {3, 9, 10, 11, 12}


def support_option(code: int) -> None:
    """Let EDNS0 option ``code`` from the query be echoed in responses."""
    SUPPORTED_OPTIONS.add(code)


class RecordError(w.FormatError):
    """A record after the question cannot be read: miekg's FORMERR reply
    then keeps the question."""


class Request:
    """One query: the raw bytes plus what was parsed from them.

    Attributes set by ``parse``: id, flags, opcode, qname (lower-cased FQDN),
    name (as sent, case kept), qtype, qclass, qwire (question name bytes as
    sent), qend (offset past the question), edns (dnswire.EDNS or None),
    arcount.  Set by the listener: client, port, proto ('udp'/'tcp'),
    family (1/2), local (address the query arrived on), server (metrics
    label such as 'dns://:53').  Set by the mux: zone (matched block key),
    view, block.
    """

    __slots__ = ("data", "id", "flags", "opcode", "qname", "name", "qtype",
                 "qclass", "qwire", "qend", "edns", "arcount", "client",
                 "port", "proto", "family", "local", "server", "zone", "view",
                 "block", "metadata", "depth", "_message", "tsig", "start",
                 "sign", "late", "reply")

    data: bytes
    id: int
    flags: int
    opcode: int
    qname: str
    name: str
    qtype: int
    qclass: int
    qwire: bytes
    qend: int
    edns: Optional[w.EDNS]
    arcount: int
    client: str
    port: int
    proto: str
    family: int
    local: Optional[Address]
    server: str
    zone: str
    view: str
    block: Optional[Block]
    #: label -> value (a string or a callable), see plugins/metadata.py
    metadata: Optional[dict[str, Any]]
    depth: int
    _message: Any
    #: offset of a TSIG record in ``data``, for the tsig plugin
    tsig: Optional[int]
    start: float
    #: The server's late slot, offered by a UDP listener's mux (else
    #: None): ``late.deliver(resp, req, req.reply)`` writes an answer that
    #: comes after ``serve`` returned, without a Deferred
    #: (``late.deliver_wire(wire, req)`` the client's bytes when made).
    #: Only the plugin first in the block's chain may use it (nothing in
    #: front of it sees the answer); its ``serve`` then returns ``LATE``.
    late: Any
    #: The listener's ``send(bytes)`` for this query, with ``late``.
    reply: Any

    def __init__(self, data: bytes, client: str = "127.0.0.1",
                 port: int = 0, proto: str = "udp",
                 local: Optional[Address] = None,
                 server: str = "") -> None:
        self.data = data
        self.client = client
        self.port = port
        self.proto = proto
        self.family = 2 if ":" in client else 1
        self.local = local
        self.server = server
        self.zone = "."
        self.view = ""
        self.block = None
        self.metadata = None
        self.depth = 0
        self._message = None
        self.tsig = None
        self.edns = None
        self.start = 0.0
        # A callable the server applies to the final reply bytes (the
        # tsig plugin's signer), or None.
        self.sign = None
        self.late = None

    # -- parsing -------------------------------------------------------------

    def parse_header(self) -> tuple[int, int, int, int]:
        """Read the header; returns (qd, an, ns, ar) counts."""
        self.id, self.flags, qd, an, ns, ar = _HEADER.unpack_from(self.data, 0)
        self.opcode = (self.flags >> 11) & 0xF
        self.arcount = ar
        return qd, an, ns, ar

    def parse_question(self, an: int, ns: int, ar: int,
                       longest: int = 255) -> None:
        """Parse the question and find the OPT record (FormatError if bad).
        ``longest``: the longest name in octets (only a question made
        inside the server, by rewrite, may pass the wire's 255)."""
        data = self.data
        ln = len(data)
        if not (an or ns) and ln - 16 <= longest:
            # The usual query: the question alone, or the question and an
            # OPT without options.  A name asked before is found in _NAMES
            # by the bytes where it must stand; a valid uncompressed name
            # there ends exactly there, so nothing needs walking.
            if not ar:
                names = _NAMES.get(data[12:ln - 4])
                if names is not None:
                    self.qwire = data[12:ln - 4]
                    self.qtype, self.qclass = _QTAIL.unpack_from(data, ln - 4)
                    self.qend = ln
                    self.name, self.qname = names
                    return
            elif ar == 1 and ln > 27 and data[ln - 11] == 0 and \
                    data[ln - 9] == 41 and data[ln - 10] == 0 and \
                    data[ln - 1] == 0 and data[ln - 2] == 0:
                names = _NAMES.get(data[12:ln - 15])
                if names is not None:
                    self.qwire = data[12:ln - 15]
                    self.qtype, self.qclass, size, ttl = _QOPT.unpack_from(
                        data, ln - 15)
                    self.qend = ln - 11
                    self.name, self.qname = names
                    self.edns = w.EDNS(size, ttl, [])
                    return
        end = 12
        # An uncompressed question name (every sane client), walked.
        while True:
            if end >= ln:
                raise w.FormatError("question overruns message")
            n = data[end]
            if n == 0:
                end += 1
                break
            if n & 0xC0:
                raise w.FormatError("compressed question name")
            end += n + 1
        if end - 12 > longest:
            raise w.FormatError("name too long")    # miekg's ErrLongDomain
        if end + 4 > ln:
            # miekg reads what is there: no type or no class is 0, half a
            # class is 0 too, only half a type is an error.
            tail = data[end:]
            if len(tail) == 1:
                raise w.FormatError("truncated question")
            data = self.data = (data[:4] + b"\x00\x01\x00\x00\x00\x00\x00\x00"
                                + data[12:end] + tail[:2]
                                + b"\x00" * (4 - len(tail[:2])))
            an = ns = ar = self.arcount = 0
            ln = len(data)
        self.qwire = qwire = data[12:end]
        self.qtype, self.qclass = _QTAIL.unpack_from(data, end)
        self.qend = end + 4
        names = _NAMES.get(qwire)
        if names is None:
            names = _names(qwire)
        self.name, self.qname = names
        if an or ns or ar:
            self._parse_rest(an + ns, ar)
        elif self.qend != ln:
            self.data = data[:self.qend]

    def _parse_rest(self, skip: int, ar: int) -> None:
        """Walk the answer/authority/additional records for OPT and TSIG.

        A record that cannot be read raises RecordError (FORMERR with the
        question).  Counts that run past the end of the message are lies
        miekg stops at: the records that are there are kept and the header
        counts in ``data`` are set to them."""
        data = self.data
        ln = len(data)
        off = self.qend
        counts = [0, 0]
        try:
            for _ in range(skip):
                if off == ln:
                    break
                off = w.skip_rr(data, off)[0]
                counts[0] += 1
            for _ in range(ar):
                if off == ln:
                    break
                start = off
                off, rtype, rclass, ttl, rdata = w.skip_rr(data, off)
                counts[1] += 1
                if rtype == w.OPT:
                    if self.edns is not None:
                        raise w.FormatError("two OPT records")
                    opts = w.parse_options(rdata)
                    if opts:
                        w.check_options(opts)
                    self.edns = w.EDNS(rclass, ttl, opts)
                elif rtype == 250 and self.tsig is None:
                    # The first TSIG, for the tsig plugin (which checks
                    # that it is the last record).
                    self.tsig = start
        except w.FormatError as e:
            raise RecordError(str(e)) from e
        if counts[0] != skip or counts[1] != ar:
            an, ns = _HEADER.unpack_from(data, 0)[3:5]
            an = min(an, counts[0])
            data = self.data = (data[:6] + struct.pack(
                "!HHH", an, counts[0] - an, counts[1]) + data[12:])
            self.arcount = counts[1]
        if off != len(data):
            # Bytes after the last record: miekg ignores them, and what is
            # passed on (to an upstream, to dnstap) is the message alone.
            self.data = data[:off]

    # -- derived values ------------------------------------------------------

    @property
    def do(self) -> bool:
        """DNSSEC OK bit of the query's OPT record."""
        e = self.edns
        return e is not None and bool(e.ttl & 0x8000)

    @property
    def bufsize(self) -> int:
        """The client's advertised EDNS0 size (0 without OPT), for logs."""
        e = self.edns
        return e.size if e is not None else 0

    @property
    def size(self) -> int:
        """How many bytes the answer may take (CoreDNS's request.Size)."""
        if self.proto == "tcp":
            return w.MAX_MSG_SIZE
        e = self.edns
        if e is None or e.size < w.MIN_UDP_SIZE:
            return w.MIN_UDP_SIZE
        return e.size

    @property
    def rd(self) -> bool:
        return bool(self.flags & w.RD)

    @property
    def cd(self) -> bool:
        return bool(self.flags & w.CD)

    def message(self) -> Any:
        """The whole query decoded by dnspython (lazily, then cached)."""
        if self._message is None:
            import dns.message
            self._message = dns.message.from_wire(
                self.data, ignore_trailing=True, keyring=False)
        return self._message

    def meta(self) -> dict[str, Any]:
        """The request's metadata dict (created on first use)."""
        if self.metadata is None:
            self.metadata = {}
        return self.metadata

    def copy(self, qname: Optional[str] = None, qtype: Optional[int] = None,
             data: Optional[bytes] = None, longest: int = 255) -> Request:
        """A new Request for a rewritten question (for rewrite, upstream);
        ``longest`` as for parse_question."""
        if data is None:
            qwire = self.qwire if qname is None else w.name_to_wire(qname)
            data = (self.data[:12] + qwire
                    + _QTAIL.pack(self.qtype if qtype is None else qtype,
                                  self.qclass)
                    + self.data[self.qend:])
        r = Request(data, self.client, self.port, self.proto, self.local,
                    self.server)
        r.family = self.family
        qd, an, ns, ar = r.parse_header()
        r.parse_question(an, ns, ar, longest)
        r.zone, r.view, r.block = self.zone, self.view, self.block
        r.metadata, r.depth, r.start = self.metadata, self.depth, self.start
        r.sign = self.sign
        return r

    def with_flags(self, flags: int) -> Request:
        """A copy whose header carries ``flags`` (same question, OPT and
        context), made without parsing the message again."""
        data = self.data
        # Every slot set once (no __init__ defaults written over).
        r = _new(Request)
        r.data = data[:2] + _H.pack(flags) + data[4:]
        r.client, r.port, r.proto, r.local, r.server = (
            self.client, self.port, self.proto, self.local, self.server)
        r.family = self.family
        r.id, r.flags, r.opcode = self.id, flags, (flags >> 11) & 0xF
        r.arcount = self.arcount
        r.qname, r.name, r.qwire, r.qend = (self.qname, self.name,
                                            self.qwire, self.qend)
        r.qtype, r.qclass = self.qtype, self.qclass
        r.edns, r.tsig, r.sign = self.edns, self.tsig, self.sign
        r.zone, r.view, r.block = self.zone, self.view, self.block
        r.metadata, r.depth, r.start = self.metadata, self.depth, self.start
        r._message = None
        # A copy is made in front of the plugin that serves it: the
        # server's late slot is not for it.
        r.late = None
        return r


_new = object.__new__


#: Question name bytes -> (text as sent, lower-cased text), for the
#: names asked again and again (a cluster asks for the same few services
#: all day): the text conversion was 6% of a query's time.  Bounded: it
#: starts afresh when full.  Sized for a cluster's whole name set (the
#: Services, the headless endpoints, SRV, PTR and the search-path
#: expansions of 10,000 Services are about 30,000 names): at 4,096 such a
#: mix emptied it every few thousand queries and converted nearly every
#: name again (a few MiB at most when full).
_NAMES: dict[bytes, tuple[str, str]] = {}
NAMES_KEPT = 32768


def _names(qwire: bytes) -> tuple[str, str]:
    """The texts of a question name, remembered in _NAMES."""
    name = _wire_text(qwire)
    return remember(_NAMES, qwire, (name, name.lower()), NAMES_KEPT)


_V = TypeVar("_V")


def remember(table: dict[Any, _V], key: Any, value: _V, limit: int) -> _V:
    """Store ``value`` under ``key`` in ``table``, one of the bounded
    tables of what the query path works out once per name, address or
    answer (emptied when it holds ``limit`` entries), and return it."""
    if len(table) >= limit:
        table.clear()
    table[key] = value
    return value


_PLAIN_BYTES = bytes(range(33, 127)).translate(None, b'.\\;()"@')


def _wire_text(qwire: bytes) -> str:
    """Presentation text of an uncompressed wire name.

    Fast path: turn the length bytes into dots in one copy; a name with a
    byte that needs escaping (or a label holding a dot) takes
    dnswire.read_name.
    """
    n = len(qwire)
    if n == 1:
        return "."
    out = bytearray(qwire[1:])
    i = qwire[0]
    dots = 0
    while i < n - 1:
        step = out[i]
        out[i] = 46
        i += step + 1
        dots += 1
    if out.translate(None, _PLAIN_BYTES) == b"." * dots:
        return out.decode("ascii")
    return w.read_name(qwire, 0)[0]


def make_query(name: str, qtype: int, qclass: int = w.CLASS_IN,
               msgid: int = 0, rd: bool = True, edns: Optional[int] = None,
               do: bool = False) -> bytes:
    """Wire bytes of a query (for upstream lookups, probes and tests)."""
    flags = w.RD if rd else 0
    ar = 1 if edns is not None or do else 0
    out = (w.header(msgid, flags, 1, 0, 0, ar) + w.name_to_wire(name)
           + _QTAIL.pack(qtype, qclass))
    if ar:
        out += w.opt_wire(edns or 1232, 0x8000 if do else 0)
    return out


class Response:
    """What a plugin answers: rcode, flags and three sections of RRs.

    ``plugin`` names the plugin that wrote it (the label of
    coredns_dns_responses_total).  ``opt`` is an OPT the answer already
    carries (from an upstream); otherwise the query's OPT is echoed as
    CoreDNS does.  ``wire`` caches the encoded bytes: middleware that needs
    the size (prometheus, log) encodes early, the server reuses it.
    ``error`` is the text of an error the plugin reports along with its
    answer (CoreDNS's ServeDNS returning an err), for the errors plugin.
    """

    __slots__ = ("rcode", "flags", "answer", "authority", "additional",
                 "plugin", "opt", "wire", "raw", "_error")

    rcode: int
    flags: int
    answer: list[w.RR]
    authority: list[w.RR]
    additional: list[w.RR]
    plugin: str
    opt: Optional[w.EDNS]
    wire: Optional[bytes]
    raw: Optional[bytes]
    _error: Optional[str]

    #: Further messages to send after this one (zone transfers over TCP);
    #: a class default so the hot path reads it without a getattr fallback.
    more: Optional[list[bytes]] = None

    def __init__(self, rcode: int = 0, answer: Optional[list[w.RR]] = None,
                 authority: Optional[list[w.RR]] = None,
                 additional: Optional[list[w.RR]] = None,
                 aa: bool = False, plugin: str = "", flags: int = 0,
                 ra: bool = False, tc: bool = False) -> None:
        if aa:
            flags |= _AA
        if ra or tc:
            flags |= (_RA if ra else 0) | (_TC if tc else 0)
        self.rcode = rcode
        self.flags = flags
        self.answer = answer if answer is not None else []
        self.authority = authority if authority is not None else []
        self.additional = additional if additional is not None else []
        self.plugin = plugin
        self.opt = None
        self.wire = None
        self.raw = None
        self._error = None

    @property
    def error(self) -> Optional[str]:
        """The plugin's error text, or None.  A property over a slot so
        subclasses that skip __init__ (ready-made answers) read None."""
        return getattr(self, "_error", None)

    @error.setter
    def error(self, text: Optional[str]) -> None:
        self._error = text

    @property
    def aa(self) -> bool:
        return bool(self.flags & w.AA)

    @property
    def tc(self) -> bool:
        return bool(self.flags & w.TC)

    def set_flag(self, bit: int, on: bool = True) -> None:
        if on:
            self.flags |= bit
        else:
            self.flags &= ~bit
        self.wire = None

    def finish(self, req: Request) -> bytes:
        """Encode for ``req`` once and return the bytes (cached)."""
        wire = self.wire
        if wire is None:
            wire = self.wire = encode(req, self)
        return wire

    def __repr__(self) -> str:
        return "<Response %s an=%d ns=%d ar=%d by %s>" % (
            w.rcode_text(self.rcode), len(self.answer), len(self.authority),
            len(self.additional), self.plugin or "-")


#: Rcodes a CoreDNS plugin returns without writing (plugin.ClientWrite
#: false); the server then writes them itself.
_SERVER_WRITES = frozenset((w.SERVFAIL, w.REFUSED, w.FORMERR, w.NOTIMP))


def unwritten(resp: Optional[Response]) -> bool:
    """Whether ``resp`` is an error no plugin wrote: a bare SERVFAIL,
    REFUSED, FORMERR or NOTIMP labelled with no plugin.  CoreDNS's server
    writes those itself (errorFunc), on the writer the plugins never
    wrapped: header rules, NSID and the cache do not see them."""
    return (resp is not None and not resp.plugin and resp.raw is None
            and resp.rcode in _SERVER_WRITES and not resp.answer
            and not resp.authority and not resp.additional
            and resp.opt is None)


#: The record sections of a prebuilt RawResponse: empty, never changed.
_NO_RECORDS: list[w.RR] = cast("list[w.RR]", ())


class RawResponse(Response):
    """A response whose wire form already exists (from an upstream or a
    cache): the server patches the ID (and a plugin may have patched TTLs)
    instead of encoding.  ``raw`` is a complete DNS message; its question is
    replaced by the query's bytes so the client's case is echoed."""

    __slots__ = ()

    raw: bytes

    def __init__(self, raw: bytes, plugin: str = "") -> None:
        super().__init__(plugin=plugin)
        self.answer = self.authority = self.additional = _NO_RECORDS
        self.raw = raw
        hdr = _HEADER.unpack_from(raw, 0)
        self.flags = hdr[1] & 0x07F0
        self.rcode = hdr[1] & 0xF

    @classmethod
    def prebuilt(cls, raw: bytes, plugin: str,
                 final: bool = False) -> RawResponse:
        """The one way to hand over an answer whose bytes already exist, on
        hot paths (forward's relayed reply, cache's hit): no generic
        constructor work, rcode and flags read straight from the header.
        ``final``: the bytes are already this client's (ID, question case
        and size done), so the server sends them as they are."""
        r = cls.__new__(cls)
        r.rcode = raw[3] & 0xF
        r.flags = ((raw[2] << 8) | raw[3]) & 0x07F0
        # No sections of records: one shared empty tuple (three new
        # lists per cache hit were a tenth of a hit's allocations).  A
        # plugin that changes records decodes the bytes first.
        r.answer = r.authority = r.additional = _NO_RECORDS
        r.plugin = plugin
        r.opt = None
        r.wire = raw if final else None
        r.raw = raw
        r._error = None
        return r


def response(rcode: int, answer: Optional[list[w.RR]],
             authority: Optional[list[w.RR]],
             additional: Optional[list[w.RR]], flags: int,
             plugin: str) -> Response:
    """``Response(rcode, answer, authority, additional, flags=flags,
    plugin=plugin)`` made without the class call, which costs as much as
    the rest of the making (Plugin.respond's way, on every answer a
    plugin builds)."""
    r = _new(Response)
    r.rcode = rcode
    r.flags = flags
    r.answer = answer if answer is not None else []
    r.authority = authority if authority is not None else []
    r.additional = additional if additional is not None else []
    r.plugin = plugin
    r.opt = None
    r.wire = None
    r.raw = None
    r._error = None
    return r


#: An answer of records cut at its TTL fields, as the cache keeps
#: answers: (segs, flags, rcode, an, ns, ar, ttl, plugin).  ``segs``
#: joined with four bytes of one TTL give the message body after the
#: question, with every record at that TTL; ``flags``: the answer's AA,
#: TC, RA, Z, AD and CD bits (0x07F0; the query's RD and CD are the
#: asker's to add); ``ttl``: the smallest TTL of the records (of the SOA
#: for a denial); ``an``, ``ns``, ``ar``: the section counts;
#: ``plugin``: the plugin that answered.  A plugin whose answers stay
#: the same until its data changes keeps them in this form
#: (``IKeptAnswers``), so that the cache stores and sends them without
#: building records or cutting bytes on every miss.  An exact tuple of
#: bytes, numbers and a string: the collector stops tracking it the
#: first time it looks at it, so tables of thousands of them add nothing
#: to its walks.
Pieces = tuple[tuple[bytes, ...], int, int, int, int, int, int, str]


def _pieces(segs: list[bytes], flags: int, rcode: int, an: int, ns: int,
            ar: int, ttl: int, plugin: str) -> Pieces:
    return (tuple(segs), flags & 0x07F0, rcode, an, ns, ar, ttl, plugin)


def address_pieces(req: Request, rdatas: list[bytes], ttl: int,
                   plugin: str) -> Pieces:
    """The answer of ``rdatas`` (one or more), records of the question's
    own name, type and class at ``ttl``, authoritative, cut as ``pieces``
    cuts that answer made of records: the same Pieces without the
    records being built (a plugin's first answer of a name it keeps;
    the records' class is the question's)."""
    head = req.qwire + _QTAIL.pack(req.qtype, req.qclass)
    pack = _H.pack
    segs = [head]
    for rd in rdatas[:-1]:
        segs.append(pack(len(rd)) + rd + head)
    rd = rdatas[-1]
    segs.append(pack(len(rd)) + rd)
    return _pieces(segs, _AA, 0, len(rdatas), 0, 0, ttl & 0xFFFFFFFF,
                   plugin)


def pieces(req: Request, resp: Response) -> Optional[Pieces]:
    """``resp`` (records, not bytes) cut at its TTL fields, when it has
    one of the two shapes an authoritative plugin gives nearly always;
    None otherwise.  An answer: NOERROR, answer records that all answer
    the question by its own name, type and class, additional records or
    none (an SRV's targets), no authority.  A denial: NXDOMAIN, or
    NOERROR without answers, with the zone's SOA as its only record.
    Neither may carry an OPT or be truncated.  Owners equal to the name
    asked are written as the query wrote it, the others uncompressed:
    the bytes ``encode`` writes for an answer that fits."""
    flags = resp.flags
    if resp.opt is not None or flags & _TC:
        return None
    rcode = resp.rcode
    answer = resp.answer
    qwire = req.qwire
    pack = _QTAIL.pack
    if answer:
        if rcode or resp.authority:
            return None
        name, qtype, qclass = req.name, req.qtype, req.qclass
        head = qwire + pack(qtype, qclass)
        low = 0xFFFFFFFF
        # Each piece: the record before's rdata, then a record's owner,
        # type and class (the TTLs go between the pieces).
        segs = [head]
        tail = b""
        for rr in answer:
            if rr.name != name or rr.rtype != qtype or rr.rclass != qclass:
                return None
            ttl = rr.ttl & 0xFFFFFFFF
            if ttl < low:
                low = ttl
            if tail:
                segs.append(tail + head)
            rd = rr.rdata
            tail = _H.pack(len(rd)) + rd
        extra = resp.additional
        for rr in extra:
            if rr.rtype == w.OPT:
                return None
            ttl = rr.ttl & 0xFFFFFFFF
            if ttl < low:
                low = ttl
            segs.append(tail + (qwire if rr.name == name
                                else w.name_to_wire(rr.name))
                        + pack(rr.rtype, rr.rclass))
            rd = rr.rdata
            tail = _H.pack(len(rd)) + rd
        segs.append(tail)
        return _pieces(segs, flags, 0, len(answer), 0, len(extra), low,
                       resp.plugin)
    if (rcode and rcode != w.NXDOMAIN) or resp.additional or \
            len(resp.authority) != 1:
        return None
    soa = resp.authority[0]
    if soa.rtype != w.SOA:
        return None
    rd = soa.rdata
    return _pieces([(qwire if soa.name == req.name
                     else w.name_to_wire(soa.name))
                    + pack(w.SOA, soa.rclass), _H.pack(len(rd)) + rd],
                   flags, rcode, 0, 1, 0, soa.ttl & 0xFFFFFFFF, resp.plugin)


class _Late:
    """The type of ``LATE``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LATE"


#: What ``serve`` returns when the answer will go through the request's
#: late slot (``Request.late``) instead of a Deferred.
LATE = _Late()


class NoReply(Response):
    """An answer that is never sent: the client hears nothing (erratic's
    ``drop``).  Middleware sees a NOERROR response of size 0 written by no
    plugin, as CoreDNS's metrics count a query a plugin chose to leave
    unanswered.  Middleware that rebuilds responses must pass it on as is."""

    __slots__ = ()

    def finish(self, req: Request) -> bytes:
        return b""


def encode(req: Request, resp: Response) -> bytes:
    """Encode ``resp`` as the answer to ``req`` (CoreDNS's SizeAndDo + Scrub).

    The question is copied byte for byte from the query (0x20 case kept).
    An answer that fits the client is written uncompressed, as miekg's
    Truncate leaves it; one that does not, or a UDP answer past the
    fragmentation limits of CoreDNS's Scrub, is compressed (``_compress``).
    """
    if resp.raw is not None:
        return _encode_raw(req, resp)
    rcode = resp.rcode
    edns = req.edns
    # The OPT to append, and the most the uncompressed answer may take
    # with it (512 bytes, within both fragmentation limits, without EDNS).
    if edns is None:
        opt = b""
        cap = _MAX_MSG_SIZE if req.proto == "tcp" else _MIN_UDP_SIZE
    else:
        opt = _opt(edns, resp, rcode)
        cap = req.size
        if req.proto == "udp" and cap > _FRAGMENT[req.family]:
            cap = _FRAGMENT[req.family]
    opcode = req.opcode
    flags = (_QR | (req.flags & _REPLY_BITS[opcode]) | (opcode << 11)
             | (resp.flags & 0x07F0) | (rcode & 0xF))
    answer = resp.answer
    authority = resp.authority
    additional = resp.additional
    ar = len(additional)
    out = [_HEADER.pack(req.id, flags, 1, len(answer), len(authority),
                        ar + 1 if opt else ar),
           req.data[12:req.qend]]
    if answer or authority or ar:
        qname = req.name
        qwire = req.qwire
        to_wire = w.name_to_wire
        pack = _RRHEAD.pack
        for section in (answer, authority, additional):
            for rr in section:
                rdata = rr.rdata
                out += (qwire if rr.name == qname else to_wire(rr.name),
                        pack(rr.rtype, rr.rclass, rr.ttl & 0xFFFFFFFF,
                             len(rdata)),
                        rdata)
    if opt:
        out.append(opt)
    wire = b"".join(out)
    if len(wire) > cap:
        return _encode_big(req, resp, opt, flags)
    return wire


def _opt(edns: w.EDNS, resp: Response, rcode: int) -> bytes:
    """The answer's OPT: SizeAndDo's version 0, the flags' upper byte (DO
    and Z) kept from the answer's OPT (client's DO added) or from the
    client's, the options echoed or the answer's own."""
    opts: list[tuple[int, bytes]] | tuple[()] = ()
    ttl = edns.ttl & 0xFF00
    if resp.opt is not None:
        opts = resp.opt.options
        ttl = (resp.opt.ttl & 0xFF00) | (ttl & 0x8000)
    elif edns.options and SUPPORTED_OPTIONS:
        opts = [o for o in edns.options if o[0] in SUPPORTED_OPTIONS]
    return w.opt_wire(edns.size, ttl | ((rcode >> 4) << 24), opts)


def _encode_big(req: Request, resp: Response, opt: bytes,
                flags: int) -> bytes:
    """An answer that does not fit uncompressed: compressed, cut to whole
    records within the client's size (TC set when cut)."""
    buf, counts, truncated = _compress(req, resp, req.size - len(opt))
    if truncated:
        flags |= w.TC
    ar = counts[2]
    if opt:
        buf += opt
        ar += 1
    struct.pack_into("!HHHHHH", buf, 0, req.id, flags, 1, counts[0],
                     counts[1], ar)
    return bytes(buf)


_QR = w.QR
_AA = w.AA
_RA = w.RA
_TC = w.TC
_MAX_MSG_SIZE = w.MAX_MSG_SIZE
_MIN_UDP_SIZE = w.MIN_UDP_SIZE


#: Uncompressed UDP answers above these sizes (IPv4, IPv6; NSD's limits)
#: are compressed anyway, as CoreDNS's Scrub does against fragmentation.
_FRAGMENT = (0, 1480, 1220)


def _compress(req: Request, resp: Response,
              budget: int) -> tuple[bytearray, tuple[int, int, int], bool]:
    """The records compressed as miekg packs them (owners, and the names
    inside the rdata of RFC 1035's types, against every suffix written
    before), cut to whole records within ``budget`` bytes as miekg's
    Truncate cuts them.  Returns (buffer, section counts, truncated)."""
    buf = bytearray(12)
    buf += req.data[12:req.qend]
    comp = w.question_comp(req.qwire)
    qname = req.name
    put_name = w.put_name
    put_rdata = w.put_rdata
    to_wire = w.name_to_wire
    counts = [0, 0, 0]
    for si, section in enumerate((resp.answer, resp.authority,
                                  resp.additional)):
        for rr in section:
            mark = len(buf)
            if rr.name == qname:
                buf += _QPTR    # the question's name, as sent
            else:
                put_name(buf, to_wire(rr.name), comp)
            put_rdata(buf, rr, comp)
            if len(buf) > budget:
                # Names registered by the cut RR point past the end, but
                # nothing is written after this, so comp is not reused.
                del buf[mark:]
                return buf, (counts[0], counts[1], counts[2]), True
            counts[si] += 1
    return buf, (counts[0], counts[1], counts[2]), False


def _encode_raw(req: Request, resp: Response) -> bytes:
    """Send a ready-made message (an upstream's answer): patch the ID and
    flags, copy the client's question bytes, and make the OPT what
    CoreDNS's SizeAndDo makes it (the client's size and DO bit, the
    upstream's options).  Anything unusual, or an answer too big for the
    client, goes through the structured path instead."""
    raw: bytes = resp.raw  # type: ignore[assignment]  # encode checked
    try:
        # Uncompressed, as CoreDNS writes what fits (miekg's Truncate);
        # a message that cannot be walked is passed on as it came.
        raw = w.expand_message(raw)
    except w.FormatError:
        pass
    try:
        _id, _fl, qd, an, ns, ar = _HEADER.unpack_from(raw, 0)
        qend = w.skip_name(raw, 12) + 4 if qd == 1 else -1
    except (w.FormatError, struct.error):
        qend = -1
    if qend - 12 != req.qend - 12:
        # No question, or one of another length: compression pointers
        # left in the body would be off.  Decode and encode afresh.
        return encode(req, _restructure(raw, resp))
    body = raw[qend:]
    edns = req.edns
    if edns is not None:
        try:
            body, ar = _size_and_do(raw, qend, an + ns, ar, edns)
        except (w.FormatError, struct.error):
            return encode(req, _restructure(raw, resp))
    flags = (w.QR | (req.flags & _REPLY_BITS[req.opcode])
             | (req.opcode << 11)
             | (resp.flags & 0x07F0) | (resp.rcode & 0xF))
    out = (_HEADER.pack(req.id, flags, 1, an, ns, ar)
           + req.data[12:req.qend] + body)
    if too_big(req, len(out)):
        return encode(req, _restructure(out, resp))
    return out


def too_big(req: Request, size: int) -> bool:
    """Whether an uncompressed answer of ``size`` bytes must be compressed
    (and maybe truncated) for ``req``: past the client's size, or a UDP
    answer past the fragmentation limit (CoreDNS's Scrub)."""
    if size <= _MIN_UDP_SIZE:
        return False        # within every limit: no need to read them
    return size > req.size or (req.proto == "udp"
                               and size > _FRAGMENT[req.family])


def _size_and_do(raw: bytes, qend: int, skip: int, ar: int,
                 edns: w.EDNS) -> tuple[bytes, int]:
    """The body after the question with the OPT set to the client's size
    and DO (kept ext-rcode and options), or the client's OPT appended when
    the answer has none.  Returns (body, additional count)."""
    off = qend
    skip_name = w.skip_name
    unpack = _RRHEAD.unpack_from
    for _ in range(skip):
        off = skip_name(raw, off)
        off += 10 + unpack(raw, off)[3]
    for _ in range(ar):
        start = off
        off = skip_name(raw, off)
        rtype, rclass, ttl, rdlen = unpack(raw, off)
        off += 10
        rdata = raw[off:off + rdlen]
        off += rdlen
        if off > len(raw):
            raise w.FormatError("rdata overruns message")
        if rtype == w.OPT:
            ttl = (ttl & 0xFF00FF00) | (edns.ttl & 0x8000)
            patched = (raw[qend:start] + b"\x00"
                       + _RRHEAD.pack(w.OPT, edns.size, ttl, len(rdata))
                       + rdata + raw[off:])
            return patched, ar
    opts = [o for o in edns.options if o[0] in SUPPORTED_OPTIONS]
    return (raw[qend:] + w.opt_wire(edns.size, edns.ttl & 0xFF00, opts),
            ar + 1)


def _restructure(data: bytes, resp: Response) -> Response:
    """A structured Response from raw bytes, keeping the plugin label."""
    try:
        out = parse_response(data)
    except (w.FormatError, struct.error, ValueError):
        out = Response(w.SERVFAIL)
    out.plugin = resp.plugin
    out.error = resp.error
    return out


def parse_response(data: bytes, req: Optional[Request] = None) -> Response:
    """Decode a whole response into a Response (for upstream answers that
    need re-encoding, and for tests)."""
    msgid, flags, qd, an, ns, ar = _HEADER.unpack_from(data, 0)
    off = 12
    for _ in range(qd):
        off = w.read_name(data, off)[1] + 4
    resp = Response(rcode=flags & 0xF, flags=flags & 0x07F0)
    sections = (resp.answer, resp.authority, resp.additional)
    for si, count in enumerate((an, ns, ar)):
        for _ in range(count):
            name, noff = w.read_name(data, off)
            rtype, rclass, ttl, rdlen = _RRHEAD.unpack_from(data, noff)
            rstart = noff + 10
            rdata = data[rstart:rstart + rdlen]
            if rtype == w.OPT:
                resp.opt = w.EDNS(rclass, ttl, w.parse_options(rdata))
                resp.rcode |= ((ttl >> 24) & 0xFF) << 4
            else:
                rdata = _decompress_rdata(data, rstart, rdlen, rtype, rclass)
                sections[si].append(w.RR(name, rtype, ttl, rdata, rclass))
            off = rstart + rdlen
    return resp


# Types whose rdata may hold compressed names (RFC 3597 section 4).
_COMPRESSIBLE = frozenset((w.NS, w.CNAME, w.SOA, w.PTR, w.MX, 3, 4, 7, 8, 9,
                           14, 17, 18, 21, 26, w.SRV, 35, 36, w.DNAME))


def _decompress_rdata(data: bytes, start: int, rdlen: int, rtype: int,
                      rclass: int) -> bytes:
    """Rdata with embedded compressed names expanded (so it can be moved)."""
    if rtype not in _COMPRESSIBLE:
        return bytes(data[start:start + rdlen])
    import dns.rdata
    rd = dns.rdata.from_wire(rclass, rtype,  # type: ignore[arg-type]
                             data, start, rdlen)
    return rd.to_wire()  # type: ignore[return-value]  # bytes, no file
