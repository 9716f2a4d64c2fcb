"""Certificates from an ACME CA (RFC 8555) for ``tls { acme DOMAIN... }``.

The server proves it controls the names with DNS-01 challenges it answers
itself: every server block of the configuration gets a ``Challenge`` link
at the front of its chain, which answers the TXT query the CA sends for
``_acme-challenge.DOMAIN`` while an order is open (CoreDNS does the same;
the server must be authoritative for the names).

Nothing is asked of the CA when the configuration is built (``--check``
stays offline): ``Manager.start`` runs when the configuration goes live.
It takes a certificate kept in the storage directory when it still
covers the names, otherwise orders one; the ACME protocol itself runs in
a thread (the client library is blocking), the reactor keeps answering
the CA's TXT queries meanwhile.  Renewal is due when a third of the
lifetime is left, as certmagic (CoreDNS's ACME library) does; a failed
order is logged and tried again later, with a doubling delay.
"""

import datetime
import os
import threading
import urllib.parse

from cryptography import x509
from OpenSSL import SSL
from twisted.internet import threads

from corednstw.core import dnswire as w
from corednstw.core import goparse, logger
from corednstw.core.plugin import Plugin
from corednstw.dnsserver import tlsconfig

#: Let's Encrypt's production directory, certmagic's default CA.
DEFAULT_CA = "https://acme-v02.api.letsencrypt.org/directory"


class ACMEError(ValueError):
    """Options that cannot be used (the message is CoreDNS's)."""


# -- options -------------------------------------------------------------


class Options:
    """The options of one ``tls { acme ... }``, validated."""

    def __init__(self, domains, email="", ca=DEFAULT_CA, storage="",
                 ca_root="", resolver=""):
        self.domains = list(domains)
        self.email = email
        self.ca = ca
        self.storage = storage
        self.ca_root = ca_root
        self.resolver = resolver

    def key(self):
        """What makes two configurations the same (the domains in any
        order)."""
        return (tuple(sorted(self.domains)), self.email, self.ca,
                self.storage, self.ca_root, self.resolver)

    def validate(self):
        """Normalise the domains (duplicates dropped) and check the
        rest; ACMEError with CoreDNS's words."""
        if not self.domains:
            raise ACMEError("ACME requires at least one domain")
        seen = []
        for domain in self.domains:
            d = normalize_domain(domain)
            if d not in seen:
                seen.append(d)
        self.domains = seen
        u = urllib.parse.urlsplit(self.ca)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ACMEError("invalid ACME CA URL %s" % goparse.quote(self.ca))
        if self.resolver:
            try:
                host, port = goparse.split_host_port(self.resolver)
            except ValueError as e:
                raise ACMEError("invalid ACME resolver %s: %s" % (
                    goparse.quote(self.resolver), e)) from e
            if not host:
                raise ACMEError("invalid ACME resolver %s: host is empty"
                                % goparse.quote(self.resolver))
            try:
                value = goparse.atoi(port)
            except ValueError:
                value = 0
            if not 1 <= value <= 65535:
                raise ACMEError("invalid ACME resolver port %s"
                                % goparse.quote(port))
        trusted_roots(self.ca_root)


def normalize_domain(domain):
    """The name as the CA sees it: lower case, no final dot, IDNA
    encoded, one leading ``*.`` at most; ACMEError for an address or a
    name that is not one."""
    domain = domain.rstrip(".").lower() if domain.endswith(".") \
        else domain.lower()
    wildcard = domain.startswith("*.")
    check = domain[2:] if wildcard else domain
    bad = ACMEError("invalid ACME domain %s" % goparse.quote(domain))
    if not check or "*" in check or goparse.parse_ip(check) is not None:
        raise bad
    try:
        check = check.encode("idna").decode("ascii")
    except UnicodeError as e:
        raise ACMEError("invalid ACME domain %s: %s"
                        % (goparse.quote(domain), e)) from e
    labels = check.split(".")
    if len(check) > 253 or any(not 0 < len(x) <= 63 for x in labels):
        raise bad
    return "*." + check if wildcard else check


def trusted_roots(path):
    """The PEM text of the ``ca_root`` file (None without one), read
    now so a missing or empty file fails the setup."""
    if not path:
        return None
    try:
        with open(path, "rb") as fh:
            pem = fh.read()
    except OSError as e:
        raise ACMEError("reading ACME CA root %s: open %s: %s" % (
            goparse.quote(path), path,
            (e.strerror or str(e)).lower())) from e
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ACMEError("ACME CA root %s contains no certificates"
                        % goparse.quote(path))
    return pem


# -- the DNS-01 answers --------------------------------------------------


class Solver:
    """The TXT records of the challenges open now, by owner name
    (lower-case FQDN); written from the ordering thread, read by the
    reactor."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records = {}

    def present(self, name, value):
        name = _fqdn(name)
        with self.lock:
            values = self.records.setdefault(name, {})
            values[value] = values.get(value, 0) + 1

    def cleanup(self, name, value):
        name = _fqdn(name)
        with self.lock:
            values = self.records.get(name, {})
            if values.get(value, 0) <= 1:
                values.pop(value, None)
            else:
                values[value] -= 1
            if not values:
                self.records.pop(name, None)

    def values(self, name):
        with self.lock:
            return sorted(self.records.get(_fqdn(name), ()))


def _fqdn(name):
    name = name.lower()
    return name if name.endswith(".") else name + "."


class Challenge(Plugin):
    """The front link of every block while ACME is configured: answers
    the CA's TXT query for an open challenge, passes the rest on."""

    name = "tls"
    passes_answers = True

    def __init__(self, solver):
        self.solver = solver

    def serve(self, req):
        if req.qtype != w.TXT or req.qclass != w.CLASS_IN:
            return self.next.serve(req)
        values = self.solver.values(req.qname)
        if not values:
            return self.next.serve(req)
        return self.respond(req, answer=[
            w.RR(req.name, w.TXT, 0, w.txt_rdata(v.encode("ascii")))
            for v in values])


def install_challenges(cfg, solver):
    """Put a Challenge link into each block's chain, where ``tls`` sits
    in the plugin order (after the plugins ordered before it)."""
    here = cfg.order.position("tls")
    for block in cfg.blocks:
        prev, p = None, block.chain
        while p.name and not isinstance(p, Challenge) and \
                cfg.order.position(p.name) < here:
            prev, p = p, p.next
        if isinstance(p, Challenge):
            continue
        link = Challenge(solver)
        link.block = block
        link.reactor = block.server.reactor
        link.next = p
        if prev is None:
            block.chain = link
        else:
            prev.next = link


# -- the listeners' settings ---------------------------------------------


class ACMETLS:
    """What the encrypted listeners take from ``tls``, like
    tlsconfig.ServerTLS, with the certificate the Manager obtained.
    Until there is one a handshake fails (CoreDNS's "ACME certificate is
    not ready"); each new certificate serves the next connections."""

    client_auth = "nocert"
    keylog = None

    def __init__(self, options):
        self.options = options
        self.current = None     # a tlsconfig.ServerTLS once issued
        self._bare = None

    @property
    def cert(self):
        return self._ready().cert

    @property
    def key(self):
        return self._ready().key

    def use(self, cert, key):
        """Serve with the certificate and key files from now on."""
        self.current = tlsconfig.ServerTLS(cert, key)

    def context(self, alpn=()):
        """The certificate's context; until there is one, a context with
        no certificate, whose handshakes fail with an alert (the
        listener cannot be given no connection at all)."""
        if self.current is None:
            if self._bare is None:
                self._bare = SSL.Context(SSL.TLS_SERVER_METHOD)
                self._bare.set_min_proto_version(SSL.TLS1_2_VERSION)
            return self._bare
        return self.current.context(alpn)

    def ssl_context(self, alpn=()):
        """The certificate's standard library context (None until there
        is one: the bare pyOpenSSL context then fails the handshake)."""
        if self.current is None:
            return None
        return self.current.ssl_context(alpn)

    def _ready(self):
        if self.current is None:
            raise tlsconfig.TLSError("ACME certificate is not ready for %s"
                                     % self.options.domains)
        return self.current


# -- obtaining certificates ------------------------------------------------


class Manager:
    """Obtains and renews the certificate of one set of options."""

    #: Delay before the first new try after a failure, doubled each time
    #: up to RETRY_MAX (seconds).
    RETRY_FIRST = 60.0
    RETRY_MAX = 6 * 3600.0
    #: How long one order may take (seconds).
    ORDER_TIMEOUT = 300.0

    def __init__(self, options, solver, reactor):
        self.options = options
        self.solver = solver
        self.reactor = reactor
        self.tls = ACMETLS(options)
        self.retry = self.RETRY_FIRST
        self.timer = None
        self.running = None
        self.stopped = False
        directory = _safe(urllib.parse.urlsplit(options.ca).netloc)
        self.dir = os.path.join(options.storage, directory)
        self.cert_file = os.path.join(self.dir, _safe(options.domains[0])
                                      + ".crt")
        self.key_file = os.path.join(self.dir, _safe(options.domains[0])
                                     + ".key")

    def start(self):
        """Take the stored certificate when it covers the names, and
        order one now or when it is due."""
        due = 0.0
        stored = self._stored()
        if stored is not None:
            self.tls.use(self.cert_file, self.key_file)
            due = self._due(stored)
            logger.info("tls", "ACME certificate for %s loaded from %s"
                        % (", ".join(self.options.domains), self.cert_file))
        self._schedule(due)

    def stop(self):
        self.stopped = True
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None

    def _schedule(self, delay):
        if not self.stopped:
            self.timer = self.reactor.callLater(max(0.0, delay), self.obtain)

    def obtain(self):
        """Order a certificate (in a thread); on success serve it and
        schedule its renewal, on failure log and try again later."""
        self.timer = None
        d = threads.deferToThreadPool(
            self.reactor, self.reactor.getThreadPool(), order,
            self.options, self.solver, self.dir, self.ORDER_TIMEOUT)
        self.running = d
        d.addCallbacks(self._issued, self._failed)
        d.addBoth(self._done)
        return d

    def _done(self, result):
        self.running = None
        return result

    def _issued(self, pems):
        if self.stopped:
            return
        cert, key = pems
        _write(self.key_file, key, 0o600)
        _write(self.cert_file, cert, 0o644)
        try:
            self.tls.use(self.cert_file, self.key_file)
        except tlsconfig.TLSError as e:
            self._failed_text(str(e))
            return
        issued = _load(cert)
        self.retry = self.RETRY_FIRST
        logger.info("tls", "ACME certificate for %s obtained from %s, "
                    "valid until %s" % (", ".join(self.options.domains),
                                        self.options.ca,
                                        _not_after(issued).isoformat()))
        self._schedule(self._due(issued))

    def _failed(self, failure):
        self._failed_text(failure.getErrorMessage() or
                          failure.type.__name__)

    def _failed_text(self, why):
        if self.stopped:
            return
        logger.error("tls", "obtaining the ACME certificate for %s from %s: "
                     "%s (next try in %ds)" % (
                         ", ".join(self.options.domains), self.options.ca,
                         why, self.retry))
        delay, self.retry = self.retry, min(self.retry * 2, self.RETRY_MAX)
        self._schedule(delay)

    def _stored(self):
        """The stored certificate when it covers the names and has not
        expired, else None."""
        try:
            with open(self.cert_file, "rb") as fh:
                cert = _load(fh.read())
            tlsconfig.ServerTLS(self.cert_file, self.key_file)
        except (OSError, ValueError):
            return None
        now = datetime.datetime.fromtimestamp(self.reactor.seconds(),
                                              datetime.timezone.utc)
        if set(_names(cert)) != set(self.options.domains) or \
                _not_after(cert) <= now:
            return None
        return cert

    def _due(self, cert):
        """Seconds until renewal: when a third of the lifetime is left."""
        start, end = _not_before(cert), _not_after(cert)
        renew = end - (end - start) / 3
        now = datetime.datetime.fromtimestamp(self.reactor.seconds(),
                                              datetime.timezone.utc)
        return max(0.0, (renew - now).total_seconds())


def order(options, solver, directory, timeout):
    """One ACME order, from the account to the certificate: (fullchain
    PEM, key PEM).  Blocking; runs in a thread."""
    import josepy
    from acme import challenges, client, crypto_util, errors, messages
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    os.makedirs(directory, mode=0o700, exist_ok=True)
    account_key = _account_key(os.path.join(directory, "account.key"))
    net = client.ClientNetwork(
        josepy.JWKEC(key=account_key), alg=josepy.ES256,
        verify_ssl=_verify(options, directory),  # type: ignore[arg-type]
        user_agent="corednstw")
    acme = client.ClientV2(client.ClientV2.get_directory(options.ca, net),
                           net)
    registration = messages.NewRegistration.from_data(
        email=options.email or None, terms_of_service_agreed=True)
    try:
        net.account = acme.new_account(registration)
    except errors.ConflictError as e:
        net.account = acme.query_registration(
            messages.RegistrationResource(uri=e.location, body=registration))
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    csr = crypto_util.make_csr(key_pem, options.domains)
    orderr = acme.new_order(csr)
    presented = []
    try:
        for authz in orderr.authorizations:
            if authz.body.status == messages.STATUS_VALID:
                continue
            chall = next((c for c in authz.body.challenges
                          if isinstance(c.chall, challenges.DNS01)), None)
            if chall is None:
                raise RuntimeError("the CA offers no dns-01 challenge for %s"
                                   % authz.body.identifier.value)
            response, validation = chall.response_and_validation(net.key)
            name = chall.chall.validation_domain_name(
                authz.body.identifier.value)
            solver.present(name, validation)
            presented.append((name, validation))
            acme.answer_challenge(chall, response)
        deadline = datetime.datetime.now() + datetime.timedelta(
            seconds=timeout)
        orderr = acme.poll_and_finalize(orderr, deadline)
    finally:
        for name, validation in presented:
            solver.cleanup(name, validation)
    return orderr.fullchain_pem.encode("ascii"), key_pem


def _account_key(path):
    """The account's key, made and stored on first use."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    try:
        with open(path, "rb") as fh:
            return serialization.load_pem_private_key(fh.read(), None)
    except FileNotFoundError:
        pass
    key = ec.generate_private_key(ec.SECP256R1())
    _write(path, key.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()), 0o600)
    return key


def _verify(options, directory):
    """requests' ``verify``: the usual CAs, plus ``ca_root``'s in a
    bundle file beside the account."""
    pem = trusted_roots(options.ca_root)
    if pem is None:
        return True
    import certifi
    with open(certifi.where(), "rb") as fh:
        bundle = fh.read()
    path = os.path.join(directory, "ca-bundle.pem")
    _write(path, bundle + b"\n" + pem, 0o644)
    return path


def _write(path, data, mode):
    """Replace ``path`` atomically (a reader never sees half a file)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _safe(text):
    """A file name for a host or domain (``*`` and ``:`` replaced)."""
    return text.replace("*", "wildcard_").replace(":", "_").replace("/", "_")


def _load(pem):
    return x509.load_pem_x509_certificate(pem)


def _names(cert):
    try:
        san = cert.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [n.lower() for n in san.get_values_for_type(x509.DNSName)]


def _not_before(cert):
    return cert.not_valid_before_utc


def _not_after(cert):
    return cert.not_valid_after_utc
