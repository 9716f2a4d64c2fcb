"""pprof: profiling data of the running server under /debug/pprof.

``pprof [ADDRESS] { block [RATE] }`` (default localhost:6053).  Go's
profile names are kept, with what the Python process has in their place:

- ``/debug/pprof/profile?seconds=N``: cProfile of the reactor thread (where
  every query is answered) for N seconds, as a pstats file; ``format=text``
  prints it, ``format=collapsed`` samples every thread's stack 100 times a
  second instead and answers collapsed stacks for flame graphs.
- ``/debug/pprof/goroutine``: the stack of every thread now.
- ``/debug/pprof/heap`` (and ``allocs``): the largest allocation sites
  seen by tracemalloc, or a census of live objects by type when it is off;
  ``seconds=N`` traces allocations for N seconds first.
- ``/debug/pprof/cmdline``: the command line.

The profiler is only on while a profile is taken; waiting never blocks the
reactor (deferLater, or a thread of the reactor's pool for sampling).
"""

import cProfile
import gc
import io
import marshal
import pstats
import sys
import threading
import time
import traceback
import tracemalloc
from collections import Counter
from types import FrameType
from typing import Optional

from twisted.internet import task, threads
from twisted.web import resource, server, util
from zope.interface import implementer

from corednstw.core import logger
from corednstw.core.interfaces import IHTTPEndpointOwner
from corednstw.core.plugin import Plugin

DEFAULT_ADDRESS = "localhost:6053"
PATH = "/debug/pprof"

#: Go's default duration of a CPU profile.
DEFAULT_SECONDS = 30
#: Sampling frequency of ``format=collapsed`` (Go samples at 100 Hz too).
SAMPLE_HZ = 100
#: Lines of a text profile or of the heap report.
TOP = 50

INDEX = """\
/debug/pprof/

Types of profiles available:
profile    CPU profile of the reactor thread (?seconds=N, default 30;
           ?format=pstats (default), text or collapsed)
goroutine  stack traces of all current threads
heap       allocation sites (tracemalloc) or live objects by type
           (?seconds=N traces allocations for N seconds)
allocs     the same as heap
cmdline    the command line of this process
"""


def _arg(request, name, default=None):
    values = request.args.get(name.encode())
    return values[0].decode("utf-8", "replace") if values else default


def _seconds(request, default):
    """The ``seconds`` argument: a positive integer, or ``default``."""
    text = _arg(request, "seconds")
    if text is None:
        return default
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _text(request, body, status=200):
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"x-content-type-options", b"nosniff")
    return body.encode()


def _finish(request, body):
    """Write ``body`` unless the client has gone away meanwhile."""
    if request.finished or request._disconnected:
        return
    request.write(body)
    request.finish()


def _frame_name(frame):
    code = frame.f_code
    return "%s:%s" % (code.co_filename.rsplit("/", 1)[-1], code.co_name)


def thread_stacks():
    """Every thread's stack, Go's goroutine?debug=2 in Python terms."""
    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        ident = t.ident
        if ident is None:       # not started
            continue
        frame = frames.get(ident)
        if frame is None:
            continue
        out.append("thread %d %r%s:\n" % (
            ident, t.name, " (daemon)" if t.daemon else ""))
        out.extend(traceback.format_stack(frame))
        out.append("\n")
    return "".join(out)


def sample(seconds, hz=SAMPLE_HZ):
    """Collapsed stacks of every thread but this one, sampled ``hz`` times
    a second for ``seconds``: ``thread;outer;...;inner COUNT`` lines."""
    me = threading.get_ident()
    names = {}
    counts: Counter[str] = Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        frame: Optional[FrameType]
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            if ident not in names:
                names = {t.ident: t.name for t in threading.enumerate()}
            stack = []
            while frame is not None:
                stack.append(_frame_name(frame))
                frame = frame.f_back
            stack.append(names.get(ident, str(ident)))
            counts[";".join(reversed(stack))] += 1
        time.sleep(1.0 / hz)
    return "".join("%s %d\n" % (s, n) for s, n in sorted(counts.items()))


def heap_report(snapshot):
    """The top allocation sites of a tracemalloc snapshot."""
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    out = ["heap profile: %d bytes in %d allocation sites (tracemalloc)\n"
           % (total, len(stats))]
    for s in stats[:TOP]:
        out.append("%10d B %8d objects  %s\n" % (s.size, s.count,
                                               s.traceback))
    return "".join(out)


def object_census():
    """Live objects counted by type (tracemalloc off): the gc's view."""
    counts = Counter(type(o).__name__ for o in gc.get_objects())
    out = ["heap profile: %d objects tracked by the gc (tracemalloc is off:"
           " ask with ?seconds=N for allocation sites)\n"
           % sum(counts.values())]
    for name, n in counts.most_common(TOP):
        out.append("%10d  %s\n" % (n, name))
    return "".join(out)


class _Page(resource.Resource):
    isLeaf = True

    def __init__(self, plugin):
        resource.Resource.__init__(self)
        self.plugin = plugin


class Index(_Page):
    def render_GET(self, request):
        if request.path == PATH.encode():
            return util.redirectTo(PATH.encode() + b"/", request)
        return _text(request, INDEX)


class Cmdline(_Page):
    def render_GET(self, request):
        return _text(request, "\x00".join(sys.argv))


class Goroutine(_Page):
    def render_GET(self, request):
        return _text(request, thread_stacks())


class Profile(_Page):
    """CPU profile: cProfile on the reactor thread, or stack sampling."""

    def render_GET(self, request):
        try:
            seconds = _seconds(request, DEFAULT_SECONDS)
        except ValueError:
            return _text(request, "Bad Request: invalid seconds\n", 400)
        fmt = _arg(request, "format", "pstats")
        if fmt not in ("pstats", "text", "collapsed"):
            return _text(request, "Bad Request: unknown format\n", 400)
        p = self.plugin
        if p.profiling:
            return _text(request, "Could not enable CPU profiling: "
                         "profiling already in use\n", 500)
        p.profiling = True
        if fmt == "collapsed":
            d = threads.deferToThreadPool(
                p.reactor, p.reactor.getThreadPool(), sample, seconds)
            d.addCallback(lambda body: _text(request, body))
        else:
            prof = cProfile.Profile()
            prof.enable()
            d = task.deferLater(p.reactor, seconds, self._stop, prof,
                                request, fmt)
        d.addBoth(self._done, request)
        return server.NOT_DONE_YET

    def _stop(self, prof, request, fmt):
        prof.disable()
        if fmt == "text":
            out = io.StringIO()
            stats = pstats.Stats(prof, stream=out)
            stats.sort_stats("cumulative").print_stats(TOP)
            return _text(request, out.getvalue())
        prof.create_stats()
        request.setHeader(b"content-type", b"application/octet-stream")
        request.setHeader(b"content-disposition",
                          b'attachment; filename="profile"')
        return marshal.dumps(prof.stats)

    def _done(self, body, request):
        self.plugin.profiling = False
        if not isinstance(body, bytes):
            logger.error("pprof", "profile failed: %s" % body)
            body = _text(request, "profile failed\n", 500)
        _finish(request, body)


class Heap(_Page):
    """tracemalloc's top allocation sites, now or after ``seconds``."""

    def render_GET(self, request):
        try:
            seconds = _seconds(request, 0)
        except ValueError:
            return _text(request, "Bad Request: invalid seconds\n", 400)
        if not seconds:
            if tracemalloc.is_tracing():
                return _text(request, heap_report(
                    tracemalloc.take_snapshot()))
            return _text(request, object_census())
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        d = task.deferLater(self.plugin.reactor, seconds, self._report,
                            request, started)
        d.addBoth(lambda body: _finish(request, body))
        return server.NOT_DONE_YET

    def _report(self, request, started):
        snapshot = tracemalloc.take_snapshot()
        if started and not self.plugin.rate:
            tracemalloc.stop()
        return _text(request, heap_report(snapshot))


@implementer(IHTTPEndpointOwner)
class Pprof(Plugin):
    name = "pprof"
    in_chain = False
    runs_in = "supervisor"

    def __init__(self, address, rate=0):
        self.address = address
        self.rate = rate
        self.profiling = False
        self._traced = False

    def http_endpoints(self):
        heap = Heap(self)
        pages = {"": Index(self), "/": Index(self), "/cmdline": Cmdline(self),
                 "/profile": Profile(self), "/goroutine": Goroutine(self),
                 "/heap": heap, "/allocs": heap}
        return [(self.address, PATH + sub, page)
                for sub, page in pages.items()]

    def start(self):
        """``block``: allocation tracing on from the start (RATE frames
        per traceback), so /heap always has allocation sites."""
        if self.rate and not tracemalloc.is_tracing():
            tracemalloc.start(self.rate)
            self._traced = True

    def stop(self):
        if self._traced:
            tracemalloc.stop()
            self._traced = False


def setup(d, block):
    args = d.between(0, 1)
    address = args[0] if args else DEFAULT_ADDRESS
    d.host_port(address)    # Go's net.SplitHostPort: a port is required
    p = Pprof(address)
    d.read_options({"block": lambda c: setattr(p, "rate", _rate(c))})
    return p


def _rate(c):
    """``block [RATE]``: frames kept per allocation traceback, 1 when
    not given.  CoreDNS refuses a bad RATE naming the value alone, not
    Go's reason, and so does a non-positive one here."""
    args = c.between(0, 1)
    if not args:
        return 1
    error = "property 'block' invalid integer value '{text}'"
    return c.integer(args[0], lo=1, error=error, range_error=error)
