"""Test helpers: start the real service on port 0 and talk to it over the
wire, from inside trial's reactor (no blocking clients: the server runs in
the same thread)."""

import os
import socket
import struct
import sys
import tempfile

import dns.message
import dns.rdataclass
import dns.rdatatype
from twisted.internet import defer, protocol, reactor
from twisted.internet.error import TimeoutError

from corednstw.core import logger
from corednstw.service.app import App

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

#: The twistd beside this interpreter (the service as a real process).
TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
#: The console scripts: CoreDNS's command line and node-cache's.
COREDNS = os.path.join(os.path.dirname(sys.executable), "coredns")
NODE_CACHE = os.path.join(os.path.dirname(sys.executable), "node-cache")


def free_port(host="127.0.0.1"):
    """A port free for both UDP and TCP on ``host``."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(50):
        u = socket.socket(fam, socket.SOCK_DGRAM)
        u.bind((host, 0))
        port = u.getsockname()[1]
        t = socket.socket(fam, socket.SOCK_STREAM)
        try:
            t.bind((host, port))
        except OSError:
            continue
        finally:
            t.close()
            u.close()
        return port
    raise OSError("no free port")


class LogCapture:
    """Collects corednstw log lines while a test runs."""

    def __init__(self):
        self.lines = []

    def write(self, s):
        self.lines.extend(x for x in s.split("\n") if x)

    def flush(self):
        pass

    def text(self):
        return "\n".join(self.lines)


def capture_log(testcase):
    """Route corednstw's log to a buffer for the test's duration."""
    cap = LogCapture()
    old = logger.out
    logger.out = cap
    testcase.addCleanup(setattr, logger, "out", old)
    return cap


def write_files(testcase, files):
    """Write {relative path: text} into a fresh temporary directory."""
    d = tempfile.mkdtemp(prefix="corednstw-test-")
    for rel, text in files.items():
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    testcase.addCleanup(_rmtree, d)
    return d


def rewrite(path, text):
    """Replace the file at ``path`` with ``text`` in one step.

    The text goes to a temporary file in the same directory, which then
    takes the file's place (``os.replace``): a plugin polling the file sees
    the old content or the new, never an empty or half-written file.
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=".rewrite-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _rmtree(d):
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def build_plugins(testcase, corefile, name, files=None):
    """Load Corefile text (no sockets, nothing started) and return the
    plugins named ``name`` of every block, with the directory the
    Corefile and ``files`` were written to."""
    d = write_files(testcase, dict(files or {}, Corefile=corefile))
    cfg = App(os.path.join(d, "Corefile"), dns_port=0).load()
    return [p for p in cfg.plugins() if p.name == name], d


def start(testcase, corefile, files=None, wait=True):
    """Start an App for Corefile text (ports 0), stopped at test cleanup.

    ``files`` are written beside the Corefile.  Returns the App once every
    plugin's start() has fired (a Deferred); with ``wait`` false, at once
    (listening, plugins maybe still starting).
    """
    d = write_files(testcase, dict(files or {}, Corefile=corefile))
    path = os.path.join(d, "Corefile")
    if logger.out is None:
        capture_log(testcase)   # keep the banner out of trial's output
    app = App(path, reactor=reactor, dns_port=0)
    app.config = app.load()
    started = app.startService()
    testcase.addCleanup(app.stopService)
    if isinstance(started, defer.Deferred) and wait:
        return started.addCallback(lambda _: app)
    return defer.succeed(app)


class _UDPClient(protocol.DatagramProtocol):
    def __init__(self, data, addr, timeout, count):
        self.data = data
        self.addr = addr
        self.d = defer.Deferred()
        self.replies = []
        self.count = count
        self.timer = reactor.callLater(timeout, self._timeout)

    def startProtocol(self):
        for datagram in ([self.data] if isinstance(self.data, bytes)
                         else self.data):
            self.transport.write(datagram, self.addr)

    def datagramReceived(self, data, addr):
        self.replies.append(data)
        if len(self.replies) >= self.count and not self.d.called:
            self.timer.cancel()
            self.d.callback(self.replies if self.count > 1 else data)

    def _timeout(self):
        if not self.d.called:
            self.d.errback(TimeoutError("no UDP answer"))


def send_udp(port, data, host="127.0.0.1", timeout=5, count=1, sport=0,
             source=None):
    """Send raw bytes (or a list of datagrams, in order) over UDP from one
    socket (bound to source port ``sport`` and address ``source`` when
    given); Deferred firing with the reply bytes (a list when count > 1)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    client = _UDPClient(data, (host, port), timeout, count)
    iface = source or ("::" if fam == socket.AF_INET6 else "")
    listening = reactor.listenUDP(sport, client, interface=iface)

    def done(r):
        listening.stopListening()
        return r
    return client.d.addBoth(done)


class _TCPClient(protocol.Protocol):
    def __init__(self, messages, count):
        self.messages = messages
        self.count = count
        self.buf = b""
        self.replies = []
        self.d = defer.Deferred()

    def connectionMade(self):
        self.transport.write(b"".join(
            struct.pack("!H", len(m)) + m for m in self.messages))

    def dataReceived(self, data):
        self.buf += data
        while len(self.buf) >= 2:
            n = struct.unpack("!H", self.buf[:2])[0]
            if len(self.buf) < 2 + n:
                break
            self.replies.append(self.buf[2:2 + n])
            self.buf = self.buf[2 + n:]
        if len(self.replies) >= self.count and not self.d.called:
            self.transport.loseConnection()
            self.d.callback(self.replies)

    def connectionLost(self, reason):
        if not self.d.called:
            self.d.callback(self.replies)


def send_tcp(port, messages, host="127.0.0.1", count=None, timeout=5,
             sport=0, source=None):
    """Send framed messages on one TCP connection (from source port
    ``sport`` and address ``source`` when given); Deferred firing with the
    list of replies (after ``count`` replies or when the server closes)."""
    if isinstance(messages, bytes):
        messages = [messages]
    client = _TCPClient(messages, len(messages) if count is None else count)
    factory = protocol.ClientFactory.forProtocol(lambda: client)
    bind = (source or host, sport) if sport or source else None
    reactor.connectTCP(host, port, factory, timeout=timeout,
                       bindAddress=bind)
    timer = reactor.callLater(timeout, lambda: client.d.called or
                              client.d.errback(TimeoutError("TCP")))

    def done(r):
        if timer.active():
            timer.cancel()
        return r
    return client.d.addBoth(done)


def make_query(name, rdtype="A", rdclass="IN", **kw):
    """A dnspython query message (id kept for matching)."""
    return dns.message.make_query(name, rdtype, rdclass, **kw)


@defer.inlineCallbacks
def query(port, name, rdtype="A", proto="udp", host="127.0.0.1", **kw):
    """Ask ``name``/``rdtype`` and return the parsed dnspython answer."""
    q = make_query(name, rdtype, **kw) if isinstance(name, str) else name
    wire = q.to_wire()
    if proto == "udp":
        data = yield send_udp(port, wire, host)
    else:
        data = (yield send_tcp(port, wire, host))[0]
    defer.returnValue(dns.message.from_wire(data, ignore_trailing=True))


def http_get(port, path, host="127.0.0.1"):
    """GET over real HTTP; Deferred firing with (status, body text)."""
    from twisted.web.client import Agent, readBody
    agent = Agent(reactor)
    d = agent.request(b"GET", ("http://%s:%d%s" % (host, port, path)).encode())

    def got(resp):
        return readBody(resp).addCallback(
            lambda body: (resp.code, body.decode()))
    return d.addCallback(got)


def rrs(msg, section="answer"):
    """Sorted text lines of a section, for exact comparisons."""
    out = []
    for rrset in getattr(msg, section):
        for rd in rrset:
            out.append("%s %d %s %s %s" % (
                rrset.name, rrset.ttl, dns.rdataclass.to_text(rrset.rdclass),
                dns.rdatatype.to_text(rrset.rdtype), rd.to_text()))
    return sorted(out)


def wait_for(predicate, timeout=10.0, interval=0.01):
    """Deferred that fires when ``predicate()`` is true (polled on the
    reactor; fails after ``timeout``).  For conditions, never fixed sleeps."""
    d = defer.Deferred()
    deadline = reactor.seconds() + timeout

    def check():
        try:
            ok = predicate()
        except Exception as e:
            d.errback(e)
            return
        if ok:
            d.callback(ok)
        elif reactor.seconds() > deadline:
            d.errback(TimeoutError("condition not met"))
        else:
            reactor.callLater(interval, check)
    check()
    return d


class Direct:
    """A configuration built without sockets: queries go straight into the
    block mux (sans-I/O table tests of the whole chain)."""

    def __init__(self, testcase, corefile, files=None, clock=None):
        """``clock``: a task.Clock the App and its plugins use as their
        reactor (timers), instead of the real one."""
        d = write_files(testcase, dict(files or {}, Corefile=corefile))
        self.app = App(os.path.join(d, "Corefile"), reactor=clock or reactor,
                       dns_port=0)
        self.app.config = cfg = self.app.load()
        self.muxes = self.app.build_muxes(cfg)
        self.app.muxes.extend(self.muxes.values())
        self.mux = next(iter(self.muxes.values()))

    def ask(self, wire, proto="udp", client="127.0.0.1", port=40000,
            mux=None):
        """Raw reply bytes (None when the server stays silent).  For answers
        that arrive later (Deferreds) use ``ask_async``."""
        out = []
        (mux or self.mux).handle(wire, client, port, proto, None,
                                 out.append)
        return out[0] if out else None

    def ask_async(self, wire, proto="udp", client="127.0.0.1", port=40000):
        d = defer.Deferred()
        self.mux.handle(wire, client, port, proto, None, d.callback)
        return d

    def query(self, name, rdtype="A", proto="udp", **kw):
        """Parsed dnspython reply to a query for name/rdtype."""
        q = make_query(name, rdtype, **kw)
        data = self.ask(q.to_wire(), proto)
        if data is None:
            return None
        return dns.message.from_wire(data, ignore_trailing=True)


class Stub:
    """A stand-in for the rest of a chain: ``serve`` answers with
    ``fn(req)`` (a Response, a Deferred or None).  Set it as a plugin's
    ``next`` to test middleware against any answer."""

    name = "stub"

    def __init__(self, fn):
        self.fn = fn

    def serve(self, req):
        return self.fn(req)


def keep_panics(testcase):
    """Panics a test provokes on purpose stay out of the process-wide
    coredns_panics_total that other tests read."""
    from corednstw.core import metrics
    saved = dict(metrics.PANICS.values)

    def restore():
        metrics.PANICS.values.clear()
        metrics.PANICS.values.update(saved)
    testcase.addCleanup(restore)
