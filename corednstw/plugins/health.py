"""health: /health answers 200 OK while the process lives.

``health [ADDRESS] { lameduck DURATION }`` (default :8080).  On shutdown the
server keeps answering (and /health keeps saying OK) for the lameduck
duration before it stops, so load balancers drain it first.
"""

from corednstw import httpd
from corednstw.durations import parse_duration
from corednstw.plugin import Plugin

DEFAULT_ADDRESS = ":8080"


class Health(Plugin):
    name = "health"
    in_chain = False

    def __init__(self, address, lameduck):
        self.address = address
        self.lameduck = lameduck


def _ok():
    return 200, "OK"


def setup(d, block):
    if len(d.args) > 1:
        raise d.arg_error()
    address = d.args[0] if d.args else DEFAULT_ADDRESS
    lameduck = 0.0
    for c in d.children:
        if c.name != "lameduck":
            raise d.error("unknown property '%s'" % c.name)
        if len(c.args) != 1:
            raise c.arg_error()
        try:
            lameduck = parse_duration(c.args[0])
        except ValueError:
            raise d.error("unable to parse lameduck duration value: '%s'"
                          % c.args[0])
    block.config.handle_http(address, "/health", httpd.Text(_ok), d)
    return Health(address, lameduck)
