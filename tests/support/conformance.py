"""Reading and judging CoreDNS's conformance cases (data from its tests).

The cases live outside the repository (``../shared/conformance``: their
README.md is the spec of the format).  Each is a Corefile, one question
and what CoreDNS's own test expected back.  This module turns a case into
a query and says, as text lines, how a reply differs from it.

The comparison is CoreDNS's ``test.SortAndCheck`` made stricter: sections
are compared as sorted sets, owner names with their case, and the whole
rdata, except where the case's ``loose`` markers name fields CoreDNS
itself never checked (SOA serials, truncated RRSIG signatures, NSEC
bitmaps, the kubernetes NS glue taken from the host's addresses).
"""

import json
import os
import re
import struct

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype

from corednstw.core.dnswire import skip_name

#: The case files, in the order their tests run.
FILES = ("file", "misc", "kubernetes")

#: A TTL CoreDNS's tests write for "any TTL".
ANY_TTL = 303

#: miekg/dns's TTL for a record string written without one.
DEFAULT_TTL = 3600

CLASSES = ("IN", "CH", "HS", "CS", "NONE", "ANY")


def load(root, name):
    """The cases of ``cases/<name>.json`` under ``root``."""
    with open(os.path.join(root, "cases", name + ".json")) as fh:
        return json.load(fh)["cases"]


def group_key(case):
    """Cases sharing a server: the same Corefile, the same cluster, the
    same scenario (a ``sequence`` runs alone, its steps in order)."""
    return (case["corefile"], case.get("k8s_fixture"),
            tuple(case.get("requires", ())), case.get("sequence"))


def groups(cases):
    """Lists of cases that share a server, in file order (the steps of a
    sequence sorted by step)."""
    out = {}
    for case in cases:
        out.setdefault(group_key(case), []).append(case)
    for members in out.values():
        members.sort(key=lambda c: c.get("sequence_step", 0))
    return list(out.values())


def query(case):
    """The query as CoreDNS's ``test.Case.Msg()`` builds it: RD set, one
    question, EDNS0 (4096, DO) only when the case says ``do``."""
    kw = {}
    if case.get("do"):
        kw = {"use_edns": 0, "want_dnssec": True, "payload": 4096}
    return dns.message.make_query(case["qname"], case["qtype"],
                                  case.get("qclass", "IN"), **kw)


def over_udp(case):
    """Whether ``case`` is asked over UDP.

    CoreDNS's unit tests take the reply from the plugin, before any size
    limit; over UDP without EDNS a reply is cut to 512 octets (RFC 1035
    4.2.1), which drops additional records some cases list (a headless
    service's SRV glue, for one).  So cases are asked over TCP, except
    those whose expected records name the transport (whoami's SRV under
    ``_udp.``)."""
    return any(isinstance(x, str) and "_udp." in x
               for x in case["answer"] + case["ns"] + case["extra"])


# -- records ------------------------------------------------------------------

class RR:
    """A record as compared: owner (case kept), TTL, class, type and the
    rdata's fields as the case's markers allow them to be compared."""

    __slots__ = ("name", "ttl", "rdclass", "rdtype", "text", "fields")

    def __init__(self, name, ttl, rdclass, rdtype, text):
        self.name = name
        self.ttl = ttl
        self.rdclass = rdclass
        self.rdtype = rdtype
        self.text = text
        self.fields = None

    def __str__(self):
        return "%s %s %s %s %s" % (
            self.name, self.ttl, dns.rdataclass.to_text(self.rdclass),
            dns.rdatatype.to_text(self.rdtype), self.text)


def parse_expected(line):
    """An RR from a record string as miekg's ``dns.NewRR`` reads it: the
    owner made absolute, TTL and class each optional and in any order."""
    tokens = line.split()
    owner = tokens.pop(0)
    ttl = rdclass = None
    while tokens and (ttl is None or rdclass is None):
        if ttl is None and tokens[0].isdigit():
            ttl = int(tokens.pop(0))
        elif rdclass is None and tokens[0].upper() in CLASSES:
            rdclass = dns.rdataclass.from_text(tokens.pop(0))
        else:
            break
    rdtype = dns.rdatatype.from_text(tokens.pop(0))
    text = line.split(None, len(line.split()) - len(tokens))[-1] \
        if tokens else ""
    rdclass = dns.rdataclass.IN if rdclass is None else rdclass
    name = dns.name.from_text(owner).to_text()
    ttl = DEFAULT_TTL if ttl is None else ttl
    try:
        rd = dns.rdata.from_text(rdclass, rdtype, text,
                                 origin=dns.name.root, relativize=False)
        text = rd.to_text()
    except Exception:
        # RRSIGs whose signatures CoreDNS's tests cut short: only the
        # fields before the signature are compared (rrsig_rdata).
        text = " ".join(text.split())
    return RR(name, ttl, rdclass, rdtype, text)


def reply_records(msg, section):
    """The RRs of a reply's section in wire order (OPT kept apart)."""
    out = []
    for rrset in getattr(msg, section):
        for rd in rrset:
            out.append(RR(rrset.name.to_text(), rrset.ttl, rrset.rdclass,
                          rrset.rdtype, rd.to_text()))
    return out


def compared_fields(rr, loose, section_glue=False):
    """What of ``rr`` is compared under the case's ``loose`` markers."""
    t = rr.rdtype
    tokens = rr.text.split()
    ttl = rr.ttl
    if "ttl_303" in loose and ttl == ANY_TTL:
        ttl = None
    data = rr.text
    if t == dns.rdatatype.SOA:
        if "soa_rdata" in loose:
            data = tokens[0]
        elif "soa_serial" in loose:
            data = " ".join(tokens[:2] + tokens[3:])
        if "soa_ttl" in loose:
            ttl = None
    elif t == dns.rdatatype.RRSIG and "rrsig_rdata" in loose:
        data = " ".join([tokens[0], tokens[2], tokens[7]])
    elif t == dns.rdatatype.NSEC and "nsec_bitmap" in loose:
        data = tokens[0]
    if section_glue:
        data = ""
        t = "A|AAAA" if t in (dns.rdatatype.A, dns.rdatatype.AAAA) else t
    return (rr.name, rr.rdclass, t, data), ttl


def _match(want, got, loose, glue):
    wkey, wttl = compared_fields(want, loose, glue)
    gkey, gttl = compared_fields(got, loose, glue)
    return wkey == gkey and (wttl is None or gttl is None or wttl == gttl)


def _pair(want, got, loose, glue=False):
    """Pair expected with received records; (unmatched expected,
    unmatched received)."""
    left = list(got)
    missing = []
    for w in want:
        for i, g in enumerate(left):
            if _match(w, g, loose, glue):
                del left[i]
                break
        else:
            missing.append(w)
    return missing, left


def _section(label, mode, want, got, loose, glue=False):
    problems = []
    if mode == "ignore":
        return problems
    if glue:
        # The glue's number and addresses are the host's: each record
        # received must be one of the expected owner, type and TTL.
        problems = ["%s: unexpected %s" % (label, g) for g in got
                    if not any(_match(w, g, loose, True) for w in want)]
        mode = "ignore"
    if mode in ("count", "count_and_contains", "full") and \
            len(want) != len(got):
        problems.append("%s: %d record(s), expected %d" % (
            label, len(got), len(want)))
    if mode in ("contains", "count_and_contains", "full"):
        missing, extra = _pair(want, got, loose, glue)
        problems += ["%s: missing %s" % (label, w) for w in missing]
        if mode == "full":
            problems += ["%s: unexpected %s" % (label, g) for g in extra]
    if mode == "names":
        names = [g.name for g in got]
        if names != [w.name for w in want]:
            problems.append("%s: owners %s, expected %s" % (
                label, names, [w.name for w in want]))
    if problems:
        problems.append("%s: got%s" % (label, "".join(
            "\n      %s" % g for g in got) or " nothing"))
    return problems


def additional_types(wire):
    """The types of the additional section in wire order, OPT included
    (dnspython keeps the OPT apart, so the order is read here)."""
    _, _, qd, an, ns, ar = struct.unpack("!HHHHHH", wire[:12])
    pos = 12
    for _ in range(qd):
        pos = skip_name(wire, pos) + 4
    types = []
    for i in range(an + ns + ar):
        pos = skip_name(wire, pos)
        rtype, _, _, rdlen = struct.unpack("!HHIH", wire[pos:pos + 10])
        pos += 10 + rdlen
        if i >= an + ns:
            types.append(rtype)
    return types


# -- the verdict --------------------------------------------------------------

def _opt_problems(case, msg, want_opts):
    out = []
    for o in want_opts:
        if msg.edns < 0:
            out.append("additional: no OPT, expected %s" % o)
            continue
        if msg.payload != o.get("udp_size", msg.payload):
            out.append("OPT size %d, expected %d" % (msg.payload,
                                                     o["udp_size"]))
        do = bool(msg.ednsflags & dns.flags.DO)
        if do != bool(o.get("do", do)):
            out.append("OPT DO is %s, expected %s" % (do, o["do"]))
    return out


def _type_list(label, want, got):
    out = []
    if len(got) != len(want):
        return ["%s: %d record(s), expected %d" % (label, len(got),
                                                    len(want))]
    for i, (w, g) in enumerate(zip(want, got)):
        allowed = {dns.rdatatype.from_text(x) for x in w.split("|")}
        if g.rdtype not in allowed:
            out.append("%s[%d] is %s, expected %s" % (
                label, i, dns.rdatatype.to_text(g.rdtype), w))
    return out


def _answer_extras(case, answer):
    out = []
    n = case.get("answer_min_count")
    if n is not None and len(answer) < n:
        out.append("answer: %d record(s), expected at least %d" % (
            len(answer), n))
    first = case.get("answer_first_type")
    if first and (not answer or dns.rdatatype.to_text(
            answer[0].rdtype) != first):
        out.append("answer[0] is not %s" % first)
    later = case.get("answer_has_type")
    if later and not any(dns.rdatatype.to_text(a.rdtype) == later
                         for a in answer[1:]):
        out.append("no later answer of type %s" % later)
    regex = case.get("answer_txt_regex")
    if regex:
        txt = answer[0].text if answer and answer[0].rdtype == \
            dns.rdatatype.TXT else ""
        first_string = txt.split('"')[1] if '"' in txt else txt
        if not re.search(regex, first_string):
            out.append("answer[0] TXT %r does not match %r" % (txt, regex))
    for text in case.get("answer_text_contains", ()):
        if not answer or text not in answer[0].text:
            out.append("answer[0] lacks %r" % text)
    if case.get("cname_order"):
        for i, a in enumerate(answer):
            if a.rdtype != dns.rdatatype.CNAME:
                continue
            target = a.text.lower()
            if any(b.name.lower() == target for b in answer[:i]):
                out.append("CNAME %s comes after its target" % a.name)
    return out


def problems(case, wire):
    """How the reply bytes ``wire`` differ from ``case`` (text lines; an
    empty list when they agree)."""
    if wire is None:
        return ["no reply"]
    msg = dns.message.from_wire(wire, ignore_trailing=True,
                                one_rr_per_rrset=True)
    compare = case.get("compare", {})
    loose = set(case.get("loose", ()))
    out = []
    rcode = dns.rcode.to_text(msg.rcode())
    mode = compare.get("rcode", "full")
    if mode == "full" and rcode != case["rcode"]:
        out.append("rcode %s, expected %s" % (rcode, case["rcode"]))
    elif mode == "not_servfail" and rcode == "SERVFAIL":
        out.append("rcode SERVFAIL")
    for flag, want in case.get("flags", {}).items():
        got = bool(msg.flags & dns.flags.from_text(flag.upper()))
        if got != want:
            out.append("flag %s is %s, expected %s" % (flag, got, want))
    answer = reply_records(msg, "answer")
    want_answer = [parse_expected(x) for x in case["answer"]]
    if case.get("answer_ordered"):
        if len(answer) != len(want_answer) or not all(
                _match(w, g, loose, False)
                for w, g in zip(want_answer, answer)):
            out.append("answer not as listed, in order: got%s" % "".join(
                "\n      %s" % g for g in answer))
    else:
        out += _section("answer", compare.get("answer", "full"),
                        want_answer, answer, loose)
    out += _answer_extras(case, answer)
    ns = reply_records(msg, "authority")
    out += _section("authority", compare.get("ns", "full"),
                    [parse_expected(x) for x in case["ns"]], ns, loose)
    if case.get("ns_types"):
        out += _type_list("authority", case["ns_types"], ns)
    extra = reply_records(msg, "additional")
    want_opts = [x["OPT"] for x in case["extra"] if isinstance(x, dict)]
    want_extra = [parse_expected(x) for x in case["extra"]
                  if isinstance(x, str)]
    mode = compare.get("extra", "full")
    if mode == "last_is_opt":
        types = additional_types(wire)
        if not types or types[-1] != dns.rdatatype.OPT:
            out.append("the last additional record is not an OPT")
    else:
        out += _section("additional", mode, want_extra, extra, loose,
                        glue="ns_glue_local_ips" in loose)
        if mode == "full":
            out += _opt_problems(case, msg, want_opts)
    if case.get("extra_types"):
        out += _type_list("additional", case["extra_types"], extra)
    for i, name in enumerate(case.get("extra_names") or ()):
        if name is not None and (i >= len(extra) or extra[i].name != name):
            out.append("additional[%d] is not %s" % (i, name))
    q = case.get("expect_question")
    if q is not None and (not msg.question or
                          msg.question[0].name.to_text() != q):
        out.append("question %s, expected %s" % (
            msg.question[0].name if msg.question else None, q))
    if case.get("expect_no_edns") and msg.edns >= 0:
        out.append("the reply has an OPT record")
    opt = case.get("expect_edns_option")
    if opt is not None:
        found = [o for o in msg.options if o.otype == opt["code"]]
        data = [o.to_wire() if hasattr(o, "to_wire") else b""
                for o in found]
        if opt["data_ascii"].encode() not in data:
            out.append("no EDNS0 option %d=%r in the reply (%r)" % (
                opt["code"], opt["data_ascii"], data))
    return out
