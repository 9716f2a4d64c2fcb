"""dnstap: structured logs of client queries and responses (dnstap.info).

``dnstap SOCKET [full] [WRITEBUFFER] [QUEUE] { identity; version; extra;
skipverify }`` sends to a collector (a UNIX socket, ``tcp://`` or
``tls://``); ``dnstap listen SOCKET [full] { ...; tls CERT KEY [CA] }``
accepts collectors that connect to us.

Every message is a protobuf ``dnstap.Dnstap`` (encoded by hand in
``message``) in a data frame of a bidirectional Frame Streams connection
(``framestream``).  ``output`` holds the collector connections and the
bounded queue that keeps a query from ever waiting on them, ``plugin``
the tap in the chain, ``directive`` the parsing of the Corefile line.

The forward plugin (or any plugin talking to an upstream) finds the taps of
its block with ``block.find(IForwarderTap)`` and calls
``tap_forwarder_query`` / ``tap_forwarder_response`` on each.
"""

from corednstw.plugins.dnstap.directive import setup
from corednstw.plugins.dnstap.framestream import (
                                                  CONTENT_TYPE,
                                                  FS_ACCEPT,
                                                  FS_FINISH,
                                                  FS_READY,
                                                  FS_START,
                                                  FS_STOP,
                                                  NAME,
                                                  FrameWriter,
                                                  control_frame,
                                                  parse_control,
)
from corednstw.plugins.dnstap.message import (
                                                  AUTH_QUERY,
                                                  AUTH_RESPONSE,
                                                  CLIENT_QUERY,
                                                  CLIENT_RESPONSE,
                                                  FORWARDER_QUERY,
                                                  FORWARDER_RESPONSE,
                                                  INET,
                                                  INET6,
                                                  RESOLVER_QUERY,
                                                  RESOLVER_RESPONSE,
                                                  TCP,
                                                  UDP,
                                                  encode_dnstap,
                                                  encode_message,
                                                  envelope_head,
                                                  varint,
)
from corednstw.plugins.dnstap.output import Listener, Output
from corednstw.plugins.dnstap.plugin import Dnstap

__all__ = [
    "AUTH_QUERY", "AUTH_RESPONSE", "CLIENT_QUERY", "CLIENT_RESPONSE",
    "CONTENT_TYPE", "Dnstap", "FORWARDER_QUERY", "FORWARDER_RESPONSE",
    "FS_ACCEPT", "FS_FINISH", "FS_READY", "FS_START", "FS_STOP",
    "FrameWriter", "INET", "INET6", "Listener", "NAME", "Output",
    "RESOLVER_QUERY", "RESOLVER_RESPONSE", "TCP", "UDP", "control_frame",
    "encode_dnstap", "encode_message", "envelope_head", "parse_control",
    "setup", "varint",
]
