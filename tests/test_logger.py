"""The log's writer: lines never wait for the reader; a full buffer drops
lines and says how many; warnings clients can provoke are rate-limited."""

import os

from twisted.internet import task
from twisted.trial import unittest

from corednstw.core import logger
from tests.support import util


def pipe(testcase):
    r, w = os.pipe()
    testcase.addCleanup(os.close, r)
    testcase.addCleanup(os.close, w)
    return r, w


def fill(fd):
    """Fill the pipe until a write would block: the reader has stalled."""
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"f" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(fd, True)


def read_all(fd, until):
    """What the pipe holds, read until ``until`` is in it."""
    os.set_blocking(fd, True)
    data = b""
    while until not in data:
        data += os.read(fd, 1 << 16)
    return data


class WriterTest(unittest.TestCase):

    def test_stalled_reader_drops_and_counts(self):
        """Nobody reads the full pipe: the writer thread blocks, the 8 KiB
        buffer fills; every put returns at once and the lines beyond are
        dropped and counted."""
        r, w = pipe(self)
        fill(w)
        writer = logger.Writer(w, limit=8192)
        before = logger.DROPPED_LINES.get()
        line = b"x" * 99 + b"\n"
        for _ in range(2000):
            writer.put(line)
        dropped = logger.DROPPED_LINES.get() - before
        self.assertEqual(dropped, 2000 - 8192 // 100)
        self.assertEqual(writer.dropped, dropped)
        self.assertFalse(writer.flush(0.05))
        # The reader comes back: the next line follows a notice of the
        # lines lost, and everything queued is written.
        got = read_all(r, b"x" * 10)
        writer.put(b"last\n")
        got += read_all(r, b"last\n")
        self.assertTrue(writer.flush(10))
        self.assertIn(b"[WARNING] %d log lines dropped: the log output is "
                      b"not read fast enough\nlast\n" % dropped, got)
        self.assertEqual(got.count(line) + dropped, 2000)

    def test_lines_in_order_and_whole(self):
        r, w = pipe(self)
        writer = logger.Writer(w)
        lines = [b"%d %s\n" % (i, b"y" * (i % 300)) for i in range(500)]
        for line in lines:
            writer.put(line)
        self.assertEqual(read_all(r, lines[-1]), b"".join(lines))
        self.assertTrue(writer.flush(10))

    def test_failed_write_is_dropped(self):
        r, w = os.pipe()
        os.close(r)
        writer = logger.Writer(w)
        self.addCleanup(os.close, w)
        writer.put(b"nobody\n")         # EPIPE: lost, not raised
        self.assertTrue(writer.flush(10))
        self.assertEqual(writer.size, 0)


class LimitedTest(unittest.TestCase):

    def test_one_line_per_interval(self):
        log = util.capture_log(self)
        clock = task.Clock()
        limited = logger.Limited("proxyproto", 10.0, clock.seconds)
        for i in range(5):
            limited.warning("bad %d" % i)
        clock.advance(9.9)
        limited.warning("bad 5")
        self.assertEqual(log.lines, ["[WARNING] plugin/proxyproto: bad 0"])
        clock.advance(0.1)
        limited.warning("bad 6")
        limited.warning("bad 7")
        clock.advance(10)
        limited.warning("bad 8")
        self.assertEqual(log.lines[1:], [
            "[WARNING] plugin/proxyproto: bad 6 (5 more like it in the "
            "last 10s not logged)",
            "[WARNING] plugin/proxyproto: bad 8 (1 more like it in the "
            "last 10s not logged)"])
