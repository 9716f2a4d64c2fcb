"""Clients of the encrypted transports for tests: dnspython's DoT and DoH
clients (blocking, so run in a thread: the server answers from the
reactor of the test), kdig, and a test CA (unbound.make_certs)."""

import os
import shutil
import ssl
import tempfile

import dns.message
import dns.query
from twisted.internet import threads, utils
from twisted.trial import unittest

from tests.support.unbound import make_certs

HOSTNAME = "dns.example.test"
KDIG = shutil.which("kdig")


def certs(testcase, names=(HOSTNAME,)):
    """A fresh CA and a server certificate for ``names`` and 127.0.0.1, in
    a directory removed at cleanup: (directory, ca, cert, key)."""
    d = tempfile.mkdtemp(prefix="corednstw-tls-")
    testcase.addCleanup(shutil.rmtree, d, True)
    ca, cert, key = make_certs(d, names)
    return d, ca, cert, key


def client_context(ca=None, cert=None, key=None, hostname=True):
    """A client SSL context trusting ``ca`` (with a client certificate
    when given)."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = hostname
    if not ca:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def dot(port, q, ctx, hostname=HOSTNAME, timeout=5):
    """One query over DNS over TLS with dnspython; Deferred firing with
    the answer."""
    return threads.deferToThread(
        dns.query.tls, q, "127.0.0.1", timeout=timeout, port=port,
        ssl_context=ctx, server_hostname=hostname)


def doh(port, q, ca, post=True, path="/dns-query", http_version=None,
        timeout=5):
    """One query over DNS over HTTPS with dnspython (httpx2); Deferred
    firing with the answer."""
    kw = {}
    if http_version is not None:
        kw["http_version"] = http_version
    url = "https://%s:%d%s" % (HOSTNAME, port, path)
    return threads.deferToThread(
        dns.query.https, q, url, timeout=timeout, post=post,
        bootstrap_address="127.0.0.1", verify=ca, **kw)


def require_kdig(testcase):
    if KDIG:
        return
    if os.environ.get("CI") == "true":
        testcase.fail("kdig is not installed")
    raise unittest.SkipTest("kdig (knot-dnsutils) is not installed")


def kdig(*args):
    """Run kdig; Deferred firing with (stdout text, exit code)."""
    d = utils.getProcessOutputAndValue(KDIG, args, env=os.environ)
    return d.addCallback(lambda r: (r[0].decode(), r[2]))


def answer(wire):
    return dns.message.from_wire(wire, ignore_trailing=True)
