"""view: route queries to a server block by expression (CoreDNS's view).

``view NAME { expr EXPRESSION ... }``.  Several server blocks may then
serve the same zone on the same port: the block mux tries them in Corefile
order and takes the first whose filters accept the query (a block without
``view`` accepts everything, so it belongs last).  Every ``expr`` must give
the boolean ``true``; anything else, a runtime error too, refuses.

The expressions are compiled at setup (docs/expressions.md) and run as the
block's filter before its chain; when the block has the *metadata* plugin,
metadata is collected first, as CoreDNS does, so ``metadata('...')`` works.
The view's name is the ``view`` label of the server metrics and the
``view/name`` metadata value.  The plugin itself is not on the request
path.
"""

from zope.interface import implementer

from corednstw.core.interfaces import IMetadataProvider
from corednstw.core.plugin import Plugin
from corednstw.engines import expressions as ex
from corednstw.plugins import metadata as md


@implementer(IMetadataProvider)
class View(Plugin):
    name = "view"
    in_chain = False

    def __init__(self, view_name, programs):
        self.view_name = view_name
        self.programs = programs
        self._collect = None

    def start(self):
        meta = self.block.plugin("metadata")
        self._collect = meta.collect if isinstance(meta, md.Metadata) \
            else None

    def filter(self, req):
        """True when every expression is true for ``req``."""
        collect = self._collect
        if collect is not None:
            collect(req)
        scope = ex.Scope(req)
        for prog in self.programs:
            if not prog.truth(scope):
                return False
        return True

    def metadata(self, req):
        md.set_value(req, "view/name", self.view_name)

    def __repr__(self):
        return "<View %s>" % self.view_name


def setup(d, block):
    """``view NAME { expr EXPRESSION... }``: the expressions are compiled
    here, so a bad one fails the configuration, not a query."""
    view_name = d.one()
    env = ex.default_env()
    programs = []

    def expr(c):
        source = " ".join(c.args)
        try:
            programs.append(ex.compile_expr(source, env))
        except ex.ExpressionError as e:
            raise c.error("%s: %s" % (source, e)) from e

    d.read_options({"expr": expr})
    plugin = View(view_name, programs)
    block.filters.append(plugin.filter)
    block.view = view_name
    return plugin
