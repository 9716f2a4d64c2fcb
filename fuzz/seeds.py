"""The seed corpus: queries as the tests send them, malformed messages as
the server tests try them, and the Corefiles of the tests.

``packets()`` and ``corefiles()`` return lists of bytes (a packet seed
starts with the control byte ``targets.PacketTarget`` reads); ``write``
puts them in a directory for libFuzzer.  Nothing here is random: the
corpus is the same on every run.
"""

import ast
import glob
import hashlib
import os
import sys

import dns.edns
import dns.flags
import dns.message
import dns.opcode

from fuzz.targets import PACKET_COREFILE, REPO

NAMES = ("example.org.", "a.example.org.", "www.example.org.",
         "nx.example.org.", "x.rw.example.org.", "12.template.test.",
         "nope.template.test.", "a.hosts.test.", "b.hosts.test.",
         "version.bind.", "localhost.", "1.0.0.127.in-addr.arpa.",
         "a.alias.test.", "mail.example.org.", "sub.example.org.", ".")
TYPES = ("A", "AAAA", "MX", "NS", "SOA", "TXT", "CNAME", "ANY", "PTR",
         "SRV", "DS", "DNSKEY", "HINFO", "NULL", "AXFR", "IXFR", "CAA")


def _queries():
    """Well-formed queries: every name and type, with and without EDNS,
    with DO, ECS, cookie, NSID and padding options."""
    opts = ([], [dns.edns.GenericOption(3, b"")],
            [dns.edns.ECSOption("192.0.2.0", 24)],
            [dns.edns.GenericOption(10, b"\x01" * 8)],
            [dns.edns.GenericOption(12, b"\x00" * 4)])
    out = []
    for i, name in enumerate(NAMES):
        for j, typ in enumerate(TYPES):
            k = i * len(TYPES) + j
            q = dns.message.make_query(
                name, typ, use_edns=(k % 3 != 0),
                payload=(512, 1232, 4096)[k % 3],
                want_dnssec=bool(k % 5 == 0), options=opts[k % 5])
            q.id = k & 0xFFFF
            out.append(q.to_wire())
    q = dns.message.make_query("example.org.", "SOA")
    q.set_opcode(dns.opcode.NOTIFY)
    out.append(q.to_wire())
    return out


def _malformed():
    """Messages the server tests send on purpose (miekg's FORMERR and
    ignore rules)."""
    good = dns.message.make_query("example.org.", "A").to_wire()
    edns = dns.message.make_query("example.org.", "A",
                                  use_edns=0).to_wire()
    return [
        b"", good[:5], good[:12], good[:13], good[:-1], good[:-3],
        good[:2] + b"\x81\x00" + good[4:],              # a response
        good[:2] + b"\x28\x00" + good[4:],              # opcode 5
        good[:4] + b"\x00\x02" + good[6:],              # two questions
        good[:4] + b"\x00\x00" + good[6:],              # no question
        good[:6] + b"\x00\x01" + good[8:],              # answer lies
        good[:10] + b"\x00\x03" + good[12:],            # additional lies
        good[:12] + b"\xc0\x0c" + good[-4:],            # compressed name
        good[:12] + b"\x3f" + b"a" * 63 + b"\x00" + good[-4:],
        good[:12] + (b"\x3f" + b"b" * 63) * 4 + b"\x00" + good[-4:],
        edns + edns[-11:],                              # two OPTs
        edns[:-11] + b"\x00\x00\x29\x04\xd0\x00\x01\x00\x00\x00\x00",
        edns[:-2] + b"\x00\x04\x00\x08\x00\x00",        # short option
        good + b"\x00" * 7,                             # trailing bytes
    ]


def packets():
    """Packet seeds, each behind every control byte it needs once."""
    out = []
    for i, wire in enumerate(_queries() + _malformed()):
        out.append(bytes([i % 32]) + wire)
    return out


def _test_strings():
    """Corefile texts written in the test modules (string constants that
    open a server block), with their format fields filled in."""
    out = []
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant)
                    and isinstance(node.value, str)):
                continue
            s = node.value
            if "{\n" in s and "}" in s and len(s) < 4000:
                out.append(s.replace("%d", "53").replace("%s", "x")
                           .replace("{port}", "53").replace("{{", "{")
                           .replace("}}", "}"))
    return out


def corefiles():
    """Corefile seeds: the files under tests/corefiles, the examples, the
    packet target's configuration and the tests' inline Corefiles."""
    texts = [PACKET_COREFILE]
    for pattern in ("tests/corefiles/**/*Corefile*", "Corefile.example",
                    "examples/**/Corefile*", "deploy/**/Corefile*"):
        for path in sorted(glob.glob(os.path.join(REPO, pattern),
                                     recursive=True)):
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    texts.append(f.read())
    texts.extend(_test_strings())
    seen = set()
    out = []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t.encode())
    return out


def write(directory, seeds):
    """One file per seed, named by its digest (libFuzzer's convention)."""
    os.makedirs(directory, exist_ok=True)
    for s in seeds:
        name = hashlib.sha1(s).hexdigest()
        with open(os.path.join(directory, name), "wb") as f:
            f.write(s)


def main(argv):
    """``python -m fuzz.seeds DIR``: DIR/packets and DIR/corefiles."""
    base = argv[1] if len(argv) > 1 else os.path.join(REPO, "fuzz",
                                                      "corpus")
    write(os.path.join(base, "packets"), packets())
    write(os.path.join(base, "corefiles"), corefiles())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
