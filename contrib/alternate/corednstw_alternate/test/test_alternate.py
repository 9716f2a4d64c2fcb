"""alternate's Corefile syntax (the upstream plugin's setup cases) and its
rules, through corednstw's configuration with no sockets
(``trial corednstw_alternate``)."""

import dns.edns
import dns.message
import dns.rdatatype
from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import directives
from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import Request, Response, make_query
from corednstw.service.app import App
from corednstw_alternate import RCODES, Alternate, Upstreams

NXRRSET, BADNAME = RCODES["NXRRSET"], RCODES["BADNAME"]


def build(body):
    """The configuration of a ``.:0`` block holding ``body``."""
    app = App(None, reactor=task.Clock(), dns_port=0,
              text=".:0 {\n%s\n}\n" % body)
    app.config = app.load()
    return app


def alternate_of(app):
    return app.config.blocks[0].plugin("alternate")


class SetupTest(unittest.TestCase):
    """The upstream plugin's setup table, with its error texts."""

    OK = [
        "alternate REFUSED . 192.168.1.1:53",
        "alternate SERVFAIL . 192.168.1.1:53",
        "alternate NXDOMAIN . 192.168.1.1:53",
        "alternate original NXDOMAIN . 192.168.1.1:53",
        "alternate SERVFAIL,REFUSED . 192.168.1.1:53",
        "alternate original SERVFAIL,REFUSED . 192.168.1.1:53",
        "alternate nxdomain . 192.168.1.1",
        "alternate SERVFAIL REFUSED . 192.168.1.1:53",
    ]

    BAD = [
        ("alternate REFUSE . 192.168.1.1:53", "REFUSE is not a valid rcode"),
        ("alternate SRVFAIL . 192.168.1.1:53",
         "SRVFAIL is not a valid rcode"),
        ("alternate NODOMAIN . 192.168.1.1:53",
         "NODOMAIN is not a valid rcode"),
        ("alternate original NODOMAIN . 192.168.1.1:53",
         "NODOMAIN is not a valid rcode"),
        ("alternate REFUSED . 192.168.1.1:53 {\n max_fails 5\n"
         " force_tcp\n}", "additional parameters not allowed"),
        ("alternate REFUSED . tls://192.168.1.1:443",
         "only dns transport allowed"),
        ("alternate REFUSED . abc", 'not an IP address or file: "abc"'),
        ("alternate REFUSED . 192.168.1.1:53\n"
         "alternate REFUSED . 192.168.1.2:53",
         "rcode 'REFUSED' is specified more than once"),
        ("alternate REFUSED . 192.168.1.1:53\n"
         "alternate original REFUSED . 192.168.1.2:53",
         "rcode 'REFUSED' is specified more than once"),
        ("alternate SERVFAIL, REFUSED . 192.168.1.1:53",
         " is not a valid rcode"),
        ("alternate", "Wrong argument count or unexpected line ending "
         "after 'alternate'"),
        ("alternate original", "Wrong argument count"),
        ("alternate NXDOMAIN .", "Wrong argument count"),
        ("alternate NXDOMAIN", "Wrong argument count"),
    ]

    def test_accepted(self):
        for line in self.OK:
            app = build(line)
            self.assertIsInstance(alternate_of(app), Alternate, line)

    def test_refused(self):
        for line, text in self.BAD:
            with self.assertRaises(CorefileError, msg=line) as cm:
                build(line)
            self.assertIn("plugin/alternate: " + text, str(cm.exception))

    def test_rules(self):
        app = build("alternate NXDOMAIN . 192.168.1.1:53\n"
                    "alternate original SERVFAIL,REFUSED . "
                    "192.168.100.1:53 192.168.100.2")
        a = alternate_of(app)
        self.assertEqual(sorted(a.rules), [w.SERVFAIL, w.NXDOMAIN,
                                           w.REFUSED])
        nx, sf = a.rules[w.NXDOMAIN], a.rules[w.SERVFAIL]
        self.assertIs(sf.upstreams, a.rules[w.REFUSED].upstreams)
        self.assertEqual((nx.original, sf.original), (False, True))
        self.assertEqual([p.addr for p in nx.upstreams.upstreams],
                         ["192.168.1.1:53"])
        self.assertEqual([(p.addr, p.name, p.expire)
                          for p in sf.upstreams.upstreams],
                         [("192.168.100.1:53", "alternate", 10.0),
                          ("192.168.100.2:53", "alternate", 10.0)])
        self.assertEqual(len(app.config.blocks[0].plugins), 1)

    def test_resolv_conf(self):
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("search example.org\nnameserver 10.0.0.1\n"
                    "nameserver ::1\n")
        a = alternate_of(build("alternate NXDOMAIN . %s" % path))
        self.assertEqual([p.addr for p in
                          a.rules[w.NXDOMAIN].upstreams.upstreams],
                         ["10.0.0.1:53", "[::1]:53"])

    def test_place_in_chain(self):
        names = directives.names()
        self.assertEqual(names.index("alternate") + 1,
                         names.index("forward"))
        app = build("forward . 127.0.0.1:53\nlog\n"
                    "alternate NXDOMAIN . 127.0.0.2:53")
        self.assertEqual(app.config.blocks[0].directive_names(),
                         ["log", "alternate", "forward"])


class _Upstreams:
    """Stands in for a rule's forward: records what it was asked."""

    def __init__(self, rcode=w.NOERROR):
        self.asked = []
        self.rcode = rcode

    def match(self, qname):
        return True

    def serve(self, req):
        self.asked.append(req)
        return Response(self.rcode, plugin="forward")


class _Next:
    """The chain below: answers ``rcode`` (None: writes nothing) and may
    replace the query's bytes, as bufsize or header do in place."""

    def __init__(self, rcode, change=None):
        self.rcode = rcode
        self.change = change

    def serve(self, req):
        if self.change is not None:
            req.data = self.change(req.data)
        if self.rcode is None:
            return None
        return Response(self.rcode, plugin="next")


def request(name="abc.com."):
    data = make_query(name, dns.rdatatype.A, msgid=9)
    req = Request(data)
    req.parse_question(*req.parse_header()[1:])
    return req


class RulesTest(unittest.TestCase):
    """The upstream plugin's handler cases: which answers go to which
    upstreams, and what query they get."""

    def setUp(self):
        app = build("alternate NXRRSET . 192.0.2.1\n"
                    "alternate original SERVFAIL . 192.0.2.2")
        self.plugin = alternate_of(app)
        self.nx = _Upstreams(w.REFUSED)
        self.sf = _Upstreams(w.REFUSED)
        self.plugin.rules[NXRRSET].upstreams = self.nx
        self.plugin.rules[w.SERVFAIL].upstreams = self.sf

    def ask(self, rcode, change=None):
        self.plugin.next = _Next(rcode, change)
        return self.plugin.serve(request())

    def test_listed_rcode_goes_to_the_rule(self):
        r = self.ask(NXRRSET)
        self.assertEqual((r.rcode, r.plugin), (w.REFUSED, "forward"))
        self.assertEqual((len(self.nx.asked), len(self.sf.asked)), (1, 0))

    def test_nothing_written_counts_as_servfail(self):
        r = self.ask(None)
        self.assertEqual(r.rcode, w.REFUSED)
        self.assertEqual(len(self.sf.asked), 1)

    def test_other_rcodes_stand(self):
        for rc in (BADNAME, w.REFUSED, w.NOERROR, w.NXDOMAIN):
            r = self.ask(rc)
            self.assertEqual((r.rcode, r.plugin), (rc, "next"))
        self.assertEqual(self.nx.asked + self.sf.asked, [])

    def test_every_query(self):
        for _ in range(10):
            self.ask(NXRRSET)
        self.assertEqual(len(self.nx.asked), 10)

    def test_original(self):
        """An ``original`` rule sends the bytes as they arrived; another
        rule sends them as the chain below left them."""
        def edns(data):
            m = dns.message.from_wire(data)
            m.use_edns(0, options=[dns.edns.GenericOption(0xffee, b"abcd")])
            return m.to_wire()

        def options(req):
            return [o.otype for o in dns.message.from_wire(req.data).options]
        self.ask(w.SERVFAIL, edns)
        self.assertEqual(options(self.sf.asked[0]), [])
        self.assertEqual(self.sf.asked[0].qname, "abc.com.")
        self.ask(NXRRSET, edns)
        self.assertEqual(options(self.nx.asked[0]), [0xffee])

    def test_upstreams_are_forward(self):
        app = build("alternate NXDOMAIN . 192.0.2.1")
        self.assertIsInstance(alternate_of(app).rules[w.NXDOMAIN].upstreams,
                              Upstreams)
