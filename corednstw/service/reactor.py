"""Twisted's reactor, imported without its TLS support until TLS is used.

Importing the reactor loads Twisted's TLS layer (twisted.protocols.tls
for ``startTLS``, ``listenSSL`` and ``connectSSL``, twisted.internet.ssl
beside it) and with it pyOpenSSL, cryptography's X.509 modules and
service_identity: 70-80 ms of CPU, a third of the process's start, for
a Corefile that speaks no TLS (kubeadm's: its API client uses the
standard library's ssl).  ``load`` imports the reactor with both put
off: the reactor's modules bind a stand-in whose ``TLSMemoryBIOFactory``
imports the real module at its first call (then puts it in their place);
twisted.internet.ssl, the reactor's fallback when twisted.protocols.tls
cannot be imported, is not loaded (with the stand-in it is never used).
Everything that uses TLS (DoT, DoH, a TLS upstream, ``tls FILE`` of
prometheus) imports twisted.protocols.tls itself and gets the real
module.
"""

import importlib.util
import sys
import types

_TLS = "twisted.protocols.tls"
_SSL = "twisted.internet.ssl"


def load():
    """The global reactor (installed and imported when nothing has)."""
    if "twisted.internet.reactor" not in sys.modules and \
            _TLS not in sys.modules and _SSL not in sys.modules and \
            importlib.util.find_spec("OpenSSL") is not None:
        _import_without_tls()
    from twisted.internet import reactor
    return reactor


def _tls_factory(*args, **kwargs):
    """The stand-in's TLSMemoryBIOFactory: the real one, made once the
    real module is loaded (and the reactor's modules given it)."""
    from twisted.internet import _newtls, posixbase
    from twisted.protocols import tls
    posixbase.tls = tls
    setattr(_newtls, "TLSMemoryBIOFactory", tls.TLSMemoryBIOFactory)
    return tls.TLSMemoryBIOFactory(*args, **kwargs)


def _import_without_tls():
    stand_in = types.ModuleType(_TLS)
    stand_in.TLSMemoryBIOFactory = _tls_factory  # type: ignore
    sys.modules[_TLS] = stand_in
    # posixbase falls back on twisted.internet.ssl only without
    # twisted.protocols.tls: with the stand-in it never does.
    sys.modules[_SSL] = None  # type: ignore
    try:
        from twisted.internet import reactor  # noqa: F401
    finally:
        for name, module in ((_TLS, stand_in), (_SSL, None)):
            if name in sys.modules and sys.modules[name] is module:
                del sys.modules[name]
