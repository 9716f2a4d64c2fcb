"""The HTTP client of the watches: plain GETs over http.client.

Importing the ``kubernetes`` package costs 0.5-0.7 s of CPU (its
generated models, the dynamic client, kube_config's dependencies), and
at start-up that time is taken from the reactor through the GIL and
delays /ready.  The watches only need authenticated GETs, so a
configuration that is a bearer token or a client certificate (an
``endpoint``, a kubeconfig without exec or auth-provider plugins, the
in-cluster service account) is served here with the standard library's
http.client (already loaded by Twisted; urllib3's import alone was
another 20 ms of the start); anything else still goes through the
kubernetes client (``Fallback``).
"""

import base64
import http.client
import os
import select
import socket
import ssl
import tempfile
import threading
import time
import zlib
from urllib.parse import urlencode, urlsplit

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: How often an in-cluster token file is read again (kubelet rotates it).
TOKEN_REREAD = 60.0


class Unsupported(Exception):
    """The configuration needs the kubernetes client."""


class Token:
    """A bearer token, fixed or read from a file now and then."""

    def __init__(self, value=None, path=None, clock=time.monotonic):
        self.value = value
        self.path = path
        self.clock = clock
        self.read_at = None
        self.lock = threading.Lock()

    def get(self):
        if self.path is None:
            return self.value
        with self.lock:
            now = self.clock()
            if self.read_at is None or now - self.read_at >= TOKEN_REREAD:
                with open(self.path) as f:
                    self.value = f.read().strip()
                self.read_at = now
            return self.value


#: Kept-alive connections waiting for the next request, at most.
IDLE_MAX = 8


class Direct:
    """GETs against ``host``, over kept-alive connections (one per
    request in flight: the kinds list and watch in parallel)."""

    def __init__(self, host, token=None, ca=None, ca_data=None,
                 cert=None, key=None, verify=True):
        self.host = host.rstrip("/")
        u = urlsplit(self.host)
        self.address = (u.hostname, u.port)
        self.token = token
        self.user_agent = "corednstw"
        self.ctx = None
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca, cadata=ca_data)
            if not verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if cert:
                _load_chain(ctx, cert, key)
            self.ctx = ctx
        self.idle = []
        self.lock = threading.Lock()

    def get(self, path, query, timeout):
        """The response of GET ``path?query``, body not read."""
        headers = {"Accept": "application/json",
                   "Accept-Encoding": "gzip",
                   "User-Agent": self.user_agent}
        token = self.token.get() if self.token is not None else None
        if token:
            headers["Authorization"] = "Bearer " + token
        if query:
            path += "?" + urlencode(query)
        connect, read = timeout
        conn = self._connection(connect)
        try:
            conn.request("GET", path, headers=headers)
            conn.sock.settimeout(read)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        return Response(self, conn, resp)

    def _connection(self, connect):
        """An idle connection the server has not closed, else a new one
        (connected at its first request)."""
        with self.lock:
            while self.idle:
                conn = self.idle.pop()
                if not _dropped(conn.sock):
                    return conn
                conn.close()
        host, port = self.address
        if self.ctx is not None:
            return _HTTPSConnection(host, port, timeout=connect,
                                    context=self.ctx)
        return http.client.HTTPConnection(host, port, timeout=connect)

    def put(self, conn):
        """Keep ``conn`` for the next request (its response was read)."""
        with self.lock:
            if len(self.idle) < IDLE_MAX:
                self.idle.append(conn)
                return
        conn.close()


class _HTTPSConnection(http.client.HTTPSConnection):
    """http.client's HTTPS connection, the server's name handed to ssl as
    ASCII bytes.  Given a str, ssl converts it with the idna codec, whose
    first use imports encodings.idna, stringprep and unicodedata: about
    10 ms of every start, for a name that is an address or plain ASCII.
    The bytes are the same the codec makes of an ASCII name; a name that
    is not ASCII still takes the codec."""

    def connect(self):
        http.client.HTTPConnection.connect(self)
        name = self._tunnel_host or self.host
        if name.isascii():
            name = name.encode("ascii")
        self.sock = self._context.wrap_socket(self.sock,
                                              server_hostname=name)


class Response:
    """What the watches read of a response (urllib3's names): ``status``,
    ``data``, ``stream``, ``release_conn`` and ``shutdown``; a gzip body
    is inflated on the way."""

    def __init__(self, client, conn, resp):
        self.client = client
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        gz = (resp.getheader("Content-Encoding") or "").lower() == "gzip"
        self.inflate = _inflater() if gz else None
        self.done = False
        self._data = None

    @property
    def data(self):
        """The whole body (read once)."""
        if self._data is None:
            self._data = b"".join(self.stream())
        return self._data

    def stream(self, amt=65536, decode_content=True):
        """The body's bytes as they arrive, at most ``amt`` a time."""
        read = self.resp.read1
        inflate = self.inflate
        while True:
            chunk = read(amt)
            if not chunk:
                break
            if inflate is not None:
                chunk = inflate.decompress(chunk)
                if not chunk:
                    continue
            yield chunk
        if inflate is not None:
            tail = inflate.flush()
            if tail:
                yield tail
        # All of it: a chunked body's last chunk came (else read1
        # raised), a sized one has nothing left.
        self.done = not self.resp.length

    def release_conn(self):
        """The connection goes back to the client once the body was read
        to its end; otherwise it is closed."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.done and not self.resp.will_close:
            self.resp.close()       # its file only: the socket stays
            self.client.put(conn)
        else:
            conn.close()

    def shutdown(self):
        """Wake a thread blocked reading the body (a stopping watch)."""
        conn = self.conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _inflater():
    """A gzip decompressor: ISA-L's when the isal package is installed
    (the same output, 2-3x faster: 8 ms less per 10,000 Services'
    list), else zlib's."""
    if not _ZLIB:
        try:
            from isal import isal_zlib as mod
        except ImportError:
            mod = zlib
        _ZLIB.append(mod)
    return _ZLIB[0].decompressobj(16 + zlib.MAX_WBITS)


_ZLIB: list = []


def _dropped(sock):
    """True when an idle connection's socket is gone or has something to
    read (the server closed it, or sent what nobody asked for)."""
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class Fallback:
    """The kubernetes client's ApiClient behind ``Direct``'s interface."""

    def __init__(self, api):
        self.api = api

    @property
    def user_agent(self):
        return self.api.user_agent

    @user_agent.setter
    def user_agent(self, value):
        self.api.user_agent = value

    def get(self, path, query, timeout):
        method, url, headers, _, _ = self.api.param_serialize(
            "GET", path, query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"])
        return self.api.call_api(method, url, header_params=headers,
                                 _request_timeout=timeout).response


def build(opts):
    """A ``Direct`` client for the plugin's connection options; raises
    ``Unsupported`` when only the kubernetes client can do it."""
    if opts.get("kubeconfig"):
        return from_kubeconfig(opts["kubeconfig"], opts.get("context"))
    if opts.get("endpoint"):
        cert = key = ca = None
        if opts.get("tls"):
            cert, key, ca = opts["tls"]
        return Direct(opts["endpoint"], cert=cert, key=key, ca=ca)
    return in_cluster()


def in_cluster(env=os.environ, sa_dir=SA_DIR):
    host = env.get("KUBERNETES_SERVICE_HOST")
    port = env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise Unsupported("not in a cluster")
    if ":" in host:
        host = "[%s]" % host
    return Direct("https://%s:%s" % (host, port),
                  token=Token(path=os.path.join(sa_dir, "token")),
                  ca=os.path.join(sa_dir, "ca.crt"))


def from_kubeconfig(path, context=None):
    """The cluster and user of ``context`` (or the current one)."""
    from corednstw.engines.kubernetes import kubeconfig
    with open(path, "rb") as f:
        cfg = kubeconfig.load(f.read()) or {}
    base = os.path.dirname(os.path.abspath(path))
    name = context or cfg.get("current-context")
    ctx = _named(cfg, "contexts", name, "context")
    cluster = _named(cfg, "clusters", ctx.get("cluster"), "cluster")
    user = _named(cfg, "users", ctx.get("user"), "user", required=False)
    if set(user) & {"exec", "auth-provider", "username", "password"}:
        raise Unsupported("credential plugin or basic auth")
    if cluster.get("proxy-url") or cluster.get("tls-server-name"):
        raise Unsupported("proxy or TLS server name")
    token = None
    if user.get("token"):
        token = Token(value=user["token"])
    elif user.get("tokenFile"):
        token = Token(path=_path(base, user["tokenFile"]))
    return Direct(
        cluster["server"], token=token,
        ca=_path(base, cluster.get("certificate-authority")),
        ca_data=_b64(cluster.get("certificate-authority-data")),
        cert=_file(base, user, "client-certificate"),
        key=_file(base, user, "client-key"),
        verify=not cluster.get("insecure-skip-tls-verify"))


def _named(cfg, section, name, field, required=True):
    for entry in cfg.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(field) or {}
    if required:
        raise Unsupported("%s %r not found" % (section, name))
    return {}


def _path(base, p):
    return os.path.join(base, p) if p else None


def _b64(data):
    return base64.b64decode(data).decode("ascii") if data else None


def _file(base, user, field):
    """A path for ``field``, or the bytes of ``field-data``."""
    if user.get(field + "-data"):
        return base64.b64decode(user[field + "-data"])
    return _path(base, user.get(field))


def _load_chain(ctx, cert, key):
    """``load_cert_chain`` with paths or PEM bytes: ssl reads only files,
    so bytes go through private files removed right after."""
    made: list[str] = []
    try:
        if isinstance(cert, bytes):
            cert = _private(cert, made)
        if isinstance(key, bytes):
            key = _private(key, made)
        ctx.load_cert_chain(cert, key)
    finally:
        for name in made:
            os.unlink(name)


def _private(data, made):
    fd, name = tempfile.mkstemp(prefix="corednstw-k8s-")
    made.append(name)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return name
