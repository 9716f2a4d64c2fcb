"""loadbalance: reorders A, AAAA and MX records of answers (CoreDNS's
loadbalance).

Middleware on what the next plugins answer (NOERROR only, never zone
transfers):

- ``round_robin`` shuffles the address records and the MX records of each
  section; a section is regrouped as CNAMEs, other records, addresses, MX
  (CoreDNS's order, so CNAMEs stay in front for picky stub resolvers).
- ``weighted WEIGHTFILE`` picks the first address record of the answer and
  additional sections at random by the weights the file gives the name's
  addresses (weight 1 for addresses it does not list), for A, AAAA and SRV
  queries; the file is re-read when its content changes.
- ``prefer CIDR...`` (with round_robin) then moves the addresses inside the
  given networks to the front, in the order the networks are listed.

Answers that arrive as wire bytes (forward, cache) are only decoded when a
section actually has something to reorder, and not even then in the common
case of one name's addresses to shuffle (``_shuffle_wire``).
"""

import hashlib
import ipaddress
import random
from typing import Union

from twisted.internet import task, threads

from corednstw.core import dnswire as w
from corednstw.core import goparse, logger
from corednstw.core.durations import format_duration
from corednstw.core.plugin import Plugin, is_deferred
from corednstw.core.request import (
    RawResponse,
    Response,
    parse_response,
    remember,
)

NAME = "loadbalance"
DEFAULT_WEIGHT_RELOAD = 30.0
POLICIES = ("round_robin", "weighted")

_MAPPED = b"\x00" * 10 + b"\xff\xff"


def _group(rtype):
    """Group of a record: 0 CNAME, 1 other, 2 address, 3 MX."""
    if rtype == w.A or rtype == w.AAAA:
        return 2
    if rtype == w.MX:
        return 3
    if rtype == w.CNAME:
        return 0
    return 1


def _prefer_group(rtype):
    """prefer's regrouping: CNAME, addresses, MX, then the rest."""
    g = _group(rtype)
    return 3 if g == 1 else g - (1 if g > 1 else 0)


def _partition(rrs, key):
    groups: tuple[list[w.RR], ...] = ([], [], [], [])
    for rr in rrs:
        groups[key(rr.rtype)].append(rr)
    return groups


def round_robin(rrs, rng=random):
    """CoreDNS's roundRobin: regroup and shuffle addresses and MX."""
    if len(rrs) <= 1:
        return rrs
    t = rrs[0].rtype
    if t == w.A or t == w.AAAA:
        # Only addresses (the common case): one copy, shuffled.
        for r in rrs:
            if r.rtype != t:
                break
        else:
            out = list(rrs)
            rng.shuffle(out)
            return out
    cname, rest, addr, mx = _partition(rrs, _group)
    rng.shuffle(addr)
    rng.shuffle(mx)
    return cname + rest + addr + mx


def _ip_bytes(rdata):
    """Address bytes of A/AAAA rdata, IPv4-mapped IPv6 as IPv4 (Go's To4)."""
    if len(rdata) == 16 and rdata[:12] == _MAPPED:
        return rdata[12:]
    return rdata


class Prefer:
    """Networks whose addresses go first, in the order given."""

    def __init__(self, networks):
        self.nets = []
        for n in networks:
            size = 4 if n.version == 4 else 16
            self.nets.append((size, int(n.network_address),
                              int(n.netmask)))

    def index(self, rdata):
        ip = _ip_bytes(rdata)
        value = int.from_bytes(ip, "big")
        for i, (size, net, mask) in enumerate(self.nets):
            if len(ip) == size and value & mask == net:
                return i
        return len(self.nets)

    def reorder(self, rrs):
        cname, addr, mx, rest = _partition(rrs, _prefer_group)
        if len(addr) > 1:
            addr = sorted(addr, key=lambda rr: self.index(rr.rdata))
        return cname + addr + mx + rest


class Weights:
    """The weight file: name -> [(address bytes, weight)]."""

    def __init__(self, path, reload=DEFAULT_WEIGHT_RELOAD, rng=None):
        self.path = path
        self.reload = reload
        self.domains = {}
        self.digest = None
        self.rng = rng or random.Random()

    def parse(self, text):
        # name -> [(address bytes, weight)]
        domains: dict[str, list[tuple[bytes, int]]] = {}
        dname = ""
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) == 1:
                if goparse.parse_ip(fields[0]) is not None:
                    raise ValueError(
                        'wrong domain name:"%s" in weight file %s. (Maybe a '
                        'missing weight value?)' % (fields[0], self.path))
                dname = fields[0]
                if not dname.endswith("."):
                    dname += "."
                dname = dname.lower()
                domains.setdefault(dname, [])
            elif len(fields) == 2:
                ip = goparse.parse_ip(fields[0])
                if ip is None:
                    raise ValueError('wrong IP address:"%s" in weight file %s'
                                     % (fields[0], self.path))
                value = fields[1]
                if not value.isdigit() or not 0 < int(value) <= 255:
                    raise ValueError('wrong weight value:"%s" in weight '
                                     'file %s' % (value, self.path))
                if not dname:
                    raise ValueError("missing domain name in weight file %s"
                                     % self.path)
                # IPv4 and IPv4-mapped both give 4 bytes, as _ip_bytes
                # gives the addresses of answers.
                domains[dname].append((ip.packed, int(value)))
            else:
                raise ValueError('could not parse weight line:"%s" in weight '
                                 'file %s' % (line, self.path))
        return domains

    def read(self):
        """Thread-safe part: (digest, domains) or None when unchanged.
        Raises OSError when the file cannot be opened, ValueError when it
        does not parse (the new digest is kept so a broken file is reported
        once, as CoreDNS does)."""
        with open(self.path, "rb") as f:
            data = f.read()
        digest = hashlib.md5(data).digest()
        if digest == self.digest:
            return None
        self.digest = digest
        return self.parse(data.decode("utf-8", "replace"))

    def load(self):
        """Read now and install; logs as CoreDNS does on success."""
        domains = self.read()
        if domains is not None:
            self.install(domains)

    def install(self, domains):
        self.domains = domains
        logger.info(NAME, "Successfully reloaded weight file %s" % self.path)

    def top(self, addr):
        """Index of the address record to put first."""
        weights = []
        for rr in addr:
            weight = 1
            ip = _ip_bytes(rr.rdata)
            for wip, value in self.domains.get(rr.name.lower(), ()):
                if wip == ip:
                    weight = value
                    break
            weights.append(weight)
        v = self.rng.randrange(sum(weights))
        acc = 0
        for i, weight in enumerate(weights):
            acc += weight
            if v < acc:
                return i
        return 0

    def reorder(self, rrs):
        cname, rest, addr, mx = _partition(rrs, _group)
        if not addr:
            return rrs
        i = self.top(addr)
        if i:
            addr[0], addr[i] = addr[i], addr[0]
        return cname + rest + addr + mx


def _changes(types, key, shuffled):
    """Whether regrouping records of these types by ``key`` (and shuffling
    the groups in ``shuffled``) could change their order."""
    if len(types) <= 1:
        return False
    groups = [key(t) for t in types]
    if groups != sorted(groups):
        return True
    return any(groups.count(g) > 1 for g in shuffled)


def _needs(types, weighted, prefer):
    """Whether the (answer, authority, additional) types of a wire answer
    give the policy anything to reorder."""
    an, ns, ar = types
    if weighted:
        return any(t.count(w.A) + t.count(w.AAAA) and _changes(
            t, _group, (2,)) for t in (an, ar))
    if any(_changes(t, _group, (2, 3)) for t in types):
        return True
    return prefer and any(_changes(t, _prefer_group, (1,)) for t in (an, ar))


def _section_types(raw):
    """Record types of the three sections of a wire message (OPT left
    out): one walk, nothing decoded."""
    _, _, qd, an, ns, ar = w.unpack_header(raw)
    off = 12
    for _ in range(qd):
        off = w.skip_question(raw, off)
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    opt = w.OPT
    auth_end = an + ns
    i = 0
    for rec in w.iter_records(raw, off, auth_end + ar):
        rtype = rec[1]
        if rtype != opt:
            out[0 if i < an else 1 if i < auth_end else 2].append(rtype)
        i += 1
    return out


class LoadBalance(Plugin):
    name = NAME

    def __init__(self, weights=None, prefer=None):
        self.weights = weights
        self.prefer = prefer
        self._loop = None

    def serve(self, req):
        """Pass the query on and reorder the answer.  The Deferred check
        is written out (not plugin.then): one call less per query, and
        a Response is ruled out first (Deferred's ABC isinstance costs
        ten times a plain one)."""
        resp = self.next.serve(req)
        if not isinstance(resp, Response) and is_deferred(resp):
            return resp.addCallback(self._after, req)
        return self._after(resp, req)

    def _after(self, resp, req):
        if resp is None or resp.rcode != w.NOERROR:
            return resp
        qtype = req.qtype
        if qtype == w.AXFR or qtype == w.IXFR:
            return resp
        weights = self.weights
        if weights is not None and qtype not in (w.A, w.AAAA, w.SRV):
            return resp
        if resp.raw is not None:
            raw = resp.raw
            # No section with two records (counting OPT), the common
            # answer: nothing can move, so the body is not walked at all.
            if len(raw) >= 12 and raw[7] <= 1 and raw[9] <= 1 and \
                    raw[11] <= 1 and not (raw[6] | raw[8] | raw[10]):
                return resp
            if weights is None and self.prefer is None and \
                    type(resp) is RawResponse:
                plan = _plan(resp)
                if plan is None:
                    return resp
                shuffled = _apply(resp, plan)
                if shuffled is not None:
                    return shuffled
            else:
                try:
                    types = _section_types(raw)
                except (w.FormatError, ValueError, IndexError):
                    return resp
                if not _needs(types, weights is not None,
                              self.prefer is not None):
                    return resp
            resp = _decoded(resp)
            if resp.rcode != w.NOERROR:
                return resp
        if weights is not None:
            resp.answer = weights.reorder(resp.answer)
            resp.additional = weights.reorder(resp.additional)
        else:
            resp.answer = round_robin(resp.answer)
            resp.authority = round_robin(resp.authority)
            resp.additional = round_robin(resp.additional)
            if self.prefer is not None:
                resp.answer = self.prefer.reorder(resp.answer)
                resp.additional = self.prefer.reorder(resp.additional)
        resp.wire = None
        return resp

    # -- the weight file ------------------------------------------------------

    def start(self):
        wts = self.weights
        if wts is None:
            return
        try:
            wts.load()
        except OSError as e:
            if wts.reload == 0:
                raise RuntimeError("plugin/%s: weight file open error"
                                   % NAME) from e
            logger.warning(NAME, "Failed to open weight file:weight file open "
                        "error. Will try again in %s"
                        % format_duration(wts.reload))
        except ValueError as e:
            raise RuntimeError("plugin/%s: %s" % (NAME, e)) from e
        if wts.reload > 0:
            self._loop = task.LoopingCall(self._reload)
            self._loop.clock = self.reactor
            self._loop.start(wts.reload, now=False)

    def _reload(self):
        d = threads.deferToThread(self.weights.read)

        def done(domains):
            if domains is not None and self._loop is not None:
                self.weights.install(domains)

        def failed(f):
            if f.check(OSError):
                logger.error(NAME, "weight file open error")
            else:
                logger.error(NAME, f.getErrorMessage())
        return d.addCallbacks(done, failed)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None


#: Wire answers (all but the ID) -> what round_robin does to them (see
#: ``_plan``): the same answers come again and again from cache, and
#: working it out walks the whole message.  Bounded: it starts afresh
#: when full (a cluster's headless Services give thousands of answers
#: of several records).
_PLANS: dict[bytes, object] = {}
PLANS_KEPT = 4096
_UNCHANGED = object()


def _plan(resp):
    """What round_robin does to the raw answer ``resp`` (a RawResponse),
    from its bytes alone, remembered: None when nothing can move, else
    (steps, decode) for ``_apply``."""
    key = resp.raw[2:]
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(_PLANS, key, _round_robin_plan(resp), PLANS_KEPT)
    return None if plan is _UNCHANGED else plan


def _round_robin_plan(resp):
    """``_UNCHANGED``, or the steps that shuffle the records of the raw
    answer ``resp`` in place, each (whole, ranges): the byte ranges
    whose contents round_robin's shuffle permutes, as one contiguous
    block (``whole``) or range by range (records of one size); with
    ``decode`` when the answer must be decoded after all (the steps
    still make the random calls they made before, for the same order
    afterwards)."""
    try:
        quick = _quick_plan(resp.raw)
        if quick is not None:
            return ((quick,), False)
        types = _section_types(resp.raw)
    except (w.FormatError, ValueError, IndexError):
        return _UNCHANGED
    if not _needs(types, False, False):
        return _UNCHANGED
    return _shuffle_plan(resp.raw)


def _apply(resp, plan):
    """``resp`` shuffled as ``plan`` says, or None when it must be
    decoded."""
    steps, decode = plan
    raw = resp.raw
    out = None
    for whole, ranges in steps:
        parts = [raw[a:b] for a, b in ranges]
        random.shuffle(parts)
        if out is None:
            out = bytearray(raw)
        if whole:
            out[ranges[0][0]:ranges[-1][1]] = b"".join(parts)
        else:
            for (a, b), part in zip(ranges, parts):
                out[a:b] = part
    if decode:
        return None
    return _rewired(resp, raw if out is None else bytes(out))


def _shuffle_plan(raw):
    """round_robin on a wire response without decoding it: (steps,
    decode) as ``_round_robin_plan`` says.

    Decoding and re-encoding an answer of a few addresses costs ten times
    the rest of the query's work.  This covers the case that brings most
    raw answers here, one name with several addresses: when each section
    is already in round_robin's group order, has at most one MX, and its
    address records (A or AAAA) share one type, length and owner bytes,
    permuting those records' type-to-rdata parts keeps every offset, so
    compression pointers stay valid.  The permutation comes from the same
    shuffle calls round_robin makes, so the order is the one the
    structured path would give.
    """
    _, _, qd, an, ns, ar = w.unpack_header(raw)
    off = 12
    for _ in range(qd):
        off = w.skip_question(raw, off)
    records = list(w.iter_records(raw, off, an + ns + ar))
    if any(r[1] == w.OPT for r in records[:-1]):
        return ((), True)
    steps: list[tuple[bool, tuple[tuple[int, int], ...]]] = []
    start = 0
    last = len(records) - (1 if records and records[-1][1] == w.OPT else 0)
    for count in (an, ns, ar):
        section = records[start:start + count]
        start += count
        plain = [r for r in section if r[1] != w.OPT]
        addrs = _address_run(raw, plain)
        if addrs is None:
            addrs = _trailing_block(raw, plain, records, last)
            if addrs is None:
                return (tuple(steps), True)
            steps.append((True, tuple((r[0], r[5]) for r in addrs)))
            continue
        if len(addrs) > 1:
            steps.append((False, tuple((r[4] - 10, r[5]) for r in addrs)))
    return (tuple(steps), False)


def _quick_plan(raw):
    """The step of round_robin on the most common wire answer with several
    records, or None when the answer is anything else: one question, then
    only address records of one type with the same owner bytes (a
    service's endpoints from kubernetes or cache), then at most an OPT.
    Such records are all the same size, so they are permuted whole, with
    no walk of the message beyond their owners; one shuffle call of the
    same length as round_robin's gives the same order."""
    if raw[4] or raw[5] != 1 or raw[8] or raw[9] or raw[10] or \
            raw[11] > 1:
        return None
    an = (raw[6] << 8) | raw[7]
    if an < 2:
        return None
    off = w.skip_question(raw, 12)
    owner_end = w.skip_name(raw, off)
    rtype = (raw[owner_end] << 8) | raw[owner_end + 1]
    if rtype != w.A and rtype != w.AAAA:
        return None
    size = owner_end + 10 + ((raw[owner_end + 8] << 8)
                             | raw[owner_end + 9]) - off
    end = off + an * size
    if end > len(raw):
        return None
    head = raw[off:owner_end + 4]      # owner, type and class
    hlen = len(head)
    for start in range(off, end, size):
        if raw[start:start + hlen] != head or \
                raw[start + hlen + 4:start + hlen + 6] != \
                raw[owner_end + 8:owner_end + 10]:
            return None
    if raw[11]:
        # The one additional record must be the OPT, right at the end.
        if raw[end] != 0 or (raw[end + 1] << 8 | raw[end + 2]) != w.OPT:
            return None
    elif end != len(raw):
        return None
    return (True, tuple((a, a + size) for a in range(off, end, size)))


def _trailing_block(raw, section, records, last):
    """The address records of a section when they differ in type, length
    or owner bytes but can still be moved whole: they are contiguous, the
    last records of the message (OPT aside), and their owner names point
    nowhere inside their own run.  Nothing after them can point into them,
    so any order keeps every compression pointer valid (the additional
    section of an MX answer: its host's A and AAAA)."""
    groups = [_group(r[1]) for r in section]
    if groups != sorted(groups) or groups.count(3) > 1:
        return None
    addrs = [r for r, g in zip(section, groups) if g == 2]
    if not addrs or addrs[-1] is not records[last - 1]:
        return None
    begin = addrs[0][0]
    for prev, r in zip(addrs, addrs[1:]):
        if r[0] != prev[5]:
            return None
    for r in addrs:
        if not _points_before(raw, r[0], begin):
            return None
    return addrs


def _points_before(raw, off, limit):
    """Whether the name at ``off`` only points to offsets below
    ``limit``."""
    while True:
        n = raw[off]
        if n == 0:
            return True
        if n & 0xC0 == 0xC0:
            return ((n & 0x3F) << 8 | raw[off + 1]) < limit
        off += n + 1


def _address_run(raw, section):
    """The address records of a section (iter_records tuples) when
    shuffling them in place is all round_robin would do; None when not."""
    groups = [_group(r[1]) for r in section]
    if groups != sorted(groups) or groups.count(3) > 1:
        return None
    addrs = [r for r, g in zip(section, groups) if g == 2]
    if len(addrs) > 1:
        first = addrs[0]
        owner = raw[first[0]:first[4] - 10]
        size = first[5] - first[4]
        for r in addrs:
            if (r[1] != first[1] or r[5] - r[4] != size
                    or raw[r[0]:r[4] - 10] != owner):
                return None
    return addrs


def _rewired(resp, raw):
    """A copy of the raw response ``resp`` with the bytes ``raw``, keeping
    what middleware may have changed (flags, rcode, error, OPT)."""
    out = RawResponse.prebuilt(raw, resp.plugin,
                               final=resp.wire is resp.raw)
    out.flags = resp.flags
    out.rcode = resp.rcode
    out._error = getattr(resp, "_error", None)   # the property, unwrapped
    out.opt = resp.opt
    return out


def _decoded(resp):
    """A structured copy of a wire response, keeping the object's flags,
    plugin and error (middleware may have changed them)."""
    out = parse_response(resp.raw)
    out.flags = resp.flags
    out.plugin = resp.plugin
    out.error = resp.error
    return out


def setup(d, block):
    policy = "round_robin"
    if d.args:
        policy = d.choice(d.args[0], POLICIES, "unknown policy: %s")
    if policy == "weighted":
        return LoadBalance(weights=_weighted(d, block))
    if len(d.args) > 1:
        raise d.error("unknown property for %s" % policy)
    prefer: list[Union[ipaddress.IPv4Network, ipaddress.IPv6Network]] = []
    d.read_options({
        "prefer": lambda c: prefer.extend(_cidr(c, a) for a in c.args),
    })
    return LoadBalance(prefer=Prefer(prefer) if prefer else None)


def _weighted(d, block):
    """``weighted WEIGHTFILE { reload DURATION }``: the file's weights."""
    if len(d.args) < 2:
        raise d.error("missing weight file argument")
    if len(d.args) > 2:
        raise d.error("unexpected argument(s)")
    weights = Weights(block.path(d.args[1]))
    d.read_options({
        "reload": lambda c: setattr(weights, "reload", _reload(c)),
    })
    return weights


def _reload(c):
    """How often the weight file is re-read (0: never; a negative
    duration counts as 0).  CoreDNS words a missing value, an extra one
    and a malformed one each its own way, naming the value alone."""
    if len(c.args) > 1:
        raise c.error("unexpected argument")
    text = c.one("reload duration value is missing")
    return max(c.duration(text, error="invalid reload duration '{text}'"),
               0.0)


def _cidr(c, text):
    """A network of ``prefer``, written as Go's net.ParseCIDR wants it
    (with the prefix length)."""
    try:
        if "/" not in text:
            raise ValueError(text)
        return ipaddress.ip_network(text, strict=False)
    except ValueError as e:
        raise c.error('invalid CIDR "%s": invalid CIDR address: %s'
                      % (text, text)) from e
