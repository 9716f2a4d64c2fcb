"""Response classification (CoreDNS's plugin/pkg/response and the TTL rule
of plugin/pkg/dnsutil), shared by cache and log.

- ``typify_parts`` is response.Typify: the type of an answer
  (NOERROR, NXDOMAIN, SERVERERROR, NODATA, DELEGATION, META, UPDATE,
  OTHERERROR) from its opcode, question type, rcode, answer count and
  authority record types.  ``classify`` is response.Classify: the class
  (success, denial, error) log's ``class`` option matches.
- ``parse`` reads a wire response once into a ``Parsed``: what cache
  stores (the body cut around each TTL field) and what its rules read.
  ``typify``, ``response_type``, ``answers_question``, ``cacheable`` and
  ``minimal_ttl`` (dnsutil.MinimalTTLWithMaximum) work on it.
- ``sections`` gives log the answer count and authority types of a wire
  message, without the rest of ``parse``.

The two plugins read a message differently where CoreDNS's own code does
not, and each keeps its behaviour:

- Expired signatures: ``parse`` with a clock marks a response whose RRSIG
  is outside its validity period, and with DO set ``typify`` calls it
  OTHERERROR (never cached).  Log classifies without a clock, so such an
  answer keeps its rcode's type there.
- Malformed messages: cache does not store what ``parse`` cannot read
  (``None``: not exactly one question, a compressed question name, OPT
  not the last record, an overrun).  Log classifies any message; when
  ``sections`` fails it counts no records (the rcode alone decides).
- Compression pointers in owner names: ``parse`` steps over any pointer
  (answer owners are decoded, which catches loops); ``sections`` accepts
  only pointers back into what came before.
"""

import struct

from corednstw.core import dnswire as w
from corednstw.core import request as rq

# response.Type
NOERROR, NAMEERROR, SERVERERROR, NODATA, DELEGATION, META, UPDATE, \
    OTHERERROR = range(8)

#: The names CoreDNS prints for each type (log's metadata, tests).
TYPE_NAMES = ("NOERROR", "NXDOMAIN", "SERVERERROR", "NODATA", "DELEGATION",
              "META", "UPDATE", "OTHERERROR")

# response.Class
ALL = "all"
SUCCESS = "success"
DENIAL = "denial"
ERROR = "error"
CLASSES = (ALL, SUCCESS, DENIAL, ERROR)

#: dnsutil.MinimalDefaultTTL and MaximumDefaultTTL (seconds).
MINIMAL_DEFAULT_TTL = 5
MAXIMUM_DEFAULT_TTL = 3600

_OPCODE_UPDATE = 5
_HDR = struct.Struct("!HHHHHH")
_HH = struct.Struct("!HH")
_II = struct.Struct("!II")
_RRHEAD = struct.Struct("!HHIH")
_YEAR68 = 1 << 31


# -- types and classes --------------------------------------------------------

def typify_parts(opcode, qtype, rcode, an, ns_types, expired=False):
    """response.Typify from the parts of a message it looks at.

    ``an``: the number of answer records; ``ns_types``: the types of the
    authority records (any container); ``expired``: DO was set and a
    signature is outside its validity period.
    """
    if opcode == _OPCODE_UPDATE:
        return UPDATE
    if opcode == w.OPCODE_NOTIFY:
        return META
    if qtype == w.AXFR or qtype == w.IXFR:
        return META
    if expired:
        return OTHERERROR
    if an and rcode == w.NOERROR:
        return NOERROR
    if an and rcode == w.NXDOMAIN:
        return OTHERERROR
    if rcode == w.NOERROR and w.SOA in ns_types:
        return NODATA
    if rcode == w.NXDOMAIN:
        return NAMEERROR
    if rcode == w.SERVFAIL or rcode == w.NOTIMP:
        return SERVERERROR
    if rcode == w.NOERROR and w.NS in ns_types:
        return DELEGATION
    if rcode == w.NOERROR:
        return NOERROR
    return OTHERERROR


def classify(t):
    """response.Classify: the class of type ``t``."""
    if t == NOERROR or t == DELEGATION:
        return SUCCESS
    if t == NAMEERROR or t == NODATA:
        return DENIAL
    return ERROR


def type_text(t):
    return TYPE_NAMES[t]


def sections(wire):
    """(answer count, authority types) of a wire message, walking only
    the question, answer and authority sections.  FormatError or
    struct.error when it is malformed."""
    _, _, qd, an, ns, _ = _HDR.unpack_from(wire, 0)
    off = 12
    for _ in range(qd):
        off = w.skip_question(wire, off)
    types = set()
    i = 0
    for rec in w.iter_records(wire, off, an + ns):
        if i >= an:
            types.add(rec[1])
        i += 1
    return an, types


# -- reading a response once --------------------------------------------------

class Parsed:
    """What classification and caching need to know about a response,
    read from its bytes.

    ``segs``: the body after the question cut around each TTL field (OPT
    left out); the message is ``header + question + ttl.join(segs)``.
    ``answers``: (lower-cased owner, type, class, CNAME target or None)
    per answer record; ``ns_types``: the authority record types.
    """

    __slots__ = ("flags", "rcode", "opcode", "qname", "qtype", "qclass",
                 "qlen", "counts", "segs", "ttls", "types", "answers",
                 "do", "expired", "ns_types", "answered")

    def __init__(self):
        self.expired = False
        self.do = False
        #: answers_question's result, kept: cache asks it up to 3 times.
        self.answered = None


def parse(wire, now_unix=None):
    """A Parsed for a response message, or None when it cannot be handled
    in wire form (no single plain question, OPT not last, malformed).
    With ``now_unix``, RRSIGs are checked against that time."""
    try:
        return _parse(wire, now_unix)
    except (w.FormatError, struct.error, IndexError):
        return None


def parse_reply(wire, now_unix=None):
    """``parse`` of ``wire`` with its compression expanded
    (``dnswire.expand_message``; as it is when that fails): the Parsed
    of an answer relayed from an upstream, as the cache stores it.  The
    usual reply (every owner the question's name by a pointer to it, an
    OPT last, no names in the rdata) is read in one pass; the others are
    expanded, then parsed."""
    try:
        p = _parse_pointed(wire)
    except (struct.error, IndexError):
        p = None
    if p is not None:
        return p
    try:
        wire = w.expand_message(wire)
    except w.FormatError:
        pass
    return parse(wire, now_unix)


def _question(wire):
    """A Parsed holding the header's and the question's fields of
    ``wire`` and empty sections, and the offset past the question; None
    when the message has not one plain question."""
    _, flags, qd, an, ns, ar = _HDR.unpack_from(wire, 0)
    if qd != 1:
        return None
    off = _question_end(wire)
    if off is None:
        return None
    p = Parsed()
    p.flags = flags
    p.rcode = flags & 0xF
    p.opcode = (flags >> 11) & 0xF
    p.qname = rq._wire_text(wire[12:off].lower())
    p.qtype, p.qclass = _HH.unpack_from(wire, off)
    p.qlen = off + 4 - 12
    p.counts = (an, ns, ar)
    p.segs, p.ttls, p.types, p.answers, p.ns_types = [], [], [], [], []
    return p, off + 4


def _parse_pointed(wire):
    """The Parsed of ``wire`` expanded when every record's owner is a
    pointer to the question (the OPT's the root) and no rdata holds a
    name, so that expanding only puts the question's bytes in place of
    the pointers; else None."""
    got = _question(wire)
    if got is None or got[0].qlen > 259:
        return None
    p, off = got
    owner = wire[12:off - 4]
    length = len(wire)
    an, ns, ar = p.counts
    total = an + ns + ar
    named = w.RDATA_NAMES
    head = _RRHEAD.unpack_from
    cut = b""
    for i in range(total):
        if wire[off] == 0:
            hdr = off + 1
            rtype, rclass, ttl, rdlen = head(wire, hdr)
            if rtype != w.OPT or i != total - 1 or \
                    hdr + 10 + rdlen > length:
                return None
            p.do = bool(ttl & 0x8000)
            p.counts = (an, ns, ar - 1)
            break
        if wire[off] != 0xC0 or wire[off + 1] != 12:
            return None
        hdr = off + 2
        rtype, rclass, ttl, rdlen = head(wire, hdr)
        rd = hdr + 10
        end = rd + rdlen
        if end > length or rtype in named or rtype == w.OPT:
            return None
        p.segs.append(cut + owner + wire[hdr:hdr + 4])
        cut = wire[rd - 2:end]
        _record(p, i, an, ns, p.qname, rtype, rclass, ttl, None)
        off = end
    p.segs.append(cut)
    return p


def relayed_pieces(wire, req, plugin):
    """The upstream's reply ``wire`` to ``req`` cut as ``request.pieces``
    cuts an answer (a ``request.Pieces``), when it is the usual positive
    reply: QR, a QUERY, not truncated, NOERROR; the question asked (its
    name in any case); one or more answer records of the question's type
    and class, each owned by a pointer to the question's name, with no
    name in their rdata; no authority; an OPT (left out) or nothing
    after them.  None for any other shape (``parse_reply`` reads those).

    Such a reply answers its question, is cacheable and is stored under
    the positive rules with its smallest TTL: the cache keeps it without
    the general path's classification, and the cut is the one
    ``_parse_pointed`` makes (owners written as the reply's question
    writes the name).  A reply whose RD or CD differs from the query's
    is left to the general path, which sends the upstream's flags."""
    qend = req.qend
    qtype = req.qtype
    if len(wire) < qend + 11 or qtype in w.RDATA_NAMES or qtype == w.OPT:
        return None
    flags = (wire[2] << 8) | wire[3]
    if flags & 0xFA0F != 0x8000 or \
            (flags ^ req.flags) & (w.RD | w.CD) or \
            wire[4] or wire[5] != 1 or wire[6] or wire[7] == 0 or \
            wire[8] or wire[9] or wire[10] or wire[11] > 1:
        # Not QR with QUERY, no TC, NOERROR and one question; no
        # answers, authority records, or more than one additional.
        return None
    data = req.data
    tail = qend - 4
    if wire[tail:qend] != data[tail:qend] or \
            wire[12:tail].lower() != data[12:tail].lower():
        return None
    an = wire[7]
    head = wire[12:qend]
    rrtail = wire[tail:qend]
    unpack = _RRHEAD.unpack_from
    length = len(wire)
    segs = [head]
    low = 0xFFFFFFFF
    off = qend
    for i in range(an):
        if off + 12 > length or wire[off] != 0xC0 or wire[off + 1] != 12 or \
                wire[off + 2:off + 6] != rrtail:
            return None
        _, _, ttl, rdlen = unpack(wire, off + 2)
        if ttl < low:
            low = ttl
        end = off + 12 + rdlen
        if end > length:
            return None
        seg = wire[off + 10:end]
        if i + 1 < an:
            seg += head
        segs.append(seg)
        off = end
    if wire[11]:
        # The OPT: the root's, the last record, whole.
        if off + 11 > length or wire[off] != 0 or \
                (wire[off + 1] << 8 | wire[off + 2]) != w.OPT or \
                off + 11 + (wire[off + 9] << 8 | wire[off + 10]) > length:
            return None
    return (tuple(segs), flags & 0x07F0, 0, an, 0, 0, low, plugin)


def _record(p, i, an, ns, name, rtype, rclass, ttl, target):
    """The ``i``-th record's TTL, type and (an answer's) owner or (an
    authority's) type, into ``p``'s sections."""
    p.ttls.append(ttl)
    p.types.append(rtype)
    if i < an:
        p.answers.append((name, rtype, rclass, target))
    elif i < an + ns:
        p.ns_types.append(rtype)


def _parse(wire, now_unix):
    got = _question(wire)
    if got is None:
        return None
    p, off = got
    qname = p.qname
    qwire = wire[12:off - 4].lower()
    qwlen = len(qwire)
    segs = p.segs
    an, ns, ar = p.counts
    last = stop = off
    total = an + ns + ar
    i = 0
    name = None
    for owner, rtype, rclass, ttl, rd, end in w.iter_records(
            wire, off, total, backward=False):
        if i < an:
            # A pointer to the question (the usual owner): its name is
            # known, no decoding.
            if wire[owner] == 0xC0 and wire[owner + 1] == 12:
                name = qname
            elif wire[owner:owner + qwlen].lower() == qwire:
                # Uncompressed and the question's name (what an expanded
                # message holds): its bytes end with the root label.
                name = qname
            else:
                name = w.read_name(wire, owner)[0].lower()
        if rtype == w.OPT:
            if i != total - 1:
                return None
            p.do = bool(ttl & 0x8000)
            p.counts = (an, ns, ar - 1)
            stop = owner
            break
        if rtype == w.RRSIG and now_unix is not None and end - rd >= 18:
            exp, inc = _II.unpack_from(wire, rd + 8)
            if not _valid_period(inc, exp, now_unix):
                p.expired = True
        # Cut out the TTL: it sits 6 bytes before the rdata.
        segs.append(wire[last:rd - 6])
        last = rd - 2
        _record(p, i, an, ns, name, rtype, rclass, ttl,
                w.read_name(wire, rd)[0] if rtype == w.CNAME and i < an
                else None)
        stop = end
        i += 1
    segs.append(wire[last:stop])
    return p


def _question_end(wire):
    """Offset past the question name, or None when it is compressed."""
    off = 12
    while True:
        ln = wire[off]
        if ln == 0:
            off += 1
            break
        if ln & 0xC0:
            return None
        off += ln + 1
    if off + 4 > len(wire):
        return None
    return off


def _valid_period(inception, expiration, now):
    """RRSIG validity with serial arithmetic (miekg's ValidityPeriod)."""
    modi = (inception - now) // _YEAR68
    mode = (expiration - now) // _YEAR68
    ti = inception + modi * _YEAR68
    te = expiration + mode * _YEAR68
    return ti <= now <= te


# -- rules on a Parsed response -----------------------------------------------

def typify(p):
    """response.Typify on a Parsed response."""
    return typify_parts(p.opcode, p.qtype, p.rcode, p.counts[0],
                        p.ns_types, p.do and p.expired)


def answers_question(p):
    """The answer section holds the asked type at the end of the CNAME
    chain that starts at the question name (CoreDNS's answersQuestion)."""
    answered = p.answered
    if answered is None:
        answered = p.answered = _answers_question(p)
    return answered


def _answers_question(p):
    if p.rcode != w.NOERROR or not p.answers:
        return False
    qclass = p.qclass
    qtype = p.qtype
    ans = [a for a in p.answers
           if qclass == w.CLASS_ANY or a[2] == qclass]
    name = p.qname
    if qtype == w.ANY:
        return any(a[0] == name for a in ans)
    if qtype == w.CNAME:
        return bool(_cname_target(ans, name))
    seen = set()
    while True:
        if name in seen:
            return False
        seen.add(name)
        t = _cname_target(ans, name)
        if t is None:
            return False
        if t == "":
            break
        name = t
    return any(a[1] == qtype and a[0] == name for a in ans)


def _cname_target(ans, owner):
    """'' when ``owner`` has no CNAME, its target, or None when it has
    several different ones."""
    target = ""
    for a in ans:
        if a[1] == w.CNAME and a[0] == owner:
            t = a[3].lower()
            if target and target != t:
                return None
            target = t
    return target


def is_nodata(p):
    """Answers that do not answer the question (a dangling CNAME chain,
    records of another type)."""
    return bool(p.answers) and not answers_question(p)


def response_type(p):
    """The type cache files a response under: typify's, with a NOERROR
    that carries an SOA but does not answer the question as NODATA."""
    t = typify(p)
    if t == NOERROR and w.SOA in p.ns_types and is_nodata(p):
        return NODATA
    return t


def cacheable(p, mt):
    """Whether a response of type ``mt`` may be cached: not truncated,
    not an error, meta or update, a denial with its SOA."""
    if p.flags & w.TC:
        return False
    if mt in (OTHERERROR, META, UPDATE):
        return False
    has_soa = w.SOA in p.ns_types
    if mt == NAMEERROR and not has_soa:
        return False
    if mt == NOERROR and not has_soa and is_nodata(p):
        return False
    return True


def minimal_ttl(p, mt, maximum=MAXIMUM_DEFAULT_TTL):
    """dnsutil.MinimalTTLWithMaximum on a Parsed response (seconds): the
    smallest TTL of the message, at most ``maximum``; the minimal default
    for other types and for messages without records."""
    if mt not in (NOERROR, NAMEERROR, NODATA):
        return MINIMAL_DEFAULT_TTL
    an, ns, ar = p.counts
    if an + ns == 0 and ar == 0:
        return MINIMAL_DEFAULT_TTL
    m = maximum
    for t in p.ttls:
        if t < m:
            m = t
    return m
