"""errors: logs the errors of the chain (CoreDNS's errors).

A plugin reports an error by answering with a Response whose ``error`` is
the error text (CoreDNS's ServeDNS returning an err); a failed Deferred is an
error too (its exception's message is the text, and the client gets
SERVFAIL); a chain that ends without an answer is CoreDNS's "no next plugin
found".  Each is logged as ``[ERROR] plugin/errors: RCODE NAME TYPE: TEXT``
unless a ``consolidate`` pattern matches it: then matching errors are
counted over the pattern's period and one summary line is written.
"""

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.durations import format_duration
from corednstw.core.plugin import END, Plugin, is_deferred
from corednstw.core.request import Response

NAME = "errors"
MAX_REGEXP_LEN = 10000

LEVELS = {
    "warning": logger.warning,
    "error": logger.error,
    "info": logger.info,
    "debug": logger.debug,
}


class Pattern:
    """One ``consolidate DURATION REGEXP [LEVEL] [show_first]`` line."""

    __slots__ = ("period", "text", "regexp", "level", "show_first", "count",
                 "timer")

    def __init__(self, period, text, level=logger.error, show_first=False):
        self.period = period
        self.text = text
        # The Go regexp engine (and re2) only for a ``consolidate`` line.
        from corednstw.engines.expressions import goregexp
        self.regexp = goregexp.compile(text)
        self.level = level
        self.show_first = show_first
        self.count = 0
        self.timer = None


class Errors(Plugin):
    name = NAME
    passes_answers = True

    def __init__(self, patterns=()):
        self.patterns = list(patterns)
        self.stopped = False
        self._last = None

    def serve(self, req):
        result = self.next.serve(req)
        if isinstance(result, Response):
            # The error property unwrapped: one call less per query.
            if getattr(result, "_error", None) is not None:
                return self._check(result, req)
            return result
        if is_deferred(result):
            return result.addCallbacks(self._check, self._failed,
                                       callbackArgs=(req,),
                                       errbackArgs=(req,))
        return self._check(result, req)

    def _check(self, resp, req):
        if resp is None:
            self.report(req, w.SERVFAIL, "plugin/%s: no next plugin found"
                        % self._last_plugin())
        elif resp.error is not None:
            self.report(req, resp.rcode, resp.error)
        return resp

    def _failed(self, failure, req):
        text = failure.getErrorMessage() or failure.type.__name__
        self.report(req, w.SERVFAIL, text)
        resp = Response(w.SERVFAIL)
        resp.error = text
        return resp

    def _last_plugin(self):
        """The plugin whose next was the chain's end (it names the error)."""
        if self._last is None:
            p: Plugin = self
            while p.next is not None and p.next is not END:
                p = p.next
            self._last = p.name
        return self._last

    # -- logging and consolidation --------------------------------------------

    def report(self, req, rcode, text):
        level = logger.error
        for p in self.patterns:
            if p.regexp.search(text):
                if self._consolidate(p):
                    return
                level = p.level
                break
        level(NAME, "%d %s %s: %s" % (rcode, req.qname,
                                      w.type_text(req.qtype), text))

    def _consolidate(self, p):
        """Count one error for ``p``; False when it must be logged now
        (after stop, or the first one with show_first)."""
        if self.stopped:
            return False
        p.count += 1
        if p.count == 1:
            p.timer = self.reactor.callLater(max(p.period, 0.0),
                                                self._summary, p)
            return not p.show_first
        return True

    def _summary(self, p):
        p.timer = None
        cnt, p.count = p.count, 0
        if cnt == 0:
            return
        if cnt > 1 or not p.show_first:
            p.level(NAME, "%d errors like '%s' occurred in last %s"
                    % (cnt, p.text, format_duration(p.period)))

    def start(self):
        self.stopped = False

    def stop(self):
        """Write what is pending now (CoreDNS does so at shutdown)."""
        self.stopped = True
        for p in self.patterns:
            if p.timer is not None and p.timer.active():
                p.timer.cancel()
                self._summary(p)


def setup(d, block):
    """``errors [stdout] { stacktrace; consolidate ... }``."""
    for target in d.between(0, 1):
        if target != "stdout":
            raise d.error("invalid log file: %s" % target)
    patterns = []
    d.read_options({
        "stacktrace": lambda c: block.settings.update(stacktrace=True),
        "consolidate": lambda c: patterns.append(_consolidate(c)),
        None: _unknown,
    }, unknown=None)
    return Errors(patterns)


def _unknown(c):
    """CoreDNS's words for an option it does not know (they name it
    twice)."""
    raise c.error("Syntax error: Unexpected token '%s', expecting "
                  "'Unknown field %s'" % (c.name, c.name))


def _consolidate(c):
    """``consolidate DURATION REGEXP [LEVEL] [show_first]``."""
    args = c.between(2, 4)
    period = c.duration(args[0])
    if len(args[1]) > MAX_REGEXP_LEN:
        raise c.error("regex pattern too long: %d > %d"
                      % (len(args[1]), MAX_REGEXP_LEN))
    from corednstw.engines.expressions import goregexp
    try:
        goregexp.compile(args[1])
    except goregexp.RegexpError as e:
        raise c.error(str(e)) from e
    level = None
    show_first = False
    for a in args[2:]:
        if a in LEVELS:
            if level is not None:
                raise c.error("multiple log levels specified in consolidate")
            if show_first:
                raise c.error("log level must come before show_first in "
                              "consolidate")
            level = LEVELS[a]
        elif a == "show_first":
            show_first = True
        else:
            raise c.error("unknown option in consolidate: %s" % a)
    return Pattern(period, args[1], level or logger.error, show_first)
