"""Start a real etcd (Debian's ``etcd-server``) for integration tests.

``start(testcase)`` runs ``etcd`` on 127.0.0.1 with free client and peer
ports and a data directory in the test's temporary directory, waits until
it answers, and stops it at cleanup.  ``Etcd.put`` and ``Etcd.delete``
write through etcd's JSON gateway (short blocking calls to a local
server).  ``stop()`` and ``start()`` on the same object restart it on the
same ports with the same data.  Without etcd the test is skipped, except
under CI=true where it fails.
"""

import base64
import json
import os
import shutil
import subprocess
import urllib.request

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from tests.support import util
from tests.support.util import free_port

ETCD = shutil.which("etcd") or (
    "/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)


def require(testcase):
    """Skip without etcd, fail under CI=true."""
    if ETCD is None:
        if os.environ.get("CI") == "true":
            testcase.fail("etcd is not installed (Debian package "
                          "etcd-server)")
        raise unittest.SkipTest("etcd is not installed")


def _b64(text):
    if isinstance(text, str):
        text = text.encode("utf-8")
    return base64.b64encode(text).decode("ascii")


class Etcd:
    def __init__(self, directory):
        self.dir = directory
        self.port = free_port()
        self.peer_port = free_port()
        self.proc = None
        self.log = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        """Run etcd; a Deferred firing once it answers."""
        url = self.url
        peer = "http://127.0.0.1:%d" % self.peer_port
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "test", "--data-dir",
             os.path.join(self.dir, "data"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", peer,
             "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "test=" + peer],
            stdout=self.log, stderr=subprocess.STDOUT)
        return self._wait()

    @defer.inlineCallbacks
    def _wait(self, tries=200):
        for _ in range(tries):
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited with %s: %s" % (
                    self.proc.returncode, self.read_log()[-2000:]))
            try:
                self.call("/v3/kv/range", {"key": _b64("/")})
                return
            except OSError:
                pass
            yield task.deferLater(reactor, 0.05, lambda: None)
        raise RuntimeError("etcd does not answer")

    def read_log(self):
        with open(os.path.join(self.dir, "etcd.log")) as f:
            return f.read()

    def call(self, path, payload):
        req = urllib.request.Request(
            self.url + path, data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def put(self, key, value, lease=0):
        """Store ``value`` (a dict is written as JSON) at ``key``."""
        if not isinstance(value, (str, bytes)):
            value = json.dumps(value)
        payload = {"key": _b64(key), "value": _b64(value)}
        if lease:
            payload["lease"] = str(lease)
        return self.call("/v3/kv/put", payload)

    def delete(self, key):
        return self.call("/v3/kv/deleterange", {"key": _b64(key)})

    def grant(self, ttl):
        """A new lease of ``ttl`` seconds; its id."""
        return int(self.call("/v3/lease/grant", {"TTL": str(ttl)})["ID"])

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


@defer.inlineCallbacks
def start(testcase):
    """A running Etcd, stopped at cleanup."""
    require(testcase)
    e = Etcd(util.write_files(testcase, {}))
    testcase.addCleanup(e.stop)
    yield e.start()
    return e
