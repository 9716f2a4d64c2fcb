"""The geoip plugin: metadata from MaxMind DB files built for the test
(with the mmdb-writer library), read by view expressions and directly."""

import os

import dns.edns
from mmdb_writer import MMDBWriter
from netaddr import IPSet
from twisted.internet import defer
from twisted.trial import unittest

from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.plugins import geoip
from corednstw.plugins import metadata as md
from tests.support import util

CAMBRIDGE = {
    "city": {"names": {"en": "Cambridge", "de": "Cambridge"}},
    "continent": {"code": "EU", "names": {"en": "Europe"}},
    "country": {"iso_code": "GB", "names": {"en": "United Kingdom"},
                "is_in_european_union": False},
    "location": {"latitude": 52.2242, "longitude": 0.1315,
                 "time_zone": "Europe/London"},
    "postal": {"code": "CB4"},
    "subdivisions": [{"iso_code": "ENG"}, {"iso_code": "TWH"}],
}
EXAMPLESHIRE = {
    "city": {"names": {"en": "Exampleshire"}},
    "country": {"iso_code": "FR", "names": {"en": "France"},
                "is_in_european_union": True},
    "location": {"latitude": 48.0, "longitude": -0.00001},
}


def build(directory, name, dbtype, networks):
    """Write a database of ``dbtype`` mapping each CIDR to its record."""
    writer = MMDBWriter(ip_version=6, database_type=dbtype,
                        ipv4_compatible=True)
    for cidr, record in networks.items():
        writer.insert_network(IPSet([cidr]), record)
    path = os.path.join(directory, name)
    writer.to_db_file(path)
    return path


def databases(testcase):
    d = util.write_files(testcase, {})
    city = build(d, "city.mmdb", "GeoLite2-City", {
        "81.2.69.0/24": CAMBRIDGE, "127.0.0.0/8": EXAMPLESHIRE})
    asn = build(d, "asn.mmdb", "GeoLite2-ASN", {
        "81.2.69.0/24": {"autonomous_system_number": 396982,
                         "autonomous_system_organization": "EXAMPLE-NET"}})
    other = build(d, "anon.mmdb", "GeoIP2-Anonymous-IP", {
        "81.2.69.0/24": {"is_anonymous": True}})
    odd = build(d, "odd.mmdb", "Something-Else", {
        "81.2.69.0/24": {"x": 1}})
    return city, asn, other, odd


class FakeRequest:
    """What geoip reads of a request."""

    def __init__(self, client, ecs=None):
        self.client = client
        self.metadata = {}
        self.edns = None
        if ecs is not None:
            self.edns = w.EDNS(1232, 0, [(geoip.ECS, ecs)])


def ecs_bytes(address, prefix):
    opt = dns.edns.ECSOption(address, prefix)
    return opt.to_wire()


class GeoIPTest(unittest.TestCase):

    def setUp(self):
        self.city, self.asn, self.other, self.odd = databases(self)

    def plugin(self, path, edns0=False):
        reader, provides = geoip.open_database(path)
        reader.close()
        p = geoip.GeoIP(path, edns0, provides)
        p.start()
        self.addCleanup(p.stop)
        return p

    def labels(self, p, req):
        p.metadata(req)
        return {k: md.value(req, k) for k in req.metadata}

    def test_city_labels(self):
        p = self.plugin(self.city)
        got = self.labels(p, FakeRequest("81.2.69.142"))
        self.assertEqual(got, {
            "geoip/city/name": "Cambridge",
            "geoip/country/code": "GB",
            "geoip/country/name": "United Kingdom",
            "geoip/country/is_in_european_union": "false",
            "geoip/continent/code": "EU",
            "geoip/continent/name": "Europe",
            "geoip/latitude": "52.2242",
            "geoip/longitude": "0.1315",
            "geoip/timezone": "Europe/London",
            "geoip/postalcode": "CB4",
            "geoip/subdivisions/code": "ENG,TWH",
        })

    def test_number_forms_and_unknown_address(self):
        p = self.plugin(self.city)
        got = self.labels(p, FakeRequest("127.0.0.1"))
        self.assertEqual(got["geoip/latitude"], "48")
        self.assertEqual(got["geoip/longitude"], "-0.00001")
        self.assertEqual(got["geoip/country/is_in_european_union"], "true")
        self.assertEqual(got["geoip/postalcode"], "")
        got = self.labels(p, FakeRequest("192.0.2.1"))
        self.assertEqual(got["geoip/city/name"], "")
        self.assertEqual(got["geoip/latitude"], "")

    def test_asn_labels(self):
        p = self.plugin(self.asn)
        got = self.labels(p, FakeRequest("81.2.69.1"))
        self.assertEqual(got, {"geoip/asn/number": "396982",
                               "geoip/asn/org": "EXAMPLE-NET"})

    def test_edns_subnet(self):
        ecs = ecs_bytes("81.2.69.0", 24)
        p = self.plugin(self.city, edns0=True)
        got = self.labels(p, FakeRequest("127.0.0.1", ecs))
        self.assertEqual(got["geoip/city/name"], "Cambridge")
        # Without the option set, the client address counts.
        p = self.plugin(self.city)
        got = self.labels(p, FakeRequest("127.0.0.1", ecs))
        self.assertEqual(got["geoip/city/name"], "Exampleshire")

    @defer.inlineCallbacks
    def test_view_selects_block(self):
        corefile_text = """\
example.com:0 {
    view exampleshire {
        expr metadata('geoip/city/name') == 'Exampleshire'
    }
    geoip %s {
        edns-subnet
    }
    metadata
    template IN A example.com {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
}
example.com:0 {
    template IN A example.com {
        answer "{{ .Name }} 60 IN A 192.0.2.2"
    }
}
""" % self.city
        app = yield util.start(self, corefile_text)
        m = yield util.query(app.port(), "example.com", "A")
        self.assertEqual(util.rrs(m), ["example.com. 60 IN A 192.0.2.1"])
        m = yield util.query(app.port(), "example.com", "A", use_edns=0,
                             options=[dns.edns.ECSOption("81.2.69.0", 24)])
        self.assertEqual(util.rrs(m), ["example.com. 60 IN A 192.0.2.2"])


class SetupTest(unittest.TestCase):

    def setUp(self):
        self.city, self.asn, self.other, self.odd = databases(self)

    def error(self, text):
        with self.assertRaises(CorefileError) as cm:
            util.Direct(self, ".:0 {\n    geoip %s\n}\n" % text)
        return str(cm.exception)

    def test_errors(self):
        self.assertIn("Corefile:2 - Error during parsing: plugin/geoip: "
                      "Wrong argument count", self.error(""))
        self.assertIn("Wrong argument count",
                      self.error(self.city + " extra"))
        self.assertIn('plugin/geoip: unknown property "foo"',
                      self.error(self.city + " {\n        foo\n    }"))
        self.assertIn("Corefile:2 - Error during parsing: plugin/geoip: "
                      "failed to open database file: open /nonexistent: "
                      "no such file or directory",
                      self.error("/nonexistent"))
        self.assertIn("database does not provide any supported schema "
                      "(city, asn)", self.error(self.other))
        self.assertIn('reader does not support the "Something-Else" '
                      "database type", self.error(self.odd))

    def test_ok(self):
        s = util.Direct(self, ".:0 {\n    geoip %s {\n        edns-subnet\n"
                        "    }\n    metadata\n}\n" % self.city)
        p = s.app.config.blocks[0].plugin("geoip")
        self.assertTrue(p.edns0)
        self.assertEqual(p.provides, geoip.CITY)

