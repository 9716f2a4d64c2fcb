"""Accept what CoreDNS accepts, refuse what it refuses.

The cases are the table rows of CoreDNS 1.14's own setup tests (data in
``../shared/setupparity``, see its README.md; read from there, never
copied): a snippet of Corefile for one plugin and whether CoreDNS's test
expects setup to fail.  Each snippet is wrapped in a server block, its
fixtures written beside the Corefile, and the configuration built as
``--check`` builds it (no sockets): refused means a CorefileError (or an
OSError, a file that cannot be read).  Any other exception is a crash and
always fails.

Every disagreement fails the plugin's test, unless the case is listed in
DIFFERENCES with the reason we decide otherwise (each is also under "Bugs
and differences" on the plugin's page); a listed case that agrees again
fails too, so the table stays true.
"""

import json
import os

from twisted.trial import unittest

from corednstw.core.errors import CorefileError
from corednstw.service.app import App
from tests.support import util
from tests.support.unbound import make_certs

#: The shared data beside the repository; COREDNSTW_SHARED names another
#: place (a worktree checked out one level deeper, for instance).
SHARED = os.environ.get("COREDNSTW_SHARED",
                        os.path.join(util.REPO, "..", "shared"))
ROOT = os.path.join(SHARED, "setupparity")

_KUBECONFIG = ("The kubeconfig file named is not there: it is read at "
               "setup, as CoreDNS's setup reads it when it builds the "
               "client; its test runs the option parser alone "
               "(docs/plugins/kubernetes.md).")
_DATADOG = ("Datadog tracing is not built in; trace datadog is refused "
            "at setup (docs/plugins/trace.md).")

#: Cases we decide otherwise on purpose, by id: the reason.
DIFFERENCES = {
    "plugin/kubernetes/setup_test.go:23": _KUBECONFIG,
    "plugin/kubernetes/setup_test.go:24": _KUBECONFIG,
    "plugin/kubernetes/setup_test.go:25": _KUBECONFIG,
    # The data lost the path the Go test appends ("keylog " + a file in
    # its temporary directory): the bare keylog left is refused, by
    # CoreDNS as well (TestTLSKeyLog "No Path").
    "plugin/tls/tls_test.go:14": (
        "The data holds keylog without the file the Go test appends; a "
        "bare keylog is refused here as by CoreDNS (docs/plugins/tls.md)."),
    "plugin/trace/setup_test.go:4": _DATADOG,
    "plugin/trace/setup_test.go:5": _DATADOG,
    "plugin/trace/setup_test.go:6": _DATADOG,
    "plugin/trace/trace_test.go:1": _DATADOG,
}

#: Server block keys the Go test computes (the data says "dynamic"): the
#: first one it tries.
KEYS = {
    "plugin/shed/setup_test.go:4": ["tls://.:853"],
}

def _ca_pem(d):
    """The text of a fresh test CA certificate, made in ``d``."""
    with open(make_certs(d, ("dns.example",))[0]) as fh:
        return fh.read()


#: Fixtures the Go test writes itself (the data holds none): case id ->
#: name -> a function of the directory making the content.
WRITTEN = {
    # TestParseACMETLS copies its test CA to roots.pem (ca_root).
    "plugin/tls/acme_test.go:0": {"roots.pem": _ca_pem},
}


#: The environment CoreDNS's kubernetes setup tests take for granted:
#: they run its option parser alone, which never looks for a cluster.
#: Inside one, these variables name the API server.
IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1",
              "KUBERNETES_SERVICE_PORT": "443"}


def load_cases():
    with open(os.path.join(ROOT, "cases.json")) as fh:
        return json.load(fh)


def corefile(case):
    """The snippet in a server block: the test's keys when it set literal
    ones, else the root zone."""
    keys = KEYS.get(case["id"], case.get("server_block_keys"))
    if not isinstance(keys, list) or not keys:
        keys = ["."]
    return "%s {\n%s\n}\n" % (" ".join(keys), case["input"])


def write_fixtures(testcase, case):
    """A fresh directory with the case's Corefile and fixtures: a name
    ending in "/" is a directory; text is written back to the bytes it
    was read from (a test may hold bytes that are not UTF-8)."""
    d = util.write_files(testcase, {})
    files = dict(case.get("fixtures") or {}, Corefile=corefile(case))
    for name, make in WRITTEN.get(case["id"], {}).items():
        files[name] = make(d)
    for name, text in files.items():
        path = os.path.join(d, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text is not None:
            with open(path, "wb") as fh:
                fh.write(text.encode("utf-8", "surrogateescape"))
    return d


def refused(testcase, case):
    """Whether building the case's Corefile is refused; raises on a crash
    (any exception but a CorefileError or OSError)."""
    d = write_fixtures(testcase, case)
    here = os.getcwd()
    # Relative file names in the snippets are read from the directory the
    # fixtures are in, as CoreDNS's tests read them from theirs.
    os.chdir(d)
    try:
        App(os.path.join(d, "Corefile"), dns_port=0).load()
    except (CorefileError, OSError):
        return True
    finally:
        os.chdir(here)
    return False


class SetupParity(unittest.TestCase):

    def check(self, cases):
        util.capture_log(self)
        if cases[0]["plugin"] == "kubernetes":
            self.patch(os, "environ", dict(os.environ, **IN_CLUSTER))
        wrong = []
        for case in cases:
            try:
                got = refused(self, case)
            except Exception as e:
                wrong.append("%s: crashed: %r\n    %s" % (
                    case["id"], e, case["input"].replace("\n", "\n    ")))
                continue
            differs = got != case["should_err"]
            listed = case["id"] in DIFFERENCES
            if differs and not listed:
                wrong.append("%s: %s, CoreDNS %s\n    %s" % (
                    case["id"], "refused" if got else "accepted",
                    "refuses" if case["should_err"] else "accepts",
                    case["input"].replace("\n", "\n    ")))
            elif listed and not differs:
                wrong.append("%s: listed in DIFFERENCES but agrees now"
                             % case["id"])
        if wrong:
            self.fail("%d of %d case(s):\n  %s" % (
                len(wrong), len(cases), "\n  ".join(wrong)))


def _method(cases):
    def test(self):
        self.check(cases)
    test.__doc__ = "%s: %d case(s)" % (cases[0]["plugin"], len(cases))
    return test


def _tests():
    attrs = {}
    if not os.path.isdir(ROOT):
        def test_cases(self):
            raise unittest.SkipTest("no setup cases next to the repository "
                                    "(../shared/setupparity)")
        attrs["test_cases"] = test_cases
        return attrs
    by_plugin = {}
    for case in load_cases():
        by_plugin.setdefault(case["plugin"], []).append(case)
    for plugin, cases in sorted(by_plugin.items()):
        attrs["test_" + plugin] = _method(cases)

    def test_differences_name_cases(self):
        """A renamed or dropped case cannot leave a stale entry."""
        ids = {c["id"] for c in load_cases()}
        self.assertEqual(set(DIFFERENCES) - ids, set())
    attrs["test_differences_name_cases"] = test_differences_name_cases
    return attrs


SetupParityTest = type("SetupParityTest", (SetupParity,), _tests())
