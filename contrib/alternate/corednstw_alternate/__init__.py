"""alternate: asks other upstreams when the answer has one of the listed
rcodes (the external plugin github.com/coredns/alternate).

    alternate [original] RCODE[,RCODE...] FROM TO...

The plugin sits right before ``forward`` (where the upstream README tells
a CoreDNS build to put it).  It lets the query go on down the chain, looks
at the rcode of what comes back (SERVFAIL when nothing was written) and,
when a rule names that rcode, sends the query to the rule's upstreams
instead and answers with what they say.  The upstreams are a ``Forward``
of corednstw's forward plugin with its defaults (random policy, health
checks, ``max_fails 2``) over the upstream engine's ``Upstream`` objects,
labelled ``proxy_name="alternate"`` in the ``coredns_proxy_*`` metrics,
as the upstream plugin builds one forward per line.

``original``: the rule sends the query as this plugin received it, not as
the plugins below it may have changed it in place.
"""

from twisted.internet import defer

from corednstw.core import dnswire as w
from corednstw.core import names
from corednstw.core.directives import PluginEntry
from corednstw.core.plugin import END, Plugin, then
from corednstw.engines.upstream import DEFAULT_EXPIRE, Upstream, hostport
from corednstw.engines.upstream.addresses import host_port_or_file
from corednstw.plugins.forward import Forward

__version__ = "0.1.0"

#: miekg/dns's StringToRcode: the rcode names a rule may use.
RCODES = {w.rcode_text(i): i for i in range(24)
          if not w.rcode_text(i).isdigit()}


class Upstreams(Forward):
    """The forward of one line: forward's defaults and query path; no
    dnstap messages (the upstream plugin's forward has no tap)."""

    name = "alternate"

    def start(self):
        started = super().start()
        self.taps = ()
        return started


class Rule:
    """What to do for one rcode: the line's upstreams, and whether they
    get the query as it arrived here."""

    __slots__ = ("original", "upstreams")

    def __init__(self, original, upstreams):
        self.original = original
        self.upstreams = upstreams


class Alternate(Plugin):
    """Every ``alternate`` line of a server block, folded into one plugin:
    ``rules`` maps an rcode to its Rule."""

    name = "alternate"
    once = False

    def __init__(self):
        self.rules = {}
        self.lines = []

    def start(self):
        for u in self.lines:
            u.block = self.block
            u.start()

    def stop(self):
        ds = [u.stop() for u in self.lines]
        ds = [d for d in ds if d is not None]
        return defer.DeferredList(ds) if ds else None

    def serve(self, req):
        # The bytes as they are now: plugins below may replace req.data
        # (an ``original`` rule sends these).
        data = req.data
        return then(self.next.serve(req), self._answered, req, data)

    def _answered(self, resp, req, data):
        rule = self.rules.get(w.SERVFAIL if resp is None else resp.rcode)
        if rule is None or not rule.upstreams.match(req.qname):
            return resp
        if rule.original and req.data is not data:
            req = req.copy(data=data)
        return rule.upstreams.serve(req)


def _rcodes(d, text):
    """The rcodes of one ``RCODE[,RCODE...]`` argument."""
    out = []
    for part in text.split(","):
        rc = RCODES.get(part.upper())
        if rc is None:
            raise d.error("%s is not a valid rcode" % part)
        out.append(rc)
    return out


def _is_rcodes(text):
    return all(p.upper() in RCODES for p in text.split(","))


def setup(d, block):
    """One line: its rules join the block's Alternate (made by the first
    line).  Errors are the upstream plugin's."""
    args = d.between(1)
    original = args[0] == "original"
    i = 1 if original else 0
    if i >= len(args):
        raise d.arg_error()
    rcodes = _rcodes(d, args[i])
    i += 1
    # Further RCODE arguments, space-separated (an extension: the
    # upstream plugin takes one comma-separated argument).
    while i < len(args) - 2 and _is_rcodes(args[i]):
        rcodes.extend(_rcodes(d, args[i]))
        i += 1
    existing = block.plugin("alternate")
    plugin = existing if existing is not None else Alternate()
    for rc in rcodes:
        if rc in plugin.rules:
            raise d.error("rcode '%s' is specified more than once"
                          % w.rcode_text(rc))
    if i + 1 >= len(args):
        raise d.arg_error()
    upstreams = _upstreams(d, args[i], args[i + 1:])
    plugin.lines.append(upstreams)
    for rc in rcodes:
        plugin.rules[rc] = Rule(original, upstreams)
    return None if existing is not None else plugin


def _upstreams(d, from_, to):
    """The Upstreams of ``FROM TO...``: plain DNS addresses or
    resolv.conf files, no options."""
    hosts = []
    for t in to:
        hosts.extend(host_port_or_file(d, t))
    if d.children:
        raise d.error("additional parameters not allowed")
    if any(trans != "dns" for trans, _h, _p in hosts):
        raise d.error("only dns transport allowed")
    zones = names.normalize(from_)
    if not zones:
        raise d.error("unable to normalize '%s'" % from_)
    u = Upstreams()
    u.from_ = zones[0]
    u.next = END
    for _t, host, port in dict.fromkeys(hosts):
        p = Upstream(hostport(host, port), host, port, "dns", name="alternate")
        p.expire = DEFAULT_EXPIRE
        u.upstreams.append(p)
    return u


#: Right before forward: it acts on what forward (and any backend below
#: it) answers, and must stay below the middleware that acts on its own
#: answer (prometheus, errors, log, cache).
PLUGIN = PluginEntry(
    "alternate", setup, before="forward",
    follows=("prometheus", "errors", "log", "cache"))
