"""cancel: give up on a query whose chain has not answered in time.

``cancel [TIMEOUT]`` (default 5001ms, just past the usual 5 s client
timeout).  When the rest of the chain answers at once nothing happens.
When it answers later (a Deferred), a timer runs; when it fires the
Deferred is cancelled: a plugin that gave its Deferred a canceller stops
its work and may still answer (CoreDNS's plugins see their context
cancelled and return SERVFAIL); otherwise the client gets SERVFAIL, the
answer CoreDNS writes when the chain returns an error without writing.
"""

from twisted.internet import defer

from corednstw.core.plugin import Plugin, is_deferred

DEFAULT = 5.001


class Cancel(Plugin):
    name = "cancel"
    passes_answers = True

    def __init__(self, timeout):
        self.timeout = timeout

    def serve(self, req):
        result = self.next.serve(req)
        if not is_deferred(result):
            return result
        if result.called:
            return result
        timer = self.reactor.callLater(self.timeout, result.cancel)

        def done(value):
            if timer.active():
                timer.cancel()
            return value

        result.addBoth(done)
        result.addErrback(_cancelled)
        return result


def _cancelled(failure):
    """A cancelled chain wrote nothing: the server answers SERVFAIL."""
    failure.trap(defer.CancelledError)
    return None


def setup(d, block):
    """``cancel [TIMEOUT]``: no block, a positive Go duration."""
    d.no_block()
    args = d.between(0, 1)
    if not args:
        return Cancel(DEFAULT)
    # CoreDNS quotes the TIMEOUT it cannot read, not Go's reason.
    timeout = d.duration(args[0], error='invalid duration: "{text}"')
    if timeout <= 0:
        raise d.error('invalid negative duration: "%s"' % args[0])
    return Cancel(timeout)
