"""What every rule kind shares: the per-query state a rule rewrites and
the base class.

A rule has two steps.  ``match(q)`` is the cheap test, side-effect free,
run on the Request itself for as long as no rule matched (``q`` has
``qname``, ``qtype`` and ``qclass``); its truthy result is handed to
``apply(state, hit)``, which changes the State and returns the response
rules to run on the way back (a list, maybe empty), or None when the rule
turns out not to apply after all.
"""

from collections.abc import Callable
from typing import Any

STOP, CONTINUE = "stop", "continue"


class State:
    """The question being rewritten: starts as the client's, ends as the
    one the rest of the chain sees.  ``opts`` is None until an edns0 rule
    touches the OPT record, then the list of (code, data) options."""

    __slots__ = ("req", "name", "qname", "qtype", "qclass", "opts",
                 "opt_added", "renamed", "reverts")

    def __init__(self, req):
        self.req = req
        self.name = req.name
        self.qname = req.qname
        self.qtype = req.qtype
        self.qclass = req.qclass
        self.opts = None
        self.opt_added = False
        self.renamed = False
        self.reverts = []

    def set_name(self, name):
        self.name = name
        self.qname = name.lower()
        self.renamed = True

    def options(self):
        """The options list to edit; an OPT record is made up when the
        query had none (CoreDNS adds one of 4096 bytes)."""
        opts = self.opts
        if opts is None:
            edns = self.req.edns
            if edns is None:
                self.opt_added = True
                opts = self.opts = []
            else:
                opts = self.opts = list(edns.options)
        return opts


class Rule:
    """Base of the rule kinds; ``stop`` is the rule's processing mode."""

    def __init__(self, mode):
        self.stop = mode != CONTINUE
        #: ``match(q)``: an attribute, not a method, so that each kind
        #: installs the test its arguments call for (match.matcher)
        self.match: Callable[[Any], Any] = _always

    def apply(self, st, hit):
        return []


def _always(q):
    return True
