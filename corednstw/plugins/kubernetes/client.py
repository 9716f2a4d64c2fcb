"""The HTTP client of the watches: plain urllib3 GETs.

Importing the ``kubernetes`` package costs 0.5-0.7 s of CPU (its
generated models, the dynamic client, kube_config's dependencies), and
at start-up that time is taken from the reactor through the GIL and
delays /ready.  The watches only need authenticated GETs, so a
configuration that is a bearer token or a client certificate (an
``endpoint``, a kubeconfig without exec or auth-provider plugins, the
in-cluster service account) is served here with urllib3 alone; anything
else still goes through the kubernetes client (``Fallback``).
"""

import base64
import os
import ssl
import tempfile
import threading
import time
from urllib.parse import urlencode

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


class Direct:
    """GETs against ``host`` with urllib3's pool manager."""

    def __init__(self, host, token=None, ca=None, ca_data=None,
                 cert=None, key=None, verify=True):
        import urllib3
        self.host = host.rstrip("/")
        self.token = token
        self.user_agent = "corednstw"
        kw = {"maxsize": 8, "retries": False}
        if self.host.startswith("https:"):
            ctx = ssl.create_default_context(cafile=ca, cadata=ca_data)
            if not verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if cert:
                _load_chain(ctx, cert, key)
            kw["ssl_context"] = ctx
        self.pool = urllib3.PoolManager(**kw)

    def get(self, path, query, timeout):
        """The response of GET ``path?query``, body not read."""
        import urllib3
        headers = {"Accept": "application/json",
                   "Accept-Encoding": "gzip",
                   "User-Agent": self.user_agent}
        token = self.token.get() if self.token is not None else None
        if token:
            headers["Authorization"] = "Bearer " + token
        url = self.host + path
        if query:
            url += "?" + urlencode(query)
        connect, read = timeout
        return self.pool.request(
            "GET", url, headers=headers, preload_content=False,
            timeout=urllib3.Timeout(connect=connect, read=read))


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
    import yaml
    with open(path, "rb") as f:
        cfg = yaml.safe_load(f) or {}
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
    made = []
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
