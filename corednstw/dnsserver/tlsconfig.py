"""The server side TLS settings of the ``tls`` directive, shared by every
encrypted listener (DoT, DoH, gRPC, DoQ, DoH3).

The certificate is held by a ``Switchable`` so a reload that keeps a
listener hands its next connections the new certificate.
"""

import os
import ssl

from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from zope.interface import implementer

#: client_auth values and the OpenSSL verify mode each maps to: whether a
#: certificate is asked for, required, and checked against the CA (Go's
#: tls.ClientAuthType).
CLIENT_AUTH = {
    "nocert": (SSL.VERIFY_NONE, False),
    "request": (SSL.VERIFY_PEER, False),
    "require": (SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, False),
    "verify_if_given": (SSL.VERIFY_PEER, True),
    "require_and_verify": (
        SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, True),
}

#: The client_auth values the standard library's ssl can express, and
#: its verify mode for each.  It has no "ask for a certificate but do
#: not check it" (request, require): those stay on pyOpenSSL.
STDLIB_VERIFY = {
    "nocert": ssl.CERT_NONE,
    "verify_if_given": ssl.CERT_OPTIONAL,
    "require_and_verify": ssl.CERT_REQUIRED,
}

#: ALPN protocols a DoH listener offers, preferred first (CoreDNS sets
#: NextProtos to h2, http/1.1).
HTTP_ALPN = (b"h2", b"http/1.1")


class TLSError(ValueError):
    """A certificate, key or CA that cannot be used."""


class ServerTLS:
    """The server side TLS settings of a block (``tls CERT KEY [CA]``).

    The files are read once, when the configuration is built: a missing or
    broken file fails the setup (and a reload keeps the old configuration),
    and a reload reads them again, picking renewed certificates up.
    """

    def __init__(self, cert, key, ca=None, client_auth="nocert",
                 keylog=None):
        self.cert = cert
        self.key = key
        self.ca = ca
        self.client_auth = client_auth
        #: The key log (``keylog FILE``): a KeyLog, or None.
        self.keylog = keylog
        self._contexts = {}
        self._ssl_contexts = {}
        self.context(())    # load and check everything now
        self.ssl_context(())

    def set_keylog(self, keylog):
        """Log the secrets of every connection from now on (contexts are
        built anew)."""
        self.keylog = keylog
        self._contexts = {}
        self._ssl_contexts = {}

    def ssl_context(self, alpn=()):
        """The standard library's ssl.SSLContext for these settings,
        offering ``alpn`` protocols (built once per protocol list), or
        None where only pyOpenSSL can serve them: client_auth request
        and require, and a key log (ours is one file for every listener,
        closed with the plugin, in CoreDNS's format)."""
        alpn = tuple(alpn)
        try:
            return self._ssl_contexts[alpn]
        except KeyError:
            pass
        ctx = None
        if self.client_auth in STDLIB_VERIFY and self.keylog is None:
            try:
                ctx = self._make_ssl(alpn)
            except (OSError, ValueError):
                ctx = None      # pyOpenSSL took the files: it serves
        self._ssl_contexts[alpn] = ctx
        return ctx

    def _make_ssl(self, alpn):
        """The settings of _make in the standard library's terms (the
        session id context is the ssl module's own)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= ssl.OP_NO_COMPRESSION
        ctx.set_ciphers("DEFAULT")      # OpenSSL's list, as pyOpenSSL's
        ctx.load_cert_chain(self.cert, self.key)
        mode = STDLIB_VERIFY[self.client_auth]
        if mode != ssl.CERT_NONE:
            if self.ca:
                ctx.load_verify_locations(self.ca)
            else:
                ctx.set_default_verify_paths()
        ctx.verify_mode = mode
        if alpn:
            ctx.set_alpn_protocols([p.decode("ascii") for p in alpn])
        return ctx

    def context(self, alpn=()):
        """An OpenSSL context for this certificate, offering ``alpn``
        protocols (built once per protocol list)."""
        alpn = tuple(alpn)
        ctx = self._contexts.get(alpn)
        if ctx is None:
            ctx = self._contexts[alpn] = self._make(alpn)
        return ctx

    def _make(self, alpn):
        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        ctx.set_options(SSL.OP_NO_COMPRESSION)
        # Sessions are resumable (tickets are on by default); the id
        # context is what OpenSSL needs to resume with client certificates.
        ctx.set_session_id(b"corednstw")
        _readable(self.cert, "could not load TLS cert")
        _readable(self.key, "could not load TLS cert")
        try:
            ctx.use_certificate_chain_file(self.cert)
        except SSL.Error as e:
            raise TLSError("could not load TLS cert: %s: %s"
                           % (self.cert, reason(e))) from e
        try:
            ctx.use_privatekey_file(self.key)
            ctx.check_privatekey()
        except SSL.Error as e:
            raise TLSError("could not load TLS cert: %s: %s"
                           % (self.key, reason(e))) from e
        self._verify(ctx)
        if alpn:
            ctx.set_alpn_select_callback(_alpn_selector(alpn))
        if self.keylog is not None:
            ctx.set_keylog_callback(self.keylog.callback)
        return ctx

    def _verify(self, ctx):
        mode, check = CLIENT_AUTH[self.client_auth]
        if self.ca:
            _readable(self.ca, "error reading %s" % self.ca)
            try:
                ctx.load_verify_locations(self.ca)
                with open(self.ca, "rb") as fh:
                    crypto.load_certificate(crypto.FILETYPE_PEM, fh.read())
            except (OSError, SSL.Error, crypto.Error) as e:
                raise TLSError("error reading %s: %s"
                               % (self.ca, reason(e))) from e
        else:
            ctx.set_default_verify_paths()
        if mode == SSL.VERIFY_NONE:
            ctx.set_verify(mode)
        elif check:
            ctx.set_verify(mode, _checked)
        else:
            ctx.set_verify(mode, _anything)


class KeyLog:
    """The TLS key log of ``keylog FILE``: every handshake's secrets, one
    NSS key log line each (what Wireshark reads to decrypt a capture).

    The file is opened for appending (created mode 0600) when the
    configuration is built, as CoreDNS opens it at setup, and closed when
    the plugin stops; a line from a connection still open after that is
    dropped.  Also a file object, for aioquic's ``secrets_log_file``
    (DoQ and DoH3 listeners).
    """

    def __init__(self, path):
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.fh = os.fdopen(fd, "a", buffering=1)

    def callback(self, conn, line):
        """pyOpenSSL's keylog callback: ``line`` without its newline."""
        self.write(line.decode("ascii", "replace") + "\n")

    def write(self, text):
        try:
            self.fh.write(text)
            self.fh.flush()
        except ValueError:      # closed: the configuration was replaced
            pass

    def flush(self):
        """aioquic flushes the file it writes to."""

    def close(self):
        self.fh.close()


def _readable(path, what):
    """TLSError naming ``path`` as Go's os.Open does when it cannot be
    read (OpenSSL's own message for a missing file says less)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise TLSError("%s: open %s: %s" % (
            what, path, (e.strerror or str(e)).lower())) from e


def _checked(conn, cert, errno, depth, ok):
    """Keep OpenSSL's verdict (verify_if_given, require_and_verify)."""
    return bool(ok)


def _anything(conn, cert, errno, depth, ok):
    """Ask for a certificate but take whatever comes (request, require)."""
    return True


def _alpn_selector(offered):
    """The ALPN callback: our first preference the client also speaks;
    none in common: no ALPN (the client may still speak HTTP/1.1)."""
    def select(conn, protos):
        for p in offered:
            if p in protos:
                return p
        return SSL.NO_OVERLAPPING_PROTOCOLS
    return select


def reason(e):
    """OpenSSL's error reasons, or the exception text."""
    args = getattr(e, "args", ())
    if args and isinstance(args[0], list) and args[0]:
        return "; ".join(str(part[-1]) for part in args[0])
    return str(e) or e.__class__.__name__


@implementer(IOpenSSLServerConnectionCreator)
class Switchable:
    """Makes each new TLS connection from the current settings; a reload
    replaces ``tls`` (open connections keep the certificate they have)."""

    def __init__(self, tls, alpn=()):
        self.tls = tls
        self.alpn = tuple(alpn)

    def serverConnectionForTLS(self, protocol):
        return SSL.Connection(self.tls.context(self.alpn), None)
