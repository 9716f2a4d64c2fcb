"""The nomad plugin: each query asks a Nomad agent's HTTP API for the
registrations of ``SERVICE.NAMESPACE.<zone>`` and answers them as A, AAAA
or SRV records, as CoreDNS's plugin does (no cache: put *cache* in front).
"""

from typing import Optional
from urllib.parse import quote

from twisted.internet import defer
from zope.interface import implementer

from corednstw.core import dnswire as w
from corednstw.core import logger, metrics
from corednstw.core.goparse import parse_ip
from corednstw.core.interfaces import IReadiness
from corednstw.core.plugin import Plugin
from corednstw.engines.hosted import FIRST_RETRY, error_text
from corednstw.engines.webapi import Client

DEFAULT_ADDRESS = "http://127.0.0.1:4646"
DEFAULT_TTL = 30
#: The longest wait between two probes of unreachable agents.
MAX_RETRY = 30.0

SUCCESS = metrics.counter(
    "coredns_nomad_success_requests_total",
    "Counter of DNS requests handled successfully.",
    ("server", "namespace"))
FAILED = metrics.counter(
    "coredns_nomad_failed_requests_total",
    "Counter of DNS requests failed.", ("server", "namespace"))


class NoAgent(Exception):
    """No configured agent answered /v1/agent/self."""


@implementer(IReadiness)
class Nomad(Plugin):
    name = "nomad"
    once = False

    def __init__(self, zone, addresses, token="", flt="", ttl=DEFAULT_TTL,
                 region=""):
        self.zone = zone
        self.zones = [zone.lower()]
        self.zone_labels = w_count(zone)
        self.addresses = list(addresses)
        self.token = token
        self.filter = flt
        self.ttl = ttl
        self.region = region
        self.current = 0
        self.reachable = False
        self.client: Optional[Client] = None     # while started
        self._timer = None
        self._retry = FIRST_RETRY

    # -- life cycle -------------------------------------------------------

    def start(self):
        self.client = Client(self.reactor)
        return self.probe()

    def stop(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        client, self.client = self.client, None
        if client is not None:
            return client.close()
        return None

    def ready(self):
        return self.reachable

    def probe(self):
        """Look for an agent that answers; until one does, log why and
        try again (one second, doubling up to MAX_RETRY)."""
        self._timer = None
        d = self.pick_agent(every=True)
        d.addCallbacks(self._probed, self._probe_failed)
        return d

    def _probed(self, _):
        self._retry = FIRST_RETRY

    def _probe_failed(self, failure):
        if self.client is None:
            return
        logger.error(self.name, "No Nomad agent reachable at [%s]: %s; "
                     "retrying" % (" ".join(self.addresses),
                                   error_text(failure.value)))
        self._timer = self.reactor.callLater(self._retry, self.probe)
        self._retry = min(self._retry * 2, MAX_RETRY)

    # -- the API ----------------------------------------------------------

    def headers(self):
        return {"X-Nomad-Token": self.token} if self.token else {}

    def pick_agent(self, every=False):
        """Deferred index of the agent to ask: with a single address that
        one (unless ``every``), else the first from the current one that
        answers /v1/agent/self (CoreDNS's getClient)."""
        if len(self.addresses) == 1 and not every:
            return defer.succeed(0)
        return self._try_agent(0, None)

    def _try_agent(self, i, last_error):
        if i >= len(self.addresses) or self.client is None:
            return defer.fail(NoAgent("no Nomad client available: %s" % (
                error_text(last_error) if last_error else "stopped")))
        idx = (self.current + i) % len(self.addresses)
        url = self.client.url(self.addresses[idx], "/v1/agent/self")
        d = self.client.get_json(url, self.headers())

        def ok(_):
            self.current = idx
            self.reachable = True
            return idx
        return d.addCallbacks(ok, lambda f: self._try_agent(i + 1, f.value))

    def registrations(self, service, namespace):
        """Deferred list of the service's registrations."""
        logger.debug(self.name, "Looking up record for svc: %s namespace: "
                     "%s" % (service, namespace))
        return self.pick_agent().addCallback(self._get, service, namespace)

    def _get(self, idx, service, namespace):
        query = [("namespace", namespace)]
        if self.filter:
            query.append(("filter", self.filter))
        if self.region:
            query.append(("region", self.region))
        client = self.client
        if client is None:      # stopped while an agent was picked
            return defer.fail(NoAgent("no Nomad client available: "
                                      "stopped"))
        url = client.url(self.addresses[idx],
                         "/v1/service/" + quote(service, safe=""), query)
        return client.get_json(url, self.headers())

    # -- serving ----------------------------------------------------------

    def serve(self, req):
        base = trim_zone(req.qname, self.zone_labels)
        if base is None or len(base) < 2 or self.client is None:
            return self.next.serve(req)
        service, namespace = base[0], base[1]
        d = self.registrations(service, namespace)
        d.addCallbacks(self._answer, self._lookup_failed,
                       callbackArgs=(req, namespace),
                       errbackArgs=(req, namespace))
        return d

    def _lookup_failed(self, failure, req, namespace):
        """CoreDNS writes an empty NOERROR answer when Nomad fails."""
        logger.warning(self.name, error_text(failure.value))
        FAILED.inc((req.server, namespace))
        return self.respond(req)

    def _answer(self, regs, req, namespace):
        if not regs:
            FAILED.inc((req.server, namespace))
            return self._nxdomain(req, [], [])
        answer: list[w.RR] = []
        extra: list[w.RR] = []
        for reg in regs:
            problem = self._add(reg, req, answer, extra)
            if problem is not None:
                FAILED.inc((req.server, namespace))
                return self._nxdomain(req, answer, extra, problem)
        SUCCESS.inc((req.server, namespace))
        return self.respond(req, answer=answer, additional=extra)

    def _add(self, reg, req, answer, extra):
        """Add one registration's records; an error text when it cannot
        be answered (CoreDNS's addServiceResponses)."""
        ip = parse_ip(reg.get("Address", ""))
        if ip is None:
            return "error parsing IP address"
        qtype = req.qtype
        if qtype == w.A:
            if ip.version == 4:
                answer.append(w.RR(req.name, w.A, self.ttl, ip.packed))
        elif qtype == w.AAAA:
            if ip.version == 6:
                answer.append(w.RR(req.name, w.AAAA, self.ttl, ip.packed))
        elif qtype == w.SRV:
            target = req.qname
            answer.append(w.RR(req.name, w.SRV, self.ttl, w.srv_rdata(
                10, 10, int(reg.get("Port", 0)) & 0xFFFF, target)))
            rtype = w.A if ip.version == 4 else w.AAAA
            extra.append(w.RR(target, rtype, self.ttl, ip.packed))
        else:
            return "query type not implemented"
        return None

    def _nxdomain(self, req, answer, extra, error=None):
        """NXDOMAIN with CoreDNS's made-up SOA in the answer section."""
        answer = answer + [self.soa(req.qname)]
        resp = self.respond(req, w.NXDOMAIN, answer=answer,
                            additional=extra)
        if error is not None:
            resp.error = error
        return resp

    def soa(self, qname):
        rdata = w.soa_rdata("ns1." + qname, "hostmaster." + self.zone,
                            0, 3600, 600, 86400, 30)
        return w.RR(qname, w.SOA, self.ttl, rdata)


def w_count(name):
    """The number of labels of a name (the root has none)."""
    return len([x for x in name.split(".") if x])


def trim_zone(qname, zone_labels):
    """The labels of ``qname`` left of its last ``zone_labels`` labels, or
    None when there are none (CoreDNS's dnsutil.TrimZone, which counts
    labels and does not compare them)."""
    labels = [x for x in qname.split(".") if x]
    if len(labels) <= zone_labels:
        return None
    return labels[:len(labels) - zone_labels]
