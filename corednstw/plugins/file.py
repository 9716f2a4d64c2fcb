"""file: zones from RFC 1035 master files (CoreDNS's file plugin).

``file DBFILE [ZONES...] { reload DURATION; reload_by_mtime; fallthrough
[ZONES...] }``.  The file is parsed (dnspython's zone reader) when the
configuration is built; a missing file is not fatal while reloading is on:
the zone answers SERVFAIL until the file appears.  Every ``reload`` interval
(default 1m, 0 turns it off) the file is read again off the reactor thread
and swapped in when its SOA serial changed (or, with ``reload_by_mtime``,
when its modification time moved on); a file that no longer parses keeps
the last good zone.  Lookups follow corednstw.engines.authority (CoreDNS's
rules).
"""

import os
from types import SimpleNamespace

from twisted.internet import task, threads

from corednstw.core import logger
from corednstw.core.durations import format_duration
from corednstw.core.plugin import Fallthrough, answers_as_made, zones_from_args
from corednstw.core.request import Response, encode, remember, response
from corednstw.engines import authority
from corednstw.engines.authority import go_quote

DEFAULT_RELOAD = 60.0
#: Answers kept made (``File.serve``), by the query's bytes after its ID,
#: and the longest kept: at most a few MiB however the questions vary.
ANSWERS_KEPT = 2048
LONGEST_KEPT = 2048


class _Made:
    """An answer given (``File.serve``): its records and its bytes after
    the ID, for the query bytes, transport and family it was made for,
    from ``zone`` (the ZoneData then serving ``origin``)."""

    __slots__ = ("proto", "family", "origin", "zone", "rcode", "flags",
                 "answer", "authority", "additional", "tail")

    def __init__(self, req, origin, zone, resp, tail):
        self.proto = req.proto
        self.family = req.family
        self.origin = origin
        self.zone = zone
        self.rcode = resp.rcode
        self.flags = resp.flags
        self.answer = resp.answer[:]
        self.authority = resp.authority[:]
        self.additional = resp.additional[:]
        self.tail = tail


class ZoneFile:
    """One origin read from one file, and its reload state."""

    def __init__(self, origin, path, reload, by_mtime):
        self.origin = origin
        self.path = path
        self.reload = reload
        self.by_mtime = by_mtime
        self.busy = False
        self.loop = None


class File(authority.ZonePlugin):
    name = "file"
    once = False

    def __init__(self):
        authority.ZonePlugin.__init__(self)
        self.files = []
        self.fall = Fallthrough()
        #: The query's bytes after its ID -> _Made, the answer given.
        self._made = {}
        #: answers_as_made(self), worked out at the first query (the
        #: chain is linked once, when the configuration is built).
        self._as_made = None

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        """ZonePlugin's serve, with the answers kept made: a question
        asked again in the same bytes (only the ID differs) while its zone
        is the same gets the same answer, whose bytes then need only the
        query's ID.  The answer depends on nothing but those bytes (the
        name as written, type, class, header flags, EDNS), the transport
        and the address family (the size the answer may take) and the zone
        data, which a reload replaces.  Kept only where every plugin in
        front of this one passes answers on unchanged (they would else
        edit an answer whose bytes are made already), and for queries
        without EDNS options (whose echo depends on the options plugins
        support).  Bounded in number and size (ANSWERS_KEPT,
        LONGEST_KEPT)."""
        data = req.data
        made = self._made.get(data[2:])
        if made is not None and made.proto == req.proto and \
                made.family == req.family and \
                self.zone_map.get(made.origin) is made.zone and \
                self._answers_as_made():
            r = response(made.rcode, made.answer[:], made.authority[:],
                         made.additional[:], made.flags, self.name)
            r.wire = data[:2] + made.tail
            return r
        origin = self.find_zone(req.qname)
        if origin is None:
            return self.not_ours(req)
        z = self.zone_map.get(origin)
        resp = self.serve_zone(req, origin, z)
        if type(resp) is Response and resp.plugin == self.name and \
                z is not None and (req.edns is None or
                                   not req.edns.options) and \
                self._answers_as_made():
            wire = resp.wire = encode(req, resp)
            if len(wire) <= LONGEST_KEPT:
                remember(self._made, data[2:],
                         _Made(req, origin, z, resp, wire[2:]),
                         ANSWERS_KEPT)
        return resp

    def _answers_as_made(self):
        as_made = self._as_made
        if as_made is None:
            as_made = self._as_made = answers_as_made(self)
        return as_made

    def add(self, zf, data):
        self.files.append(zf)
        if zf.origin not in self.names:
            self.names.append(zf.origin)
        self.zone_map[zf.origin] = data

    # -- life cycle -----------------------------------------------------------

    def start(self):
        reactor = self.reactor
        for zf in self.files:
            if zf.reload > 0 and reactor is not None:
                zf.loop = task.LoopingCall(self.check, zf)
                zf.loop.clock = reactor
                zf.loop.start(zf.reload, now=False)
        for origin in self.names:
            self.notify_peers(origin)

    def stop(self):
        for zf in self.files:
            if zf.loop is not None and zf.loop.running:
                zf.loop.stop()
            zf.loop = None

    # -- reloading ------------------------------------------------------------

    def check(self, zf):
        """One reload tick: read the file in a thread, swap on success."""
        if zf.busy:
            return None
        zf.busy = True
        current = self.zone_map.get(zf.origin)
        d = threads.deferToThread(_reread, zf, current)
        d.addCallbacks(self._reloaded, self._reload_failed,
                       callbackArgs=(zf,), errbackArgs=(zf,))
        return d

    def _reloaded(self, data, zf):
        zf.busy = False
        if data is None:
            return
        self.zone_map[zf.origin] = data
        logger.info(self.name,
                    "Successfully reloaded zone %s in %s with %d SOA "
                    "serial" % (go_quote(zf.origin), go_quote(zf.path),
                                data.serial))
        self.notify_peers(zf.origin)

    def _reload_failed(self, failure, zf):
        zf.busy = False
        e = failure.value
        if isinstance(e, OSError):
            if zf.by_mtime and isinstance(e, _StatError):
                logger.error(self.name, "Failed to stat zone %s in %s: %s" % (
                    go_quote(zf.origin), go_quote(zf.path), _oserr(e)))
            else:
                logger.error(self.name, "Failed to open zone %s in %s: %s" % (
                    go_quote(zf.origin), go_quote(zf.path), _oserr(e)))
        else:
            logger.error(self.name, "Parsing zone %s: %s" % (
                go_quote(zf.origin), e))


def _oserr(e):
    """An OSError as Go prints a PathError: "open PATH: reason"."""
    reason = (e.strerror or str(e)).lower()
    return "open %s: %s" % (e.filename, reason) if e.filename else reason


class _StatError(OSError):
    """The file could not be stat'ed (the by-mtime check), as opposed to
    opened or read: the reload's log line says which."""


def _reread(zf, current):
    """Runs in a thread: the new ZoneData, or None when nothing changed."""
    mtime = None
    if zf.by_mtime:
        try:
            mtime = os.stat(zf.path).st_mtime
        except OSError as e:
            raise _StatError(e.errno, e.strerror, e.filename) from e
        if current is not None and current.mtime is not None and (
                mtime <= current.mtime):
            return None
    data = authority.parse_file(zf.path, zf.origin)
    data.mtime = mtime
    if not zf.by_mtime and current is not None and current.soa is not None \
            and data.serial == current.serial:
        return None
    return data


def load(path, origin, by_mtime=False):
    """Parse at configuration time (ZoneError / OSError)."""
    mtime = os.stat(path).st_mtime if by_mtime else None
    data = authority.parse_file(path, origin)
    data.mtime = mtime
    return data


def _options(d):
    """The block's options: how often the file is re-read, whether by
    modification time, and the fallthrough zones (None: unchanged, for a
    second ``file`` line adding to the block's plugin)."""
    o = SimpleNamespace(reload=DEFAULT_RELOAD, by_mtime=False, fall=None)
    d.read_options({
        "fallthrough": lambda c: setattr(o, "fall",
                                         Fallthrough.parse(c.args)),
        "reload": lambda c: setattr(o, "reload",
                                    authority.reload_option(c)),
        "reload_by_mtime": lambda c: setattr(o, "by_mtime", True),
        "upstream": lambda c: None,     # accepted and ignored, as CoreDNS
    })
    return o


def setup(d, block):
    path = block.path(d.between(1)[0])
    origins = zones_from_args(d.args[1:], block)
    o = _options(d)
    existing = block.plugin("file")
    plugin = existing if existing is not None else File()
    if o.fall is not None:
        plugin.fall = o.fall
    open_error = None
    for origin in origins:
        data = None
        try:
            data = load(path, origin, o.by_mtime)
        except authority.ZoneError as e:
            raise d.error(str(e)) from e
        except OSError as e:
            open_error = e
        plugin.add(ZoneFile(origin, path, o.reload, o.by_mtime), data)
    if open_error is not None:
        if o.reload == 0:
            raise d.error(_oserr(open_error))
        logger.warning("file", 'Failed to open "%s": trying again in %s' % (
            _oserr(open_error), format_duration(o.reload)))
    return None if existing is not None else plugin
