"""Log lines as CoreDNS writes them: ``[LEVEL] plugin/NAME: message``.

Written straight to the process's real standard output (``sys.__stdout__``):
twistd redirects ``sys.stdout`` into its own log, which would add a
timestamp prefix CoreDNS does not have.  Tests swap ``out`` for a buffer.

While serving (``write_in_background``), a write never waits for the
reader: a stalled stdout pipe (a log shipper that stopped reading) would
otherwise stop the reactor and every query with it.  Lines go into a
bounded buffer that a thread of their own writes out; when the buffer is
full, lines are dropped, counted in
``coredns_corednstw_log_lines_dropped_total``, and a ``[WARNING] N log
lines dropped`` line takes their place once there is room again.  The
descriptor itself is not made non-blocking: it is shared with whoever
started the server (a shell, a supervisor, the worker processes), and the
flag would change it for all of them.
"""

import atexit
import collections
import os
import sys
import threading
import time

from corednstw.core import metrics

out = None
#: When False, debug lines are dropped (the ``debug`` plugin turns them on).
debug_enabled = False
quiet = False

#: Bytes of log lines held for a slow reader before lines are dropped.
BUFFER_LIMIT = 1 << 20
#: Lines are written in batches of at most this many bytes, of whole
#: lines: a pipe write this small is atomic, so the lines of processes
#: sharing the pipe (multisocket workers) never mix.
BATCH = 4096
#: How long an exit waits for the buffered lines to be written.
EXIT_WAIT = 2.0

DROPPED_LINES = metrics.counter(
    "coredns_corednstw_log_lines_dropped_total",
    "Counter of log lines dropped because the log output was not read "
    "fast enough.")

_writer = None


class Writer:
    """The lines bound for one descriptor, written by a thread."""

    def __init__(self, fd, limit=BUFFER_LIMIT):
        self.fd = fd
        self.limit = limit
        self.pending = collections.deque()
        self.size = 0           # bytes pending or being written
        self.dropped = 0        # lines dropped since the last notice
        self.busy = False
        # Reentrant: a signal handler may log while the thread it
        # interrupted is inside put().
        lock = threading.RLock()
        self.wake = threading.Condition(lock)
        self.idle = threading.Condition(lock)
        self.thread = None

    def put(self, data):
        """Queue ``data`` (whole lines); drop it when the buffer is full."""
        with self.wake:
            if self.size + len(data) > self.limit:
                self.dropped += 1
                DROPPED_LINES.inc()
                return
            if self.dropped:
                self._append(b"[WARNING] %d log lines dropped: the log "
                             b"output is not read fast enough\n"
                             % self.dropped)
                self.dropped = 0
            self._append(data)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="log writer", daemon=True)
                self.thread.start()
            self.wake.notify()

    def _append(self, data):
        self.pending.append(data)
        self.size += len(data)

    def _run(self):
        pending = self.pending
        while True:
            with self.wake:
                while not pending:
                    self.busy = False
                    self.idle.notify_all()
                    self.wake.wait()
                self.busy = True
                batch = [pending.popleft()]
                n = len(batch[0])
                while pending and n + len(pending[0]) <= BATCH:
                    n += len(pending[0])
                    batch.append(pending.popleft())
            self._write(b"".join(batch))
            with self.wake:
                self.size -= n

    def _write(self, data):
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except InterruptedError:
                continue
            except OSError:
                return          # a full disk, a closed pipe: lines lost
            # (as they were when the write raised in the reactor)

    def flush(self, timeout=EXIT_WAIT):
        """Wait up to ``timeout`` seconds for every queued line to be
        written; False if some are still waiting."""
        deadline = time.monotonic() + timeout
        with self.idle:
            while self.pending or self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.idle.wait(left)
        return True


def write_in_background():
    """Serve mode: from now on lines go through a Writer, never blocking
    the caller (see the module's docstring)."""
    global _writer
    stream = sys.__stdout__
    if _writer is not None or stream is None:
        return
    try:
        stream.flush()
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    _writer = Writer(fd)


def flush(timeout=EXIT_WAIT):
    """Before the process ends (or forks): the queued lines written,
    waiting ``timeout`` seconds at most."""
    if _writer is not None:
        _writer.flush(timeout)


def _after_fork():
    # The child has no writer thread, and the parent writes what was
    # queued: the child starts an empty buffer of its own.
    global _writer
    if _writer is not None:
        _writer = Writer(_writer.fd, _writer.limit)


os.register_at_fork(after_in_child=_after_fork)
atexit.register(flush)


def _write(line):
    if out is None and _writer is not None:
        _writer.put((line + "\n").encode("utf-8", "backslashreplace"))
        return
    stream = out if out is not None else sys.__stdout__
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Limited:
    """Warnings a client can cause at will (one per bad datagram): at
    most one line per ``interval`` seconds, the next one saying how many
    were left out, so a flood of bad packets cannot flood the log."""

    def __init__(self, plugin, interval=10.0, clock=time.monotonic):
        self.plugin = plugin
        self.interval = interval
        self.clock = clock
        self.after = None
        self.suppressed = 0

    def warning(self, msg):
        now = self.clock()
        if self.after is not None and now < self.after:
            self.suppressed += 1
            return
        if self.suppressed:
            msg = "%s (%d more like it in the last %gs not logged)" % (
                msg, self.suppressed, self.interval)
            self.suppressed = 0
        self.after = now + self.interval
        warning(self.plugin, msg)


def _fmt(level, plugin, msg):
    if plugin:
        return "[%s] plugin/%s: %s" % (level, plugin, msg)
    return "[%s] %s" % (level, msg)


def info(plugin, msg):
    if not quiet:
        _write(_fmt("INFO", plugin, msg))


def warning(plugin, msg):
    _write(_fmt("WARNING", plugin, msg))


def error(plugin, msg):
    _write(_fmt("ERROR", plugin, msg))


def debug(plugin, msg):
    if debug_enabled:
        _write(_fmt("DEBUG", plugin, msg))


def fatal(plugin, msg):
    """Written out before returning: the process ends next."""
    _write(_fmt("FATAL", plugin, msg))
    flush()


def raw(line):
    """A line with no level prefix (the log plugin's query lines)."""
    _write(line)


def observer_factory():
    """twistd's --logger: Twisted's own events in CoreDNS's style.

    Informational chatter ("Starting protocol", "reactor class: ...") is
    not something CoreDNS prints, so only warnings and errors pass, as
    ``[WARNING] ...``/``[ERROR] ...`` lines without a timestamp.
    """
    from twisted.logger import ILogObserver, LogLevel, formatEvent
    from zope.interface import provider

    @provider(ILogObserver)
    def observe(event):
        level = event.get("log_level")
        failure = event.get("log_failure")
        if failure is None and (level is None or level < LogLevel.warn):
            return
        text = formatEvent(event)
        name = "ERROR" if failure is not None or level >= LogLevel.error \
            else "WARNING"
        if failure is not None:
            text = (text + "\n" if text else "") + failure.getTraceback()
        _write("[%s] %s" % (name, text.rstrip("\n")))
    return observe
