"""tls: the certificate of the block's encrypted listeners.

``tls CERT KEY [CA] { client_auth nocert|request|require|verify_if_given|
require_and_verify; keylog FILE }``.  The files are resolved against
``root`` and read now (a missing or broken one fails the setup at the
directive's line); the result goes to ``block.settings["tls"]``, where the
encrypted listeners of the block take it.  CoreDNS's minimum version, TLS
1.2, applies.  ``keylog`` appends every handshake's secrets to FILE (NSS
key log format), for debugging.  ACME is not offered.
"""

import os

from corednstw.core import logger
from corednstw.core.plugin import Plugin
from corednstw.dnsserver import tlsconfig


class TLS(Plugin):
    name = "tls"
    in_chain = False
    once = False    # a repeat gets CoreDNS's own message, below

    def __init__(self, settings):
        self.settings = settings

    def stop(self):
        """The key log is closed with the configuration that opened it."""
        if self.settings.keylog is not None:
            self.settings.keylog.close()


def _options(d, block):
    """The client_auth value (default nocert) and the keylog path (or
    None) of the directive's block."""
    auth = "nocert"
    keylog = None

    def client_auth(c):
        nonlocal auth
        auth = c.choice(c.one(), tlsconfig.CLIENT_AUTH,
                        "unknown authentication type '%s'")

    def keylog_file(c):
        nonlocal keylog
        keylog = c, block.path(c.one())

    d.read_options({"client_auth": client_auth, "keylog": keylog_file},
                   unknown="unknown option '%s'")
    return auth, keylog


def _open_keylog(keylog):
    """The key log opened for appending, CoreDNS's warning logged."""
    c, path = keylog
    path = os.path.abspath(path)
    try:
        log = tlsconfig.KeyLog(path)
    except OSError as e:
        raise c.error("unable to write TLS Key Log to %s: %s"
                      % (_quote(path), e.strerror or e)) from e
    logger.warning("tls", "Writing TLS Key Log to %s" % _quote(path))
    return log


def _quote(text):
    """Go's %q of a path (printable ASCII)."""
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def setup(d, block):
    if "tls" in block.settings:
        raise d.error("TLS already configured for this server instance")
    if not d.args:
        raise d.error("ACME certificates: not supported yet")
    d.between(2, 3)
    auth, keylog = _options(d, block)
    files = [block.path(a) for a in d.args]
    try:
        settings = tlsconfig.ServerTLS(
            files[0], files[1], files[2] if len(files) > 2 else None,
            client_auth=auth)
    except tlsconfig.TLSError as e:
        raise d.error(str(e)) from e
    if keylog is not None:
        settings.set_keylog(_open_keylog(keylog))
    block.settings["tls"] = settings
    return TLS(settings)
