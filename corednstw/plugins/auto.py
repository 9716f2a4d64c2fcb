"""auto: zones from master files found in a directory (CoreDNS's auto).

``auto [ZONES...] { directory DIR [REGEXP ORIGIN_TEMPLATE]; reload
DURATION }``.
Files whose base name matches REGEXP (unanchored; default ``db\\.(.*)``)
become zones whose origin is ORIGIN_TEMPLATE with ``{N}`` replaced by the
N-th group (default ``{1}``).  The directory is scanned when the server
starts and every ``reload`` interval (default 1m; 0: never again), off the
reactor thread: new files are loaded, removed ones dropped, and zones whose
SOA serial changed reloaded.  Queries for names in ZONES that no loaded zone
holds go to the next plugin.
"""

import os
import re
import types

from twisted.internet import task, threads

from corednstw.core import logger
from corednstw.core.interfaces import IZoneAdder
from corednstw.core.plugin import END, match, zones_from_args
from corednstw.engines import authority
from corednstw.engines.authority import go_quote
from corednstw.engines.expressions import goregexp

DEFAULT_REGEX = r"db\.(.*)"
DEFAULT_TEMPLATE = "{1}"
MAX_REGEX = 10000


class Auto(authority.ZonePlugin):
    name = "auto"
    aa_on_alias_delegation = False
    handles_notify = False

    def __init__(self, origins, directory, regex, template, reload):
        authority.ZonePlugin.__init__(self)
        self.origins = origins
        self.directory = directory
        self.regex = regex
        self.template = template
        self.reload = reload
        self.paths = {}          # origin -> file path
        self.loop = None
        self.busy = False

    def serve(self, req):
        if match(self.origins, req.qname) is None:
            return self.next.serve(req)
        origin = self.find_zone(req.qname)
        if origin is None:
            if self.next is END:
                return self.respond(req, 5, aa=False)
            return self.next.serve(req)
        return self.serve_zone(req, origin, self.zone_map.get(origin))

    def start(self):
        d = self.scan()
        if self.reload > 0:
            self.loop = task.LoopingCall(self.scan)
            self.loop.clock = self.reactor
            self.loop.start(self.reload, now=False)
        return d

    def stop(self):
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.loop = None

    def scan(self):
        if self.busy:
            return None
        self.busy = True
        current = dict(self.zone_map)
        d = threads.deferToThread(walk, self.directory, self.regex,
                                  self.template, current, dict(self.paths))
        d.addBoth(self._scanned)
        return d

    def _scanned(self, result):
        self.busy = False
        if not isinstance(result, tuple):
            logger.error(self.name, "scanning %s: %s" % (
                self.directory, result.getErrorMessage()))
            return None
        loaded, removed, messages = result
        for level, msg in messages:
            getattr(logger, level)(self.name, msg)
        for origin, (path, data, reloaded) in loaded.items():
            self.paths[origin] = path
            if data is None:
                continue
            self.zone_map[origin] = data
            if origin not in self.names:
                self.names.append(origin)
                # Like CoreDNS's metrics.AddZone: prometheus labels queries
                # with the zone auto loaded, not only the block's key.
                for p in self.block.find(IZoneAdder):
                    p.add_zone(origin)
            if reloaded:
                logger.info(self.name, "Successfully reloaded zone %s in %s "
                         "with %d SOA serial" % (go_quote(origin),
                                                 go_quote(path),
                                                 data.serial))
            self.notify_peers(origin)
        for origin in removed:
            self.zone_map.pop(origin, None)
            self.paths.pop(origin, None)
            if origin in self.names:
                self.names.remove(origin)
            logger.info(self.name, "Deleting zone `%s'" % origin)
        return None


def origin_of(regex, template, filename):
    """The origin a file name gives (None when it does not match)."""
    m = regex.search(os.path.basename(filename))
    if m is None:
        return None

    def group(g):
        n = int(g.group(1))
        try:
            return m.group(n) or ""
        except IndexError:
            return ""
    origin = re.sub(r"\{(\d+)\}", group, template)
    if not origin:
        return None
    origin = origin.lower()
    return origin if origin.endswith(".") else origin + "."


def walk(directory, regex, template, current, paths):
    """Runs in a thread.  Returns ({origin: (path, ZoneData or None,
    reloaded)}, [removed origins], [(level, message)])."""
    msgs = []
    seen: dict[str, str] = {}
    loaded = {}
    directory = os.path.realpath(directory)
    for root, dirs, files in os.walk(directory, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            origin = origin_of(regex, template, name)
            if origin is None:
                continue
            path = os.path.normpath(os.path.join(root, name))
            if origin in seen and seen[origin] != path:
                msgs.append(("warning", "Multiple zone files match origin "
                             "%s: using %s instead of %s" % (
                                 go_quote(origin), go_quote(seen[origin]),
                                 go_quote(path))))
                continue
            seen[origin] = path
            old = current.get(origin)
            try:
                data = authority.parse_file(path, origin)
            except (authority.ZoneError, OSError) as e:
                if old is None:
                    msgs.append(("warning", "Parse zone `%s': %s" % (origin,
                                                                     e)))
                else:
                    msgs.append(("error", "Parsing zone %s: %s" % (
                        go_quote(origin), e)))
                loaded[origin] = (path, None, False)
                continue
            if old is not None:
                if data.serial == old.serial and paths.get(origin) == path:
                    loaded[origin] = (path, None, False)
                    continue
                loaded[origin] = (path, data, True)
            else:
                msgs.append(("info", "Inserting zone `%s' from: %s" % (
                    origin, path)))
                loaded[origin] = (path, data, False)
    removed = [o for o in current if o not in seen]
    return loaded, removed, msgs


def setup(d, block):
    """The options apply in Corefile order; ``directory`` is required and
    ``upstream`` accepted and ignored, as CoreDNS does."""
    o = types.SimpleNamespace(directory=None,
                              regex=goregexp.compile(DEFAULT_REGEX),
                              template=DEFAULT_TEMPLATE, reload=60.0)
    d.read_options({
        "directory": lambda c: _directory(c, block, o),
        "reload": lambda c: setattr(o, "reload", _reload(c)),
        "upstream": lambda c: None,
    })
    if o.directory is None:
        raise d.error("directory is required")
    return Auto(zones_from_args(d.args, block), o.directory, o.regex,
                o.template, o.reload)


def _directory(c, block, o):
    """``directory DIR [REGEXP ORIGIN_TEMPLATE]``: a directory that does
    not exist yet is only warned about (it is scanned again later)."""
    args = c.between(1, 3)
    if len(args) == 2:
        raise c.arg_error()
    o.directory = block.path(args[0])
    if os.path.exists(o.directory) and not os.access(o.directory, os.R_OK):
        raise c.error("Unable to access root path '%s'" % o.directory)
    if not os.path.exists(o.directory):
        logger.warning("auto", "Directory does not exist: %s" % o.directory)
    if len(args) == 3:
        o.regex = _regex(c, args[1])
        o.template = args[2]


def _regex(c, text):
    """REGEXP, which needs a group for the template to use."""
    if len(text) > MAX_REGEX:
        raise c.error("regexp too large")
    try:
        regex = goregexp.compile(text)
    except goregexp.RegexpError as e:
        raise c.error(str(e)) from e
    if regex.groups == 0:
        raise c.error("Need at least one sub expression")
    return regex


def _reload(c):
    """``reload DURATION``: how often the directory is scanned (0:
    never again)."""
    reload = authority.reload_option(c)
    if reload < 0:
        raise c.error("invalid duration")
    return reload
