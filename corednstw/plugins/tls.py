"""tls: the certificate of the block's encrypted listeners.

``tls CERT KEY [CA] { client_auth nocert|request|require|verify_if_given|
require_and_verify }``.  The files are resolved against ``root`` and read
now (a missing or broken one fails the setup at the directive's line);
the result goes to ``block.settings["tls"]``, where the tls:// and
https:// listeners of the block take it.  CoreDNS's minimum version, TLS
1.2, applies.  A ``keylog`` file and ACME are not offered.
"""

from corednstw.core.plugin import Plugin
from corednstw.dnsserver import tlsconfig


class TLS(Plugin):
    name = "tls"
    in_chain = False
    once = False    # a repeat gets CoreDNS's own message, below

    def __init__(self, settings):
        self.settings = settings


def _client_auth(d):
    """The client_auth value of the directive's block (default nocert)."""
    auth = "nocert"

    def client_auth(c):
        nonlocal auth
        auth = c.choice(c.one(), tlsconfig.CLIENT_AUTH,
                        "unknown authentication type '%s'")

    def keylog(c):
        """Named, so that it is refused as unsupported, not unknown."""
        raise c.error("keylog: not supported")

    d.read_options({"client_auth": client_auth, "keylog": keylog},
                   unknown="unknown option '%s'")
    return auth


def setup(d, block):
    if "tls" in block.settings:
        raise d.error("TLS already configured for this server instance")
    if not d.args:
        raise d.error("ACME certificates: not supported yet")
    d.between(2, 3)
    auth = _client_auth(d)
    files = [block.path(a) for a in d.args]
    try:
        settings = tlsconfig.ServerTLS(
            files[0], files[1], files[2] if len(files) > 2 else None,
            client_auth=auth)
    except tlsconfig.TLSError as e:
        raise d.error(str(e)) from e
    block.settings["tls"] = settings
    return TLS(settings)
