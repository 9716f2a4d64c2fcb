"""hello: answers TXT "hello from corednstw" for chosen names.

A plugin shipped as its own package: the entry point
``hello = corednstw_example:PLUGIN`` (pyproject.toml) registers the
directive, ``PLUGIN`` says where it sits in the chain.

    hello [NAMES...] {
        text TEXT
    }

NAMES default to ``hello.`` under each zone of the server block; other
questions go on down the chain.
"""

from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import metrics, names
from corednstw.core.directives import PluginEntry
from corednstw.core.interfaces import IReadiness
from corednstw.core.plugin import Plugin

__version__ = "0.1.0"

ANSWERS = metrics.counter(
    "coredns_hello_answers_total",
    "Counter of the TXT answers the hello plugin gave.", ("server",))


@implementer(IReadiness)
class Hello(Plugin):
    """One per server block; the TXT rdata is built once, at setup."""

    name = "hello"
    started = False

    def __init__(self, names, text):
        self.names = frozenset(names)
        self.rdata = w.txt_rdata(text)

    def serve(self, req):
        if req.qname not in self.names or req.qtype != w.TXT:
            return self.next.serve(req)
        ANSWERS.inc((req.server,))
        txt = w.RR(req.name, w.TXT, 60, self.rdata, req.qclass)
        return self.respond(req, answer=[txt])

    def start(self):
        self.started = True

    def ready(self):
        """Ready once the configuration runs (a plugin loading data would
        say so once it is loaded)."""
        return self.started


def setup(d, block):
    """``hello [NAMES...] { text TEXT }``: errors name the line."""
    text = "hello from corednstw"
    for c in d.children:
        if c.name != "text":
            raise c.error("unknown property '%s'" % c.name)
        if len(c.args) != 1:
            raise c.arg_error()
        text = c.args[0]
    wanted = [names.normalize_name(a) for a in d.args]
    if not wanted:
        wanted = ["hello." + z if z != "." else "hello." for z in
                  block.zones]
    return Hello(wanted, text)


#: Where ``hello`` sits: before the data plugins (hosts, file, forward,
#: ...) see the question, so below cache; and it must stay below
#: prometheus, which counts its answers.
PLUGIN = PluginEntry("hello", setup, before="hosts",
                     follows=("prometheus",))
