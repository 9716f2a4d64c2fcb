"""DNSSEC key pairs in BIND's file format (``K<zone>+<alg>+<id>``).

A pair is two files: ``.key`` holds the DNSKEY record in presentation
form (comments first, as ``dnssec-keygen`` and ``ldns-keygen`` write
them), ``.private`` the private key as ``Field: value`` lines
(``Private-key-format: v1.3``).  Signing goes through the
``cryptography`` package.  The algorithms are those CoreDNS reads:
RSASHA1 (5), RSASHA1-NSEC3-SHA1 (7), RSASHA256 (8), RSASHA512 (10),
ECDSAP256SHA256 (13), ECDSAP384SHA384 (14) and ED25519 (15).

``generate`` and ``write_files`` make new pairs (what ``coredns-keygen``
does): tests and benchmarks use them.
"""

import base64
import hashlib
import os
import struct
import time
from collections.abc import Callable
from typing import Union

from cryptography.exceptions import InvalidKey
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
)

from corednstw.core import dnswire as w

RSASHA1 = 5
RSASHA1NSEC3SHA1 = 7
RSASHA256 = 8
RSASHA512 = 10
ECDSAP256SHA256 = 13
ECDSAP384SHA384 = 14
ED25519 = 15

#: Mnemonics, as BIND writes them after the number in ``Algorithm:``.
ALGORITHMS = {
    RSASHA1: "RSASHA1", RSASHA1NSEC3SHA1: "NSEC3RSASHA1",
    RSASHA256: "RSASHA256", RSASHA512: "RSASHA512",
    ECDSAP256SHA256: "ECDSAP256SHA256", ECDSAP384SHA384: "ECDSAP384SHA384",
    ED25519: "ED25519",
}

_RSA_HASH: dict[int, Callable[[], hashes.HashAlgorithm]] = {
    RSASHA1: hashes.SHA1, RSASHA1NSEC3SHA1: hashes.SHA1,
    RSASHA256: hashes.SHA256, RSASHA512: hashes.SHA512}
_EC = {ECDSAP256SHA256: (ec.SECP256R1, hashes.SHA256, 32),
       ECDSAP384SHA384: (ec.SECP384R1, hashes.SHA384, 48)}

#: DNSKEY flags: zone key (bit 7) and secure entry point (bit 15).
ZONE = 0x0100
SEP = 0x0001

#: miekg/dns's TTL for a record read without one.
DEFAULT_TTL = 3600


class KeyFileError(Exception):
    """A key pair that cannot be used (text says which file and why)."""


class Key:
    """One DNSSEC key pair: the DNSKEY's fields and a private key."""

    __slots__ = ("name", "ttl", "flags", "algorithm", "public", "private",
                 "tag", "path")

    def __init__(self, name, flags, algorithm, public, private,
                 ttl=DEFAULT_TTL, path=""):
        self.name = name.lower()
        self.ttl = ttl
        self.flags = flags
        self.algorithm = algorithm
        self.public = public
        self.private = private
        self.tag = key_tag(self.rdata())
        self.path = path

    def rdata(self):
        """The DNSKEY rdata (protocol is always 3)."""
        return struct.pack("!HBB", self.flags, 3, self.algorithm) + \
            self.public

    def dnskey(self, owner=None, ttl=None):
        """The DNSKEY record, owned by ``owner`` (default: the key's)."""
        return w.RR(owner or self.name, w.DNSKEY,
                    self.ttl if ttl is None else ttl, self.rdata())

    def is_zsk(self):
        """A zone key without the SEP bit (RFC 4034 section 2.1.1)."""
        return self.flags & ZONE == ZONE and self.flags & SEP == 0

    def is_ksk(self):
        """A zone key with the SEP bit: a KSK, or a CSK."""
        return self.flags & ZONE == ZONE and self.flags & SEP == SEP

    def ds(self, digest_type=2, owner=None):
        """DS rdata for this key (1: SHA-1, 2: SHA-256)."""
        owner_wire = w.name_to_wire(owner or self.name).lower()
        h = hashlib.sha1 if digest_type == 1 else hashlib.sha256
        digest = h(owner_wire + self.rdata()).digest()
        return struct.pack("!HBB", self.tag, self.algorithm,
                           digest_type) + digest

    def sign(self, data):
        """The DNSSEC signature of ``data`` (RFC 3110, 6605, 8080)."""
        alg = self.algorithm
        if alg == ED25519:
            return self.private.sign(data)
        if alg in _EC:
            _, hsh, size = _EC[alg]
            der = self.private.sign(data, ec.ECDSA(hsh()))
            r, s = decode_dss_signature(der)
            return r.to_bytes(size, "big") + s.to_bytes(size, "big")
        return self.private.sign(data, padding.PKCS1v15(), _RSA_HASH[alg]())

    def __repr__(self):
        return "<Key %s alg %d tag %d flags %d>" % (
            self.name, self.algorithm, self.tag, self.flags)


def key_tag(rdata):
    """RFC 4034 appendix B's checksum of a DNSKEY rdata."""
    acc = 0
    for i, b in enumerate(rdata):
        acc += b if i & 1 else b << 8
    acc += (acc >> 16) & 0xFFFF
    return acc & 0xFFFF


# -- reading ------------------------------------------------------------------

def base_name(arg):
    """The pair's path without extension: ``K...+013+123`` for any of
    ``K...+013+123``, ``K...+013+123.key`` and ``K...+013+123.private``."""
    for ext in (".key", ".private"):
        if arg.endswith(ext):
            return arg[:-len(ext)]
    return arg


def read_pair(base):
    """The Key in ``base.key`` and ``base.private``; KeyFileError when a
    file is missing, unreadable, malformed or of another algorithm."""
    pub, priv = base + ".key", base + ".private"
    return parse_pair(_read(pub), _read(priv), pub, priv, base)


def parse_pair(pub_text, priv_text, pub="stdin", priv="stdin", base=""):
    """The Key of a public key record and a private key file's text
    (``pub`` and ``priv`` name them in errors); KeyFileError when either
    is malformed, of another algorithm or they do not match."""
    name, ttl, flags, alg, public = parse_public(pub_text, pub)
    if alg not in ALGORITHMS:
        raise KeyFileError("unsupported algorithm %d in %s" % (alg, pub))
    fields = parse_private_fields(priv_text, priv)
    private = private_key(fields, alg, priv)
    if public_bytes(private, alg) != public:
        raise KeyFileError("private key in %s does not match the public key "
                        "in %s" % (priv, pub))
    return Key(name, flags, alg, public, private, ttl, base)


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise KeyFileError("open %s: %s" % (path, (e.strerror or str(e))
                                         .lower())) from e
    except UnicodeDecodeError as e:
        raise KeyFileError("%s: not a text file" % path) from e


def parse_public(text, path="stdin"):
    """(owner, ttl, flags, algorithm, public key bytes) of the DNSKEY
    record in ``text``: ``owner [ttl] [IN] DNSKEY flags 3 alg base64``."""
    import dns.exception
    import dns.rdata
    import dns.rdtypes.ANY.DNSKEY
    lines = [ln.split(";", 1)[0] for ln in text.splitlines()]
    tokens = " ".join(lines).replace("(", " ").replace(")", " ").split()
    if not tokens:
        raise KeyFileError("no public key found in %s" % path)
    upper = [t.upper() for t in tokens]
    if "DNSKEY" not in upper:
        raise KeyFileError("RR in %s is not a DNSKEY" % path)
    at = upper.index("DNSKEY")
    ttl = DEFAULT_TTL
    for t in tokens[1:at]:
        if t.isdigit():
            ttl = int(t)
        elif t.upper() != "IN":
            raise KeyFileError("bad DNSKEY header in %s: %r" % (path, t))
    try:
        rd = dns.rdata.from_text("IN", "DNSKEY", " ".join(tokens[at + 1:]))
    except (dns.exception.DNSException, ValueError) as e:
        raise KeyFileError("bad DNSKEY in %s: %s" % (path, e)) from e
    assert isinstance(rd, dns.rdtypes.ANY.DNSKEY.DNSKEY)    # as asked
    owner = tokens[0] if tokens[0].endswith(".") else tokens[0] + "."
    return owner, ttl, rd.flags, int(rd.algorithm), bytes(rd.key)


def parse_private_fields(text, path="stdin"):
    """The ``Field: value`` pairs of a BIND private key file."""
    fields = {}
    for ln in text.splitlines():
        if not ln.strip() or ln.lstrip().startswith(";"):
            continue
        if ":" not in ln:
            raise KeyFileError("bad line in %s: %r" % (path, ln.strip()))
        k, v = ln.split(":", 1)
        fields[k.strip().lower()] = v.strip()
    if "algorithm" not in fields:
        raise KeyFileError("no Algorithm in %s" % path)
    return fields


def _b64int(fields, name, path):
    return int.from_bytes(_b64(fields, name, path), "big")


def _b64(fields, name, path):
    v = fields.get(name.lower())
    if v is None:
        raise KeyFileError("no %s in %s" % (name, path))
    try:
        return base64.b64decode(v, validate=True)
    except ValueError as e:
        raise KeyFileError("bad %s in %s" % (name, path)) from e


def private_key(fields, alg, path="stdin"):
    """A cryptography private key from parsed private-file fields."""
    try:
        palg = int(fields["algorithm"].split()[0])
    except ValueError as e:
        raise KeyFileError("bad Algorithm in %s" % path) from e
    if palg != alg:
        raise KeyFileError("algorithm %d in %s differs from the public key's "
                        "%d" % (palg, path, alg))
    try:
        if alg == ED25519:
            return ed25519.Ed25519PrivateKey.from_private_bytes(
                _b64(fields, "PrivateKey", path))
        if alg in _EC:
            curve = _EC[alg][0]
            return ec.derive_private_key(
                _b64int(fields, "PrivateKey", path), curve())
        return _rsa_private(fields, path)
    except (ValueError, InvalidKey) as e:
        raise KeyFileError("bad private key in %s: %s" % (path, e)) from e


def _rsa_private(fields, path):
    def get(n):
        return _b64int(fields, n, path)
    pub = rsa.RSAPublicNumbers(get("PublicExponent"), get("Modulus"))
    return rsa.RSAPrivateNumbers(
        get("Prime1"), get("Prime2"), get("PrivateExponent"),
        get("Exponent1"), get("Exponent2"), get("Coefficient"),
        pub).private_key()


def public_bytes(private, alg):
    """The DNSKEY public key field for ``private``."""
    from cryptography.hazmat.primitives import serialization
    pub = private.public_key()
    if alg == ED25519:
        return pub.public_bytes(serialization.Encoding.Raw,
                                serialization.PublicFormat.Raw)
    if alg in _EC:
        nums = pub.public_numbers()
        size = _EC[alg][2]
        return nums.x.to_bytes(size, "big") + nums.y.to_bytes(size, "big")
    nums = pub.public_numbers()
    e = _uint_bytes(nums.e)
    head = bytes([len(e)]) if len(e) < 256 else \
        b"\x00" + struct.pack("!H", len(e))
    return head + e + _uint_bytes(nums.n)


def _uint_bytes(n):
    return n.to_bytes((n.bit_length() + 7) // 8 or 1, "big")


# -- generating ---------------------------------------------------------------

def generate(zone, algorithm=ECDSAP256SHA256, flags=ZONE | SEP, bits=2048):
    """A new Key for ``zone`` (a CSK or KSK by default; ``flags=ZONE``
    for a ZSK)."""
    private: Union[ed25519.Ed25519PrivateKey, ec.EllipticCurvePrivateKey,
                   rsa.RSAPrivateKey]
    if algorithm == ED25519:
        private = ed25519.Ed25519PrivateKey.generate()
    elif algorithm in _EC:
        private = ec.generate_private_key(_EC[algorithm][0]())
    elif algorithm in _RSA_HASH:
        private = rsa.generate_private_key(65537, bits)
    else:
        raise KeyFileError("unsupported algorithm %d" % algorithm)
    zone = zone if zone.endswith(".") else zone + "."
    return Key(zone, flags, algorithm, public_bytes(private, algorithm),
               private)


def write_files(key, directory):
    """Write ``key`` as BIND does; returns the base path
    ``directory/K<zone>+<alg>+<tag>``."""
    base = os.path.join(directory, "K%s+%03d+%05d" % (
        key.name, key.algorithm, key.tag))
    kind = "key-signing" if key.flags & SEP else "zone-signing"
    with open(base + ".key", "w") as f:
        f.write("; This is a %s key, keyid %d, for %s\n" % (
            kind, key.tag, key.name))
        f.write("%s IN DNSKEY %d 3 %d %s\n" % (
            key.name, key.flags, key.algorithm,
            base64.b64encode(key.public).decode()))
    # Created 0600: never readable by others, not even for a moment (and
    # a file of that name left before is tightened before it is written).
    fd = os.open(base + ".private", os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(private_text(key))
    key.path = base
    return base


def private_text(key):
    """The ``.private`` file of ``key`` (Private-key-format v1.3)."""
    lines = ["Private-key-format: v1.3",
             "Algorithm: %d (%s)" % (key.algorithm,
                                     ALGORITHMS[key.algorithm])]
    for name, value in _private_fields(key):
        lines.append("%s: %s" % (name, base64.b64encode(value).decode()))
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    lines += ["Created: " + stamp, "Publish: " + stamp,
              "Activate: " + stamp]
    return "\n".join(lines) + "\n"


def _private_fields(key):
    from cryptography.hazmat.primitives import serialization
    p = key.private
    if key.algorithm == ED25519:
        return [("PrivateKey", p.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
            serialization.NoEncryption()))]
    if key.algorithm in _EC:
        size = _EC[key.algorithm][2]
        return [("PrivateKey",
                 p.private_numbers().private_value.to_bytes(size, "big"))]
    n = p.private_numbers()
    pub = n.public_numbers
    return [("Modulus", _uint_bytes(pub.n)),
            ("PublicExponent", _uint_bytes(pub.e)),
            ("PrivateExponent", _uint_bytes(n.d)),
            ("Prime1", _uint_bytes(n.p)), ("Prime2", _uint_bytes(n.q)),
            ("Exponent1", _uint_bytes(n.dmp1)),
            ("Exponent2", _uint_bytes(n.dmq1)),
            ("Coefficient", _uint_bytes(n.iqmp))]
