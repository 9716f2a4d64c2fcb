"""whoami: the client's address, port and transport (CoreDNS's whoami).

The answer section stays empty; the additional section carries an A or
AAAA record of the client for the query name and an SRV record
``_<proto>.<qname>`` whose port is the client's source port.  TTL 0, AA set.
"""

import socket
import struct

from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin
from corednstw.core.request import Response

_SRV_HEAD = struct.Struct("!HHIHHHH")


class Whoami(Plugin):
    name = "whoami"

    def serve(self, req):
        qclass = req.qclass
        if req.family == 2:
            rr = w.RR(req.name, w.AAAA, 0,
                      socket.inet_pton(socket.AF_INET6, req.client), qclass)
        else:
            rr = w.RR(req.name, w.A, 0,
                      socket.inet_aton(req.client), qclass)
        prefix = "_" + req.proto
        srvname = prefix + "." + req.name if req.name != "." else prefix + "."
        srv = w.RR(srvname, w.SRV, 0,
                   struct.pack("!HHH", 0, 0, req.port) + b"\x00", qclass)
        resp = Response(0, aa=True, plugin="whoami")
        resp.additional = [rr, srv]
        return resp


def setup(d, block):
    if d.args:
        raise d.arg_error()
    return Whoami()
