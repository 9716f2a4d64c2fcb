"""hosts: A, AAAA and PTR answers from an /etc/hosts-style file and inline
entries (CoreDNS's hosts).

The file is polled every ``reload`` interval (default 5s): when its mtime or
size changed it is read and parsed in a thread, and the new data replace the
old ones in one step on the reactor thread.  Answers are built when the data
are loaded (owner names are the lower-cased query names, as CoreDNS writes
them), so a query costs a zone match and a dict lookup.

What CoreDNS does and we follow:

- PTR queries are answered for any reverse name the data know, even outside
  the plugin's zones; an unknown PTR always goes to the next plugin.
- A name the data know answers NOERROR with AA, possibly empty (NODATA
  without SOA: there is no SOA for hosts data).
- A name the data do not know falls through when ``fallthrough`` covers it,
  else the answer is SERVFAIL (not NXDOMAIN: no SOA to put in it), not
  written by the plugin.
- ``*.example.org`` entries match one extra label (not the apex, not deeper)
  and make no PTR records.
"""

import os
import stat
from collections.abc import Callable
from typing import Any, Optional

from twisted.internet import task, threads

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.goparse import parse_ip
from corednstw.core.plugin import Fallthrough, Plugin, match, zones_from_args
from corednstw.core.request import Response

NAME = "hosts"
DEFAULT_PATH = "/etc/hosts"
DEFAULT_TTL = 3600
DEFAULT_RELOAD = 5.0

ENTRIES = metrics.gauge(
    "coredns_hosts_entries",
    "The combined number of entries in hosts and Corefile.", ("hostsfile",))
RELOAD_TIMESTAMP = metrics.gauge(
    "coredns_hosts_reload_timestamp_seconds",
    "The timestamp of the last reload of hosts file.")


# -- parsing ------------------------------------------------------------------

class HostsMap:
    """Entries of one source (the file or the inline lines).

    name4/name6: name -> [address bytes]; wild4/wild6 the same for
    ``*.`` owners; addr: canonical address text -> [names] (for PTR).
    """

    __slots__ = ("name4", "name6", "wild4", "wild6", "addr", "skipped")

    def __init__(self):
        self.name4 = {}
        self.name6 = {}
        self.wild4 = {}
        self.wild6 = {}
        self.addr = {}
        self.skipped = []   # (line number, text) of lines that were dropped

    def __len__(self):
        """CoreDNS's Map.Len: addresses of every name plus reverse names."""
        return sum(len(v) for m in (self.name4, self.name6, self.wild4,
                                    self.wild6, self.addr)
                   for v in m.values())


def parse(lines, origins, reverse=True):
    """A HostsMap from hosts-file lines; names outside ``origins`` are
    left out, broken lines recorded in ``skipped``."""
    hmap = HostsMap()
    for num, raw in enumerate(lines, 1):
        line = raw
        i = line.find("#")
        if i >= 0:
            line = line[:i]
        fields = line.split()
        if not fields:
            continue
        ip = parse_ip(fields[0], zone=True) if len(fields) >= 2 else None
        if ip is None:
            hmap.skipped.append((num, raw.strip()))
            continue
        v4 = ip.version == 4
        packed = ip.packed
        text = str(ip)
        for f in fields[1:]:
            name = (f if f.endswith(".") else f + ".").lower()
            if match(origins, name) is None:
                continue
            try:
                w.name_to_wire(name)
            except Exception:   # ValueError, or dnspython's for escapes
                hmap.skipped.append((num, raw.strip()))
                continue
            if name.startswith("*."):
                m = hmap.wild4 if v4 else hmap.wild6
                m.setdefault(name, []).append(packed)
                continue
            m = hmap.name4 if v4 else hmap.name6
            m.setdefault(name, []).append(packed)
            if reverse:
                hmap.addr.setdefault(text, []).append(name)
    return hmap


def wildcard_of(qname):
    """``*.`` plus all but the first label of qname ('' for one label)."""
    i = qname.find(".")
    rest = qname[i + 1:]
    if not rest:
        return ""
    return "*." + rest


class Snapshot:
    """What queries read: answers built from the file's and the inline
    entries together (file first, as CoreDNS concatenates them)."""

    __slots__ = ("a", "aaaa", "ptr", "wild", "file", "inline", "ttl")

    def __init__(self, file, inline, ttl):
        self.file = file
        self.inline = inline
        self.ttl = ttl
        self.wild = bool(file.wild4 or file.wild6 or inline.wild4
                         or inline.wild6)
        self.a = self._build(w.A, "name4", "wild4")
        self.aaaa = self._build(w.AAAA, "name6", "wild6")
        self.ptr = {}
        for text in list(file.addr) + [t for t in inline.addr
                                       if t not in file.addr]:
            names = file.addr.get(text, []) + inline.addr.get(text, [])
            owner = w.reverse_name(text)
            self.ptr[owner] = [w.RR(owner, w.PTR, ttl, w.name_to_wire(n))
                               for n in names]

    def _part(self, src, exact, wild, name):
        ips = getattr(src, exact).get(name)
        if ips is not None:
            return ips
        pattern = wildcard_of(name)
        if pattern:
            return getattr(src, wild).get(pattern, [])
        return []

    def _build(self, rtype, exact, wild):
        out = {}
        names = set(getattr(self.file, exact)) | set(getattr(self.inline,
                                                             exact))
        for name in names:
            ips = (self._part(self.file, exact, wild, name)
                   + self._part(self.inline, exact, wild, name))
            out[name] = [w.RR(name, rtype, self.ttl, ip) for ip in ips]
        return out

    def lookup(self, qname, rtype):
        """The A or AAAA records for qname ([] when none)."""
        rrs = (self.a if rtype == w.A else self.aaaa).get(qname)
        if rrs is not None:
            return rrs
        if not self.wild:
            return []
        pattern = wildcard_of(qname)
        if not pattern:
            return []
        key = "wild4" if rtype == w.A else "wild6"
        ips = (getattr(self.file, key).get(pattern, [])
               + getattr(self.inline, key).get(pattern, []))
        return [w.RR(qname, rtype, self.ttl, ip) for ip in ips]

    def exists(self, qname):
        return bool(self.lookup(qname, w.A) or self.lookup(qname, w.AAAA))


# -- the plugin ---------------------------------------------------------------

class Hosts(Plugin):
    name = NAME

    def __init__(self, path, zones, inline_lines, ttl=DEFAULT_TTL,
                 reverse=True, reload=DEFAULT_RELOAD, fall=None,
                 fall_unsupported=False):
        self.path = path
        self.zones = zones
        self.ttl = ttl
        self.reverse = reverse
        self.reload = reload
        self.fall = fall or Fallthrough()
        self.fall_unsupported = fall_unsupported
        self.inline = parse(inline_lines, zones, reverse)
        self.filemap = HostsMap()
        self.snap = Snapshot(self.filemap, self.inline, ttl)
        self.stamp = None       # (mtime_ns, size) of the data we serve
        self._loop = None
        self._reading = None
        self._stopped = False

    # -- serving --------------------------------------------------------------

    def serve(self, req):
        qname = req.qname
        qtype = req.qtype
        snap = self.snap
        if qtype == w.PTR:
            answer = snap.ptr.get(qname)
            if not answer:
                return self.next.serve(req)
            return Response(w.NOERROR, answer, aa=True, plugin=NAME)
        if match(self.zones, qname) is None:
            return self.next.serve(req)
        if qtype == w.A or qtype == w.AAAA:
            answer = snap.lookup(qname, qtype)
        else:
            answer = []
            if self.fall_unsupported and self.fall.through(qname):
                return self.next.serve(req)
        if not answer and not snap.exists(qname):
            if self.fall.through(qname):
                return self.next.serve(req)
            # No SOA for an NXDOMAIN: CoreDNS returns SERVFAIL unwritten.
            return Response(w.SERVFAIL)
        return Response(w.NOERROR, answer, aa=True, plugin=NAME)

    # -- the file -------------------------------------------------------------

    def start(self):
        # The first read happens before any query is served (CoreDNS reads
        # the file at startup, before its servers accept queries); later
        # checks read in a thread.
        self._stopped = False
        try:
            result = self._read(self.stamp)
        except Exception as e:
            logger.warning(NAME, "reading %s: %s" % (self.path, e))
            result = None
        if result is not None:
            self._install(*result)
        if self.reload > 0:
            clock = self.reactor
            self._loop = task.LoopingCall(self.check)
            if clock is not None:
                self._loop.clock = clock
            self._loop.start(self.reload, now=False)

    def stop(self):
        self._stopped = True
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def check(self):
        """Re-read the file if its mtime or size changed (in a thread)."""
        if self._reading is not None:
            return self._reading
        d = threads.deferToThread(self._read, self.stamp)
        self._reading = d

        def done(result):
            self._reading = None
            if result is not None and not self._stopped:
                self._install(*result)
            return None

        def failed(f):
            self._reading = None
            logger.warning(NAME, "reading %s: %s" % (self.path,
                                                   f.getErrorMessage()))
            return None
        d.addCallbacks(done, failed)
        return d

    def _read(self, stamp):
        """Thread side: (stamp, mtime, HostsMap, Snapshot) or None when the
        file is missing or unchanged (the last data stay, as in CoreDNS)."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                new = (st.st_mtime_ns, st.st_size)
                if new == stamp:
                    return None
                data = f.read()
        except OSError:
            return None
        lines = data.decode("utf-8", "replace").splitlines()
        hmap = parse(lines, self.zones, self.reverse)
        return new, st.st_mtime, hmap, Snapshot(hmap, self.inline, self.ttl)

    def _install(self, stamp, mtime, hmap, snap):
        self.stamp = stamp
        self.filemap = hmap
        self.snap = snap
        if hmap.skipped:
            num, text = hmap.skipped[0]
            logger.warning(NAME, "%s: skipped %d malformed line(s), first at "
                        "line %d: %r" % (self.path, len(hmap.skipped), num,
                                         text))
        ENTRIES.set((self.path,), len(self.inline) + len(hmap))
        RELOAD_TIMESTAMP.set((), mtime)


# -- setup --------------------------------------------------------------------

def setup(d, block):
    path = DEFAULT_PATH
    args = list(d.args)
    if args:
        path = args.pop(0)
        path = block.path(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            logger.warning(NAME, "File does not exist: %s" % path)
        except OSError as e:
            raise d.error("unable to access hosts file '%s': %s"
                          % (path, e)) from e
        else:
            if stat.S_ISDIR(st.st_mode):
                logger.warning(NAME, 'Hosts file "%s" is a directory' % path)
    zones = zones_from_args(args, block)
    o = _OptionReader()
    d.read_options(o.handlers(), unknown=None)
    if o.fall_unsupported and not o.fall:
        raise d.error("fallthrough_unsupported requires fallthrough")
    return Hosts(path, zones, o.inline, o.ttl, o.reverse, o.reload, o.fall,
                 o.fall_unsupported)


class _OptionReader:
    """hosts's block options, one method per option line; a line that
    is no option is an inline hosts entry (until ``fallthrough``, after
    which it is CoreDNS's unknown property)."""

    def __init__(self):
        self.ttl = DEFAULT_TTL
        self.reverse = True
        self.reload = DEFAULT_RELOAD
        self.fall = Fallthrough()
        self.fall_unsupported = False
        self.inline = []

    def handlers(self):
        """Option name -> reader: the ``opt_NAME`` methods, and ``entry``
        for any other line."""
        readers: dict[Optional[str], Callable[[Any], None]] = {
            n[4:]: getattr(self, n) for n in dir(self)
            if n.startswith("opt_")}
        readers[None] = self.entry
        return readers

    def opt_fallthrough(self, c):
        self.fall = Fallthrough.parse(c.args)

    def opt_fallthrough_unsupported(self, c):
        """Types other than A, AAAA and PTR go to the next plugin too
        (checked against ``fallthrough`` once the block is read)."""
        c.no_args()
        self.fall_unsupported = True

    def opt_no_reverse(self, c):
        """No PTR records from the entries; CoreDNS ignores arguments."""
        self.reverse = False

    def opt_ttl(self, c):
        """The answers' TTL: Go's Atoi, 1 to 65535 seconds."""
        text = c.between(1, error="ttl needs a time in second")[0]
        self.ttl = c.integer(
            text, lo=1, hi=65535, error="ttl needs a number of second",
            range_error="ttl provided is invalid")

    def opt_reload(self, c):
        """How often the file is checked for changes; 0 turns it off."""
        text = c.one("reload needs a duration (zero seconds to disable)")
        self.reload = c.duration(
            text, error="invalid duration for reload '{text}'", lo=0,
            range_error="invalid negative duration for reload '{text}'")

    def entry(self, c):
        """An inline ``ADDRESS NAME...`` line."""
        if self.fall:
            raise c.error("unknown property '%s'" % c.name)
        self.inline.append(" ".join([c.name] + list(c.args)))
