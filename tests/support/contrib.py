"""Helpers for the tests of the add-on packages under contrib/ (installed
into the venv by scripts/test.sh): whether one is installed, and the
upstream README's Corefiles run through ``twistd coredns --check``."""

import importlib.util
import os
import subprocess

from tests.support import util
from tests.support.util import TWISTD

#: The skip reason when a package is missing.
README_CHECK = "pip install ./contrib/%s (scripts/test.sh installs it)"


def installed(module):
    """True when the package's module can be imported."""
    return importlib.util.find_spec(module) is not None


def check_examples(testcase, examples, files=None):
    """Each Corefile of ``examples`` (name -> text) passes ``twistd -n
    coredns --check``, run as a user runs it: exit 0, nothing printed.
    ``files`` are written beside the Corefiles."""
    for name, text in examples.items():
        d = util.write_files(testcase, dict(files or {}, Corefile=text))
        r = subprocess.run(
            [TWISTD, "-n", "--pidfile=", "coredns", "--check", "-c",
             os.path.join(d, "Corefile")],
            capture_output=True, text=True, cwd=d, timeout=60)
        testcase.assertEqual((r.returncode, r.stdout), (0, ""),
                             "example %r:\n%s" % (name, r.stderr))


def upstreams(testcase, n):
    """``n`` scriptable upstreams (tests.support.upstream), stopped at
    cleanup."""
    from tests.support.upstream import Upstream
    ups = []
    for _ in range(n):
        up = Upstream().start()
        testcase.addCleanup(up.stop)
        ups.append(up)
    return ups


def answer(address, rcode=None):
    """An upstream handler: an A record with ``address`` for every
    question, or (``rcode`` given) that rcode and no records."""
    import dns.message
    import dns.rrset

    def handler(q, proto):
        r = dns.message.make_response(q)
        if rcode is not None:
            r.set_rcode(rcode)
        else:
            r.answer.append(dns.rrset.from_text(q.question[0].name, 30,
                                                "IN", "A", address))
        return r
    return handler
