"""The ``node-cache`` command: k8s-dns-node-cache's flags and start-up.

Start-up, as node-cache: render the Corefile from ``-basecorefile``,
set the interface up (``-setupinterface``), load and start the server
(exit 1 on a bad Corefile), then install the iptables rules
(``-setupiptables``; node-cache waits for its first sync tick or the
pid file, this installs them as soon as the listeners are open) and check
rules and interface again every ``-syncinterval``.  The template's
directory and the kube-dns ConfigMap (``-kubednscm``) are polled; a change
rewrites the Corefile, which the ``reload`` plugin (or, with
``-reloadwithsignal``, an immediate reload) picks up.  On SIGTERM, SIGINT
or SIGQUIT the rules and the interface are removed unless
``-skipteardown``.
"""

import dataclasses
import ipaddress
import os
import sys

from twisted.application import service
from twisted.internet import task, threads

from corednstw import COREDNS_VERSION, __version__, cli
from corednstw.core import logger, metrics
from corednstw.nodecache import iptables, netif, template
from corednstw.service import entry, signals

#: Seconds between two reads of the mounted ConfigMaps (node-cache's
#: DefaultConfigSyncPeriod).
CONFIG_SYNC = 10.0

SETUP_ERRORS = metrics.counter(
    "coredns_nodecache_setup_errors_total",
    "The number of errors during periodic network setup for node-cache",
    ("errortype",))
ERROR_TYPES = ("iptables", "iptables_lock", "interface_add",
               "interface_check", "configmap")


def flagset(prog):
    """node-cache's flags beside CoreDNS's (one Go flag set in node-cache:
    coremain's flags are registered there too)."""
    fs = cli.flagset(prog)
    fs.header = ["Runs CoreDNS v%s as a nodelocal cache listening on the "
                 "specified ip:port" % COREDNS_VERSION, ""]
    fs.string("localip", "", "comma-separated string of ip addresses to "
              "bind dnscache to")
    fs.bool("setupinterface", True, "indicates whether network interface "
            "should be setup")
    fs.string("interfacename", "nodelocaldns", "name of the interface to "
              "be created")
    # Go's default is 60 nanoseconds, multiplied by a second at use: the
    # value's nanoseconds count as seconds (see Params.interval).
    fs.duration("syncinterval", 60e-9, "interval(in seconds) to check for "
                "iptables rules")
    fs.string("metrics-listen-address", "0.0.0.0:9353", "address to serve "
              "metrics on")
    fs.bool("setupiptables", True, "indicates whether iptables rules should "
            "be setup")
    fs.string("basecorefile", "/etc/coredns/Corefile.base", "Path to the "
              "template Corefile for node-cache")
    fs.string("corefile", "/etc/Corefile", "Path to the Corefile to be used "
              "by node-cache")
    fs.string("kubednscm", "", "Path where the kube-dns configmap will be "
              "mounted")
    fs.string("upstreamsvc", "kube-dns", "Service name whose cluster IP is "
              "upstream for node-cache")
    fs.string("health-port", "8080", "port used by health plugin")
    fs.bool("skipteardown", False, "indicates whether iptables rules should "
            "be torn down on exit")
    fs.bool("reloadwithsignal", False, "use SIGUSR1 on self to reload "
            "CoreDNS")
    return fs


class ParamError(Exception):
    pass


@dataclasses.dataclass
class Params:
    local_ips: list
    port: str
    health_port: str
    corefile: str
    base_corefile: str
    kubedns_dir: str
    upstream_svc: str
    interface: str
    setup_interface: bool
    setup_iptables: bool
    skip_teardown: bool
    reload_with_signal: bool
    metrics_address: str
    #: Seconds between network checks: the flag's nanoseconds, as
    #: node-cache multiplies the duration by time.Second.
    interval: float

    @property
    def ipv6(self):
        return ipaddress.ip_address(self.local_ips[0]).version == 6


def params(values):
    """Params from the parsed flags; ParamError with node-cache's text."""
    ips = values["localip"].split(",")
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise ParamError('invalid localip specified - "%s"' % ip) \
                from None
    v6 = ipaddress.ip_address(ips[0]).version == 6
    for ip in ips:
        if (ipaddress.ip_address(ip).version == 6) != v6:
            raise ParamError('unexpected IP Family for localIP - "%s", '
                             'want IPv6=%s' % (ip, str(v6).lower()))
    for text, what in ((values["port"], "port"),
                       (values["health-port"], "healthcheck port")):
        if not text.lstrip("+-").isdigit():
            raise ParamError('invalid %s specified - "%s"' % (what, text))
    return Params(
        local_ips=ips, port=values["port"],
        health_port=values["health-port"],
        corefile=values["conf"] or values["corefile"],
        base_corefile=values["basecorefile"],
        kubedns_dir=values["kubednscm"],
        upstream_svc=values["upstreamsvc"],
        interface=values["interfacename"],
        setup_interface=values["setupinterface"],
        setup_iptables=values["setupiptables"],
        skip_teardown=values["skipteardown"],
        reload_with_signal=values["reloadwithsignal"],
        metrics_address=values["metrics-listen-address"],
        interval=round(values["syncinterval"] * 1e9, 6))


class NodeCache(service.Service):
    """The App plus node-cache's side: a service the signals stop and
    reload (``reactor`` and ``reload`` as the App has them)."""

    name = "node-cache"

    def __init__(self, p, reactor):
        self.p = p
        self.reactor = reactor
        self.app = None
        self.netif = netif.Netif(p.local_ips, p.interface) \
            if p.setup_interface else None
        self.iptables = iptables.IPTables(p.ipv6) \
            if p.setup_iptables else None
        self.rules = iptables.rules(p.local_ips, p.port, p.health_port) \
            if p.setup_iptables else []
        self.cluster_ip = template.cluster_dns(p.upstream_svc)
        self.kubedns = template.KubeDNSConfig()
        self.versions = {}
        self.loops = []
        self._checking = False

    # -- start-up, before the server loads its Corefile -----------------------

    def init(self):
        for label in ERROR_TYPES:
            SETUP_ERRORS.inc((label,), 0)
        self._serve_metrics()
        self.update_corefile()
        if not self.p.kubedns_dir and os.path.exists(
                template.DEFAULT_KUBEDNS_DIR):
            self.p.kubedns_dir = template.DEFAULT_KUBEDNS_DIR
        if not self.p.kubedns_dir:
            logger.info("", "Skipping kube-dns configmap sync as no "
                        "directory was specified")
        self.sync_configs(initial=True)
        # The interface now, the rules once the server listens: no rules
        # steering traffic to a server that failed to start.
        self._count(self.setup_networking(rules=False))

    def _serve_metrics(self):
        from corednstw.plugins.prometheus import MetricsResource
        from corednstw.service import httpd
        try:
            httpd.serve(self.reactor, self.p.metrics_address,
                        {"/metrics": (MetricsResource(), None)})
        except Exception as e:
            logger.error("", "Failed to start metrics handler: %s" % e)

    # -- the Corefile ---------------------------------------------------------

    def _dirs(self):
        dirs = []
        if self.p.kubedns_dir:
            dirs.append(("kube-dns", self.p.kubedns_dir))
        dirs.append(("node-local-dns",
                     os.path.dirname(self.p.base_corefile) or "."))
        return dirs

    def sync_configs(self, initial=False):
        """Read the mounted ConfigMaps; re-render when one changed."""
        changed = set()
        for name, path in self._dirs():
            try:
                version, data = template.read_dir(path)
            except (OSError, UnicodeDecodeError) as e:
                logger.error("", "Failed to sync %s config directory %s, "
                             "err: %s" % (name, path, e))
                continue
            if self.versions.get(name) == version:
                continue
            self.versions[name] = version
            if name == "kube-dns":
                self.kubedns = template.KubeDNSConfig.from_files(data)
            changed.add(name)
        # At start the template was just rendered: only the kube-dns
        # ConfigMap's first read can change it.
        if changed - ({"node-local-dns"} if initial else set()):
            self.update_corefile()

    def update_corefile(self):
        try:
            self.kubedns.validate()
        except template.ConfigError as e:
            logger.error("", "Invalid config: %s" % e)
            SETUP_ERRORS.inc(("configmap",))
            return
        try:
            with open(self.p.base_corefile) as f:
                base = f.read()
        except OSError as e:
            logger.error("", "Failed to read node-cache coreFile %s - %s"
                         % (self.p.base_corefile, e))
            SETUP_ERRORS.inc(("configmap",))
            return
        text, upstream = template.render(base, self.p.local_ips,
                                         self.p.port, self.cluster_ip,
                                         self.kubedns)
        try:
            with open(self.p.corefile, "w") as f:
                f.write(text)
        except OSError as e:
            logger.error("", "Failed to write config file %s - err %s"
                         % (self.p.corefile, e))
            SETUP_ERRORS.inc(("configmap",))
            return
        logger.info("", "Updated Corefile with %d custom stubdomains and "
                    "upstream servers %s" % (len(self.kubedns.stub_domains),
                                             upstream))
        logger.info("", "Using config file:\n%s" % text)
        if self.p.reload_with_signal and self.app is not None:
            logger.info("", "Sending reload signal to PID %d" % os.getpid())
            self.reactor.callLater(0, self.reload)

    def reload(self):
        if self.app is not None:
            return self.app.reload()
        return None

    # -- interface and rules (blocking: run in a thread while serving) --------

    def setup_networking(self, rules=True):
        """Ensure rules and interface; the error types met."""
        errors = []
        if rules and self.iptables is not None:
            for rule in self.rules:
                try:
                    if not self.iptables.ensure(rule):
                        logger.info("", "Added back nodelocaldns rule - %s"
                                    % rule)
                except iptables.IPTablesError as e:
                    logger.error("", "Error checking/adding iptables rule "
                                 "%s, error - %s" % (rule, e))
                    errors.append("iptables_lock" if e.locked
                                  else "iptables")
        if self.netif is not None:
            try:
                if not self.netif.ensure():
                    logger.info("", "Added interface - %s" % self.p.interface)
            except netif.NetifError as e:
                logger.error("", "Failed to add non-existent interface %s: %s"
                             % (self.p.interface, e))
                errors.append("interface_add")
        return errors

    def _count(self, errors):
        for label in errors:
            SETUP_ERRORS.inc((label,))

    def _check(self):
        if self._checking:
            return None
        self._checking = True
        d = threads.deferToThread(self.setup_networking)
        d.addCallback(self._count)

        def done(result):
            self._checking = False
            return result
        return d.addBoth(done)

    def teardown(self):
        """Remove the rules (every copy) and the interface."""
        logger.info("", "Tearing down")
        if self.iptables is not None:
            for rule in self.rules:
                try:
                    self.iptables.delete(rule)
                except iptables.IPTablesError as e:
                    logger.error("", "Failed deleting iptables rule %s, "
                                 "error - %s" % (rule, e))
        if self.netif is not None:
            try:
                self.netif.remove()
            except netif.NetifError as e:
                logger.error("", "Failed to remove interface %s: %s"
                             % (self.p.interface, e))

    # -- service --------------------------------------------------------------

    def startService(self):
        service.Service.startService(self)
        self.app.startService()
        for fn, period in ((self._check, max(self.p.interval, 1e-3)),
                           (self.sync_configs, CONFIG_SYNC)):
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            loop.start(period, now=fn == self._check)
            self.loops.append(loop)

    def stopService(self):
        service.Service.stopService(self)
        for loop in self.loops:
            if loop.running:
                loop.stop()
        self.loops = []
        return self.app.stopService()


def main(argv=None, prog=None):
    """The console script; the process's exit status."""
    args = sys.argv[1:] if argv is None else argv
    fs = flagset(prog or os.path.basename(sys.argv[0]) or "node-cache")
    values, rest = fs.parse_or_exit(args)
    logger.info("", "Starting node-cache image: %s" % __version__)
    status = cli.informational(values, rest)
    if status is not None:
        return status
    try:
        p = params(values)
    except ParamError as e:
        cli.fatal("[FATAL] Error parsing flags - %s, Exiting" % e,
                  stamp=True)
    logger.info("", "Using Corefile %s" % p.corefile)
    logger.info("", "Using Pidfile %s" % values["pidfile"])
    if values["quiet"]:
        logger.quiet = True
    if p.interval <= 0:
        cli.fatal("[FATAL] Error parsing flags - non-positive interval for "
                  "-syncinterval, Exiting", stamp=True)
    from twisted.internet import reactor
    nc = NodeCache(p, reactor)
    nc.init()
    if not p.skip_teardown:
        signals.at_exit(nc.teardown)
    nc.app = entry.load_app(p.corefile, int(p.port), reactor=reactor,
                            err=sys.stderr)
    reactor.callWhenRunning(signals.install, nc)
    return entry.run(nc, values["pidfile"])

