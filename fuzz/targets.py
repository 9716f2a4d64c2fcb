"""The properties one fuzz input must keep.

``PacketTarget`` sends bytes through the real block mux of a sans-I/O
configuration (many plugins in a chain, no sockets): the input's first byte
picks the transport, the client family, the listener and whether the query
is asked twice (the second time from the cache); the rest is the message.
It must be answered with a well-formed reply carrying the query's ID, or
ignored, as CoreDNS does; UDP replies must fit the client's buffer; no
plugin may raise (a "panic" the server recovers from counts as a crash).

``CorefileTarget`` parses and sets up Corefile text as ``--check`` does:
a configuration, or a ``CorefileError`` that names a file and a line.

Any other outcome raises ``Finding`` (or lets an exception out), which the
atheris entry points report as a crash.
"""

import os
import shutil
import struct
import tempfile

import dns.exception
import dns.message
from twisted.internet import task

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.errors import CorefileError
from corednstw.service.app import App

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ZONES = os.path.join(REPO, "tests", "zones")

#: The chain every packet goes through: authoritative data (file, hosts,
#: template), middleware that rewrites questions and answers (rewrite,
#: cache, minimal, loadbalance, dns64, header, acl, any, bufsize, nsid,
#: metadata, log, errors) and the catch-alls (whoami, chaos, local).
PACKET_COREFILE = r"""example.org:53 {
    log
    errors
    metadata
    nsid fuzz
    bufsize 1232
    acl {
        block type HINFO
        filter type NULL
    }
    any
    header {
        response set ra
    }
    rewrite name regex (.*)\.rw\.example\.org {1}.example.org answer auto
    rewrite edns0 local set 0xffee abcd
    cache 30 {
        prefetch 2 10m
        serve_stale 1h
    }
    minimal
    loadbalance
    dns64 64:ff9b::/96
    root {root}
    file db.example.org
}
template.test:53 {
    template IN A template.test {
        match ^(?P<a>[0-9]+)\.template\.test\.$
        answer "{{ .Name }} 60 IN A 10.0.0.{{ .Group.a }}"
        fallthrough
    }
    template IN ANY template.test {
        rcode NXDOMAIN
        authority "template.test. 60 IN SOA ns.template.test. (
            h.template.test. 1 2 3 4 5 )"
    }
}
hosts.test:53 {
    cache
    hosts {
        10.0.0.1 a.hosts.test
        2001:db8::1 a.hosts.test
        fallthrough
    }
    whoami
}
.:53 {
    chaos fuzz author@example.org
    local
    whoami
}
.:5353 {
    cache {
        success 64
        denial 64
    }
    rewrite stop {
        name suffix .alias.test .example.org
        answer name (.*)\.example\.org {1}.alias.test
    }
    root {root}
    file db.example.org example.org
    whoami
}
"""


class Finding(AssertionError):
    """An input broke a property (a crash, for the fuzzer)."""


class _Null:
    """Log sink: the log plugin writes a line per query."""

    def write(self, s):
        pass

    def flush(self):
        pass


def quiet_log():
    """Send corednstw's log nowhere (fuzzing writes millions of lines)."""
    logger.out = _Null()


class PacketTarget:
    """The packet path of one configuration, driven without sockets."""

    def __init__(self, corefile_text=PACKET_COREFILE):
        self.dir = tempfile.mkdtemp(prefix="corednstw-fuzz-")
        shutil.copy(os.path.join(ZONES, "db.example.org"), self.dir)
        shutil.copy(os.path.join(ZONES, "db.example.org.inc"), self.dir)
        path = os.path.join(self.dir, "Corefile")
        with open(path, "w") as f:
            f.write(corefile_text.replace("{root}", self.dir))
        self.clock = task.Clock()
        self.app = App(path, reactor=self.clock, dns_port=0)
        self.app.config = cfg = self.app.load()
        muxes = self.app.build_muxes(cfg)
        self.app.muxes.extend(muxes.values())
        self.muxes = [muxes[k] for k in sorted(muxes, key=str)]

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, data):
        """One input: control byte, then the message."""
        if not data:
            return
        ctl, wire = data[0], bytes(data[1:])
        proto = "tcp" if ctl & 1 else "udp"
        client = "2001:db8::7" if ctl & 2 else "192.0.2.7"
        mux = self.muxes[(ctl >> 2) % len(self.muxes)]
        for _ in range(2 if ctl & 0x10 else 1):
            self.ask(mux, wire, proto, client)

    def ask(self, mux, wire, proto, client):
        panics = _panics()
        out = []
        mux.handle(wire, client, 40000, proto, None, out.append)
        self.clock.advance(6)   # timers a chain left behind fire now
        if _panics() != panics:
            raise Finding("a plugin raised on %r" % wire)
        if len(out) > 1:
            raise Finding("%d replies to one query %r" % (len(out), wire))
        for reply in out:
            check_reply(wire, reply, proto)


def _panics():
    return sum(metrics.PANICS.values.values())


def check_reply(query, reply, proto):
    """A reply CoreDNS could have written for ``query``."""
    if not isinstance(reply, bytes) or len(reply) < 12:
        raise Finding("short reply %r to %r" % (reply, query))
    if reply[:2] != query[:2]:
        raise Finding("reply ID differs: %r to %r" % (reply, query))
    if not reply[2] & 0x80:
        raise Finding("reply without QR: %r to %r" % (reply, query))
    limit = 65535 if proto == "tcp" else client_size(query)
    if len(reply) > limit:
        raise Finding("reply of %d bytes over %d: %r"
                      % (len(reply), limit, query))
    check_records(reply)
    if not _internet(reply):
        return      # dnspython reads CH A rdata as a name, miekg does not
    try:
        dns.message.from_wire(reply, ignore_trailing=True,
                              one_rr_per_rrset=True)
    except dns.exception.DNSException as e:
        if not _dnspython_refuses(query):
            raise Finding("unreadable reply %r to %r: %s"
                          % (reply, query, e)) from e


def check_records(reply):
    """Every record the header counts is there and readable (names,
    lengths), read as miekg reads a message."""
    counts = struct.unpack_from("!HHHH", reply, 4)
    try:
        off = 12
        for _ in range(counts[0]):
            off = w.skip_question(reply, off)
        for _ in range(sum(counts[1:])):
            off = w.skip_rr(reply, off)[0]
    except (w.FormatError, struct.error, IndexError) as e:
        raise Finding("malformed reply %r: %s" % (reply, e)) from e


def _internet(reply):
    """The reply's question is of class IN (or there is none)."""
    if reply[4:6] == b"\x00\x00":
        return True
    off = w.skip_question(reply, 12)
    return reply[off - 2:off] == b"\x00\x01"


def _dnspython_refuses(query):
    """dnspython checks EDNS options (a COOKIE's length) that miekg takes
    as they come and CoreDNS echoes: a reply is only held to dnspython's
    rules when the query passes them."""
    try:
        dns.message.from_wire(query, ignore_trailing=True)
    except dns.exception.DNSException:
        return True
    return False


def client_size(query):
    """The UDP size the query allows: its OPT's, at least 512."""
    try:
        qd, an, ns, ar = struct.unpack_from("!HHHH", query, 4)
        off = w.skip_question(query, 12)
        for _ in range(an + ns + ar):
            off, rtype, rclass = w.skip_rr(query, off)[:3]
            if rtype == w.OPT:
                return max(512, rclass)
    except (w.FormatError, struct.error, IndexError):
        pass
    return 512


class CorefileTarget:
    """Corefile text parsed and set up as ``--check`` does."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="corednstw-fuzz-")
        for name in ("db.example.org", "db.example.org.inc"):
            shutil.copy(os.path.join(ZONES, name), self.dir)
        self.path = os.path.join(self.dir, "Corefile")

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, data):
        text = bytes(data).decode("utf-8", "replace")
        app = App(self.path, dns_port=0, text=text)
        errors = []
        try:
            cfg = app.load(errors)
        except CorefileError as e:
            for err in errors or [e]:
                check_error(err, text)
            return
        app.build_muxes(cfg)


def check_error(err, text):
    """A CorefileError names where: a file and a line (0 only for a
    plugin package, which is no line of the Corefile)."""
    if not isinstance(err.line, int) or err.line < 0:
        raise Finding("error without a line: %r" % err)
    if not err.file:
        raise Finding("error without a file: %r" % err)
    if not str(err):
        raise Finding("error without a message: %r" % err)
