"""kubernetes: the list/watch life cycle against the test API server —
paging, watch events while queries run, 410 relists, dropped connections,
startup before sync, readiness and metrics."""

import datetime
import json
import threading
import time

import dns.rcode
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from corednstw.core import metrics
from corednstw.engines.kubernetes import feed
from corednstw.engines.kubernetes import watch as wt
from corednstw.plugins.kubernetes import records as rec
from corednstw.plugins.kubernetes import store as st
from corednstw.service import stall
from tests.support import k8s_apiserver as k8s
from tests.support import util

S = "svc.cluster.local."


def answers(m):
    return sorted(rd.to_text() for rrset in m.answer for rd in rrset)


class WatchTest(unittest.TestCase):
    options = ""

    @defer.inlineCallbacks
    def setUp(self):
        self.patch(wt, "BACKOFF_START", 0.01)
        self.patch(wt, "BACKOFF_MAX", 0.05)
        self.patch(wt, "PAGE", 100)
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.api.add("namespaces", k8s.namespace("default"),
                     k8s.namespace("other"))
        # More than one page of services.
        self.api.add("services", *[
            k8s.service("s%d" % i, "default", ("10.1.%d.%d" % (i // 250,
                                                                i % 250 + 1),))
            for i in range(250)])
        self.app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "%s    }\n    ready 127.0.0.1:0\n}\n") % (self.api.url,
                                                    self.options))
        self.port = self.app.port()
        self.k = self.app.config.blocks[0].plugin("kubernetes")

    def q(self, name, qtype="A"):
        return util.query(self.port, name, qtype)

    @defer.inlineCallbacks
    def wait_rcode(self, name, rcode, qtype="A"):
        """Ask until the answer has ``rcode`` (the watch is asynchronous)."""
        deadline = time.monotonic() + 10
        while True:
            m = yield self.q(name, qtype)
            if m.rcode() == rcode or time.monotonic() > deadline:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(m.rcode(), rcode)
        defer.returnValue(m)

    @defer.inlineCallbacks
    def test_paged_list(self):
        lists = [q for k, what, q in self.api.requests
                 if k == "services" and what == "list"]
        self.assertEqual(len(lists), 3)
        self.assertEqual(lists[0]["limit"], "100")
        self.assertIn("continue", lists[1])
        yield util.wait_for(lambda: self.api.count("services", "watch"))
        watches = [q for k, what, q in self.api.requests
                   if k == "services" and what == "watch"]
        self.assertEqual(watches[0]["allowWatchBookmarks"], "true")
        m = yield self.q("s249.default." + S)
        self.assertEqual(answers(m), ["10.1.0.250"])
        self.assertEqual(len(self.k.store.services), 250)

    @defer.inlineCallbacks
    def test_changes_while_serving(self):
        m = yield self.q("new.default." + S)
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        self.api.add("services", k8s.service("new", "default", ("10.9.0.1",)))
        m = yield self.wait_rcode("new.default." + S, 0)
        self.assertEqual(answers(m), ["10.9.0.1"])
        self.api.update("services", k8s.service("new", "default",
                                                ("10.9.0.2",)))
        yield util.wait_for(lambda: self.k.store.services[
            ("new", "default")].ips == ("10.9.0.2",))
        m = yield self.q("new.default." + S)
        self.assertEqual(answers(m), ["10.9.0.2"])
        self.api.delete("services", "default", "new")
        yield self.wait_rcode("new.default." + S, dns.rcode.NXDOMAIN)
        # A namespace that goes away takes its names with it.
        self.api.delete("namespaces", "", "default")
        yield self.wait_rcode("s1.default." + S, dns.rcode.NXDOMAIN)

    @defer.inlineCallbacks
    def test_headless_slices(self):
        """Several slices per service merge; duplicates go; ready: null is
        ready; dual-stack; publishNotReadyAddresses."""
        self.api.add("services", k8s.service("h", "default", ("None",)),
                     k8s.service("p", "default", ("None",), pna=True))
        self.api.add("endpointslices", k8s.endpoint_slice("h-a", "default",
                                                          "h", [
            k8s.endpoint(["10.0.1.1"]), k8s.endpoint(["10.0.1.2"],
                                                     ready=False),
            k8s.endpoint(["10.0.1.3"], ready=None)]),
            k8s.endpoint_slice("h-b", "default", "h", [
                k8s.endpoint(["10.0.1.1"]),
                k8s.endpoint(["fd00::1"])], address_type="IPv6"),
            k8s.endpoint_slice("p-a", "default", "p", [
                k8s.endpoint(["10.0.2.1"], ready=False)]))
        yield util.wait_for(lambda: len(self.k.store.slices) == 3)
        m = yield self.q("h.default." + S)
        self.assertEqual(answers(m), ["10.0.1.1", "10.0.1.3"])
        m = yield self.q("h.default." + S, "AAAA")
        self.assertEqual(answers(m), ["fd00::1"])
        m = yield self.q("p.default." + S)
        self.assertEqual(answers(m), ["10.0.2.1"])
        # One slice goes: its addresses go with it.
        self.api.delete("endpointslices", "default", "h-a")
        yield util.wait_for(lambda: len(self.k.store.slices) == 2)
        m = yield self.q("h.default." + S)
        self.assertEqual(answers(m), ["10.0.1.1"])

    @defer.inlineCallbacks
    def test_relist_on_410(self):
        """An expired watch relists at once; the relist removes what is
        gone and adds what is new (mark and sweep)."""
        before = self.api.count("services", "list")
        objs = [k8s.service("s%d" % i, "default", ("10.1.0.%d" % (i + 1),))
                for i in range(5)]
        objs.append(k8s.service("fresh", "other", ("10.7.0.1",)))
        self.api.replace_silently("services", objs)
        m = yield self.wait_rcode("fresh.other." + S, 0)
        self.assertEqual(answers(m), ["10.7.0.1"])
        # The sweep runs when the relist's last page is in: until then the
        # old data is still served, so wait for it rather than race it.
        m = yield self.wait_rcode("s100.default." + S, dns.rcode.NXDOMAIN)
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)
        m = yield self.q("s4.default." + S)
        self.assertEqual(answers(m), ["10.1.0.5"])
        self.assertGreater(self.api.count("services", "list"), before)

    @defer.inlineCallbacks
    def test_list_410_and_drops(self):
        """HTTP 410 on a list and cut connections: the thread retries and
        the last good data is served meanwhile."""
        self.api.list_gone = 1
        self.api.list_drop = 1
        self.api.expire()
        m = yield self.q("s3.default." + S)
        self.assertEqual(answers(m), ["10.1.0.4"])
        self.api.drop()
        self.api.add("services", k8s.service("late", "default",
                                             ("10.9.9.9",)))
        m = yield self.wait_rcode("late.default." + S, 0)
        self.assertEqual(answers(m), ["10.9.9.9"])
        self.assertEqual(self.api.list_gone, 0)
        self.assertEqual(self.api.list_drop, 0)

    @defer.inlineCallbacks
    def test_api_down_and_back(self):
        """The API server goes away (connections refused) and comes back
        on the same address: the last data is answered all along, with
        no SERVFAIL, and changes made while it was down show after."""
        port = self.api.httpd.server_address[1]
        self.api.stop()
        yield util.wait_for(lambda: self.k.store is not None)
        replies = []
        for i in range(100):
            m = yield self.q("s%d.default.%s" % (i, S))
            replies.append(m.rcode())
        self.assertEqual(set(replies), {dns.rcode.NOERROR})
        self.api.closing = False
        self.api.add("services", k8s.service("back", "default",
                                             ("10.8.8.8",)))
        self.api.start(port=port)
        m = yield self.wait_rcode("back.default." + S, 0)
        self.assertEqual(answers(m), ["10.8.8.8"])
        m = yield self.q("s7.default." + S)
        self.assertEqual(answers(m), ["10.1.0.8"])

    @defer.inlineCallbacks
    def test_bookmarks(self):
        self.api.bookmark_every = 0.01
        # The watch follows the list and may not be open yet: cut the
        # open watches at every poll until one has come back.
        yield util.wait_for(lambda: self.api.drop() or self.api.count(
            "namespaces", "watch") >= 2)
        self.api.add("namespaces", k8s.namespace("third"))
        yield util.wait_for(lambda: "third" in self.k.store.namespaces)

    @defer.inlineCallbacks
    def test_ready_and_metrics(self):
        port = self.app.http_port("127.0.0.1:0")
        code, body = yield util.http_get(port, "/ready")
        self.assertEqual((code, body), (200, "OK"))
        host = self.api.url.split("//")[1]
        req = metrics.families()[
            "coredns_kubernetes_rest_client_requests_total"]
        self.assertGreater(req.get(("200", "GET", host)), 0)
        lat = metrics.families()[
            "coredns_kubernetes_rest_client_request_duration_seconds"]
        self.assertGreater(lat.count(("GET", host)), 0)

    @defer.inlineCallbacks
    def test_programming_duration(self):
        hist = metrics.families()[
            "coredns_kubernetes_dns_programming_duration_seconds"]
        before = {k: hist.count((k,)) for k in (
            "cluster_ip", "headless_with_selector",
            "headless_without_selector")}
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.api.add("services", k8s.service("hh", "default", ("None",)))
        # Services and slices come from two watches: like CoreDNS, a
        # slice whose service is not known yet is not recorded.
        yield util.wait_for(lambda: ("hh", "default") in
                            self.k.store.services)
        self.api.add("endpointslices",
                     k8s.endpoint_slice("s1-x", "default", "s1", [
                         k8s.endpoint(["10.3.0.1"])], trigger=stamp),
                     k8s.endpoint_slice("hh-x", "default", "hh", [
                         k8s.endpoint(["10.3.0.2"])], trigger=stamp),
                     # No service behind it: not recorded.
                     k8s.endpoint_slice("orphan-x", "default", "orphan", [
                         k8s.endpoint(["10.3.0.3"])], trigger=stamp))
        yield util.wait_for(lambda: len(self.k.store.slices) == 3)
        self.assertEqual(hist.count(("cluster_ip",)),
                         before["cluster_ip"] + 1)
        self.assertEqual(hist.count(("headless_with_selector",)),
                         before["headless_with_selector"] + 1)
        self.assertEqual(hist.count(("headless_without_selector",)),
                         before["headless_without_selector"])


class UnsyncedTest(unittest.TestCase):
    """No API server: serving starts after startup_timeout; names in the
    zone get SERVFAIL (with the SOA), others pass on; not ready."""

    @defer.inlineCallbacks
    def test_servfail_until_synced(self):
        self.patch(wt, "BACKOFF_START", 0.01)
        self.patch(wt, "BACKOFF_MAX", 0.05)
        log = util.capture_log(self)
        api = k8s.APIServer()
        api.list_gone = 10 ** 6       # every list fails
        api.start()
        self.addCleanup(api.stop)
        api.add("namespaces", k8s.namespace("default"))
        t0 = time.monotonic()
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "        startup_timeout 200ms\n    }\n    whoami\n}\n")
            % api.url)
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertIn("starting server with unsynced Kubernetes API",
                      log.text())
        k = app.config.blocks[0].plugin("kubernetes")
        self.assertFalse(k.ready())
        m = yield util.query(app.port(), "x.default.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.SERVFAIL)
        self.assertEqual(len(m.authority), 1)
        m = yield util.query(app.port(), "example.org.")
        self.assertEqual(len(m.additional), 2)     # whoami
        api.list_gone = 0
        yield util.wait_for(k.ready)
        m = yield util.query(app.port(), "x.default.svc.cluster.local.")
        self.assertEqual(m.rcode(), dns.rcode.NXDOMAIN)


    @defer.inlineCallbacks
    def test_held_until_synced(self):
        """Names asked before the first lists are in wait for them: the
        existing one is answered, the missing one NXDOMAIN, and nothing
        is SERVFAIL (not even through cache, which would keep it)."""
        util.capture_log(self)
        api = k8s.APIServer()
        api.list_gate = threading.Event()
        api.start()
        self.addCleanup(api.stop)
        api.add("namespaces", k8s.namespace("default"))
        api.add("services", k8s.service("late", "default", ("10.3.3.3",)))
        app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "    }\n    cache 30\n}\n") % api.url, wait=False)
        k = app.config.blocks[0].plugin("kubernetes")
        asked = [util.query(app.port(), n + ".default.svc.cluster.local.")
                 for n in ("late", "gone")]
        yield util.wait_for(lambda: len(k._held or ()) == 2)
        api.list_gate.set()
        late, gone = yield defer.gatherResults(asked)
        self.assertEqual(answers(late), ["10.3.3.3"])
        self.assertEqual(gone.rcode(), dns.rcode.NXDOMAIN)
        m = yield util.query(app.port(), "late.default.svc.cluster.local.")
        self.assertEqual(answers(m), ["10.3.3.3"])


class SelectorTest(unittest.TestCase):

    @defer.inlineCallbacks
    def start(self, options):
        self.api = k8s.APIServer().start()
        self.addCleanup(self.api.stop)
        self.api.add("namespaces", k8s.namespace("a", {"team": "x"}),
                     k8s.namespace("b", {"team": "y"}))
        self.api.add("services",
                     k8s.service("web", "a", ("10.0.0.1",),
                                 labels={"app": "nginx", "env": "qa"}),
                     k8s.service("web", "b", ("10.0.0.2",),
                                 labels={"app": "nginx", "env": "prod"}),
                     k8s.service("db", "a", ("10.0.0.3",),
                                 labels={"app": "pg"}))
        self.app = yield util.start(self, (
            ".:0 {\n    kubernetes cluster.local {\n        endpoint %s\n"
            "        %s\n    }\n}\n") % (self.api.url, options))

    @defer.inlineCallbacks
    def rcodes(self, *names):
        out = []
        for n in names:
            m = yield util.query(self.app.port(), n + ".svc.cluster.local.")
            out.append(m.rcode())
        defer.returnValue(out)

    @defer.inlineCallbacks
    def test_labels(self):
        yield self.start("labels env in (qa, staging),app=nginx")
        got = yield self.rcodes("web.a", "web.b", "db.a")
        self.assertEqual(got, [0, 3, 3])
        q = [x[2] for x in self.api.requests if x[0] == "services"]
        self.assertEqual(q[0]["labelSelector"],
                         "env in (qa, staging),app=nginx")

    @defer.inlineCallbacks
    def test_namespace_labels(self):
        yield self.start("namespace_labels team=y")
        got = yield self.rcodes("web.a", "web.b")
        self.assertEqual(got, [3, 0])

    @defer.inlineCallbacks
    def test_namespaces(self):
        yield self.start("namespaces a")
        got = yield self.rcodes("web.a", "web.b", "db.a")
        self.assertEqual(got, [0, 3, 0])


def _svc(i):
    return rec.service(k8s.service("s%d" % i, "default", ("10.2.0.%d" % (
        i % 250 + 1),)))


class StoreBatchTest(unittest.TestCase):
    """Work from the watch threads is applied at most BUDGET records per
    reactor turn, in order, the rest in the next turns."""

    def setUp(self):
        self.clock = task.Clock()
        self.store = st.Store((st.SERVICES,), later=self.clock.callLater)

    def turn(self):
        """One reactor turn: run the calls due now, not those they add."""
        for call in self.clock.getDelayedCalls():
            self.clock.calls.remove(call)
            call.func(*call.args, **call.kw)

    def test_budget_per_turn(self):
        s = self.store
        s.feed("begin", st.SERVICES)
        s.feed("apply", st.SERVICES, [("LIST", _svc(i)) for i in range(600)])
        s.feed("end", st.SERVICES)
        self.assertEqual(len(s.services), feed.BUDGET)
        self.assertFalse(s.synced)
        self.turn()
        self.assertEqual(len(s.services), 2 * feed.BUDGET)
        self.turn()
        self.assertEqual(len(s.services), 600)
        self.assertTrue(s.synced)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_relist_sweeps_after_its_pages(self):
        """The sweep waits for the pages queued before it."""
        s = self.store
        s.feed("begin", st.SERVICES)
        s.feed("apply", st.SERVICES, [("LIST", _svc(i)) for i in range(10)])
        s.feed("end", st.SERVICES)
        s.feed("begin", st.SERVICES)
        s.feed("apply", st.SERVICES, [("LIST", _svc(i)) for i in range(400)])
        s.feed("end", st.SERVICES)
        while self.clock.getDelayedCalls():
            self.clock.advance(0)
        self.assertEqual(len(s.services), 400)

    def test_stop_drops_queued_work(self):
        s = self.store
        s.feed("apply", st.SERVICES, [("LIST", _svc(i)) for i in range(600)])
        s.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        s.feed("apply", st.SERVICES, [("LIST", _svc(1))])
        self.assertEqual(len(s.services), feed.BUDGET)


class ListReaderTest(unittest.TestCase):
    """A List body decoded one item at a time, whatever the chunking."""

    body = json.dumps({"kind": "ServiceList", "apiVersion": "v1",
                       "metadata": {"resourceVersion": "42",
                                    "continue": "abc"},
                       "items": [{"n": i, "s": "\u00e9" * (i % 5),
                                  "x": [1.5, None, True]}
                                 for i in range(50)]}).encode()

    def read(self, size):
        chunks = [self.body[i:i + size]
                  for i in range(0, len(self.body), size)]
        r = wt.ListReader(chunks)
        items = list(r.items())
        return r, items

    def test_chunkings(self):
        want = json.loads(self.body)
        for size in (1, 2, 7, 64, 1 << 20):
            r, items = self.read(size)
            self.assertEqual(items, want["items"])
            self.assertEqual(r.meta, want["metadata"])
            self.assertTrue(r.done)

    def test_empty_and_missing_items(self):
        for body in (b'{"metadata":{"resourceVersion":"1"},"items":[]}',
                     b'{"metadata":{"resourceVersion":"1"},"items":null}',
                     b' { "metadata" : {"resourceVersion":"1"} } '):
            r = wt.ListReader([body])
            self.assertEqual(list(r.items()), [])
            self.assertEqual(r.meta, {"resourceVersion": "1"})

    def test_cut(self):
        r = wt.ListReader([self.body[:len(self.body) // 2]])
        self.assertRaises(wt.Cut, list, r.items())


def _managed(fields):
    return [{"manager": "kubectl", "operation": "Update",
             "fieldsType": "FieldsV1", "fieldsV1": fields}]


class ManagedFieldsTest(unittest.TestCase):
    """The API server's compact bodies: managedFields is cut out before
    decoding where that is exact, and everything else decodes as
    json.loads would, whatever the chunking."""

    items = [
        {"metadata": {"name": "plain", "namespace": "ns",
                      "managedFields": _managed({"f:spec": {"f:ports": {
                          "k:{\"port\":80,\"protocol\":\"TCP\"}": {
                              ".": {}}}}})},
         "spec": {"clusterIP": "10.0.0.1"}},
        # a bracket and quotes inside its strings
        {"metadata": {"name": "tricky", "managedFields": _managed({
            'f:a"]b': {}, "k:{\"ip\":\"fd00::1]\"}": {}})},
         "spec": {"ports": [{"port": 53}]}},
        # an opening bracket, even inside a string: kept, and decoded
        {"metadata": {"name": "opening", "managedFields": _managed({
            "k:{\"ip\":\"[fd00::1]\"}": {}})},
         "spec": {}},
        # another array inside: kept, and decoded
        {"metadata": {"name": "nested",
                      "managedFields": [{"fieldsV1": {"x": [1, 2]}}]},
         "spec": {}},
        # an escaped backslash inside: kept, and decoded
        {"metadata": {"name": "backslash",
                      "managedFields": _managed({"f:a\\": {}})},
         "spec": {}},
        # the key elsewhere than last, and a string that looks like it
        {"metadata": {"managedFields": _managed({}), "name": "first",
                      "annotations": {"a": ',"managedFields":[1]'}},
         "spec": {}},
    ] * 3

    def body(self):
        return json.dumps({"kind": "ServiceList", "metadata": {
            "resourceVersion": "7"}, "items": self.items},
            separators=(",", ":")).encode()

    def test_items_as_decoded_without_managed_fields(self):
        body = self.body()
        want = json.loads(body)["items"]
        for size in (1, 3, 17, 100, 1 << 20):
            chunks = [body[i:i + size] for i in range(0, len(body), size)]
            r = wt.ListReader(chunks)
            got = list(r.items())
            self.assertEqual(r.meta, {"resourceVersion": "7"})
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                name = w["metadata"].get("name")
                if name in ("opening", "nested", "backslash", "first"):
                    self.assertEqual(g, w, size)
                    continue
                self.assertNotIn("managedFields", g["metadata"], size)
                del w["metadata"]["managedFields"]
                self.assertEqual(g, w, size)
                w["metadata"]["managedFields"] = "restored"

    def test_strip_carries_an_incomplete_value(self):
        text = '{"a":1,"managedFields":[{"x":"]'
        out, carry = wt.strip_managed(text, final=False)
        self.assertEqual((out, carry), ('{"a":1', text[6:]))
        self.assertEqual(wt.strip_managed(text, final=True), (text, ""))
        out, carry = wt.strip_managed(carry + '"}]},"b":2}', final=False)
        self.assertEqual((out, carry), ('},"b":2}', ""))
        self.assertEqual(wt.strip_managed('{"a":1,"manag', final=False),
                         ('{"a":1', ',"manag'))
        self.assertEqual(wt.strip_managed('{"a":1,"b', final=False),
                         ('{"a":1,"b', ""))


class OutageLogTest(unittest.TestCase):
    """One line when the API goes away, one when it is back."""

    def test_one_line_each_way(self):
        cap = util.capture_log(self)
        now = [100.0]
        conn = wt.Connection({}, lambda f, *a: f(*a))
        conn.clock = lambda: now[0]
        for _ in range(5):
            conn.unreachable(ConnectionRefusedError("refused"))
        now[0] += 30.04
        conn.reachable()
        conn.reachable()
        self.assertEqual(cap.lines, [
            "[WARNING] plugin/kubernetes: Kubernetes API unreachable, "
            "serving the last known data: refused",
            "[INFO] plugin/kubernetes: Kubernetes API reachable again "
            "after 30.0s"])

    def test_api_errors_once_each(self):
        cap = util.capture_log(self)
        conn = wt.Connection({}, lambda f, *a: f(*a))
        w = wt.Watcher(conn, st.Store(), st.SERVICES, lambda f, *a: f(*a),
                       *st.RESOURCES[st.SERVICES])
        w.failed(wt.APIError("HTTP 403: forbidden"))
        w.failed(wt.APIError("HTTP 403: forbidden"))
        w.failed(wt.APIError("HTTP 500: oops"))
        w.failed(wt.Cut("watch stream cut"))
        self.assertEqual(cap.lines, [
            "[ERROR] plugin/kubernetes: services: HTTP 403: forbidden",
            "[ERROR] plugin/kubernetes: services: HTTP 500: oops",
            "[WARNING] plugin/kubernetes: Kubernetes API unreachable, "
            "serving the last known data: watch stream cut"])


class StallMonitorTest(unittest.TestCase):
    """The monitor's lateness, as the histogram and the max gauge."""

    def test_lateness(self):
        # The gauge reads the newest monitor of the process: another
        # server's, left running on a busy machine, must not be it.
        self.patch(stall, "_current", [])
        clock = task.Clock()
        mon = stall.start(clock, period=0.01)
        self.addCleanup(stall.stop, mon)
        before = stall.LATENESS.count(())
        clock.advance(0.01)             # on time
        clock.advance(0.06)             # 50 ms late
        clock.advance(0.01)
        self.assertEqual(stall.LATENESS.count(()), before + 3)
        fam = stall.MAX_LATENESS.family()
        self.assertAlmostEqual(fam.samples[0].value, 0.05)
        fam = stall.MAX_LATENESS.family()     # a new interval
        self.assertEqual(fam.samples[0].value, 0.0)
        self.assertAlmostEqual(mon.worst, 0.05)
        stall.stop(mon)
        self.assertEqual(clock.getDelayedCalls(), [])
        self.assertEqual(stall.MAX_LATENESS.family().samples, [])

    def test_runs_with_the_server(self):
        """The app starts it with the server and stops it with it."""
        app = util.start(self, ".:0 {\n    whoami\n}\n")
        return app.addCallback(self._check) if isinstance(
            app, defer.Deferred) else self._check(app)

    def _check(self, app):
        self.assertTrue(app.stall.running)
        self.assertIn(app.stall, stall._current)


_LIST_READER = wt.ListReader


def _record_key(r):
    """A record's fields, for comparing two decodings of one list."""
    return tuple(tuple(e.key() for e in r.eps) if s == "eps"
                 else getattr(r, s) for s in type(r).__slots__)


class KeptListReaderTest(unittest.TestCase):
    """Lists decoded keeping only the keys the parsers read (msgspec) give
    the records ListReader gives, whatever the chunking and segment size;
    what the fast path cannot take goes to ListReader from the last item
    it decoded."""

    svc_items = [
        {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1",
                      "managedFields": _managed({"f:spec": {}}),
                      "labels": {"x": "y"}},
         "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1",
                                                          "fd00::1"],
                  "ports": [{"name": "DNS", "protocol": "UDP", "port": 53},
                            {"port": 80}],
                  "externalIPs": ["192.0.2.1"]},
         "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.9"},
                                                 {"hostname": "lb.test"}]}}},
        {"metadata": {"name": "h\u00e9", "namespace": "ns"},
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True},
         "status": {}},
        {"metadata": {"name": "ext", "namespace": "other"},
         "spec": {"type": "ExternalName", "externalName": "example.com",
                  "ports": None}},
        {"metadata": {"name": "bare"}},
    ] * 7

    slice_items = [
        {"metadata": {"name": "s1", "namespace": "ns",
                      "labels": {rec.SERVICE_NAME_LABEL: "a"},
                      "annotations": {rec.TRIGGER_TIME:
                                      "2024-01-01T00:00:00Z"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": ["10.1.0.1", "10.1.0.2"],
                        "conditions": {"ready": False},
                        "hostname": "h", "zone": "Z1",
                        "targetRef": {"kind": "Pod", "name": "p1"}},
                       {"addresses": ["10.1.0.3"]}],
         "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]},
        {"metadata": {"name": "s2", "namespace": "ns"},
         "addressType": "FQDN", "endpoints": [{"addresses": ["x.test"]}]},
    ] * 5

    pod_items = [
        {"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
         "spec": {"containers": [{"name": "c"}]},
         "status": {"podIP": "10.2.0.1", "conditions": [{"type": "Ready"}]}},
        {"metadata": {"name": "gone", "namespace": "ns",
                      "deletionTimestamp": "2024-01-01T00:00:00Z"},
         "status": {"podIP": "10.2.0.2"}},
    ] * 5

    # A custom resource's items begin with apiVersion and kind.
    import_items = [
        {"apiVersion": "multicluster.x-k8s.io/v1alpha1",
         "kind": "ServiceImport",
         "metadata": {"name": "i", "namespace": "ns"},
         "spec": {"type": "ClusterSetIP", "ips": ["10.3.0.1"],
                  "ports": [{"port": 53, "protocol": "UDP"}]}},
    ] * 4

    kinds = ((svc_items, rec.service, rec.SERVICE_KEYS),
             (slice_items, rec.endpoint_slice, rec.SLICE_KEYS),
             (slice_items, lambda o: rec.endpoint_slice(o, zonal=True),
              rec.SLICE_KEYS),
             (pod_items, rec.pod, rec.POD_KEYS),
             (import_items, rec.service_import, rec.IMPORT_KEYS),
             (svc_items, rec.namespace, rec.NAMESPACE_KEYS))

    def body(self, items, **extra):
        return json.dumps(dict({"kind": "List", "apiVersion": "v1",
                                "metadata": {"resourceVersion": "9",
                                             "continue": "c"},
                                "items": items}, **extra),
                          separators=(",", ":")).encode()

    def records(self, reader, parse):
        out = list(reader.records(parse))
        self.assertTrue(reader.done)
        return [None if r is None else _record_key(r) for r in out]

    def compare(self, body, parse, keys, sizes=(1, 13, 200, 1 << 20),
                typed=None):
        want = self.records(_LIST_READER([body]), parse)
        meta = json.loads(body)["metadata"]
        for size in sizes:
            for segment in (1, 300, wt.SEGMENT):
                self.patch(wt, "SEGMENT", segment)
                chunks = [body[i:i + size]
                          for i in range(0, len(body), size)]
                r = wt.list_reader(chunks, keys, typed)
                self.assertIsInstance(r, wt.KeptListReader)
                self.assertEqual(self.records(r, parse), want,
                                 (size, segment))
                self.assertEqual(r.meta, meta)
        return want

    def fast_only(self):
        """ListReader may not be used (the fast path took everything)."""
        def refuse(*a):
            raise AssertionError("fell back")
        self.patch(wt, "ListReader", refuse)

    def test_records_as_list_reader_gives(self):
        self.fast_only()
        for items, parse, keys in self.kinds:
            self.assertEqual(len(self.compare(self.body(items), parse,
                                              keys)), len(items))

    def test_typed_records_as_list_reader_gives(self):
        """Items decoded into Structs (typed.py) give the records the
        dict parsers give."""
        self.fast_only()
        for items, parse, kind, zonal in (
                (self.svc_items, rec.service, st.SERVICES, False),
                (self.slice_items, rec.endpoint_slice, st.SLICES, False),
                (self.slice_items,
                 lambda o: rec.endpoint_slice(o, zonal=True), st.SLICES,
                 True),
                (self.slice_items,
                 lambda o: rec.endpoint_slice(o, multicluster=True),
                 st.MC_SLICES, False),
                (self.pod_items, rec.pod, st.PODS, False),
                (self.svc_items, rec.namespace, st.NAMESPACES, False),
                (self.odd_items, rec.service, st.SERVICES, False),
                (self.odd_slices, rec.endpoint_slice, st.SLICES, False)):
            typed = st.typed(kind, zonal)
            self.assertIsNotNone(typed)
            self.assertEqual(len(self.compare(
                self.body(items), parse, st.KEYS[kind], typed=typed,
                sizes=(13, 1 << 20))), len(items))

    # Values the dict parsers take loosely (the typed ones must agree).
    odd_items = [
        {"metadata": {"name": None, "namespace": "ns",
                      "resourceVersion": 5}},
        {"metadata": {}, "spec": None, "status": None},
        {"metadata": {"name": "p"},
         "spec": {"ports": [{"port": "80", "protocol": "tcp",
                             "name": None}, {"port": 7.0}, {}],
                  "clusterIPs": [], "clusterIP": None, "type": None,
                  "publishNotReadyAddresses": 0,
                  "externalIPs": ["::ffff:1.2.3.4"]},
         "status": {"loadBalancer": {}}},
        {"metadata": {"name": "q"},
         "spec": {"clusterIPs": ["None"], "ports": [],
                  "externalName": None},
         "status": {"loadBalancer": {"ingress": []}}},
        {"metadata": {"name": "r"},
         "spec": {"clusterIPs": ["10.0.0.300", "fd00::0:1", "None", ""]},
         "status": {"loadBalancer": {"ingress": [{"ip": "", "hostname":
                                                  None}, {}]}}},
    ]

    def test_typed_ports_kept_once(self):
        """Equal port lists share one tuple; values equal across types
        (80, 80.0, True and 1) give what each gives; a full table is
        emptied."""
        from corednstw.plugins.kubernetes import typed as ty
        self.patch(ty, "_PORTS", {})
        self.patch(ty, "PORTS_MAX", 3)
        items = [{"metadata": {"name": "p%d" % i},
                  "spec": {"ports": [{"name": "A", "port": port}]}}
                 for i, port in enumerate([80, 80.0, True, 1, 80, 1.0, 2,
                                           3, 4, 80])]
        typed = st.typed(st.SERVICES)
        got = self.compare(self.body(items), rec.service, rec.SERVICE_KEYS,
                           sizes=(1 << 20,), typed=typed)
        self.assertEqual(len(got), len(items))
        self.assertLessEqual(len(ty._PORTS), 3)

    odd_slices = [
        {"metadata": {"name": "s", "labels": None, "annotations": None},
         "endpoints": None, "ports": None},
        {"metadata": {"name": "t", "labels": {}},
         "addressType": "IPv6",
         "endpoints": [{"addresses": None, "conditions": None},
                       {"addresses": ["fd00::1", "bad"],
                        "conditions": {"ready": None},
                        "targetRef": {"name": "x" * 64}, "zone": None,
                        "hostname": None},
                       {"addresses": ["10.0.0.1"],
                        "conditions": {"ready": 0},
                        "targetRef": None}]},
    ]

    def test_typed_parsers_agree_or_do_not_decode(self):
        """Each typed parser, on whatever JSON decodes into its Struct,
        gives the record its dict twin gives, or raises what it raises;
        JSON that does not decode goes to the dict parsers anyway."""
        import msgspec

        from corednstw.plugins.kubernetes import typed as ty
        variants = [None, {}, [], "x", 0, 1, [None], [{}], {"a": 1},
                    ["10.0.0.1"], [{"port": "x"}], True, [{"name": ["x"]}],
                    [{"port": 80}], [{"port": 80.0}], [{"port": True}],
                    [{"port": 1}], ["1.2.3.4"], ["1.2.3.4\u0000"],
                    ["::1"], [5], ["None"], [""]]
        cases = [
            (rec.service, ty.Service, ty.service, self.svc_items[0],
             [("metadata",), ("spec",), ("status",),
              ("spec", "ports"), ("spec", "clusterIPs"),
              ("spec", "clusterIP"), ("spec", "externalIPs"),
              ("spec", "type"), ("status", "loadBalancer"),
              ("status", "loadBalancer", "ingress")]),
            (rec.endpoint_slice, ty.EndpointSlice, ty.endpoint_slice,
             self.slice_items[0],
             [("metadata",), ("metadata", "labels"),
              ("metadata", "annotations"), ("endpoints",), ("ports",),
              ("addressType",)]),
            (rec.pod, ty.Pod, ty.pod, self.pod_items[0],
             [("metadata",), ("status",), ("status", "podIP"),
              ("metadata", "labels"), ("metadata", "deletionTimestamp")]),
        ]
        decoded = 0
        for parse, item, twin, base, paths in cases:
            dec = msgspec.json.Decoder(item)
            for path in paths:
                for value in variants:
                    obj = json.loads(json.dumps(base))
                    at = obj
                    for k in path[:-1]:
                        at = at[k]
                    at[path[-1]] = value
                    text = json.dumps(obj).encode()
                    try:
                        got = dec.decode(text)
                    except msgspec.DecodeError:
                        continue
                    decoded += 1
                    self.assertEqual(self._result_of(twin, got),
                                     self._result_of(parse, obj),
                                     (path, value))
        self.assertGreater(decoded, 50)

    @staticmethod
    def _result_of(parse, obj):
        try:
            r = parse(obj)
        except Exception as e:
            return type(e)
        return None if r is None else _record_key(r)

    def test_typed_without_msgspec(self):
        """No msgspec: no typed parser; lists take ListReader."""
        import builtins
        real = builtins.__import__

        def imp(name, *a, **kw):
            if name == "msgspec" or name.endswith(".typed") or (
                    a[2:3] and a[2] and "typed" in a[2]):
                raise ImportError(name)
            return real(name, *a, **kw)
        import sys
        self.patch(sys, "modules", {k: v for k, v in sys.modules.items()
                                    if k != "corednstw.plugins.kubernetes"
                                    ".typed"})
        self.patch(builtins, "__import__", imp)
        self.assertIsNone(st.typed(st.SERVICES))
        self.patch(wt, "_MSGSPEC", [None])
        body = self.body(self.svc_items)
        r = wt.list_reader([body], rec.SERVICE_KEYS, None)
        self.assertIsInstance(r, wt.ListReader)
        self.assertEqual(len(list(r.records(rec.service))),
                         len(self.svc_items))

    def test_empty(self):
        self.fast_only()
        self.assertEqual(self.compare(self.body([]), rec.service,
                                      rec.SERVICE_KEYS), [])

    def test_what_it_cannot_take_goes_to_list_reader(self):
        nested = {"metadata": {"name": "n"}, "spec": {"list": [
            {"metadata": {"name": "in"}}, {"metadata": {"name": "in2"}}]}}
        bodies = [
            # a cut between two objects inside an item
            self.body(self.svc_items[:3] + [nested] + self.svc_items),
            # a key after the items
            self.body(self.svc_items, zzz=1)[:-1] + b',"after":1}',
            # a value json takes and msgspec does not
            self.body(self.svc_items).replace(b'"status":{}',
                                              b'"status":{"n":NaN}', 1),
            # metadata that is no object
            self.body([{"metadata": None}] + self.svc_items),
            # not compact
            json.dumps({"metadata": {"resourceVersion": "9"},
                        "items": self.svc_items}, indent=1).encode(),
            # items null, and no items at all
            b'{"metadata":{"resourceVersion":"9"},"items":null}',
            b'{"metadata":{"resourceVersion":"9"}}',
        ]
        typed = st.typed(st.SERVICES)
        for body in bodies:
            self.compare(body, rec.service, rec.SERVICE_KEYS,
                         sizes=(7, 1 << 20))
            self.compare(body, rec.service, rec.SERVICE_KEYS,
                         sizes=(7, 1 << 20), typed=typed)
        # A shape only the dict parser takes: an array where an object
        # belongs, after items the fast path decoded.
        body = self.body(self.svc_items + [{"metadata": {"name": "z"},
                                            "spec": []}]
                         + self.svc_items)
        got = self.compare(body, rec.service, rec.SERVICE_KEYS,
                           sizes=(7, 1 << 20), typed=typed)
        self.assertEqual(len(got), 2 * len(self.svc_items) + 1)

    def test_cut_body(self):
        body = self.body(self.svc_items)
        r = wt.list_reader([body[:len(body) // 2]], rec.SERVICE_KEYS)
        self.assertRaises(wt.Cut, list, r.items())

    def test_without_msgspec(self):
        self.patch(wt, "_MSGSPEC", [None])
        body = self.body(self.svc_items)
        r = wt.list_reader([body], rec.SERVICE_KEYS)
        self.assertIsInstance(r, wt.ListReader)
        self.assertEqual(len(list(r.items())), len(self.svc_items))
        self.assertIsInstance(wt.list_reader([body]), wt.ListReader)
