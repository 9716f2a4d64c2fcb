"""node-cache's Corefile: the node-local-dns ConfigMap's template with its
``__PILLAR__`` placeholders filled, plus a server block per stub domain of
the kube-dns ConfigMap.

* ``__PILLAR__UPSTREAM__SERVERS__``: the kube-dns ConfigMap's
  ``upstreamNameservers`` (then forwarded over UDP: a ``force_tcp`` block
  around them is rewritten), else ``/etc/resolv.conf``;
* ``__PILLAR__CLUSTER__DNS__``: the ClusterIP of the ``-upstreamsvc``
  Service, from the ``<NAME>_SERVICE_HOST`` variable Kubernetes sets;
* ``__PILLAR__LOCAL__DNS__``: the ``-localip`` addresses, space separated;
* ``__PILLAR__DNS__SERVER__``: removed (its address is among ``-localip``).
"""

import hashlib
import ipaddress
import json
import os

from corednstw.core import logger

UPSTREAM_SERVERS = "__PILLAR__UPSTREAM__SERVERS__"
CLUSTER_DNS = "__PILLAR__CLUSTER__DNS__"
LOCAL_DNS = "__PILLAR__LOCAL__DNS__"
DNS_SERVER = "__PILLAR__DNS__SERVER__"

# The forward blocks node-cache rewrites when custom upstreams are set,
# byte for byte as its template writes them.
_UPSTREAM_TCP = ("\n    forward . " + UPSTREAM_SERVERS
                 + " {\n            force_tcp\n    }\n")
_UPSTREAM_UDP = "\n    forward . %s\n"
_STUB = ("\n%s:%s {\n    errors\n    cache 30\n    bind %s\n"
         "    forward . %s\n}\n")

#: Where the kube-dns ConfigMap is looked for when -kubednscm is not given.
DEFAULT_KUBEDNS_DIR = "/etc/kube-dns"


class ConfigError(Exception):
    pass


def service_env(name):
    """The variable Kubernetes sets to a Service's ClusterIP."""
    return name.replace("-", "_").upper() + "_SERVICE_HOST"


def cluster_dns(name, environ=None):
    """The ``-upstreamsvc`` Service's address, or None (warned about)."""
    env = os.environ if environ is None else environ
    var = service_env(name)
    value = env.get(var, "")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        logger.warning("", "Unable to lookup IP address of Upstream service "
                       "%s, env $%s `%s`" % (name, var, value))
        return None


def read_dir(path):
    """(version, {file: text}) of a mounted ConfigMap: its visible files,
    not recursing (as kube-dns's directory sync reads them); version ""
    when there are none.  OSError when the directory cannot be read."""
    data = {}
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.startswith(".") or os.path.isdir(full):
            continue
        with open(full, "rb") as f:
            raw = f.read()
        digest.update(name.encode() + b"\0" + raw + b"\0")
        data[name] = raw.decode("utf-8")
    return (digest.hexdigest() if data else ""), data


class KubeDNSConfig:
    """The kube-dns ConfigMap's two keys node-cache uses."""

    def __init__(self, stub_domains=None, upstreams=None):
        self.stub_domains = stub_domains or {}
        self.upstreams = upstreams or []

    @classmethod
    def from_files(cls, data):
        """From the ConfigMap's files (JSON values); a key that does not
        parse is logged and left out, as kube-dns does."""
        conf = cls()
        for key, attr, kind in (("stubDomains", "stub_domains", dict),
                                ("upstreamNameservers", "upstreams", list)):
            if key not in data:
                continue
            try:
                value = json.loads(data[key])
                if not isinstance(value, kind):
                    raise ValueError("not a JSON %s" % kind.__name__)
            except ValueError as e:
                logger.error("", "Invalid %s value: %s (value was %r)"
                             % (key, e, data[key]))
                continue
            setattr(conf, attr, value)
        return conf

    def validate(self):
        """node-cache forwards over dns:// or tls:// only, to addresses or
        resolv.conf-style files; ConfigError otherwise."""
        for domain in sorted(self.stub_domains):
            servers = self.stub_domains[domain]
            try:
                _check_servers(servers)
            except ConfigError as e:
                raise ConfigError("invalid nameservers %s for the stub "
                                  "domain %s: %s" % (_golist(servers),
                                                     domain, e)) from None
        try:
            _check_servers(self.upstreams)
        except ConfigError as e:
            raise ConfigError("invalid upstream nameservers %s: %s"
                              % (_golist(self.upstreams), e)) from None


def _golist(items):
    return "[%s]" % " ".join(items)


def _check_servers(servers):
    for server in servers:
        if not isinstance(server, str):
            raise ConfigError("not an IP address or file: %r" % server)
        transport, sep, rest = server.partition("://")
        if not sep:
            transport, rest = "dns", server
        if transport not in ("dns", "tls"):
            raise ConfigError("unsupported transport %s of nameserver %s"
                              % (transport, server))
        if os.path.exists(rest):
            continue
        host = rest
        if host.startswith("["):
            host = host[1:].partition("]")[0]
        elif host.count(":") == 1:
            host = host.partition(":")[0]
        try:
            ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            raise ConfigError('not an IP address or file: "%s"'
                              % rest) from None


def render(base, local_ips, port, cluster_ip, config):
    """(Corefile text, upstream servers) from the template ``base``."""
    listen = " ".join(local_ips)
    upstream = " ".join(config.upstreams)
    if not upstream:
        upstream = "/etc/resolv.conf"
        text = base.replace(UPSTREAM_SERVERS, upstream)
    else:
        text = base.replace(_UPSTREAM_TCP, _UPSTREAM_UDP % upstream)
        if UPSTREAM_SERVERS in text:
            logger.warning("", "Did not find TCP upstream block to replace, "
                           "assuming upstreams already use UDP.")
            text = text.replace(UPSTREAM_SERVERS, upstream)
    # Go prints a missing address as "<nil>": the Corefile then fails to
    # load with forward's error naming it, as node-cache's does.
    text = text.replace(CLUSTER_DNS, cluster_ip or "<nil>")
    text = text.replace(LOCAL_DNS, listen)
    text = text.replace(DNS_SERVER, "")
    for domain in sorted(config.stub_domains):
        text += _STUB % (domain, port, listen,
                         " ".join(config.stub_domains[domain]))
    return text, upstream
