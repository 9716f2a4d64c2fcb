"""Signing one zone file, as CoreDNS's sign plugin does.

``Signer.sign(now)`` reads the zone file (its DNSKEY, RRSIG, CDS and
CDNSKEY records dropped), sets the SOA serial to the Unix time of
signing, adds for every key its DNSKEY, two CDS (SHA-1 and SHA-256) and a
CDNSKEY at the apex, an NSEC chain over the authoritative names (TTL: the
SOA's minimum), and one RRSIG per key over every authoritative RRset but
the delegations' NS.  Signatures are valid from three hours (less up to
18 hours of jitter) before signing until 32 days (plus up to 5 days of
jitter) after; the jitter is drawn once per zone.

``needs_signing(text, now)`` says why a signed file must be signed again:
its SOA signatures were made more than six days ago, start in the future,
or expire within seven days.
"""

import calendar
import os
import random
import tempfile
import time

from corednstw.core import dnswire as w
from corednstw.engines.authority import (
    canonical_key,
    go_quote,
    is_sub,
    parse_file,
)
from corednstw.engines.dnssec.signer import rrsig, sig_times, type_bitmap

DAY = 24 * 3600
#: Resign when the SOA signature was made longer ago than this.
RESIGN = 6 * DAY
#: Resign when the SOA signature expires sooner than this.
EXPIRE = 7 * DAY
#: How long signatures are valid, and the jitter added per zone.
SIGNATURE_VALIDITY = 32 * DAY
EXPIRATION_JITTER = 5 * DAY
#: Inception: three hours back, and up to 18 more hours of jitter.
INCEPTION_OFFSET = 3 * 3600
INCEPTION_JITTER = 18 * 3600
#: How often every zone is checked.
REFRESH = 5 * 3600
#: How many records of a signed file are read looking for the SOA's
#: signatures.
SCAN_LIMIT = 100

CDS, CDNSKEY = 59, 60
#: Records of the input that sign makes itself.
_DROPPED = frozenset((w.DNSKEY, w.RRSIG, CDS, CDNSKEY))


class SignError(Exception):
    """The zone could not be signed (text as CoreDNS logs it)."""


class Signer:
    """One zone: its input file, keys, output file and jitter."""

    def __init__(self, dbfile, origin, keys, directory,
                 rand=random.random):
        self.dbfile = dbfile
        self.origin = origin
        self.keys = keys
        self.directory = directory
        self.jitter_inception = int(INCEPTION_JITTER * rand())
        self.jitter_expiration = int(EXPIRATION_JITTER * rand())
        # origin is a FQDN, its dot separates it from "signed".
        self.signedfile = "db.%ssigned" % origin

    @property
    def path(self):
        return os.path.join(self.directory, self.signedfile)

    def lifetime(self, now):
        """(inception, expiration) of signatures made at ``now``."""
        now = int(now)
        return (now - INCEPTION_OFFSET - self.jitter_inception,
                now + SIGNATURE_VALIDITY + self.jitter_expiration)

    def key_tags(self):
        return ",".join(str(k.tag) for k in self.keys)

    # -- signing ------------------------------------------------------------

    def sign(self, now):
        """The signed zone as a list of records, in the order written."""
        zone = _read(self.dbfile, self.origin)
        soa = zone.soa
        ttl = soa.ttl
        minttl = int.from_bytes(soa.rdata[-4:], "big")
        soa = w.RR(soa.name, w.SOA, ttl,
                   _with_serial(soa.rdata, int(now) & 0xFFFFFFFF))
        inception, expiration = self.lifetime(now)
        apex = zone.nodes.setdefault(zone.owire, _Node(self.origin))
        for k in self.keys:
            self._add_key_records(apex, k, ttl)

        def sign(rrs, ttl):
            return [rrsig(k, rrs, self.origin, ttl, inception, expiration,
                          orig_ttl=ttl) for k in self.keys]

        out = [soa] + sign([soa], ttl) + zone.ns
        if zone.ns:
            out += sign(zone.ns, ttl)
        order = sorted(zone.nodes, key=canonical_key)
        auth = _authoritative(order, zone.nodes, zone.owire)
        for i, wire in enumerate(auth):
            node = zone.nodes[wire]
            nxt = auth[(i + 1) % len(auth)]
            self._add_nsec(node, wire == zone.owire, nxt, minttl)
            for t, rrs in list(node.types.items()):
                if t != w.NS:
                    node.types.setdefault(w.RRSIG, []).extend(
                        sign(rrs, rrs[0].ttl))
        for wire in order:
            for rrs in zone.nodes[wire].types.values():
                out.extend(rrs)
        return _SignedZone(soa, out)

    def _add_key_records(self, apex, key, ttl):
        origin = self.origin
        types = apex.types
        types.setdefault(w.DNSKEY, []).append(key.dnskey(origin, ttl))
        for digest in (1, 2):
            types.setdefault(CDS, []).append(
                w.RR(origin, CDS, ttl, key.ds(digest, origin)))
        types.setdefault(CDNSKEY, []).append(
            w.RR(origin, CDNSKEY, ttl, key.rdata()))

    def _add_nsec(self, node, apex, next_wire, ttl):
        types = list(node.types) + [w.RRSIG, w.NSEC]
        if apex:
            types += [w.NS, w.SOA]
        node.types[w.NSEC] = [w.RR(node.name, w.NSEC, ttl,
                                   next_wire + type_bitmap(types))]

    # -- writing ------------------------------------------------------------

    def write(self, signed):
        """Write the zone to a temporary file in the directory, then
        move it into place."""
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix="signed-")
        try:
            with os.fdopen(fd, "w") as f:
                for rr in signed.records:
                    f.write(rr.to_text())
                    f.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def why_resign(self, now):
        """Why the signed file must be signed (again), or None."""
        try:
            with open(self.path, encoding="utf-8",
                      errors="surrogateescape") as f:
                text = f.read()
        except FileNotFoundError as e:
            return "open %s: no such file or directory" % e.filename
        except OSError:
            return None      # CoreDNS only acts on a missing file
        return needs_signing(text, now)


class _SignedZone:
    __slots__ = ("soa", "records")

    def __init__(self, soa, records):
        self.soa = soa
        self.records = records

    @property
    def serial(self):
        return int.from_bytes(self.soa.rdata[-20:-16], "big")


class _Node:
    """An apex that had no records but SOA and NS."""

    def __init__(self, name):
        self.name = name
        self.types = {}


def _read(path, origin):
    """The zone in ``path`` without the records signing makes."""
    from corednstw.engines.authority import ZoneError
    try:
        zone = parse_file(path, origin)
    except ZoneError as e:
        raise SignError(str(e)) from e
    except OSError as e:
        raise SignError("open %s: %s" % (
            path, (e.strerror or str(e)).lower())) from e
    zone.sigsoa = []
    zone.signs = []
    for wire in list(zone.nodes):
        node = zone.nodes[wire]
        for t in _DROPPED:
            node.types.pop(t, None)
        node.sigs = {}
        if not node.types:
            del zone.nodes[wire]
    return zone


def _authoritative(order, nodes, owire):
    """The names of ``order`` (canonical) at or above every zone cut:
    those get an NSEC and signatures; names below a delegation (glue)
    get neither."""
    cuts: list[bytes] = []
    out = []
    for wire in order:
        if not is_sub(wire, owire):
            continue
        if any(wire != c and is_sub(wire, c) for c in cuts):
            continue
        if wire != owire and w.NS in nodes[wire].types:
            cuts.append(wire)
        out.append(wire)
    return out


def _with_serial(rdata, serial):
    """SOA rdata with another serial."""
    at = len(rdata) - 20
    return rdata[:at] + serial.to_bytes(4, "big") + rdata[at + 4:]


# -- deciding when to sign ----------------------------------------------------

def needs_signing(text, now):
    """Why the signed zone ``text`` must be signed again at ``now``, or
    None: CoreDNS's rules, checked on every signature of the SOA among
    the first records."""
    found = False
    for rd in _first_rrsigs(text):
        if rd.type_covered != w.SOA:
            continue
        found = True
        why = _soa_sig_reason(rd.inception, rd.expiration, now)
        if why:
            return why
    if not found:
        return "no SOA RRSIG found in first %d records" % SCAN_LIMIT
    return None


def _first_rrsigs(text):
    """The RRSIG rdatas among the first SCAN_LIMIT records of ``text``
    (a master file; only its head is read)."""
    import dns.exception
    import dns.rdata
    out = []
    for tokens in _records(text, SCAN_LIMIT):
        upper = [t.upper() for t in tokens[:4]]
        if "RRSIG" not in upper:
            continue
        at = upper.index("RRSIG")
        try:
            out.append(dns.rdata.from_text("IN", "RRSIG",
                                           " ".join(tokens[at + 1:])))
        except (dns.exception.DNSException, ValueError):
            continue
    return out


def _records(text, limit):
    """The first ``limit`` records of a master file, as token lists
    (comments dropped, parentheses joined, directives skipped)."""
    count = 0
    pending = []
    depth = 0
    for line in text.splitlines():
        line = line.split(";", 1)[0]
        depth += line.count("(") - line.count(")")
        pending.append(line.replace("(", " ").replace(")", " "))
        if depth > 0:
            continue
        tokens = " ".join(pending).split()
        pending = []
        depth = 0
        if not tokens or tokens[0].startswith("$"):
            continue
        yield tokens
        count += 1
        if count >= limit:
            return


def _soa_sig_reason(inception, expiration, now):
    incep = _serial_time(inception, now)
    expire = _serial_time(expiration, now)
    age = now - incep
    if age > RESIGN:
        return "inception %s was more than: %s ago from %s: %s" % (
            go_quote(_fmt(incep)), _go_duration(RESIGN), _fmt(now),
            _go_duration(age))
    if age < 0:
        return "inception %s date is in the future: %s" % (
            go_quote(_fmt(incep)), _go_duration(age))
    left = expire - now
    if left < EXPIRE:
        return "expiration %s is less than: %s away from %s: %s" % (
            go_quote(_fmt(expire)), _go_duration(EXPIRE), _fmt(now),
            _go_duration(left))
    return None


def _serial_time(t, now):
    """An RRSIG time (32 bits, RFC 1982 arithmetic) near ``now``."""
    t = int(t)
    base = int(now) & ~0xFFFFFFFF
    best = base + t
    for cand in (best - (1 << 32), best + (1 << 32)):
        if abs(cand - now) < abs(best - now):
            best = cand
    return best


def _fmt(t):
    """Go's "2006-01-02T15:04:05.000Z07:00" for a UTC time."""
    ms = int(round((t - int(t)) * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(t))) + \
        ".%03dZ" % ms


def _go_duration(seconds):
    from corednstw.core.durations import format_duration
    return format_duration(seconds)


def unix(text):
    """Seconds since the epoch of a YYYYMMDDHHMMSS time (tests)."""
    return calendar.timegm(time.strptime(text, "%Y%m%d%H%M%S"))


__all__ = ["SignError", "Signer", "needs_signing", "sig_times"]
