"""header: set or clear header flags of queries and responses.

``header { query|response set|clear FLAG... }`` with the flags CoreDNS
supports (aa, ra, rd); the old ``set|clear FLAG...`` (no selector) means
``response``, with a deprecation notice.  Rules run in Corefile order, the
last one wins.  Query rules change the request every later plugin (and an
upstream) sees; response rules change what the client gets.
"""

import struct

from corednstw.core import dnswire as w
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import unwritten

FLAGS = {"aa": w.AA, "ra": w.RA, "rd": w.RD}


def new_rules(action, flags):
    """[(bit, state)] for one rule line; ValueError with CoreDNS's text."""
    if not action:
        raise ValueError("no flag action provided")
    if not flags:
        raise ValueError("invalid length for flags, at least one should be "
                         "provided")
    action = action.lower()
    if action == "set":
        state = True
    elif action == "clear":
        state = False
    else:
        raise ValueError("unknown flag action=%s, should be set or clear"
                         % action)
    rules = []
    for f in flags:
        bit = FLAGS.get(f.lower())
        if bit is None:
            raise ValueError("unknown/unsupported flag=%s" % f.lower())
        rules.append((bit, state))
    return rules


def apply(flags, rules):
    for bit, state in rules:
        if state:
            flags |= bit
        else:
            flags &= ~bit
    return flags


class Header(Plugin):
    name = "header"

    def __init__(self, query_rules, response_rules):
        self.query_rules = query_rules
        self.response_rules = response_rules

    def serve(self, req):
        if self.query_rules:
            flags = apply(req.flags, self.query_rules)
            if flags != req.flags:
                req.flags = flags
                # The bytes too: an upstream forwards the query as it is.
                req.data = (req.data[:2] + struct.pack("!H", flags)
                            + req.data[4:])
                req._message = None
        if not self.response_rules:
            return self.next.serve(req)
        return then(self.next.serve(req), self._response, req)

    def _response(self, resp, req):
        if resp is None or unwritten(resp):
            # An error the server writes itself: no rules (CoreDNS's
            # header wraps a writer such an error never goes through).
            return resp
        for bit, state in self.response_rules:
            resp.set_flag(bit, state)
            if bit == w.RD and not state:
                # The reply's RD bit is copied from the query when encoded;
                # clearing it there is how the reply loses it.
                req.flags &= ~w.RD
        return resp


def _rule_line(c):
    """(selector, action, flags) of one rule line.

    Before CoreDNS 1.12.4 the selector could be left out (``set ra``) and
    meant ``response``; such Corefiles still work, with a notice naming
    the explicit form.
    """
    selector = c.name.lower()
    if selector in ("set", "clear"):
        rule = " ".join([c.name] + c.args)
        c.deprecated('a rule without a selector is deprecated: write '
                     '"response %s" instead of "%s"' % (rule, rule))
        return "response", c.name, c.args
    if selector not in ("query", "response"):
        raise c.error("setting up rule: invalid selector=%s should be "
                      "query or response" % selector)
    return selector, (c.args[0] if c.args else ""), c.args[1:]


def _read_rule(c, rules):
    """One rule line into ``rules`` (selector -> [(bit, state)])."""
    selector, action, flags = _rule_line(c)
    try:
        rules[selector].extend(new_rules(action, flags))
    except ValueError as e:
        raise c.error("setting up rule: %s" % e) from e


def setup(d, block):
    d.no_args()
    rules: dict[str, list[tuple[int, bool]]] = {"query": [],
                                                "response": []}
    # Every line is a rule; its selector is checked without regard to
    # case, so the lines are not told apart by read_options' names.
    d.read_options({None: lambda c: _read_rule(c, rules)}, unknown=None)
    if not rules["query"] and not rules["response"]:
        raise d.arg_error()
    return Header(rules["query"], rules["response"])
