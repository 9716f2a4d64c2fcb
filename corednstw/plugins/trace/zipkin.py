"""A Zipkin v2 HTTP reporter on the reactor: batches of JSON spans.

It keeps CoreDNS's reporter options (zipkin-go's HTTP reporter): a span
joins a batch; the batch is posted when it holds ``max_batch`` spans or
every ``interval`` seconds; past ``max_backlog`` spans waiting the oldest
are dropped.  One POST at a time; a failed POST is logged and its spans
dropped, as zipkin-go does.  Nothing blocks the reactor and no thread is
started.
"""

import json
from collections import deque
from io import BytesIO
from typing import Any

from twisted.internet import defer, task
from twisted.web.http_headers import Headers

from corednstw.core import logger

#: zipkin-go's defaults.
MAX_BACKLOG = 1000
MAX_BATCH = 100
INTERVAL = 1.0
#: Seconds a POST may take.
TIMEOUT = 5.0


class Reporter:
    """Collects spans (dicts in Zipkin's v2 JSON model) and posts them."""

    def __init__(self, reactor, url, max_backlog=0, max_batch=0,
                 interval=0.0):
        self.reactor = reactor
        self.url = url.encode()
        self.max_backlog = max_backlog or MAX_BACKLOG
        self.max_batch = max_batch or MAX_BATCH
        self.interval = interval or INTERVAL
        self.spans: deque[dict[str, Any]] = deque()
        self.sent = 0
        self.dropped = 0
        self._loop = None
        self._agent = None
        self._pool = None
        self._posting = None

    def start(self):
        from twisted.web.client import Agent, HTTPConnectionPool
        self._pool = HTTPConnectionPool(self.reactor, persistent=True)
        self._pool.maxPersistentPerHost = 1
        self._agent = Agent(self.reactor, connectTimeout=TIMEOUT,
                            pool=self._pool)
        self._loop = task.LoopingCall(self.flush)
        self._loop.clock = self.reactor
        self._loop.start(self.interval, now=False)

    @defer.inlineCallbacks
    def stop(self):
        """Post what is left (one last try), then close the connection."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if self._posting is not None:
            yield self._posting
        if self.spans and self._agent is not None:
            yield self.flush()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            yield pool.closeCachedConnections()
        self._agent = None

    def report(self, span):
        """Queue one finished span (cheap: an append)."""
        spans = self.spans
        spans.append(span)
        if len(spans) > self.max_backlog:
            spans.popleft()
            self.dropped += 1
        if len(spans) >= self.max_batch and self._posting is None \
                and self._agent is not None:
            self.flush()

    def flush(self):
        """Post one batch unless a POST is still under way."""
        if self._posting is not None or not self.spans or \
                self._agent is None:
            return self._posting
        spans = self.spans
        batch = [spans.popleft()
                 for _ in range(min(self.max_batch, len(spans)))]
        d = self._post(batch)
        self._posting = d

        def done(_):
            self._posting = None
        d.addBoth(done)
        return d

    def _post(self, batch):
        from twisted.web.client import FileBodyProducer, readBody
        body = json.dumps(batch, separators=(",", ":")).encode()
        headers = Headers({b"content-type": [b"application/json"]})
        agent = self._agent
        assert agent is not None    # flush() posts only with an agent
        d = agent.request(b"POST", self.url, headers,
                                FileBodyProducer(BytesIO(body)))
        d.addTimeout(TIMEOUT, self.reactor)

        def answered(resp):
            if not 200 <= resp.code < 300:
                logger.warning("trace", "failed the request: %d %s" % (
                    resp.code, resp.phrase.decode("latin-1")))
            else:
                self.sent += len(batch)
            return readBody(resp)

        def failed(f):
            self.dropped += len(batch)
            logger.warning("trace", "failed to send the request: %s"
                           % f.getErrorMessage())
        d.addCallback(answered)
        d.addErrback(failed)
        return d
