"""Start a real Knot DNS (Debian's ``knot``) for integration tests.

``start(testcase, zones, notify_port=None, ixfr=False)`` writes a
configuration and the zone files into a temporary directory, runs
``knotd`` on 127.0.0.1 and a free port, waits until it answers SOA for
every zone, and stops it at test cleanup.
``start_catalog(testcase, catalog, zones, listed, notify_port)`` runs one
that generates an RFC 9432 catalog of the ``listed`` zones, and
``Knot.list_members`` changes that list (configuration reloaded).
``start_secondary(testcase, zone, primary_port, key)`` runs one that
transfers ``zone`` in from a primary, the requests signed with a TSIG
key.  Without knotd the test is skipped, except under CI=true where it
fails.
"""

import os
import shutil
import signal
import subprocess

from twisted.internet import defer
from twisted.trial import unittest

from tests.support import util
from tests.support.unbound import free_port  # noqa: F401 (shared helper)

KNOTD = shutil.which("knotd") or (
    "/usr/sbin/knotd" if os.path.exists("/usr/sbin/knotd") else None)

CONF = """\
server:
    rundir: "{dir}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{dir}/db"
log:
  - target: stderr
    any: warning
remote:
  - id: secondary
    address: 127.0.0.1@{notify_port}
acl:
  - id: transfer
    address: 127.0.0.0/8
    action: transfer
template:
  - id: default
    storage: "{dir}"
    zonefile-sync: -1
{journal}
    semantic-checks: off
{zones}"""

#: The journal without history (every transfer is whole), or with the
#: changes a reload of the zone file makes (served by IXFR).
NO_JOURNAL = "    journal-content: none"
JOURNAL = "    journal-content: changes\n    zonefile-load: difference"

SECONDARY_CONF = """\
server:
    rundir: "{dir}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{dir}/db"
log:
  - target: stderr
    any: info
key:
  - id: {keyname}
    algorithm: {algorithm}
    secret: {secret}
remote:
  - id: primary
    address: 127.0.0.1@{primary_port}
    key: {keyname}
template:
  - id: default
    storage: "{dir}"
    zonefile-sync: -1
    journal-content: none
    semantic-checks: off
zone:
  - domain: {zone}
    master: primary
"""


def require(testcase):
    """Skip without knotd, fail under CI=true."""
    if KNOTD is None:
        if os.environ.get("CI") == "true":
            testcase.fail("knotd is not installed (Debian package knot)")
        raise unittest.SkipTest("knotd is not installed")


class Knot:
    def __init__(self, directory, port, proc):
        self.dir = directory
        self.port = port
        self.proc = proc
        #: listed members -> configuration text (start_catalog's knots)
        self.make_conf = None

    def log(self):
        """What knotd wrote so far."""
        with open(os.path.join(self.dir, "knot.log")) as f:
            return f.read()

    def write_zone(self, zone, text):
        with open(os.path.join(self.dir, zone + "zone"), "w") as f:
            f.write(text)

    def reload(self):
        """Re-read the zone files (SIGHUP); knot then sends NOTIFY."""
        self.proc.send_signal(signal.SIGHUP)

    def list_members(self, listed):
        """A catalog of ``start_catalog`` that lists ``listed`` now: the
        configuration rewritten and reloaded; knot serves a new catalog
        version and sends NOTIFY."""
        with open(os.path.join(self.dir, "knot.conf"), "w") as f:
            f.write(self.make_conf(listed))
        self.reload()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@defer.inlineCallbacks
def start(testcase, zones, notify_port=None, ixfr=False):
    """Run knotd serving ``zones`` ({origin with final dot: zone text});
    ``ixfr``: it keeps the changes of each reload and serves them by
    IXFR."""
    require(testcase)
    d = util.write_files(testcase, {o + "zone": t for o, t in zones.items()})
    os.makedirs(os.path.join(d, "db"), exist_ok=True)
    port = free_port()
    zlines = "zone:\n" + "".join(
        "  - domain: %s\n    file: \"%s/%szone\"\n    acl: transfer\n%s" % (
            o, d, o, "    notify: secondary\n" if notify_port else "")
        for o in zones)
    conf = CONF.format(dir=d, port=port, notify_port=notify_port or 9,
                       zones=zlines, journal=JOURNAL if ixfr else NO_JOURNAL)
    knot = run(testcase, d, port, conf)
    for origin in zones:
        yield wait_answers(port, origin, knot.proc)
    return knot


CATALOG = """\
  - domain: {catalog}
    catalog-role: generate
    acl: transfer
    notify: secondary
"""

MEMBER = """\
  - domain: {zone}
    file: "{dir}/{zone}zone"
    catalog-role: member
    catalog-zone: {catalog}
    acl: transfer
    notify: secondary
"""


@defer.inlineCallbacks
def start_catalog(testcase, catalog, zones, listed, notify_port):
    """Run knotd as a catalog producer: the zones of ``listed`` (origins
    of ``zones``, {origin: zone text}) are served and listed in the
    catalog ``catalog`` it generates; every change is notified to
    127.0.0.1:``notify_port``."""
    require(testcase)
    d = util.write_files(testcase, {o + "zone": t for o, t in zones.items()})
    os.makedirs(os.path.join(d, "db"), exist_ok=True)
    port = free_port()

    def make_conf(members):
        return CONF.format(dir=d, port=port, notify_port=notify_port,
                           journal=NO_JOURNAL,
                           zones="zone:\n" + CATALOG.format(catalog=catalog)
                           + "".join(MEMBER.format(zone=z, dir=d,
                                                   catalog=catalog)
                                     for z in members))
    knot = run(testcase, d, port, make_conf(listed))
    knot.make_conf = make_conf
    # Knot answers a catalog over TCP only (as a secondary asks it).
    yield wait_answers(port, catalog, knot.proc, tcp=True)
    for origin in listed:
        yield wait_answers(port, origin, knot.proc)
    return knot


def start_secondary(testcase, zone, primary_port, key,
                    algorithm="hmac-sha256"):
    """Run knotd as a secondary of ``zone`` (final dot) pulling it from
    127.0.0.1:``primary_port``, signing with ``key`` (name, base64
    secret).  Returns the Knot at once: the zone arrives later."""
    require(testcase)
    d = util.write_files(testcase, {})
    os.makedirs(os.path.join(d, "db"), exist_ok=True)
    port = free_port()
    conf = SECONDARY_CONF.format(
        dir=d, port=port, primary_port=primary_port, zone=zone,
        keyname=key[0], secret=key[1], algorithm=algorithm)
    return run(testcase, d, port, conf)


def run(testcase, d, port, conf):
    """Start knotd with ``conf`` in directory ``d``; stopped at cleanup."""
    path = os.path.join(d, "knot.conf")
    with open(path, "w") as f:
        f.write(conf)
    log = open(os.path.join(d, "knot.log"), "w")
    proc = subprocess.Popen([KNOTD, "-c", path], stdout=log,
                            stderr=subprocess.STDOUT)
    knot = Knot(d, port, proc)
    testcase.addCleanup(log.close)
    testcase.addCleanup(knot.stop)
    return knot


@defer.inlineCallbacks
def wait_answers(port, origin, proc, tries=150, tcp=False):
    """Poll until the server on ``port`` answers SOA for ``origin`` (over
    TCP with ``tcp``)."""
    import dns.message
    from twisted.internet import reactor, task
    for _ in range(tries):
        if proc.poll() is not None:
            raise RuntimeError("knotd exited with %s" % proc.returncode)
        try:
            wire = util.make_query(origin, "SOA").to_wire()
            if tcp:
                data = (yield util.send_tcp(port, wire, timeout=0.3))[0]
            else:
                data = yield util.send_udp(port, wire, timeout=0.3)
            m = dns.message.from_wire(data)
            if m.rcode() == 0 and m.answer:
                return
        except Exception:
            pass
        yield task.deferLater(reactor, 0.1, lambda: None)
    raise RuntimeError("knotd does not answer for %s" % origin)
