"""geoip: geolocation and network data of the client, from a MaxMind DB
(``.mmdb``) file, published as metadata (CoreDNS's geoip).

``geoip DBFILE { edns-subnet }``.  For every query in the *metadata*
plugin's zones the client's address (or, with ``edns-subnet``, the address
of the query's EDNS0 client subnet option) is looked up, and the labels
``geoip/city/name``, ``geoip/country/code``, ``geoip/asn/number``, ... are
set, for *view* expressions, *log* formats and other plugins.

The database type decides what is published, as the Go reader CoreDNS
uses decides it: City, Country and Enterprise databases give the city
labels, ASN and ISP databases the ``asn`` labels.  The lookup runs once
per query, and only when a label is read.
"""

import ipaddress
import os
from decimal import Decimal

from zope.interface import implementer

from corednstw.core.interfaces import IMetadataProvider
from corednstw.core.plugin import Plugin
from corednstw.plugins.metadata import set_value

NAME = "geoip"
ECS = 8         # EDNS0 option code of the client subnet (RFC 7871)

CITY = 1
ASN = 2

#: database_type -> what it provides (the Go reader's table).
_TYPES = {
    "GeoLite2-ASN": ASN, "GeoLite-ASN": ASN, "DBIP-ASN-Lite": ASN,
    "DBIP-ASN-Lite (compat=GeoLite2-ASN)": ASN,
    "GeoIP2-ISP": ASN, "GeoIP2-Precision-ISP": ASN,
    "GeoIP2-Enterprise": CITY, "DBIP-ISP (compat=Enterprise)": CITY,
    "DBIP-Location-ISP (compat=Enterprise)": CITY,
}
for _t in ("DBIP-City-Lite", "DBIP-Country-Lite", "DBIP-Country",
           "DBIP-Location (compat=City)", "GeoLite2-City", "GeoLite-City",
           "GeoIP2-City", "GeoIP2-City-Africa", "GeoIP2-City-Asia-Pacific",
           "GeoIP2-City-Europe", "GeoIP2-City-North-America",
           "GeoIP2-City-South-America", "GeoIP2-Precision-City",
           "GeoLite2-Country", "GeoLite-Country", "GeoIP2-Country"):
    _TYPES[_t] = CITY
#: Types the reader knows but that give none of our labels.
_OTHER = ("GeoIP2-Anonymous-IP", "GeoIP2-Connection-Type", "GeoIP2-Domain")


class DatabaseError(Exception):
    pass


def open_database(path):
    """(reader, provides) for the database at ``path``; DatabaseError with
    CoreDNS's texts when it cannot be used."""
    import maxminddb
    try:
        reader = maxminddb.open_database(path)
    except FileNotFoundError as e:
        raise DatabaseError("failed to open database file: open %s: no such "
                            "file or directory" % path) from e
    except Exception as e:
        raise DatabaseError("failed to open database file: %s" % e) from e
    dbtype = reader.metadata().database_type
    provides = _TYPES.get(dbtype, 0)
    if not provides:
        reader.close()
        if dbtype in _OTHER:
            raise DatabaseError("database does not provide any supported "
                                "schema (city, asn)")
        raise DatabaseError('failed to open database file: geoip2: reader '
                            'does not support the "%s" database type'
                            % dbtype)
    return reader, provides


@implementer(IMetadataProvider)
class GeoIP(Plugin):
    name = NAME

    def __init__(self, path, edns0, provides):
        self.path = path
        self.edns0 = edns0
        self.provides = provides
        self.reader = None

    def start(self):
        self.reader, self.provides = open_database(self.path)

    def stop(self):
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def serve(self, req):
        return self.next.serve(req)

    def metadata(self, req):
        addr = self._address(req)
        if addr is None or self.reader is None:
            return
        record = _Lazy(self.reader, addr)
        if self.provides & CITY:
            for label, fn in _CITY_LABELS:
                set_value(req, "geoip/" + label, record.bind(fn))
        if self.provides & ASN:
            for label, fn in _ASN_LABELS:
                set_value(req, "geoip/" + label, record.bind(fn))

    def _address(self, req):
        """The address to locate: the client's, or the EDNS0 subnet's."""
        addr = req.client
        if self.edns0 and req.edns is not None:
            subnet = req.edns.option(ECS)
            if subnet is not None:
                ecs = _subnet_address(subnet)
                if ecs is not None:
                    return ecs
        try:
            return str(ipaddress.ip_address(addr.split("%")[0]))
        except ValueError:
            return None


def _subnet_address(data):
    """The address of a client subnet option, padded to full length."""
    if len(data) < 4:
        return None
    family = int.from_bytes(data[:2], "big")
    raw = bytes(data[4:])
    size = {1: 4, 2: 16}.get(family)
    if size is None or len(raw) > size:
        return None
    raw = raw + b"\x00" * (size - len(raw))
    return str(ipaddress.ip_address(raw))


class _Lazy:
    """The database record of one address, looked up on first use."""

    __slots__ = ("reader", "addr", "record")

    def __init__(self, reader, addr):
        self.reader = reader
        self.addr = addr
        self.record = None

    def get(self):
        if self.record is None:
            try:
                r = self.reader.get(self.addr)
            except (ValueError, OSError):
                r = None
            self.record = r if isinstance(r, dict) else {}
        return self.record

    def bind(self, fn):
        return lambda: fn(self.get())


def _path(record, *keys):
    for k in keys:
        if not isinstance(record, dict):
            return None
        record = record.get(k)
    return record


def _text(v):
    return v if isinstance(v, str) else ""


def _english(record, what):
    return _text(_path(record, what, "names", "en"))


def _float(v):
    """Go's FormatFloat(v, 'f', -1, 64): shortest form, no exponent."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return ""
    text = format(Decimal(repr(float(v))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _subdivisions(record):
    subs = _path(record, "subdivisions")
    if not isinstance(subs, list):
        return ""
    return ",".join(_text(_path(s, "iso_code")) for s in subs)


def _uint(v):
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else "0"


_CITY_LABELS = (
    ("city/name", lambda r: _english(r, "city")),
    ("country/name", lambda r: _english(r, "country")),
    ("continent/name", lambda r: _english(r, "continent")),
    ("country/code", lambda r: _text(_path(r, "country", "iso_code"))),
    ("subdivisions/code", _subdivisions),
    ("country/is_in_european_union", lambda r: "true" if _path(
        r, "country", "is_in_european_union") is True else "false"),
    ("continent/code", lambda r: _text(_path(r, "continent", "code"))),
    ("latitude", lambda r: _float(_path(r, "location", "latitude"))),
    ("longitude", lambda r: _float(_path(r, "location", "longitude"))),
    ("timezone", lambda r: _text(_path(r, "location", "time_zone"))),
    ("postalcode", lambda r: _text(_path(r, "postal", "code"))),
)

_ASN_LABELS = (
    ("asn/number", lambda r: _uint(_path(r, "autonomous_system_number"))),
    ("asn/org", lambda r: _text(_path(r, "autonomous_system_organization"))),
)


def setup(d, block):
    db = d.exactly(1)[0]
    # The one option, ``edns-subnet``, takes no value (CoreDNS reads no
    # argument of it): look up the ECS address rather than the client's.
    d.read_options({"edns-subnet": lambda c: None},
                   unknown='unknown property "%s"')
    edns0 = bool(d.children)
    path = block.path(db)
    try:
        reader, provides = open_database(path)
    except DatabaseError as e:
        raise d.error(str(e)) from e
    reader.close()
    return GeoIP(os.fspath(path), edns0, provides)
