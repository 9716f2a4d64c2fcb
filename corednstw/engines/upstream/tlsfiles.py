"""Client TLS material from a directive's file arguments, as CoreDNS's
``tls.NewTLSConfigFromArgs`` reads them for its upstream clients (forward,
etcd): ``CA``; ``CERT KEY``; or ``CERT KEY CA``.  One argument names the
CA bundle that verifies the server; two name our client certificate and
key; three both."""


def pem_blocks(data):
    """The PEM certificates in ``data`` (a bundle), each as its own bytes."""
    marker = b"-----END CERTIFICATE-----"
    out = []
    for part in data.split(marker):
        if b"-----BEGIN CERTIFICATE-----" in part:
            out.append(part.strip() + b"\n" + marker + b"\n")
    if not out:
        raise ValueError("no certificates found")
    return out


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def load_client_tls(args):
    """``(trust, client)`` for Twisted's client TLS options: the trust root
    of the CA bundle (or None: the system's) and our client certificate
    (or None).  Raises OSError or an OpenSSL/ValueError error for a file
    that cannot be read or parsed; callers word the setup error."""
    from twisted.internet import ssl
    trust = client = None
    if len(args) in (1, 3):
        trust = ssl.trustRootFromCertificates(
            [ssl.Certificate.loadPEM(b) for b in pem_blocks(_read(args[-1]))])
    if len(args) >= 2:
        client = ssl.PrivateCertificate.loadPEM(
            _read(args[0]) + b"\n" + _read(args[1]))
    return trust, client
