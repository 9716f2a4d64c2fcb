"""https: options of the block's DNS-over-HTTPS listeners.

``https { max_connections N }``: at most N concurrent connections per
listener (default 200, 0 for no limit); the listener stops accepting while
that many are open.  Stored in ``block.settings["https"]``.
"""

from corednstw.core.plugin import Plugin


class HTTPS(Plugin):
    name = "https"
    in_chain = False

    def __init__(self, values):
        self.values = values


def setup(d, block):
    if d.args:
        raise d.arg_error()
    values = {}
    for c in d.children:
        if c.name != "max_connections":
            raise c.error("unknown property '%s'" % c.name)
        if len(c.args) != 1:
            raise c.arg_error()
        try:
            n = int(c.args[0])
        except ValueError as e:
            raise c.error("invalid max_connections value '%s': "
                          "strconv.Atoi: parsing %s: invalid syntax"
                          % (c.args[0], _quote(c.args[0]))) from e
        if n < 0:
            raise c.error("max_connections must be a non-negative integer: "
                          "%d" % n)
        if "max_connections" in values:
            raise c.error("max_connections already defined for this server "
                          "block")
        values["max_connections"] = n
    block.settings["https"] = values
    return HTTPS(values)


def _quote(s):
    """Go's %q of a plain string."""
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
