"""Parsing the dnstap directive: ``dnstap SOCKET [full] [WRITEBUFFER]
[QUEUE] { identity; version; extra; skipverify }`` and ``dnstap listen
SOCKET [full] { ...; tls CERT KEY [CA] }``."""

import socket

from corednstw.plugins.dnstap.output import (
    MAX_QUEUE,
    MAX_WRITE_BUFFER,
    Listener,
    Output,
)
from corednstw.plugins.dnstap.plugin import Dnstap


def _endpoint(d, text, listen):
    """(kind, address) from SOCKET, unix://SOCKET, tcp:// or tls://."""
    for scheme in ("tcp", "tls"):
        if text.startswith(scheme + "://"):
            hostport = text[len(scheme) + 3:]
            host, sep, port = hostport.rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise d.arg_error()
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            return scheme, (host, int(port))
    if text.startswith("unix://"):
        text = text[7:]
    return "unix", text


def _multiple(d, text, what, units, top):
    try:
        v = int(text)
    except ValueError as e:
        raise d.error("dnstap: invalid %s %r" % (what, text)) from e
    if v < 1 or v > top:
        raise d.error("dnstap: %s must be between 1 and %d (%s): %d"
                      % (what, top, units, v))
    return v


def setup(d, block):
    args = list(d.args)
    if not args:
        raise d.arg_error()
    listen = args[0] == "listen"
    if listen:
        if len(args) < 2:
            raise d.error("dnstap listen requires an endpoint argument")
        args = args[1:]
    if len(args) > 4:
        raise d.arg_error()
    writebuf = queue = 1
    if len(args) >= 3:
        writebuf = _multiple(d, args[2], "MultipleTcpWriteBuf", "MiB units",
                             MAX_WRITE_BUFFER)
    if len(args) >= 4:
        queue = _multiple(d, args[3], "MultipleQueue", "x10k messages",
                          MAX_QUEUE)
    kind, address = _endpoint(d, args[0], listen)
    full = len(args) >= 2 and args[1] == "full"
    from corednstw import COREDNS_VERSION
    identity = socket.gethostname().encode()
    version = ("CoreDNS-" + COREDNS_VERSION).encode()
    extra = ""
    skipverify = False
    certs = None
    for c in d.children:
        if c.name == "skipverify":
            if c.args:
                raise c.arg_error()
            skipverify = True
        elif c.name == "tls":
            if not listen:
                raise d.error("tls directive only valid for listeners")
            if len(c.args) < 2:
                raise d.error("tls requires cert and key file paths")
            if len(c.args) > 3:
                raise c.arg_error()
            certs = list(c.args)
        elif c.name in ("identity", "version", "extra"):
            if len(c.args) != 1:
                raise c.arg_error(c.name)
            if c.name == "identity":
                identity = c.args[0].encode()
            elif c.name == "version":
                version = c.args[0].encode()
            else:
                extra = c.args[0]
        else:
            raise d.error("unknown property '%s'" % c.name)
    if listen:
        tls = None
        if kind == "tls":
            if certs is None:
                raise d.error("TLS listener requires cert and key files")
            tls = _server_tls(d, block, certs, skipverify)
        output = Listener(kind, address, tls)
    else:
        tls = _client_tls(address[0], skipverify) if kind == "tls" else None
        output = Output(kind, address, queue, writebuf, tls)
    return Dnstap(output, full, identity, version, extra)


def _client_tls(host, skipverify):
    from twisted.internet import ssl
    if skipverify:
        return ssl.CertificateOptions(verify=False)
    return ssl.optionsForClientTLS(host)


def _server_tls(d, block, certs, skipverify):
    from twisted.internet import ssl
    paths = [block.path(p) for p in certs]
    try:
        with open(paths[0], "rb") as f:
            cert = f.read()
        with open(paths[1], "rb") as f:
            key = f.read()
        pc = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)
        if len(paths) > 2 and not skipverify:
            with open(paths[2], "rb") as f:
                ca = ssl.Certificate.loadPEM(f.read())
            return pc.options(ca)
        return pc.options()
    except (OSError, Exception) as e:
        raise d.error("unable to load TLS certificate: %s" % e) from e
