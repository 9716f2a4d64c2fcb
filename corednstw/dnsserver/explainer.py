"""One query, explained: which plugins saw it, what each did, how long.

The query takes the listener's own routing (``Mux.route``), then a traced
copy of the block's chain built for this query alone: every plugin is
copied (``copy.copy``: its state is shared, its ``next`` is not) and
linked to a ``_Step`` that records what it received and returned.  The
chain that serves ordinary queries is never touched, so the hot path
checks no flag.

Actions, per plugin:

* ``answered``: returned an answer without calling the next plugin;
* ``passed``: called the next plugin and returned its answer unchanged;
* ``fell through``: passed a query in its own zones on (a plugin with a
  ``fallthrough`` option: it had no answer for it);
* ``rewrote``: called the next plugin with another question, or changed
  or replaced its answer (``detail`` says which);
* ``wrote nothing``: returned None (the client gets SERVFAIL);
* ``raised``: failed (CoreDNS's panic: SERVFAIL);
* ``not reached``: an earlier plugin answered.

The explained query is a real one: the plugins log it, count it in
their metrics and may cache its answer, as they would any other.
"""

import copy
import time

import dns.message
from twisted.internet import defer
from twisted.python.failure import Failure

from corednstw.core import dnswire as w
from corednstw.core.plugin import END, Plugin, then
from corednstw.core.request import Request, make_query


class Record:
    """What one plugin of the traced chain saw and did."""

    def __init__(self, plugin):
        self.plugin = plugin
        self.reached = False
        self.question = None        # (qname, qtype) it received
        self.request = None
        self.result = None          # the object it returned
        self.returned = None        # fingerprint of that, when returned
        self.error = None
        self.start = self.end = 0

    def elapsed(self):
        return self.end - self.start


class _Step(Plugin):
    """Stands in front of one copied plugin: records, then serves."""

    def __init__(self, plugin, record):
        self.plugin = plugin
        self.record = record
        self.name = plugin.name

    def serve(self, req):
        rec = self.record
        rec.reached = True
        rec.request = req
        rec.question = (req.qname, req.qtype)
        rec.start = time.perf_counter_ns()
        try:
            result = self.plugin.serve(req)
        except Exception as e:
            rec.end = time.perf_counter_ns()
            rec.error = "%s: %s" % (type(e).__name__, e)
            raise
        return then(result, self._done)

    def _done(self, resp):
        rec = self.record
        rec.end = time.perf_counter_ns()
        rec.result = resp
        rec.returned = fingerprint(resp)
        return resp


def fingerprint(resp):
    """What an answer says, to tell whether a plugin changed it."""
    if resp is None:
        return None
    sections = tuple(tuple((r.name.lower(), r.rtype, r.ttl, r.rdata)
                           for r in s)
                     for s in (resp.answer, resp.authority,
                               resp.additional))
    return (resp.rcode, resp.flags, resp.raw, sections)


def traced(chain):
    """(first step, records) of a traced copy of ``chain``."""
    plugins = []
    p = chain
    while p is not END and p is not None:
        plugins.append(p)
        p = p.next
    records = [Record(p) for p in plugins]
    nxt = END
    for plugin, rec in zip(reversed(plugins), reversed(records)):
        clone = copy.copy(plugin)
        clone.next = nxt
        nxt = _Step(clone, rec)
    return nxt, records


def explain(mux, name, qtype, client="127.0.0.1", proto="udp", do=False):
    """A Deferred firing with the trace of one query (a dict for JSON)
    through listener ``mux``."""
    req = Request(make_query(name, qtype, do=do), client, 0, proto, None,
                  mux.label)
    qd, an, ns, ar = req.parse_header()
    req.parse_question(an, ns, ar)
    out = {"query": {"name": req.qname, "type": w.type_text(qtype),
                     "client": client, "proto": proto},
           "server": mux.label}
    entry = mux.route(req)
    if entry is None:
        out.update(block=None, chain=[], rcode="REFUSED")
        return defer.succeed(out)
    req.zone, block = entry
    req.block = block
    req.view = block.view
    req.start = mux.server.clock()
    out["block"] = {"zone": req.zone, "keys": [str(k) for k in block.keys],
                    "file": block.source.file, "line": block.source.line}
    first, records = traced(block.chain)
    d = defer.maybeDeferred(first.serve, req)
    d.addBoth(_report, req, records, out)
    return d


def _report(result, req, records, out):
    out["chain"] = [_step(records, i) for i in range(len(records))]
    answered = [r for r in out["chain"] if r["action"] == "answered"]
    out["answered_by"] = answered[0]["plugin"] if answered else None
    if isinstance(result, Failure):
        out["rcode"] = "SERVFAIL"
        out["error"] = result.getErrorMessage()
        return out
    if result is None:
        out["rcode"] = "SERVFAIL"
        return out
    out["rcode"] = w.rcode_text(result.rcode)
    out["response"] = _sections(result.finish(req))
    return out


def _sections(wire):
    """The answer as text lines, per section."""
    if not wire:
        return None
    m = dns.message.from_wire(wire, ignore_trailing=True)
    return {"answer": _lines(m.answer), "authority": _lines(m.authority),
            "additional": _lines(m.additional)}


def _lines(rrsets):
    return [line for rrset in rrsets for line in rrset.to_text().split("\n")]


def _step(records, i):
    """One plugin's line of the trace."""
    rec = records[i]
    nxt = records[i + 1] if i + 1 < len(records) else None
    out = {"plugin": rec.plugin.name}
    if not rec.reached:
        out["action"] = "not reached"
        return out
    out["ms"] = round(rec.elapsed() / 1e6, 3)
    inner = nxt.elapsed() if nxt is not None and nxt.reached else 0
    out["self_ms"] = round(max(rec.elapsed() - inner, 0) / 1e6, 3)
    action, detail = _action(rec, nxt)
    out["action"] = action
    if detail:
        out["detail"] = detail
    if rec.result is not None:
        out["rcode"] = w.rcode_text(rec.result.rcode)
    return out


def _action(rec, nxt):
    """(action, detail) of one reached plugin."""
    if rec.error is not None:
        return "raised", rec.error
    called = nxt is not None and nxt.reached
    if not called:
        if rec.result is None:
            return "wrote nothing", None
        return "answered", None
    changes = []
    if nxt.question != rec.question:
        changes.append("question %s %s -> %s %s" % (
            rec.question[0], w.type_text(rec.question[1]),
            nxt.question[0], w.type_text(nxt.question[1])))
    if rec.result is not nxt.result:
        changes.append("answer replaced")
    elif rec.returned != nxt.returned:
        changes.append("answer changed")
    if changes:
        return "rewrote", "; ".join(changes)
    if _falls_through(rec.plugin, rec.request):
        return "fell through", None
    return "passed", None


def _falls_through(plugin, req):
    """True for a plugin with a ``fallthrough`` option on that passed a
    query in its own zones."""
    fall = getattr(plugin, "fall", None)
    if not fall or not hasattr(fall, "through"):
        return False
    return bool(plugin.zones) and plugin.match_zone(req.qname) is not None
