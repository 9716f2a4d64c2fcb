"""fanout's Corefile stanza, as networkservicemesh/fanout reads it, on
corednstw's typed readers; one upstream engine ``Upstream`` per upstream."""

import functools
import os

from corednstw.core import names
from corednstw.core.errors import CorefileError
from corednstw.engines.upstream import Upstream, hostport
from corednstw.engines.upstream.addresses import host_port_or_file
from corednstw.engines.upstream.tlsfiles import load_client_tls
from corednstw.plugins.forward import tls_options
from corednstw_fanout.plugin import Fanout

MAX_UPSTREAMS = 100
MIN_WORKERS, MAX_WORKERS = 2, 32
MIN_LOAD, MAX_LOAD = 1, 100
#: How long one attempt waits for its answer (fanout's readTimeout).
READ_TIMEOUT = 2.0
NETWORKS = ("udp", "tcp", "tcp-tls")
POLICIES = ("sequential", "weighted-random")


class _Options:
    """What the block sets that is applied once the upstreams are known."""

    def __init__(self):
        self.tls_args = None
        self.servername = ""
        self.policy = ""
        self.loads = []


def setup(d, block):
    """The Fanout of ``fanout FROM TO... { options }``."""
    args = d.between(2)
    zones = names.normalize(args[0])
    if not zones:
        raise d.error("unable to normalize '%s'" % args[0])
    f = Fanout()
    f.from_ = zones[0]
    hosts = []
    for to in args[1:]:
        hosts.extend(host_port_or_file(d, to))
    o = _Options()
    handlers = {name: functools.partial(fn, f=f, o=o, block=block)
                for name, fn in _OPTIONS.items()}

    def any_case(c):
        # fanout reads its option names in any case (``network TCP``).
        handler = handlers.get(c.name.lower())
        if handler is None:
            raise c.error("unknown property %s" % c.name.lower())
        handler(c)
    handlers[None] = any_case
    d.read_options(handlers, unknown=None)
    if len(hosts) > MAX_UPSTREAMS:
        raise d.error("more than %d TOs configured: %d"
                      % (MAX_UPSTREAMS, len(hosts)))
    material = None
    if o.tls_args is not None or f.network == "tcp-tls" or any(
            t == "tls" for t, _h, _p in hosts):
        try:
            material = load_client_tls(o.tls_args or [])
        except Exception as e:
            raise d.error(str(e)) from e
    for trans, host, port in hosts:
        if trans not in ("dns", "tls"):
            raise d.error("'%s' is not supported as a destination protocol "
                          "in fanout: %s://%s" % (trans, trans,
                                                  hostport(host, port)))
        p = Upstream(hostport(host, port), host, port, "dns", name="fanout")
        p.read_timeout = READ_TIMEOUT
        if trans == "tls" or f.network == "tcp-tls":
            p.servername = o.servername or host
            try:
                p.tls = tls_options(material, p.servername, False)
            except ValueError as e:
                raise d.error(str(e)) from e
        f.upstreams.append(p)
    if f.network == "tcp-tls":
        f.network = "tcp"       # the Upstream's TLS makes it DNS over TLS
    n = len(f.upstreams)
    loads = o.loads or [MAX_LOAD] * n
    if len(loads) != n:
        raise d.error("load-factor params count must be the same as the "
                      "number of hosts")
    if o.policy == "weighted-random":
        f.weights = loads
    if not f.servers or f.servers > n:
        f.servers = n
    if not f.workers or f.workers > n:
        f.workers = n
    return f


def _positive(c):
    """fanout's parsePositiveInt: a wrong or negative number is an
    argument error naming it."""
    text = c.exactly(1)[0]
    try:
        n = c.integer(text)
    except CorefileError:
        n = -1
    if n < 0:
        raise c.arg_error(text)
    return n


def _workers(c, f, o, block):
    n = _positive(c)
    if n < MIN_WORKERS:
        raise c.error("worker count should be more or equal 2. Consider "
                      "to use Forward plugin")
    if n > MAX_WORKERS:
        raise c.error("worker count more then max value: %d" % MAX_WORKERS)
    f.workers = n


def _servers(c, f, o, block):
    f.servers = _positive(c)


def _attempts(c, f, o, block):
    f.attempts = _positive(c)


def _policy(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    policy = c.args[0].lower()
    if policy not in POLICIES:
        raise c.error('unknown policy "%s"' % c.args[0])
    o.policy = policy


def _loads(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    for a in c.args:
        try:
            n = c.integer(a)
        except CorefileError:
            raise c.arg_error() from None
        if n < MIN_LOAD:
            raise c.error("load-factor should be more or equal 1")
        if n > MAX_LOAD:
            raise c.error("load-factor %d should be less than %d"
                          % (n, MAX_LOAD))
        o.loads.append(n)


def _timeout(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    f.timeout = c.duration(c.args[0])


def _race(c, f, o, block):
    c.no_args()
    f.race = True


def _network(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    net = c.args[0].lower()
    if net not in NETWORKS:
        raise c.error("unknown network protocol")
    f.network = net


def _except(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    f.excepted.update(_zone(c, a) for a in c.args)


def _except_file(c, f, o, block):
    path = block.path(c.exactly(1)[0])
    try:
        with open(path) as fh:
            lines = fh.read().split("\n")
    except OSError as e:
        raise c.error("open %s: %s" % (path, e.strerror.lower())) from e
    f.excepted.update(_zone(c, line.strip()) for line in lines
                      if line.strip())


def _zone(c, text):
    zones = names.normalize(text)
    if not zones:
        raise c.error("unable to normalize '%s'" % text)
    return zones[0]


def _tls(c, f, o, block):
    if len(c.args) > 3:
        raise c.arg_error()
    o.tls_args = [block.path(a) for a in c.args]
    for a in o.tls_args:
        if not os.path.exists(a):
            raise c.error("open %s: no such file or directory" % a)


def _tls_server(c, f, o, block):
    if not c.args:
        raise c.arg_error()
    o.servername = c.args[0]


_OPTIONS = {
    "tls": _tls,
    "tls-server": _tls_server,
    "network": _network,
    "worker-count": _workers,
    "policy": _policy,
    "weighted-random-server-count": _servers,
    "weighted-random-load-factor": _loads,
    "timeout": _timeout,
    "race": _race,
    "except": _except,
    "except-file": _except_file,
    "attempt-count": _attempts,
}
