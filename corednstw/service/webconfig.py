"""The web configuration file of ``prometheus { tls FILE }``.

CoreDNS 1.14 serves /metrics through the Prometheus exporter toolkit,
which reads a YAML file of this shape (its "web configuration")::

    tls_server_config:          # TLS when a certificate is named
      cert_file / cert:         # PEM file, or the PEM text inline
      key_file / key:
      client_ca_file / client_ca:
      client_auth_type:         # NoClientCert (default),
                                # RequestClientCert, RequireAnyClientCert,
                                # VerifyClientCertIfGiven,
                                # RequireAndVerifyClientCert
      client_allowed_sans: [...]
      min_version: TLS12        # TLS10 .. TLS13
      max_version: TLS13
      prefer_server_cipher_suites: true
    http_server_config:
      http2: true
      headers: {Strict-Transport-Security: ..., ...}
    basic_auth_users: {NAME: BCRYPT-HASH}
    rate_limit: {interval: 1s, burst: 20}

The file is read, and every certificate in it checked, when the
configuration is built; relative file names are resolved against the
file's directory, as the toolkit does.  A file that configures no
certificate (an empty one, for instance) leaves the endpoint on plain
HTTP.  Unknown fields are refused (the toolkit reads the file strictly).
"""

import base64
import os
import re
from typing import Any, Optional

from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.web import resource
from zope.interface import implementer

from corednstw.core.durations import parse_duration
from corednstw.dnsserver import tlsconfig

#: client_auth_type values and the tls plugin's names of the same policy.
CLIENT_AUTH = {
    "": "nocert", "NoClientCert": "nocert",
    "RequestClientCert": "request",
    "RequireAnyClientCert": "require", "RequireClientCert": "require",
    "VerifyClientCertIfGiven": "verify_if_given",
    "RequireAndVerifyClientCert": "require_and_verify",
}

VERSIONS = {"TLS10": SSL.TLS1_VERSION, "TLS11": SSL.TLS1_1_VERSION,
            "TLS12": SSL.TLS1_2_VERSION, "TLS13": SSL.TLS1_3_VERSION}

#: The response headers the toolkit lets a file set, with the values it
#: accepts (None: any).
HEADERS: dict[str, Optional[tuple[str, ...]]] = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}

_FIELDS = {
    "web.Config": ("tls_server_config", "http_server_config",
                   "basic_auth_users", "rate_limit"),
    "web.TLSConfig": ("cert", "key", "client_ca", "cert_file", "key_file",
                      "client_auth_type", "client_ca_file",
                      "client_allowed_sans", "min_version", "max_version",
                      "prefer_server_cipher_suites", "cipher_suites",
                      "curve_preferences"),
    "web.HTTPConfig": ("http2", "headers"),
    "web.RateLimiterConfig": ("interval", "burst"),
}


class WebConfigError(ValueError):
    """A web configuration file that cannot be used."""


def _section(data, kind):
    """A mapping of known fields (an absent section is empty)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise WebConfigError("cannot unmarshal %s into %s"
                             % (type(data).__name__, kind))
    for k in data:
        if k not in _FIELDS[kind]:
            raise WebConfigError("field %s not found in type %s" % (k, kind))
    return data


def _text(section, name):
    value = section.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WebConfigError("%s: not a string" % name)
    return value


def _join(directory, path):
    return path if not path or os.path.isabs(path) else os.path.join(
        directory, path)


class WebConfig:
    """What the file says: ``tls`` (a WebTLS, or None for plain HTTP),
    ``headers``, ``users`` (name: bcrypt hash) and ``rate`` ((interval,
    burst) or None)."""

    def __init__(self, path):
        # yaml here: only a ``tls FILE`` needs it, not every start.
        import yaml
        self.path = path
        try:
            with open(path, "rb") as fh:
                data = yaml.safe_load(fh)
        except OSError as e:
            raise WebConfigError("open %s: %s" % (
                path, (e.strerror or str(e)).lower())) from e
        except yaml.YAMLError as e:
            raise WebConfigError("%s: %s" % (path, e)) from e
        top = _section(data, "web.Config")
        directory = os.path.dirname(path)
        self.tls = WebTLS.from_section(
            _section(top.get("tls_server_config"), "web.TLSConfig"),
            directory)
        if self.tls is not None:
            self.tls.source = path
        http = _section(top.get("http_server_config"), "web.HTTPConfig")
        self.headers = _headers(http.get("headers"))
        self.users = _users(top.get("basic_auth_users"))
        self.rate = _rate(_section(top.get("rate_limit"),
                                   "web.RateLimiterConfig"))

    def guard(self, inner, clock):
        """``inner`` behind this file's headers, basic auth and rate
        limit (the resource itself when it asks for none of them)."""
        if not (self.headers or self.users or self.rate):
            return inner
        return Guarded(inner, self, clock)


def _headers(data):
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise WebConfigError("headers: not a mapping")
    out = {}
    for name, value in data.items():
        if name not in HEADERS:
            raise WebConfigError('HTTP header "%s" can not be configured'
                                 % name)
        allowed = HEADERS[name]
        if allowed is not None and value.lower() not in allowed:
            raise WebConfigError('invalid value for %s. Expected one of: '
                                 '%s, but got: "%s"' % (
                                     name, list(allowed), value))
        if value:
            out[name] = str(value)
    return out


def _users(data):
    if not data:
        return {}
    if not isinstance(data, dict):
        raise WebConfigError("basic_auth_users: not a mapping")
    try:
        import bcrypt  # noqa: F401  (the optional dependency, checked now)
    except ImportError as e:
        raise WebConfigError("basic_auth_users needs the bcrypt package "
                             "(pip install corednstw[metrics-auth])") from e
    users = {}
    for name, hashed in data.items():
        if not _BCRYPT.match(str(hashed)):
            raise WebConfigError("basic_auth_users: the password of %s is "
                                 "not a bcrypt hash" % name)
        users[str(name)] = str(hashed).encode()
    return users


_BCRYPT = re.compile(r"^\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}$")


def _rate(section):
    interval = section.get("interval", 0)
    burst = section.get("burst", 0)
    try:
        seconds = parse_duration(str(interval), strict=True)
    except ValueError as e:
        raise WebConfigError("rate_limit: %s" % e) from e
    if not isinstance(burst, int) or burst < 0:
        raise WebConfigError("rate_limit: burst must be an integer")
    return (seconds, burst) if seconds else None


def _pem_certs(data, what):
    """Every certificate of a PEM text."""
    certs = []
    marker = b"-----END CERTIFICATE-----"
    for part in data.split(marker)[:-1]:
        try:
            certs.append(crypto.load_certificate(crypto.FILETYPE_PEM,
                                                 part + marker))
        except crypto.Error as e:
            raise WebConfigError("%s: %s" % (what, e)) from e
    return certs


def _read(path, what):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise WebConfigError("failed to read %s (%s): open %s: %s" % (
            what, path, path, (e.strerror or str(e)).lower())) from e


class WebTLS:
    """The TLS side of the file: an OpenSSL context made once (the files
    are read now), handed out per connection."""

    @classmethod
    def from_section(cls, s, directory):
        cert_file = _join(directory, _text(s, "cert_file"))
        key_file = _join(directory, _text(s, "key_file"))
        ca_file = _join(directory, _text(s, "client_ca_file"))
        cert, key, ca = (_text(s, "cert"), _text(s, "key"),
                         _text(s, "client_ca"))
        auth = _text(s, "client_auth_type")
        if not (cert_file or cert or key_file or key or ca_file or ca
                or auth):
            return None     # no TLS: plain HTTP
        if not (cert_file or cert):
            raise WebConfigError("missing one of cert or cert_file")
        if not (key_file or key):
            raise WebConfigError("missing one of key or key_file")
        for name in ("cipher_suites", "curve_preferences"):
            if s.get(name):
                raise WebConfigError("%s: not supported (OpenSSL's "
                                     "defaults apply)" % name)
        cert_pem = _read(cert_file, "cert_file") if cert_file else \
            cert.encode()
        key_pem = _read(key_file, "key_file") if key_file else key.encode()
        ca_pem = None
        if ca_file:
            ca_pem = _read(ca_file, "client_ca_file")
        elif ca:
            ca_pem = ca.encode()
        if auth not in CLIENT_AUTH:
            raise WebConfigError("invalid ClientAuth: " + auth)
        mode = CLIENT_AUTH[auth]
        if ca_pem is not None and mode == "nocert":
            raise WebConfigError("client CA's have been configured without "
                                 "a Client Auth Policy")
        sans = s.get("client_allowed_sans")
        if sans is not None and mode not in ("require",
                                             "require_and_verify"):
            raise WebConfigError(
                "client_allowed_sans requires client_auth_type to be one "
                "of RequireAnyClientCert or RequireAndVerifyClientCert")
        versions = []
        for name, default in (("min_version", "TLS12"),
                              ("max_version", "TLS13")):
            v = _text(s, name) or default
            if v not in VERSIONS:
                raise WebConfigError("unknown TLS version: " + v)
            versions.append(VERSIONS[v])
        prefer = s.get("prefer_server_cipher_suites", True)
        return cls(cert_pem, key_pem, ca_pem, mode, sans, versions,
                   bool(prefer))

    #: The web configuration file this came from.
    source = ""

    def __init__(self, cert_pem, key_pem, ca_pem, client_auth, sans,
                 versions, prefer_server=True):
        self.client_auth = client_auth
        self.sans = None if sans is None else [str(x) for x in sans]
        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(versions[0])
        ctx.set_max_proto_version(versions[1])
        ctx.set_options(SSL.OP_NO_COMPRESSION)
        if prefer_server:
            ctx.set_options(SSL.OP_CIPHER_SERVER_PREFERENCE)
        ctx.set_session_id(b"corednstw-web")
        chain = _pem_certs(cert_pem, "failed to load X509KeyPair")
        if not chain:
            raise WebConfigError("failed to load X509KeyPair: tls: failed "
                                 "to find any PEM data in certificate input")
        try:
            ctx.use_certificate(chain[0])
            for extra in chain[1:]:
                ctx.add_extra_chain_cert(extra)
            ctx.use_privatekey(crypto.load_privatekey(crypto.FILETYPE_PEM,
                                                      key_pem))
            ctx.check_privatekey()
        except (SSL.Error, crypto.Error) as e:
            raise WebConfigError("failed to load X509KeyPair: %s"
                                 % tlsconfig.reason(e)) from e
        store = ctx.get_cert_store()
        if ca_pem is not None:
            assert store is not None
            for c in _pem_certs(ca_pem, "client CA"):
                store.add_cert(c)
        else:
            ctx.set_default_verify_paths()
        mode, check = tlsconfig.CLIENT_AUTH[client_auth]
        if mode != SSL.VERIFY_NONE:
            ctx.set_verify(mode, self._verify(check))
        self.context = ctx

    def _verify(self, check):
        sans = self.sans

        def verify(conn, cert, errno, depth, ok):
            if check and not ok:
                return False
            if depth == 0 and sans is not None:
                return bool(set(cert_sans(cert)) & set(sans))
            return True
        return verify

    def creator(self):
        return _Creator(self.context)


def cert_sans(cert):
    """A certificate's subject alternative names as Go lists them: DNS
    names, e-mail addresses, IP addresses and URIs."""
    from cryptography import x509
    try:
        ext = cert.to_cryptography().extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    out = list(ext.get_values_for_type(x509.DNSName))
    out += ext.get_values_for_type(x509.RFC822Name)
    out += [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]
    out += ext.get_values_for_type(x509.UniformResourceIdentifier)
    return out


@implementer(IOpenSSLServerConnectionCreator)
class _Creator:
    def __init__(self, context):
        self.ctx = context

    def serverConnectionForTLS(self, protocol):
        return SSL.Connection(self.ctx, None)


class Guarded(resource.Resource):
    """A resource behind the file's rate limit, basic auth and headers
    (in the toolkit's order: the limit first, then the credentials)."""

    isLeaf = True

    def __init__(self, inner, web, clock):
        resource.Resource.__init__(self)
        from corednstw.service import website
        self.inner = website.as_resource(inner)
        self.web = web
        self.clock = clock
        self.tokens = float(web.rate[1]) if web.rate else 0.0
        self.last: Optional[float] = None
        self.checked: set[Any] = set()

    def render(self, request):
        for name, value in self.web.headers.items():
            request.setHeader(name.encode(), value.encode())
        if self.web.rate and not self._take():
            return self._refuse(request, 429, b"Too Many Requests\n")
        if self.web.users and not self._authorized(request):
            request.setHeader(b"www-authenticate", b"Basic")
            return self._refuse(request, 401, b"Unauthorized\n")
        return self.inner.render(request)

    @staticmethod
    def _refuse(request, code, body):
        request.setResponseCode(code)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return body

    def _take(self):
        """A token bucket: one request every ``interval``, ``burst`` at
        once."""
        interval, burst = self.web.rate
        now = self.clock()
        if self.last is not None:
            self.tokens = min(float(burst), self.tokens
                              + (now - self.last) / interval)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def _authorized(self, request):
        import bcrypt
        header = request.getHeader(b"authorization") or b""
        if not header[:6].lower() == b"basic ":
            return False
        try:
            user, _, password = base64.b64decode(
                header[6:], validate=True).partition(b":")
        except ValueError:
            return False
        hashed = self.web.users.get(user.decode("utf-8", "replace"))
        if hashed is None:
            return False
        # A hash costs tens of milliseconds: a pair found good is
        # remembered, as the toolkit caches it (a bad one is not, so that
        # guessing cannot fill the memory).
        key = (user, password)
        if key in self.checked:
            return True
        if not bcrypt.checkpw(password, hashed):
            return False
        self.checked.add(key)
        return True
