"""rrl's Corefile syntax (coredns/rrl's setup cases) and its accounting,
on a fake clock (``trial corednstw_rrl``)."""

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import directives
from corednstw.core import dnswire as w
from corednstw.core.errors import CorefileError
from corednstw.core.request import (
    NoReply,
    RawResponse,
    Request,
    Response,
    make_query,
)
from corednstw.service.app import App
from corednstw_rrl import (
    REQUESTS_EXCEEDED,
    RESPONSES_EXCEEDED,
    RESPONSES_SLIPPED,
    RRL,
)
from corednstw_rrl.plugin import (
    ERROR,
    NODATA,
    NXDOMAIN,
    REFERRAL,
    RESPONSE,
    _categorize,
)


def build(body, zones="."):
    app = App(None, reactor=task.Clock(), dns_port=0,
              text="%s:0 {\n%s\n}\n" % (zones, body))
    app.config = app.load()
    return app.config.blocks[0].plugin("rrl")


class SetupTest(unittest.TestCase):
    """coredns/rrl's setup table, with its error texts."""

    def test_defaults(self):
        r = build("rrl")
        self.assertEqual((r.zones, r.window, r.v4_prefix, r.v6_prefix,
                          r.intervals, r.requests_interval, r.slip,
                          r.max_table, r.report_only),
                         (["."], 15 * 10**9, 24, 56, [0] * 5, 0, 0, 100000,
                          False))

    def test_all_options(self):
        r = build("rrl example.org {\n window 5\n ipv4-prefix-length 16\n"
                  " ipv6-prefix-length 48\n responses-per-second 10\n"
                  " nodata-per-second 5\n nxdomains-per-second 4\n"
                  " referrals-per-second 2\n errors-per-second 1\n"
                  " slip-ratio 3\n requests-per-second 100\n"
                  " max-table-size 50\n report-only\n}", "example.org")
        self.assertEqual((r.zones, r.window, r.v4_prefix, r.v6_prefix,
                          r.intervals, r.requests_interval, r.slip,
                          r.max_table, r.report_only),
                         (["example.org."], 5 * 10**9, 16, 48,
                          [10**8, 2 * 10**8, 25 * 10**7, 5 * 10**8, 10**9],
                          10**7, 3, 50, True))

    def test_allowances_default_to_responses(self):
        r = build("rrl {\n responses-per-second 4\n nxdomains-per-second 0"
                  "\n}")
        q = 25 * 10**7
        self.assertEqual(r.intervals, [q, q, 0, q, q])
        r = build("rrl {\n responses-per-second 0.5\n}")
        self.assertEqual(r.intervals, [2 * 10**9] * 5)

    def test_zones_default_to_the_block(self):
        self.assertEqual(build("rrl", "example.org").zones,
                         ["example.org."])

    BAD = [
        ("window", "Wrong argument count or unexpected line ending after "
         "'window'"),
        ("window 1 2", "Wrong argument count"),
        ("window abc", 'abc invalid value. strconv.ParseFloat: parsing '
         '"abc": invalid syntax'),
        ("window 0", "window must be greater than zero"),
        ("ipv4-prefix-length 33", "33 must be between 1 and 32"),
        ("ipv4-prefix-length 0", "0 must be between 1 and 32"),
        ("ipv4-prefix-length x", 'x invalid value. strconv.Atoi: parsing '
         '"x": invalid syntax'),
        ("ipv6-prefix-length 129", "129 must be between 1 and 128"),
        ("responses-per-second -1", "-1 cannot be negative"),
        ("nxdomains-per-second x", "x invalid value."),
        ("slip-ratio 11", "slip-ratio '11' must be between 0 and 10"),
        ("slip-ratio x", "slip-ratio 'x' invalid value. strconv.Atoi"),
        ("max-table-size -1", "-1 cannot be negative"),
        ("max-table-size 1.5", "1.5 invalid value."),
        ("report-only yes", "Wrong argument count"),
        ("colour red", "unknown property 'colour'"),
    ]

    def test_refused(self):
        for line, text in self.BAD:
            with self.assertRaises(CorefileError, msg=line) as cm:
                build("rrl {\n %s\n}" % line)
            self.assertIn("plugin/rrl: " + text, str(cm.exception))

    def test_place_in_chain(self):
        names = directives.names()
        self.assertEqual(names.index("rrl") + 1, names.index("acl"))
        self.assertLess(names.index("rrl"), names.index("cache"))


def request(client, name="www.example.org.", qtype=w.A, proto="udp"):
    data = make_query(name, qtype, msgid=5)
    req = Request(data, client, 4000, proto)
    req.parse_question(*req.parse_header()[1:])
    return req


class _Answers:
    """The chain below rrl: one A record for every question."""

    def __init__(self):
        self.rr = w.RR("www.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))

    def serve(self, req):
        return Response(0, [self.rr], aa=True, plugin="file")


class Limiter(unittest.TestCase):
    """An rrl plugin on a fake clock, fed queries."""

    body = "rrl {\n responses-per-second 100\n slip-ratio 2\n}"

    def setUp(self):
        self.rrl = build(self.body)
        self.clock = task.Clock()
        self.rrl.reactor = self.clock
        self.rrl.start()
        self.rrl.next = _Answers()
        for family in (RESPONSES_EXCEEDED, RESPONSES_SLIPPED,
                       REQUESTS_EXCEEDED):
            saved = dict(family.values)
            self.addCleanup(family.values.update, saved)
            self.addCleanup(family.values.clear)
            family.values.clear()

    def outcome(self, resp):
        if isinstance(resp, NoReply):
            return "dropped"
        if resp.flags & w.TC:
            return "slipped"
        return "full"

    def flood(self, rate, seconds, clients, others=()):
        """Queries at ``rate`` per second for ``seconds``, each from the
        next of ``clients`` in turn; ``others``: (client, rate) pairs
        asking besides.  The outcomes, by client and kind."""
        counts = {}
        step = 1.0 / rate
        n = int(rate * seconds)
        other_next = {c: 0.0 for c, _ in others}
        for i in range(n):
            now = i * step
            self.clock.advance(now - self.clock.seconds())
            c = clients[i % len(clients)]
            kind = self.outcome(self.rrl.serve(request(c)))
            counts[c, kind] = counts.get((c, kind), 0) + 1
            for oc, orate in others:
                if other_next[oc] <= now:
                    other_next[oc] += 1.0 / orate
                    kind = self.outcome(self.rrl.serve(request(oc)))
                    counts[oc, kind] = counts.get((oc, kind), 0) + 1
        return counts


class FloodTest(Limiter):
    """A flood from one /24 (``responses-per-second 100``,
    ``slip-ratio 2``), on a fake clock."""

    def total(self, counts, kind, prefix="192.0.2."):
        return sum(v for (c, k), v in counts.items()
                   if k == kind and c.startswith(prefix))

    def test_flood_is_limited(self):
        """2,000 queries a second for 10 s from 50 addresses of one /24:
        the account gives one second of credit (100 answers, plus what it
        earns while the flood drains it: 100 * 2000/1900), then every
        answer is limited, half of them slipped; another /24 asking 20
        times a second is answered in full throughout."""
        clients = ["192.0.2.%d" % i for i in range(1, 51)]
        counts = self.flood(2000, 10, clients,
                            others=[("198.51.100.7", 20)])
        full = self.total(counts, "full")
        self.assertTrue(90 <= full <= 110, full)
        limited = 20000 - full
        self.assertEqual(self.total(counts, "slipped"), (limited + 1) // 2)
        self.assertEqual(self.total(counts, "dropped"), limited // 2)
        other = {k: v for (c, k), v in counts.items()
                 if c == "198.51.100.7"}
        self.assertEqual(other, {"full": 200})
        self.assertEqual(sum(RESPONSES_EXCEEDED.values.values()), limited)
        self.assertEqual(sum(RESPONSES_SLIPPED.values.values()),
                         (limited + 1) // 2)

    def test_under_the_rate_is_answered(self):
        """90 a second for 10 s from one /24: every answer goes out."""
        counts = self.flood(90, 10, ["192.0.2.1", "192.0.2.2"])
        self.assertEqual(self.total(counts, "full"), 900)

    def test_account_recovers(self):
        """After the flood the account is at -``window`` (15 s): a client
        that keeps quiet that long is still just short of zero; a little
        longer and it has its second of credit back."""
        self.flood(1000, 2, ["192.0.2.1"])
        self.clock.advance(15)
        self.assertNotEqual(
            self.outcome(self.rrl.serve(request("192.0.2.1"))), "full")
        self.clock.advance(2)
        out = [self.outcome(self.rrl.serve(request("192.0.2.1")))
               for _ in range(101)]
        self.assertEqual(out.count("full"), 100)

    def test_categories_are_apart(self):
        """Another name, another type, or an NXDOMAIN from the same /24
        has an account of its own."""
        self.flood(2000, 1, ["192.0.2.1"])
        self.assertEqual(self.outcome(self.rrl.serve(
            request("192.0.2.1"))), "dropped")
        for req in (request("192.0.2.1", "other.example.org."),
                    request("192.0.2.1", qtype=w.TXT)):
            self.assertEqual(self.outcome(self.rrl.serve(req)), "full")

    def test_tcp_is_not_limited(self):
        self.flood(2000, 1, ["192.0.2.1"])
        resp = self.rrl.serve(request("192.0.2.1", proto="tcp"))
        self.assertEqual(self.outcome(resp), "full")

    def test_other_zone_is_not_limited(self):
        self.rrl = build("rrl example.net {\n responses-per-second 1\n}")
        self.rrl.reactor = self.clock
        self.rrl.start()
        self.rrl.next = _Answers()
        out = {self.outcome(self.rrl.serve(request("192.0.2.1")))
               for _ in range(10)}
        self.assertEqual(out, {"full"})

    def test_slip_keeps_rcode_and_empties_sections(self):
        self.flood(2000, 1, ["192.0.2.1"])
        answers = [self.rrl.serve(request("192.0.2.1")) for _ in range(2)]
        slipped = [r for r in answers if not isinstance(r, NoReply)][0]
        self.assertEqual((slipped.rcode, slipped.answer, slipped.authority,
                          slipped.additional, bool(slipped.flags & w.TC)),
                         (0, [], [], [], True))


class PrefixTest(Limiter):
    body = ("rrl {\n responses-per-second 1\n ipv4-prefix-length 16\n"
            " ipv6-prefix-length 64\n}")

    def test_prefixes(self):
        p = self.rrl.prefix
        self.assertEqual(p("10.1.2.3"), p("10.1.200.7"))
        self.assertNotEqual(p("10.1.2.3"), p("10.2.2.3"))
        self.assertEqual(p("2001:db8:0:1::5"), p("2001:db8:0:1:ff::1"))
        self.assertNotEqual(p("2001:db8:0:1::5"), p("2001:db8:0:2::5"))
        self.assertEqual(p("fe80::1%eth0"), p("fe80::2"))
        self.assertEqual(p("not-an-address"), "not-an-address")
        # An IPv4 prefix and an IPv6 one never share an account.
        self.assertNotEqual(p("0.0.0.1"), p("::1"))


class ReportOnlyTest(Limiter):
    body = ("rrl {\n responses-per-second 100\n slip-ratio 2\n"
            " report-only\n}")

    def test_counts_but_answers(self):
        """``report-only``: the same flood, every answer in full; only
        the counters say what would have been limited."""
        counts = self.flood(2000, 10, ["192.0.2.%d" % i
                                       for i in range(1, 51)])
        self.assertEqual(set(k for _c, k in counts), {"full"})
        exceeded = sum(RESPONSES_EXCEEDED.values.values())
        self.assertTrue(90 <= 20000 - exceeded <= 110, exceeded)
        self.assertEqual(sum(RESPONSES_SLIPPED.values.values()),
                         (exceeded + 1) // 2)


class TableTest(Limiter):
    body = "rrl {\n responses-per-second 10\n max-table-size 1000\n}"

    def test_spoofed_flood(self):
        """100,000 queries from 100,000 spoofed /24s: the table never
        holds more than 1,000 accounts, and the prefix cache stays as
        small."""
        for i in range(100000):
            if i % 1000 == 0:
                self.clock.advance(0.01)
            client = "10.%d.%d.1" % (i // 256 % 256, i % 256)
            client = "%d.%s" % (11 + i // 65536, client[3:])
            self.rrl.serve(request(client))
            self.assertLessEqual(len(self.rrl.table), 1000)
        self.assertEqual(len(self.rrl.table), 1000)
        self.assertLessEqual(len(self.rrl.prefixes), 1000)

    def test_idle_accounts_make_room(self):
        """Once the table is full, an account back at full credit (idle
        for ``window``) gives its place to a new one, which is then
        limited."""
        for i in range(1000):
            self.rrl.serve(request("10.0.%d.1" % (i % 250), "n%d." % i))
        self.assertEqual(len(self.rrl.table), 1000)
        self.clock.advance(15)
        outs = [self.outcome(self.rrl.serve(request("192.0.2.1")))
                for _ in range(20)]
        self.assertEqual(outs.count("full"), 10)
        self.assertEqual(len(self.rrl.table), 1000)


class RequestsTest(Limiter):
    body = "rrl {\n requests-per-second 10\n}"

    def test_requests_limited_per_prefix(self):
        counts = self.flood(100, 5, ["192.0.2.1", "192.0.2.200"],
                            others=[("198.51.100.1", 5)])
        full = counts["192.0.2.1", "full"] + counts["192.0.2.200", "full"]
        self.assertTrue(10 <= full <= 12, full)
        self.assertEqual(counts["198.51.100.1", "full"], 25)
        self.assertEqual(sum(REQUESTS_EXCEEDED.values.values()),
                         500 - counts["192.0.2.1", "full"]
                         - counts["192.0.2.200", "full"])


class CategoryTest(unittest.TestCase):
    """BIND's response categories, from records and from wire answers."""

    def check(self, resp, want, name="www.example.org."):
        req = request("192.0.2.1", name)
        self.assertEqual(_categorize(req, resp), want)
        wire = resp.finish(req)
        self.assertEqual(_categorize(req, RawResponse(wire)), want)

    def test_categories(self):
        soa = w.RR("example.org.", w.SOA, 60, w.soa_rdata(
            "ns.example.org.", "h.example.org.", 1, 2, 3, 4, 5))
        ns = w.RR("Sub.Example.ORG.", w.NS, 60, w.name_to_wire(
            "ns.sub.example.org."))
        a = w.RR("www.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))
        self.check(Response(0, [a]), (RESPONSE, "www.example.org."))
        self.check(Response(0, authority=[soa]),
                   (NODATA, "www.example.org."))
        self.check(Response(3, authority=[soa]), (NXDOMAIN, "example.org."))
        self.check(Response(3), (NXDOMAIN, ""))
        self.check(Response(0, authority=[ns]),
                   (REFERRAL, "sub.example.org."))
        self.check(Response(2), (ERROR, ""))
        self.check(Response(5, authority=[soa]), (ERROR, ""))

    def test_compressed_wire(self):
        """An upstream's answers, names compressed (as forward and cache
        hand them on)."""
        for rcode, rtype, owner, want in (
                ("NXDOMAIN", "SOA", "example.org.",
                 (NXDOMAIN, "example.org.")),
                ("NOERROR", "NS", "www.example.org.",
                 (REFERRAL, "www.example.org.")),
                ("NOERROR", "SOA", "Example.ORG.",
                 (NODATA, "www.example.org."))):
            req = request("192.0.2.1", "www.example.org.")
            m = dns.message.make_response(dns.message.from_wire(req.data))
            m.set_rcode(dns.rcode.from_text(rcode))
            rdata = ("ns.example.org. h.example.org. 1 2 3 4 5"
                     if rtype == "SOA" else "ns.example.org.")
            m.authority.append(dns.rrset.from_text(owner, 60, "IN", rtype,
                                                   rdata))
            raw = RawResponse.prebuilt(m.to_wire(), "forward")
            self.assertEqual(_categorize(req, raw), want)

    def test_wildcard_metadata(self):
        req = request("192.0.2.1", "a.example.org.")
        req.metadata = {"zone/wildcard": lambda: "*.example.org."}
        a = w.RR("a.example.org.", w.A, 60, w.a_rdata("192.0.2.1"))
        self.assertEqual(_categorize(req, Response(0, [a])),
                         (RESPONSE, "example.org."))

    def test_is_rrl(self):
        self.assertIsInstance(build("rrl"), RRL)
        m = dns.message.make_query("x.", dns.rdatatype.A)
        self.assertEqual(len(m.question), 1)
