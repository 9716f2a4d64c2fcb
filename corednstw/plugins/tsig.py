"""tsig: verify TSIG-signed queries and sign the answers (RFC 8945).

``tsig [ZONE...] { secret NAME KEY; secrets FILE; require [QTYPE...|all|
none]; require_opcode [OPCODE...|all|none] }``.  For a query in the zones
with a TSIG record, the MAC is checked with dnspython's ``dns.tsig``
(HMAC-MD5, SHA-1, SHA-224, SHA-256, SHA-384 and SHA-512, the algorithm the
client chose, as CoreDNS's library does), the record is taken off the
query, and the answer is signed with the query's MAC as the RFC says.  A
failed check is answered NOTAUTH with the TSIG error (BADKEY, BADSIG,
BADTIME); an unsigned query of a required type or opcode is REFUSED.

The answer is signed over its final bytes: the plugin leaves a signer on
the Request (``req.sign``) that the server applies after encoding, so
whatever plugins before this one change in the answer is covered.  The
server applies it to every message of a zone transfer in turn, each MAC
chained to the one before (RFC 8945 section 5.3.1).
"""

import struct
from typing import Optional

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.plugin import Plugin, match, zones_from_args
from corednstw.core.request import Response

TSIG = 250
BADSIG, BADKEY, BADTIME = 16, 17, 18
FUDGE = 300

#: The algorithms CoreDNS's DNS library accepts.
ALGORITHMS = frozenset(dns.name.from_text(a) for a in (
    "hmac-md5.sig-alg.reg.int.", "hmac-sha1.", "hmac-sha224.",
    "hmac-sha256.", "hmac-sha384.", "hmac-sha512."))

OPCODES = {"QUERY": 0, "IQUERY": 1, "STATUS": 2, "NOTIFY": 4, "UPDATE": 5}

_RRHEAD = struct.Struct("!HHIH")


class Signer:
    """Adds the TSIG record to the reply bytes: signed with the query's
    MAC, or (for BADKEY and BADSIG) with no MAC at all.

    Called again for each further message of a zone transfer, it signs
    that message over the previous one's MAC and the timers only (RFC 8945
    section 5.3.1), so a client can check the whole stream.  ``limit`` is
    the client's UDP buffer (0 over TCP): an answer the record would push
    past it is cut to its question, with TC set (section 5.3).
    """

    __slots__ = ("owner", "key", "algorithm", "request_mac", "error",
                 "time_signed", "other", "clock", "limit", "mac")

    def __init__(self, owner, key, algorithm, request_mac, error, clock,
                 time_signed=0, other=b"", limit=0):
        self.owner = owner
        self.key = key
        self.algorithm = algorithm
        self.request_mac = request_mac
        self.error = error
        self.clock = clock
        self.time_signed = time_signed
        self.other = other
        self.limit = limit
        self.mac = None         # the last message's MAC, once one is signed

    def __call__(self, wire):
        previous = self.mac
        try:
            record = self.record(wire)
            if self.limit and len(wire) + len(record) > self.limit:
                self.mac = previous
                wire = _question_only(wire)
                record = self.record(wire)
        except Exception as e:           # noqa: BLE001 - never fail a reply
            logger.error("tsig", "signing the reply: %s" % e)
            return wire
        ar = struct.unpack_from("!H", wire, 10)[0] + 1
        return wire[:10] + struct.pack("!H", ar) + wire[12:] + record

    def record(self, wire):
        """The TSIG record (owner to rdata) for ``wire``."""
        msgid = struct.unpack_from("!H", wire, 0)[0]
        rd = dns.rdtypes.ANY.TSIG.TSIG(
            dns.rdataclass.ANY, dns.rdatatype.TSIG, self.algorithm,
            self.time_signed if self.error == BADTIME else 0, FUDGE, b"",
            msgid, self.error, self.other)
        if self.error not in (BADKEY, BADSIG):
            rd = self.signed(wire, rd)
        rdata = rd.to_wire()
        assert rdata is not None    # given no file, dnspython returns it
        return (w.name_to_wire(self.owner)
                + _RRHEAD.pack(TSIG, dns.rdataclass.ANY, 0, len(rdata))
                + rdata)

    def signed(self, wire, rd):
        """``rd`` with its MAC: over the query's MAC for the first message,
        over the previous message's MAC and the timers for the others."""
        now = self.time_signed or int(self.clock())
        if self.mac is None:
            rd, _ = dns.tsig.sign(wire, self.key, rd, now,
                                  self.request_mac)
        else:
            ctx = dns.tsig.get_context(self.key)
            ctx.update(struct.pack("!H", len(self.mac)) + self.mac)
            rd, _ = dns.tsig.sign(wire, self.key, rd, now, ctx=ctx,
                                  multi=True)
        self.mac = rd.mac
        return rd


def _question_only(wire):
    """The reply cut to its header, question and OPT record, with TC set:
    what RFC 8945 section 5.3 sends when the TSIG record does not fit."""
    try:
        msgid, flags, qd, an, ns, ar = struct.unpack_from("!6H", wire, 0)
        off = 12
        for _ in range(qd):
            off = w.skip_name(wire, off) + 4
        qend = off
        opt = b""
        for _ in range(an + ns + ar):
            start = off
            off = w.skip_name(wire, off)
            rtype, _, _, rdlen = _RRHEAD.unpack_from(wire, off)
            off += 10 + rdlen
            if rtype == w.OPT:
                opt = wire[start:off]
    except (w.FormatError, struct.error):
        return wire
    return (struct.pack("!6H", msgid, flags | w.TC, qd, 0, 0,
                        1 if opt else 0)
            + wire[12:qend] + opt)


class TSIGServer(Plugin):
    name = "tsig"

    def __init__(self, zones, secrets, types, opcodes):
        self.zones = zones
        self.secrets = secrets
        self.types = types          # None: all
        self.opcodes = opcodes      # None: all

    def required(self, qtype, opcode):
        t, o = self.types, self.opcodes
        return t is None or qtype in t or o is None or opcode in o

    def serve(self, req):
        off = req.tsig
        if off is None and not self.required(req.qtype, req.opcode):
            return self.next.serve(req)
        if match(self.zones, req.qname) is None:
            return self.next.serve(req)
        if off is None:
            logger.debug("tsig", "rejecting '%s' request without TSIG"
                         % w.type_text(req.qtype))
            return Response(w.REFUSED, plugin=self.name)
        try:
            owner, rdata, end = _read_tsig(req.data, off)
        except (w.FormatError, dns.exception.DNSException, struct.error):
            return Response(w.FORMERR, plugin=self.name)
        if end != len(req.data):
            # RFC 8945 5.1: the TSIG must be the last record.
            return Response(w.FORMERR, plugin=self.name)
        error, key = self.check(req.data, off, owner, rdata)
        _strip(req, off)
        signer = Signer(owner, key, rdata.algorithm, rdata.mac, error,
                        self.reactor.seconds,
                        limit=req.size if req.proto != "tcp" else 0)
        if error == BADTIME:
            signer.time_signed = rdata.time_signed
            signer.other = struct.pack(
                "!Q", int(self.reactor.seconds()))[2:]
        req.sign = signer
        if error:
            logger.debug("tsig", "TSIG validation failed: %s %s"
                         % (w.type_text(req.qtype), w.rcode_text(error)))
            return Response(w.NOTAUTH, plugin=self.name)
        return self.next.serve(req)

    def check(self, data, off, owner, rdata):
        """(TSIG error, key): 0 when the MAC and the time are right."""
        secret = self.secrets.get(owner.lower())
        if secret is None:
            return BADKEY, None
        if rdata.algorithm not in ALGORITHMS:
            return BADSIG, None
        try:
            key = dns.tsig.Key(owner.lower(), secret, rdata.algorithm)
            dns.tsig.validate(data, key, key.name, rdata,
                              int(self.reactor.seconds()), None, off)
        except dns.tsig.BadTime:
            return BADTIME, key
        except Exception:        # noqa: BLE001 - any failure is BADSIG
            return BADSIG, None
        return 0, key


def _read_tsig(data, off):
    """(owner text, TSIG rdata, offset past the record) of the record at
    ``off``."""
    owner, end = w.read_name(data, off)
    rtype, rclass, ttl, rdlen = _RRHEAD.unpack_from(data, end)
    rd = dns.rdata.from_wire(rclass, rtype, data, end + 10, rdlen)
    return owner, rd, end + 10 + rdlen


def _strip(req, off):
    """Take the TSIG record off the query the rest of the chain sees."""
    data = req.data
    ar = struct.unpack_from("!H", data, 10)[0] - 1
    req.data = data[:10] + struct.pack("!H", ar) + data[12:off]
    req.arcount = ar
    req.tsig = None
    req._message = None


# -- setup -------------------------------------------------------------------

def parse_key_file(text):
    """{name: secret} from a BIND-style key file; ValueError when it is
    not one."""
    secrets = {}
    lines = iter(text.splitlines())
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if fields[0] != "key":
            raise ValueError("unexpected token %r" % fields[0])
        name = fields[1].strip('"{') if len(fields) > 1 else ""
        if not name:
            raise ValueError("expected key name %r" % line)
        name = _normalize(name)
        if name in secrets:
            raise ValueError("key %r redefined" % name)
        for inner in lines:
            f = inner.split()
            if not f or f[0] == "algorithm":
                continue
            if f[0] == "secret":
                secret = f[1].strip('";') if len(f) > 1 else ""
                if not secret:
                    raise ValueError("expected secret key %r" % inner)
                secrets[name] = secret
            elif f[0] in ("}", "};"):
                break
            else:
                raise ValueError("unexpected token %r" % f[0])
        if name not in secrets:
            raise ValueError("expected secret for key %r" % name)
    return secrets


def _normalize(name):
    name = name.lower()
    return name if name.endswith(".") else name + "."


def _requirement(c, table):
    """The set a ``require``/``require_opcode`` line names; None for
    ``all``.  Any mistake is CoreDNS's argument error."""
    if c.between(1)[0] == "all":
        return None
    if c.args[0] == "none":
        return frozenset()
    out = set()
    for a in c.args:
        v = table(a)
        if v is None:
            raise c.arg_error()
        out.add(v)
    return frozenset(out)


def _qtype(text):
    if text != text.upper() or text.startswith("TYPE"):
        return None
    try:
        return w.type_value(text)
    except ValueError:
        return None


def _wrong(c):
    """CoreDNS answers an unknown option with its argument error."""
    raise c.arg_error()


def setup(d, block):
    secrets = {}
    types: Optional[frozenset[int]] = frozenset()
    opcodes: Optional[frozenset[int]] = frozenset()

    def add(name, secret, c):
        if name in secrets:
            raise c.arg_error()
        secrets[name] = secret

    def secret(c):
        name, value = c.exactly(2)
        add(_normalize(name), value, c)

    def secrets_file(c):
        """``secrets FILE``: keys in BIND's key-file syntax; a file that
        does not read is CoreDNS's argument error too."""
        path = block.path(c.one())
        try:
            with open(path) as fh:
                found = parse_key_file(fh.read())
        except (OSError, ValueError) as e:
            raise c.arg_error() from e
        for name, value in found.items():
            add(name, value, c)

    def require(c):
        nonlocal types
        types = _requirement(c, _qtype)

    def require_opcode(c):
        nonlocal opcodes
        opcodes = _requirement(c, OPCODES.get)

    d.read_options({"secret": secret, "secrets": secrets_file,
                    "require": require, "require_opcode": require_opcode,
                    None: _wrong}, unknown=None)
    return TSIGServer(zones_from_args(d.args, block), secrets, types,
                      opcodes)
