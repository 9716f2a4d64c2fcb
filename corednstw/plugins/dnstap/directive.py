"""Parsing the dnstap directive: ``dnstap SOCKET [full] [WRITEBUFFER]
[QUEUE] { identity; version; extra; skipverify }`` and ``dnstap listen
SOCKET [full] { ...; tls CERT KEY [CA] }``."""

import socket
import types
from typing import Union

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
    """WRITEBUFFER or QUEUE: a count of ``units`` from 1 to ``top``.
    CoreDNS quotes a count it cannot read, not Go's reason."""
    return d.integer(text, lo=1, hi=top,
                     error="dnstap: invalid " + what + " {text!r}",
                     range_error="dnstap: %s must be between 1 and %d "
                     "(%s): {reason}" % (what, top, units))


def _value(c):
    """The one value of ``identity``, ``version`` or ``extra``; a wrong
    count is reported after the option's name."""
    if len(c.args) != 1:
        raise c.arg_error(c.name)
    return c.args[0]


def _options(d, listen):
    """The block's settings, read in Corefile order."""
    from corednstw import COREDNS_VERSION
    o = types.SimpleNamespace(
        identity=socket.gethostname().encode(),
        version=("CoreDNS-" + COREDNS_VERSION).encode(),
        extra="", skipverify=False, certs=None)

    def skipverify(c):
        c.no_args()
        o.skipverify = True

    def tls(c):
        """``tls CERT KEY [CA]``: a listener's certificate."""
        if not listen:
            raise d.error("tls directive only valid for listeners")
        if len(c.args) < 2:
            raise d.error("tls requires cert and key file paths")
        o.certs = c.between(2, 3)

    d.read_options({
        "skipverify": skipverify,
        "tls": tls,
        "identity": lambda c: setattr(o, "identity", _value(c).encode()),
        "version": lambda c: setattr(o, "version", _value(c).encode()),
        "extra": lambda c: setattr(o, "extra", _value(c)),
    }, unknown_here=True)
    return o


def setup(d, block):
    """``dnstap [listen] SOCKET [full] [WRITEBUFFER] [QUEUE] { ... }``."""
    args = d.between(1)
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
    o = _options(d, listen)
    output: Union[Listener, Output]
    if listen:
        # The TLS files are read when the listener opens, as CoreDNS's.
        certs = [block.path(p) for p in o.certs] if o.certs else None
        output = Listener(kind, address, certs, o.skipverify)
    else:
        tls = (_client_tls(address[0], o.skipverify) if kind == "tls"
               else None)
        output = Output(kind, address, queue, writebuf, tls)
    return Dnstap(output, full, o.identity, o.version, o.extra)


def _client_tls(host, skipverify):
    from twisted.internet import ssl
    if skipverify:
        return ssl.CertificateOptions(verify=False)
    return ssl.optionsForClientTLS(host)
