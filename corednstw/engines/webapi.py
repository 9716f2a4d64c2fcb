"""JSON over HTTP(S) with twisted.web's Agent, for plugins that read a
service's REST API (nomad, azure, clouddns) without blocking the reactor
and without a vendor SDK.

``Client(reactor)`` keeps a pool of persistent connections; every call
returns a Deferred and gives up after ``timeout`` seconds.  A status other
than 2xx fails with ``HTTPError``, whose text is the status and the body's
first line (what the SDKs put in their errors).  ``unix:///path`` URLs
reach an HTTP server on a UNIX socket (Nomad's task API socket): the API
path is what follows the socket's path from ``/v1/`` on.
"""

import base64
import json
import time
from io import BytesIO
from urllib.parse import urlencode

from twisted.internet import defer
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.python.failure import Failure
from twisted.web.client import (
    Agent,
    FileBodyProducer,
    HTTPConnectionPool,
    readBody,
)
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory
from zope.interface import implementer

DEFAULT_TIMEOUT = 10.0
UNIX = "unix://"


class HTTPError(Exception):
    """A response with a status other than 2xx."""

    def __init__(self, code, body):
        self.code = code
        self.body = body
        text = body.decode("utf-8", "replace").strip().split("\n")[0]
        Exception.__init__(self, "Unexpected response code: %d (%s)" % (
            code, text[:200]))


@implementer(IAgentEndpointFactory)
class _UnixSocket:
    """Every URL to one UNIX socket."""

    def __init__(self, reactor, path):
        self.reactor = reactor
        self.path = path

    def endpointForURI(self, uri):
        return UNIXClientEndpoint(self.reactor, self.path)


class Client:
    """A small JSON client on one connection pool."""

    def __init__(self, reactor, timeout=DEFAULT_TIMEOUT):
        self.reactor = reactor
        self.timeout = timeout
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.agent = Agent(reactor, connectTimeout=timeout, pool=self.pool)
        self.unix_agents = {}

    def url(self, address, path, query=None):
        """``address`` (a base URL, or unix:///socket) joined with
        ``path`` and the ``query`` pairs."""
        url = address.rstrip("/") + path
        if query:
            url += ("&" if "?" in url else "?") + urlencode(query)
        return url

    def _agent_for(self, url):
        """The agent for ``url`` and the URL to give it: unix:///sock/path
        URLs are not known to Agent, they go to the socket as http://."""
        if not url.startswith(UNIX):
            return self.agent, url
        rest = url[len(UNIX):]
        path, sep, tail = rest.partition("?")
        sock, _, api = ("/" + path.lstrip("/")).partition("/v1/")
        agent = self.unix_agents.get(sock)
        if agent is None:
            agent = self.unix_agents[sock] = Agent.usingEndpointFactory(
                self.reactor, _UnixSocket(self.reactor, sock),
                pool=self.pool)
        return agent, "http://localhost/v1/" + api + sep + tail

    def request(self, method, url, headers=None, body=None):
        """Deferred (code, body bytes)."""
        agent, url = self._agent_for(url)
        h = Headers({k: [v] for k, v in (headers or {}).items()})
        producer = None
        if body is not None:
            producer = FileBodyProducer(BytesIO(body))
        d = agent.request(method.encode(), url.encode(), h, producer)
        d.addCallback(_read)
        d.addTimeout(self.timeout, self.reactor)
        return d

    def get_json(self, url, headers=None):
        """Deferred of the decoded body of a GET (HTTPError unless 2xx)."""
        return self.request("GET", url, headers).addCallback(_decode)

    def post_form(self, url, fields, headers=None):
        """Deferred of the decoded body of a form POST."""
        h = dict(headers or {})
        h["Content-Type"] = "application/x-www-form-urlencoded"
        body = urlencode(fields).encode()
        return self.request("POST", url, h, body).addCallback(_decode)

    def post_json(self, url, obj, headers=None):
        """Deferred of the decoded body of a POST of ``obj`` as JSON."""
        h = dict(headers or {})
        h["Content-Type"] = "application/json"
        body = json.dumps(obj).encode()
        return self.request("POST", url, h, body).addCallback(_decode)

    def close(self):
        return self.pool.closeCachedConnections()


def _read(response):
    return readBody(response).addCallback(lambda b: (response.code, b))


def _decode(result):
    code, body = result
    if code < 200 or code >= 300:
        raise HTTPError(code, body)
    try:
        return json.loads(body or b"null")
    except ValueError as e:
        raise ValueError("invalid JSON in response: %s" % e) from e


class Token:
    """An OAuth access token kept until shortly before it expires.

    ``fetch()`` returns a Deferred of the token endpoint's JSON
    (``access_token``, ``expires_in``); concurrent ``get()`` calls share one
    request."""

    #: Renew this many seconds before the token expires.
    MARGIN = 60.0

    def __init__(self, fetch, clock=time.time):
        self.fetch = fetch
        self.clock = clock
        self.value = None
        self.expires = 0.0
        self._waiting = None

    def get(self):
        if self.value is not None and self.clock() < self.expires:
            return defer.succeed(self.value)
        if self._waiting is None:
            self._waiting = []
            d = defer.maybeDeferred(self.fetch)
            d.addBoth(self._got)
        waiter = defer.Deferred()
        self._waiting.append(waiter)
        return waiter

    def _got(self, result):
        waiting, self._waiting = self._waiting, None
        if isinstance(result, Failure):
            for w in waiting:
                w.errback(result)
            return None
        try:
            self.value = result["access_token"]
            self.expires = self.clock() + float(
                result.get("expires_in", 3600)) - self.MARGIN
        except (KeyError, TypeError, ValueError) as e:
            for w in waiting:
                w.errback(ValueError("no access token in the token "
                                     "response: %s" % e))
            return None
        for w in waiting:
            w.callback(self.value)
        return None


def b64url(data):
    """Unpadded base64url, as JWTs spell their parts."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rs256_jwt(key, header, claims):
    """A JWT of ``claims`` signed with the RSA private ``key`` (RS256):
    the assertions OAuth token endpoints take from service accounts and
    certificate-holding clients (RFC 7523)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("private key is not an RSA key (RS256)")
    signing = "%s.%s" % (b64url(json.dumps(dict(header, alg="RS256",
                                                  typ="JWT")).encode()),
                         b64url(json.dumps(claims).encode()))
    sig = key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing + "." + b64url(sig)
