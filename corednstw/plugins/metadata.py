"""metadata: collects metadata from the plugins of the block that provide
it, for every query in its zones, before the rest of the chain runs.

``metadata [ZONES...]``.  A *provider* is a plugin of the block that
declares ``IMetadataProvider`` (core/interfaces.py); its ``metadata(req)``
publishes values with ``set_value(req,
"plugin/name", value)`` (or straight into ``req.meta()``), where ``value`` is
a string or a callable returning one, called only when someone reads it
(``value(req, label)``; log's ``{/label}``, dnstap's ``extra``).  The empty
string means "no metadata".

As in CoreDNS, values can be set only while a metadata collector runs for the
query: ``set_value`` is a no-op (returning False) when the block has no
*metadata* plugin.  Plugins that learn something while serving (forward's
upstream, a wildcard match) call ``set_value`` then.
"""

from corednstw.core.interfaces import IMetadataProvider
from corednstw.core.plugin import Plugin, match, zones_from_args


def is_label(label):
    """True for ``plugin/NAME`` (text on both sides of the first slash)."""
    i = label.find("/")
    return 0 < i < len(label) - 1


def set_value(req, label, value):
    """Publish ``label`` for ``req``; False when metadata is not enabled
    for this query.  ``value``: a string or a callable returning one."""
    md = req.metadata
    if md is None:
        return False
    md[label] = value
    return True


def value(req, label):
    """The string published under ``label``, or None when there is none."""
    md = req.metadata
    if not md:
        return None
    v = md.get(label)
    if v is None:
        return None
    if callable(v):
        v = v()
    return v


def labels(req):
    """Every label published for ``req``."""
    return list(req.metadata or ())


class Metadata(Plugin):
    name = "metadata"
    passes_answers = True

    def __init__(self, zones):
        self.zones = zones
        self._providers = None

    def providers(self):
        """The ``metadata`` methods of the block's plugins, in chain order."""
        p = self._providers
        if p is None:
            p = self._providers = [x.metadata for x in
                                   self.block.find(IMetadataProvider)]
        return p

    def start(self):
        self._providers = None
        self.providers()

    def collect(self, req):
        """A fresh metadata dict for ``req``, filled by every provider when
        the query is in our zones."""
        req.metadata = {}
        if match(self.zones, req.qname) is not None:
            for provide in self.providers():
                provide(req)

    def serve(self, req):
        self.collect(req)
        return self.next.serve(req)


def setup(d, block):
    if d.children:
        raise d.arg_error(d.children[0].name)
    return Metadata(zones_from_args(d.args, block))
