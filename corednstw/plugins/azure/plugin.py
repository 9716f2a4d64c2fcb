"""The azure plugin: record sets listed with Azure DNS's REST API (the
calls the Go SDK makes), with an OAuth token from Azure AD's client
credentials flow, served through engines.hosted."""

from typing import Optional
from urllib.parse import quote

from twisted.internet import defer

from corednstw.core import logger
from corednstw.core.names import fqdn
from corednstw.engines.hosted import HostedZones, error_text, rr_from_text
from corednstw.engines.webapi import Client, Token

#: Azure's clouds by the names go-autorest knows: (login, management).
_PUBLIC = ("https://login.microsoftonline.com/",
           "https://management.azure.com/")
ENVIRONMENTS = {
    "AZURECLOUD": _PUBLIC,
    "AZUREPUBLICCLOUD": _PUBLIC,
    "AZURECHINACLOUD": ("https://login.chinacloudapi.cn/",
                        "https://management.chinacloudapi.cn/"),
    "AZUREGERMANCLOUD": ("https://login.microsoftonline.de/",
                         "https://management.microsoftazure.de/"),
    "AZUREUSGOVERNMENT": ("https://login.microsoftonline.us/",
                          "https://management.usgovcloudapi.net/"),
    "AZUREUSGOVERNMENTCLOUD": ("https://login.microsoftonline.us/",
                               "https://management.usgovcloudapi.net/"),
}

PUBLIC_API = "2018-05-01"
PRIVATE_API = "2018-09-01"
REFRESH = 60.0


class Credentials:
    """A service principal and where to use it."""

    tenant = client = secret = subscription = ""
    login, management = _PUBLIC
    resource = _PUBLIC[1]


class Zone:
    """What identifies a zone in Azure: its resource group and name, and
    whether it is a private zone."""

    def __init__(self, group, name, private=False):
        self.group = group
        self.name = name
        self.private = private

    def __str__(self):
        return self.name


class Azure(HostedZones):
    name = "azure"

    def __init__(self, hosted, creds, fall=None):
        HostedZones.__init__(self, hosted, REFRESH, fall)
        self.creds = creds
        self.client: Optional[Client] = None     # made by start
        self._token = Token(self._new_token)

    def start(self):
        self.client = Client(self.reactor)
        return HostedZones.start(self)

    def stop(self):
        HostedZones.stop(self)
        if self.client is not None:
            return self.client.close()
        return None

    def describe(self, hz):
        return hz.ref.name

    # -- the API ----------------------------------------------------------

    def token(self):
        """A Deferred bearer token, renewed shortly before it expires."""
        return self._token.get()

    def _new_token(self):
        """Azure AD's client credentials flow (ADAL's v1 endpoint)."""
        client = self.client
        assert client is not None   # tokens are asked for once started
        c = self.creds
        url = "%s%s/oauth2/token?api-version=1.0" % (
            _slash(c.login), quote(c.tenant, safe=""))
        return client.post_form(url, {
            "grant_type": "client_credentials", "client_id": c.client,
            "client_secret": c.secret, "resource": c.resource})

    def first_page(self, zone):
        c = self.creds
        base = "%ssubscriptions/%s/resourceGroups/%s/providers/" \
            "Microsoft.Network/" % (_slash(c.management),
                                    quote(c.subscription, safe=""),
                                    quote(zone.group, safe=""))
        if zone.private:
            return base + "privateDnsZones/%s/ALL?api-version=%s" % (
                quote(zone.name, safe=""), PRIVATE_API)
        return base + "dnsZones/%s/recordsets?api-version=%s" % (
            quote(zone.name, safe=""), PUBLIC_API)

    @defer.inlineCallbacks
    def fetch(self, hz):
        """Every record set of the zone, following ``nextLink``."""
        client = self.client
        assert client is not None   # zones are fetched once started
        url = self.first_page(hz.ref)
        rrs = []
        while url:
            token = yield self.token()
            page = yield client.get_json(
                url, {"Authorization": "Bearer " + token})
            for rs in page.get("value") or ():
                rrs.extend(_checked(rs, hz.ref.private))
            url = page.get("nextLink")
        return rrs


def _checked(rs, private):
    """``records``, or none with a warning when the set is malformed."""
    try:
        return records(rs, private)
    except (KeyError, TypeError, ValueError) as e:
        logger.warning("azure", "Failed to process resource record set "
                       "%s: %s" % (rs.get("name"), error_text(e)))
        return []


def _slash(url):
    return url if url.endswith("/") else url + "/"


def _lower(obj):
    """A JSON object with lower-case keys: the public API spells them
    ``ARecords``, ``TTL``, the private one ``aRecords``, ``ttl``."""
    return {k.lower(): v for k, v in obj.items()} if isinstance(
        obj, dict) else {}


def _txt(strings):
    return " ".join('"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
                    for s in strings)


#: Record kinds: (property, type, presentation of one item).
_KINDS = [
    ("arecords", "A", lambda r: r["ipv4address"]),
    ("aaaarecords", "AAAA", lambda r: r["ipv6address"]),
    ("mxrecords", "MX", lambda r: "%d %s" % (r["preference"],
                                             fqdn(r["exchange"]))),
    ("ptrrecords", "PTR", lambda r: fqdn(r["ptrdname"])),
    ("srvrecords", "SRV", lambda r: "%d %d %d %s" % (
        r["priority"], r["weight"], r["port"], fqdn(r["target"]))),
    ("txtrecords", "TXT", lambda r: _txt(r.get("value") or [])),
    ("nsrecords", "NS", lambda r: fqdn(r["nsdname"])),
]


def records(rs, private):
    """The RRs of one record set, as CoreDNS's azure plugin reads them
    (private zones have no NS)."""
    props = _lower(rs.get("properties"))
    owner = fqdn(props.get("fqdn") or "")
    ttl = int(props.get("ttl") or 0)
    out = []
    for key, rtype, text in _KINDS:
        if private and rtype == "NS":
            continue
        for item in props.get(key) or ():
            out.append(rr_from_text(owner, rtype, ttl, text(_lower(item))))
    soa = _lower(props.get("soarecord"))
    if soa:
        out.append(rr_from_text(owner, "SOA", ttl, "%s %s %d %d %d %d %d" % (
            fqdn(soa["host"]), fqdn(soa["email"]), soa["serialnumber"],
            soa["refreshtime"], soa["retrytime"], soa["expiretime"],
            soa["minimumttl"])))
    cname = _lower(props.get("cnamerecord"))
    if cname.get("cname"):
        out.append(rr_from_text(owner, "CNAME", ttl, fqdn(cname["cname"])))
    return out
