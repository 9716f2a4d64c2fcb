"""CoreDNS's own test cases, asked of the real server over the wire.

The cases are data taken from CoreDNS's tests (plugin/file,
plugin/kubernetes, test/ and a few plugin unit tests); they live beside
the repository in ``../shared/conformance`` (its README.md describes the
format) and are read from there, never copied.  Each group of cases that
shares a Corefile gets one server, started on port 0 (the kubernetes
groups with a test API server serving the case's cluster); every case's
query goes over the wire (TCP unless the case needs UDP, see
``conformance.over_udp``) and its reply is compared as
``tests.support.conformance`` says.  A group fails with every case that
differs, by name.
"""

import json
import os
import re
import threading

from twisted.internet import defer
from twisted.trial import unittest

from tests.support import conformance, util
from tests.support import k8s_apiserver as k8s

#: The shared data beside the repository; COREDNSTW_SHARED names another
#: place (a worktree checked out one level deeper, for instance).
SHARED = os.environ.get("COREDNSTW_SHARED",
                        os.path.join(util.REPO, "..", "shared"))
ROOT = os.path.join(SHARED, "conformance")
FIXTURES = os.path.join(ROOT, "fixtures")
KINDS = {kind: plural for plural, (_, kind) in k8s.KIND_NAMES.items()}


def _no_opt_instead(case):
    """The case as we answer it: everything it expects but the OPT."""
    case = dict(case, expect_no_edns=True)
    del case["expect_edns_option"]
    return case


#: Cases where we answer otherwise on purpose, by name: (why, the case
#: rewritten to what we answer instead, which is checked in its place).
#: Each is listed under "Bugs and differences" on its plugin's page.
DIFFERENCES = {
    "test/rewrite_test.go:TestRewrite/testEdns0": (
        "The query has no OPT record; rewrite's edns0 rule adds one for "
        "the plugins after it.  CoreDNS then answers the client with that "
        "OPT (its option included); RFC 6891 section 7 says a responder "
        "MUST NOT put an OPT record in the reply to a query without one, "
        "and that is kept here (docs/plugins/rewrite.md).",
        _no_opt_instead),
}


def cluster(fixture):
    """A fixture file's objects by the API server's kind names."""
    with open(os.path.join(FIXTURES, fixture)) as fh:
        objects = json.load(fh)
    out = {}
    for obj in objects:
        out.setdefault(KINDS[obj["kind"]], []).append(obj)
    return out


class Conformance(unittest.TestCase):
    """One test per group of cases sharing a server."""

    @defer.inlineCallbacks
    def check_group(self, members):
        first = members[0]
        text = first["corefile"].replace("{{PORT}}", "0").replace(
            "{{FIXTURES}}", FIXTURES)
        if first.get("k8s_fixture"):
            api = k8s.APIServer()
            if "k8s_api_never_syncs" in first.get("requires", ()):
                # Lists wait for this gate, opened only when the API
                # server stops: the cluster never syncs.
                api.list_gate = threading.Event()
            api.start()
            self.addCleanup(api.stop)
            for kind, objs in cluster(first["k8s_fixture"]).items():
                api.load(kind, objs)
            text = text.replace("{{K8S_API_ENDPOINT}}", api.url)
        util.capture_log(self)
        app = yield util.start(self, text)
        port = app.port()
        failed = []
        for case in members:
            wire = conformance.query(case).to_wire()
            source = case.get("client_source_ip")
            if conformance.over_udp(case):
                reply = yield util.send_udp(port, wire, source=source)
            else:
                reply = (yield util.send_tcp(port, wire, source=source))[0]
            if case["name"] in DIFFERENCES:
                case = DIFFERENCES[case["name"]][1](case)
            found = conformance.problems(case, reply)
            if found:
                failed.append("%s (%s %s):\n    %s" % (
                    case["name"], case["qname"], case["qtype"],
                    "\n    ".join(found)))
        if failed:
            self.fail("%d of %d case(s) differ:\n  %s" % (
                len(failed), len(members), "\n  ".join(failed)))


def _method(members):
    def test(self):
        return self.check_group(members)
    test.__doc__ = "%s (%d case(s))" % (members[0]["name"], len(members))
    return test


def _slug(name):
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")[:60]


def _suite(name):
    """The test class of ``cases/<name>.json``: a method per group."""
    attrs = {}
    if os.path.isdir(ROOT):
        for i, members in enumerate(conformance.groups(
                conformance.load(ROOT, name))):
            attrs["test_%02d_%s" % (i, _slug(members[0]["name"]))] = \
                _method(members)
    else:
        def test_cases(self):
            raise unittest.SkipTest("no conformance cases next to the "
                                    "repository (../shared/conformance)")
        attrs["test_cases"] = test_cases
    return type(name.capitalize() + "Test", (Conformance,), attrs)


FileTest = _suite("file")
MiscTest = _suite("misc")
KubernetesTest = _suite("kubernetes")


class DifferencesTest(unittest.TestCase):

    def test_each_difference_names_a_case(self):
        """A renamed or dropped case cannot leave a stale entry."""
        if not os.path.isdir(ROOT):
            raise unittest.SkipTest("no conformance cases next to the "
                                    "repository (../shared/conformance)")
        names = {c["name"] for f in conformance.FILES
                 for c in conformance.load(ROOT, f)}
        self.assertEqual(len(names), 305)
        self.assertEqual(set(DIFFERENCES) - names, set())
