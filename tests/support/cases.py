"""Table tests in CoreDNS's style: a query, and the answer expected.

A ``Case`` names the question (``qname``, ``qtype``, the DO bit) and what
the reply must hold: its rcode, the records of each section written as
zone-file lines (``"www.example.org. 3600 IN A 127.0.0.1"``) and, when
given, header flags.  ``check_response`` compares a dnspython reply to a
case (rcode, the question echoed with its case, flags, every section);
``run`` sends a whole table to a server (a port) or to a
``util.Direct`` chain and checks every reply.

Sections are compared as sets of records, sorted, as CoreDNS's
test.SortAndCheck does: order within a section is not checked.  Owner
names are compared with their case (the 0x20 echo matters).  Two
wildcards keep rows exact where the server chooses a value: a TTL written
``*`` matches any TTL, and an rdata field written ``*`` matches any value
(whoami's SRV port, for instance).
"""

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from twisted.internet import defer, reactor, task

from tests.support import util

#: Header flags ``Case`` can check, by keyword.
FLAGS = {"aa": dns.flags.AA, "tc": dns.flags.TC, "rd": dns.flags.RD,
         "ra": dns.flags.RA, "ad": dns.flags.AD, "cd": dns.flags.CD}

#: Section keyword of ``Case`` and dnspython's name for the section.
SECTIONS = (("answer", "answer"), ("ns", "authority"),
            ("extra", "additional"))

ANY = "*"


class Case:
    """One row of a table test.

    ``rcode`` is a mnemonic or a number.  ``answer``, ``ns`` and ``extra``
    list the records each section must hold, no more, no less.  ``aa``,
    ``tc``, ``rd``, ``ra``, ``ad`` and ``cd`` check one header flag when
    True or False (None: not checked); ``flags`` checks the whole set
    (``"QR AA RD"``).  ``do`` and ``cd_query`` shape the query; ``qclass``
    and ``payload`` too.  ``desc`` is printed with failures.
    """

    def __init__(self, qname, qtype="A", rcode="NOERROR", answer=(), ns=(),
                 extra=(), do=False, qclass="IN", flags=None, desc="",
                 payload=None, cd_query=False, **bits):
        unknown = set(bits) - set(FLAGS)
        if unknown:
            raise TypeError("unknown Case flags: %s" % sorted(unknown))
        self.qname = qname
        self.qtype = qtype
        self.qclass = qclass
        self.rcode = rcode
        self.answer = list(answer)
        self.ns = list(ns)
        self.extra = list(extra)
        self.do = do
        self.payload = payload
        self.cd_query = cd_query
        self.flags = flags
        self.bits = {k: v for k, v in bits.items() if v is not None}
        self.desc = desc

    def msg(self):
        """The query this case asks, as a dnspython message (RD set, as
        CoreDNS's SetQuestion does; EDNS0 when ``do`` or ``payload``)."""
        kw = {}
        if self.do or self.payload is not None:
            kw = {"use_edns": 0, "want_dnssec": self.do,
                  "payload": self.payload or 4096}
        q = dns.message.make_query(self.qname, self.qtype, self.qclass, **kw)
        if self.cd_query:
            q.flags |= dns.flags.CD
        return q

    def __str__(self):
        text = "%s/%s" % (self.qname, self.qtype)
        if self.qclass != "IN":
            text += "/" + self.qclass
        if self.do:
            text += " +do"
        if self.desc:
            text += " (%s)" % self.desc
        return text

    __repr__ = __str__


class Record:
    """A record reduced to what is compared: owner (case kept), TTL (None
    for any), class, type and the rdata as text (or a list of fields when
    the expectation has ``*`` fields)."""

    __slots__ = ("name", "ttl", "rdclass", "rdtype", "rdata", "text")

    def __init__(self, name, ttl, rdclass, rdtype, rdata, text):
        self.name = name
        self.ttl = ttl
        self.rdclass = rdclass
        self.rdtype = rdtype
        self.rdata = rdata
        self.text = text

    def key(self):
        return (self.name, self.rdclass, self.rdtype, str(self.rdata))

    def same_data(self, other):
        """Equal but for the TTL; ``self`` may hold ``*`` fields."""
        if (self.name, self.rdclass, self.rdtype) != (
                other.name, other.rdclass, other.rdtype):
            return False
        if isinstance(self.rdata, list):
            fields = other.rdata.split()
            return len(fields) == len(self.rdata) and all(
                want in (ANY, got) for want, got in zip(self.rdata, fields))
        return self.rdata == other.rdata

    def matches(self, other):
        return self.same_data(other) and self.ttl in (None, other.ttl)


def _canonical(rdclass, rdtype, text, fields):
    """The rdata as compared: ``fields(rdtype, text)`` when the caller
    compares only some fields, else dnspython's presentation form (so
    ``::FFFF:10.0.0.2`` and ``::ffff:10.0.0.2`` are the same)."""
    if fields is not None:
        return fields(rdtype, text)
    rd = dns.rdata.from_text(rdclass, rdtype, text, origin=dns.name.root,
                             relativize=False)
    return rd.to_text()


def _pop(text):
    """The first field of ``text`` and the rest, stripped."""
    parts = text.split(None, 1)
    return parts[0], (parts[1].strip() if len(parts) > 1 else "")


def parse_record(text, fields=None):
    """A ``Record`` from a zone-file line: owner, TTL, optional class,
    type, rdata.  ``fields`` narrows what of the rdata is compared."""
    tokens = text.split(None, 2)
    if len(tokens) < 3:
        raise ValueError("record needs owner, TTL and type: %r" % text)
    name, ttl, rest = tokens
    ttl = None if ttl == ANY else int(ttl)
    first, rest = _pop(rest)
    rdclass = dns.rdataclass.IN
    if first.upper() in ("IN", "CH", "HS", "ANY") or \
            first.upper().startswith("CLASS"):
        rdclass = dns.rdataclass.from_text(first)
        first, rest = _pop(rest)
    rdtype = dns.rdatatype.from_text(first)
    owner = dns.name.from_text(name).to_text()
    if ANY in rest.split():
        rdata = rest.split()
    else:
        rdata = _canonical(rdclass, rdtype, rest, fields)
    return Record(owner, ttl, rdclass, rdtype, rdata, text)


def section_records(msg, section, fields=None):
    """The records of a reply section (OPT left out) as ``Record``s."""
    out = []
    for rrset in getattr(msg, section):
        if rrset.rdtype == dns.rdatatype.OPT:
            continue
        for rd in rrset:
            text = "%s %d %s %s %s" % (
                rrset.name, rrset.ttl,
                dns.rdataclass.to_text(rrset.rdclass),
                dns.rdatatype.to_text(rrset.rdtype), rd.to_text())
            rdata = (fields(rrset.rdtype, rd.to_text()) if fields
                     else rd.to_text())
            out.append(Record(rrset.name.to_text(), rrset.ttl,
                              rrset.rdclass, rrset.rdtype, rdata, text))
    return sorted(out, key=Record.key)


def compare_section(label, want, got):
    """Problems (text lines) between expected and received records.

    Exact matches are paired first; what is left is reported as a TTL
    difference (same record, other TTL), a missing or an unexpected
    record."""
    want = sorted(want, key=Record.key)
    left = list(got)
    missing = []
    for w in want:
        for i, g in enumerate(left):
            if w.matches(g):
                del left[i]
                break
        else:
            missing.append(w)
    problems = []
    for w in missing:
        near = [g for g in left if w.same_data(g)]
        if near:
            left.remove(near[0])
            problems.append("%s: TTL of %s is %d, expected %d" % (
                label, w.name + " " + dns.rdatatype.to_text(w.rdtype),
                near[0].ttl, w.ttl))
        else:
            problems.append("%s: missing   %s" % (label, w.text))
    for g in left:
        problems.append("%s: unexpected %s" % (label, g.text))
    if problems:
        problems.append("%s: got %d record(s)%s" % (
            label, len(got), "".join("\n    " + g.text for g in got)))
    return problems


def _rcode_text(rcode):
    if isinstance(rcode, str):
        return rcode.upper()
    return dns.rcode.to_text(rcode)


def _flag_problems(case, reply):
    problems = []
    for name, bit in sorted(FLAGS.items()):
        want = case.bits.get(name)
        if want is not None and bool(reply.flags & bit) != want:
            problems.append("flag %s is %s, expected %s" % (
                name.upper(), "set" if not want else "clear",
                "set" if want else "clear"))
    if case.flags is not None:
        got = dns.flags.to_text(reply.flags)
        want = " ".join(case.flags.split())
        if sorted(got.split()) != sorted(want.split()):
            problems.append("flags are %r, expected %r" % (got, want))
    return problems


def _question_problems(case, reply):
    """The reply repeats the question as asked, case included."""
    if not reply.question:
        return []
    q = reply.question[0]
    want = dns.name.from_text(case.qname).to_text()
    got = (q.name.to_text(), dns.rdatatype.to_text(q.rdtype))
    if got != (want, dns.rdatatype.to_text(
            dns.rdatatype.from_text(case.qtype))):
        return ["question is %s %s, expected %s %s" % (
            got + (want, case.qtype))]
    return []


def problems(case, reply, fields=None):
    """What differs between ``reply`` and ``case``, as text lines (an
    empty list when the reply matches).  ``fields(rdtype, rdata_text)``,
    when given, reduces rdata to the parts compared."""
    if reply is None:
        return ["no reply"]
    out = []
    got_rcode = dns.rcode.to_text(reply.rcode())
    if got_rcode != _rcode_text(case.rcode):
        out.append("rcode is %s, expected %s" % (got_rcode,
                                                   _rcode_text(case.rcode)))
    out.extend(_question_problems(case, reply))
    out.extend(_flag_problems(case, reply))
    for attr, section in SECTIONS:
        want = [parse_record(t, fields) for t in getattr(case, attr)]
        got = section_records(reply, section, fields)
        out.extend(compare_section(section, want, got))
    return out


def check_response(testcase, case, reply, fields=None):
    """Fail ``testcase`` with every difference between ``reply`` (a
    dnspython message) and ``case``: rcode, question, flags, and each
    section record by record."""
    found = problems(case, reply, fields)
    if found:
        testcase.fail("%s:\n  %s" % (case, "\n  ".join(found)))


def parse_reply(data):
    """A reply's bytes as dnspython reads them, one record per set, so
    each record keeps its own TTL."""
    if data is None:
        return None
    return dns.message.from_wire(data, ignore_trailing=True,
                                 one_rr_per_rrset=True)


def ask(target, case, proto="udp", host="127.0.0.1", **kw):
    """Deferred reply (dnspython message) to ``case`` from ``target``: a
    port on ``host``, or a ``util.Direct`` chain (then the Deferred has
    usually fired already).  ``kw`` go to ``util.send_udp``/``send_tcp``
    (a source port, for instance)."""
    wire = case.msg().to_wire()
    if isinstance(target, util.Direct):
        d = target.ask_async(wire, proto)
    elif proto == "udp":
        d = util.send_udp(target, wire, host, **kw)
    else:
        d = util.send_tcp(target, wire, host, **kw).addCallback(
            lambda replies: replies[0])
    return d.addCallback(parse_reply)


@defer.inlineCallbacks
def run(testcase, target, table, proto="udp", host="127.0.0.1",
        fields=None):
    """Ask every case of ``table`` in turn and check its reply."""
    for case in table:
        reply = yield ask(target, case, proto, host)
        check_response(testcase, case, reply, fields)


@defer.inlineCallbacks
def wait_for_answer(target, case, proto="udp", host="127.0.0.1",
                    timeout=10.0, interval=0.03):
    """Ask ``case`` until the reply matches it: for answers that change
    once something happened (a reload, a transfer).  Fails after
    ``timeout`` seconds with what still differed."""
    deadline = reactor.seconds() + timeout
    while True:
        reply = yield ask(target, case, proto, host)
        found = problems(case, reply)
        if not found:
            return reply
        if reactor.seconds() > deadline:
            raise AssertionError("%s never answered:\n  %s" % (
                case, "\n  ".join(found)))
        yield task.deferLater(reactor, interval, lambda: None)


def run_direct(testcase, direct, table, proto="udp", fields=None):
    """``run`` for a ``util.Direct`` chain whose answers are synchronous:
    checks every row now (no Deferred to return)."""
    for case in table:
        got = []
        ask(direct, case, proto).addCallback(got.append)
        if not got:
            testcase.fail("%s: no synchronous reply" % case)
        check_response(testcase, case, got[0], fields)


def rrset(line):
    """A dnspython RRset of one zone-file line (owner TTL class type
    rdata), for scripting answers a plugin receives."""
    name, ttl, rdclass, rdtype, rdata = line.split(None, 4)
    return dns.rrset.from_text(name, int(ttl), rdclass, rdtype, rdata)


def whoami(qname, proto="udp", client="127.0.0.1", port=ANY):
    """The additional records whoami answers ``qname`` with (its A or
    AAAA of the client and the SRV of the source port; any port unless
    ``port`` is given)."""
    rtype = "AAAA" if ":" in client else "A"
    owner = qname if qname.endswith(".") else qname + "."
    srv = "_%s.%s" % (proto, owner) if owner != "." else "_%s." % proto
    return ["%s 0 IN %s %s" % (owner, rtype, client),
            "%s 0 IN SRV 0 0 %s ." % (srv, port)]
