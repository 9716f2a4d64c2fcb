"""rewrite: change the question (name, type, class, EDNS0 options) before
the rest of the chain sees it, and the response (names back, TTLs,
rcode, CNAME targets) before the client does.

Every ``rewrite`` line of a block adds one rule to a single list, tried in
Corefile order; a matching rule in ``stop`` mode (the default) ends the
list, one in ``continue`` mode goes on.  The rewritten query goes down the
chain as a new Request; the client's own question (its case included) is
what the reply carries.

The rule kinds live in sibling modules; this one parses the Corefile and
runs the rules.  A query no rule matches costs one cheap test per rule:
nothing is built until a rule matches.
"""

import struct

from corednstw.core import dnswire as w
from corednstw.core import logger
from corednstw.core.plugin import Plugin, then
from corednstw.core.request import (
    SUPPORTED_OPTIONS,
    NoReply,
    Response,
    parse_response,
)
from corednstw.plugins.rewrite import edns0, name, response, simple
from corednstw.plugins.rewrite.rule import CONTINUE, STOP, State

_H = struct.Struct("!H")
_QTAIL = struct.Struct("!HH")
#: Size of the OPT record added to a query that had none (as CoreDNS).
ADDED_OPT_SIZE = 4096


class Rewrite(Plugin):
    name = "rewrite"
    once = False

    def __init__(self, rules):
        self.rules = rules

    def serve(self, req):
        for rule in self.rules:
            hit = rule.match(req)
            if hit:
                return self._rewrite(req, rule, hit)
        return self.next.serve(req)

    # -- the query ------------------------------------------------------------

    def _rewrite(self, req, first, hit):
        """Run the rules from ``first`` (which matched with ``hit``)."""
        st = State(req)
        responses = []
        done = False
        rules = self.rules
        for rule in rules[rules.index(first):]:
            if rule is not first:
                hit = rule.match(st)
                if not hit:
                    continue
            out = rule.apply(st, hit)
            if out is None:
                continue
            if st.renamed and _wire(st.name) is None:
                return _invalid(st.name)
            done = True
            responses.extend(out)
            if rule.stop:
                break
        if not done:
            return self.next.serve(req)
        new = req.copy(data=_query_bytes(req, st), longest=LONGEST_NAME)
        return then(self.next.serve(new), self._respond, req, new, st,
                    responses)

    # -- the response ---------------------------------------------------------

    def _respond(self, resp, req, new, st, responses):
        if isinstance(resp, NoReply):
            return resp
        if not responses and st.opts is None:
            if resp is not None and resp.wire is not None:
                # Encoded for the rewritten question: encode again for
                # the client's.
                resp.wire = None
            return resp
        out = _copy(resp)
        cnames = [r for r in reversed(responses)
                  if getattr(r, "cname", False)]
        if cnames:
            d = self._cnames(out, cnames, new)
            if d is not None:
                return d.addCallback(self._records, req, st, responses)
        return self._records(out, req, st, responses)

    def _records(self, out, req, st, responses):
        """Run the record rules (last rule first) over every record."""
        plain = [r for r in reversed(responses)
                 if not getattr(r, "cname", False)
                 and not getattr(r, "revert", False)]
        if plain:
            records = out.authority + out.answer + out.additional
            for rr in records:
                for r in plain:
                    r.record(out, rr)
            if not records:
                for r in plain:
                    if r.message:
                        r.record(out, None)
        _client_case(out, req)
        _reply_options(out, req, st, responses)
        return out

    def _cnames(self, out, cnames, new):
        """Apply the cname rules one after the other; a Deferred when a
        lookup is under way, None when nothing needed one."""
        for i, r in enumerate(cnames):
            found = r.find(out)
            if found is None:
                continue
            index, target = found
            app = self.block.server
            d = app.lookup(target, r.qtype, parent=new)

            def got(up, r=r, index=index, target=target, rest=cnames[i + 1:]):
                if up is None:
                    logger.error("rewrite", "upstream lookup returned nil")
                else:
                    r.splice(out, index, target, up)
                return self._cnames(out, rest, new) or out

            def failed(f):
                logger.error("rewrite", "upstream lookup failed: %s"
                             % f.getErrorMessage())
                return out
            return d.addCallbacks(got, failed)
        return None


#: The longest question name a rule may make, in wire octets.  CoreDNS
#: checks the new name with miekg's IsDomainName, whose count leaves out
#: the root label and allows one octet over 256: names of 256 and 257
#: octets pass, reach the next plugin (the file plugin answers NXDOMAIN
#: for them) and never go on the wire, as the reply carries the client's
#: question.
LONGEST_NAME = 257


def _wire(text):
    """The wire form of a rewritten question name, or None when CoreDNS
    refuses the name (an empty or over-long label, or longer than
    LONGEST_NAME)."""
    try:
        return w.name_to_wire(text)
    except ValueError:
        pass
    if "\\" in text or text in ("", "."):
        return None
    out = bytearray()
    for label in text.rstrip(".").split("."):
        b = label.encode("utf-8")
        if not b or len(b) > 63:
            return None
        out.append(len(b))
        out += b
    out.append(0)
    return bytes(out) if len(out) <= LONGEST_NAME else None


def _invalid(text):
    """CoreDNS's answer to a rule that made an unusable name: SERVFAIL
    with the error for the errors plugin."""
    r = Response(w.SERVFAIL)
    r.error = "invalid name after rewrite: %s" % text
    return r


def _query_bytes(req, st):
    """The wire query with the State's question and OPT record."""
    data = req.data
    qwire = _wire(st.name) if st.renamed else req.qwire
    head = data[:12]
    rest = data[req.qend:]
    if st.opts is not None:
        head, rest = _with_opt(req, head, rest, st)
    return head + qwire + _QTAIL.pack(st.qtype, st.qclass) + rest


def _with_opt(req, head, rest, st):
    """Header and records after the question, the OPT record replaced by
    (or, when the query had none, completed with) the State's options."""
    if req.edns is None:
        opt = w.opt_wire(ADDED_OPT_SIZE, 0, st.opts)
        ar = _H.unpack_from(head, 10)[0] + 1
        head = head[:10] + _H.pack(ar)
        if req.tsig is not None:
            # TSIG stays the last record.
            cut = req.tsig - req.qend
            return head, rest[:cut] + opt + rest[cut:]
        return head, rest + opt
    an, ns, ar = struct.unpack_from("!HHH", head, 6)
    # Walked in the whole message: a compressed owner name points there.
    data = req.data
    base = off = req.qend
    for _ in range(an + ns):
        off = w.skip_rr(data, off)[0]
    for _ in range(ar):
        start = off
        off, rtype, rclass, ttl, _rd = w.skip_rr(data, off)
        if rtype == w.OPT:
            opt = w.opt_wire(rclass, ttl, st.opts)
            return head, rest[:start - base] + opt + rest[off - base:]
    return head, rest


def _copy(resp):
    """A private, structured copy of ``resp`` for the response rules to
    edit (the original may be shared, a cache entry for one)."""
    if resp is None:
        return Response(w.SERVFAIL)
    if resp.raw is not None:
        out = parse_response(resp.raw)
        out.plugin = resp.plugin
        out.error = resp.error
        return out
    out = Response(resp.rcode, [rr.copy() for rr in resp.answer],
                   [rr.copy() for rr in resp.authority],
                   [rr.copy() for rr in resp.additional],
                   flags=resp.flags, plugin=resp.plugin)
    if resp.opt is not None:
        out.opt = w.EDNS(resp.opt.size, resp.opt.ttl, list(resp.opt.options))
    out.error = resp.error
    return out


def _client_case(out, req):
    """Names turned back into the question get the client's spelling."""
    qname, name = req.qname, req.name
    for section in (out.answer, out.authority, out.additional):
        for rr in section:
            if rr.name != name and rr.name.lower() == qname:
                rr.name = name


def _reply_options(out, req, st, responses):
    """The OPT options of the reply, as CoreDNS's echo of the (rewritten)
    query makes them: the query's options after the edns0 rules, the
    ``revert`` ones undone.  An answer with an OPT record of its own keeps
    it, with the reverts applied."""
    reverts = [r for r in reversed(responses) if getattr(r, "revert", False)]
    if out.opt is not None:
        for r in reverts:
            r.apply(out.opt.options)
        return
    if st.opts is None or req.edns is None:
        return
    opts = list(st.opts)
    for r in reverts:
        r.apply(opts)
    opts = [o for o in opts if o[0] in SUPPORTED_OPTIONS]
    original = [o for o in req.edns.options if o[0] in SUPPORTED_OPTIONS]
    if opts != original:
        out.opt = w.EDNS(req.edns.size, req.edns.ttl & 0xFF00, opts)


# -- setup -------------------------------------------------------------------

_FIELDS = {
    "name": name.new_rule,
    "edns0": edns0.new_rule,
    "ttl": response.new_ttl_rule,
    "cname": response.new_cname_rule,
    "rcode": response.new_rcode_rule,
}


def new_rule(args):
    """One rule from a rewrite line's arguments; ValueError with
    CoreDNS's message when they are wrong."""
    if not args:
        raise ValueError("no rule type specified for rewrite")
    first = args[0].lower()
    mode = STOP
    if first in (CONTINUE, STOP):
        if len(args) < 2:
            raise ValueError("%s rule must begin with a rule type" % first)
        mode = first
        field, rest = args[1].lower(), args[2:]
    else:
        field, rest = first, args[1:]
    if field == "answer":
        raise ValueError("response rewrites must begin with a name rule")
    if field in ("class", "type"):
        if len(rest) != 2:
            raise ValueError("%s rules must have exactly two arguments"
                             % field)
        make_field = simple.new_type_rule if field == "type" else \
            simple.new_class_rule
        return make_field(mode, rest)
    make = _FIELDS.get(field)
    if make is None:
        raise ValueError('invalid rule type "%s"' % args[0])
    return make(mode, rest)


def setup(d, block):
    args = list(d.args)
    if len(args) < 2:
        # A block holds one rule, its tokens read one after the other.
        for c in d.children:
            args.append(c.name)
            args.extend(c.args)
    elif d.children:
        raise d.error("unexpected block after a complete rule")
    try:
        rule = new_rule(args)
    except ValueError as e:
        raise d.error(str(e)) from e
    for p in block.plugins:
        if isinstance(p, Rewrite):
            # Later lines extend the first one's list: one plugin, so
            # ``stop`` ends every rule after it.
            p.rules.append(rule)
            return None
    return Rewrite([rule])
