"""The azure plugin: record sets listed with Azure DNS's REST API (the
calls the Go SDK makes), with an OAuth token from Azure AD (a client
secret or a client certificate's signed assertion) or from the managed
identity of the machine (the instance metadata service, or the identity
endpoint of App Service and Container Apps), served through
engines.hosted."""

import hashlib
import os
import time
import uuid
from typing import Any, Optional
from urllib.parse import quote

from twisted.internet import defer

from corednstw.core import logger
from corednstw.core.names import fqdn
from corednstw.engines.hosted import HostedZones, error_text, rr_from_text
from corednstw.engines.webapi import Client, Token, b64url, rs256_jwt

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

#: The instance metadata service; AZURE_POD_IDENTITY_AUTHORITY_HOST
#: names another (AAD Pod Identity's, or a test's), as Azure's SDKs allow.
IMDS = "http://169.254.169.254"
IMDS_TOKEN_API = "2018-02-01"
IMDS_INSTANCE_API = "2021-02-01"
#: App Service's and Container Apps' identity endpoint protocol.
IDENTITY_API = "2019-08-01"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class Credentials:
    """A service principal (a secret or a certificate) or a managed
    identity (``client``: a user-assigned one's client ID), and where to
    use it.  An empty ``subscription`` is the machine's, read from the
    instance metadata."""

    tenant = client = secret = subscription = ""
    login, management = _PUBLIC
    resource = _PUBLIC[1]
    #: ``certificate``: (DER of the certificate, RSA private key)
    certificate: Optional[tuple[bytes, Any]] = None

    @property
    def kind(self):
        """How tokens are had, in go-autorest's order of preference."""
        if self.secret:
            return "secret"
        if self.certificate is not None:
            return "certificate"
        return "managed identity"


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
        """Azure AD's client credentials flow (ADAL's v1 endpoint), with
        the secret or a certificate's assertion; else the managed
        identity's token."""
        client = self.client
        assert client is not None   # tokens are asked for once started
        c = self.creds
        if c.kind == "managed identity":
            return self._identity_token(client)
        url = "%s%s/oauth2/token" % (_slash(c.login),
                                     quote(c.tenant, safe=""))
        form = {"grant_type": "client_credentials", "client_id": c.client,
                "resource": c.resource}
        if c.kind == "secret":
            form["client_secret"] = c.secret
        else:
            form["client_assertion_type"] = ASSERTION_TYPE
            form["client_assertion"] = client_assertion(c, url)
        return client.post_form(url + "?api-version=1.0", form)

    def _identity_token(self, client):
        """The managed identity's token: from the identity endpoint App
        Service and Container Apps give (IDENTITY_ENDPOINT with its
        IDENTITY_HEADER secret), else from the instance metadata
        service."""
        c = self.creds
        query = [("resource", c.resource)]
        if c.client:
            query.append(("client_id", c.client))
        endpoint = os.environ.get("IDENTITY_ENDPOINT")
        secret = os.environ.get("IDENTITY_HEADER")
        if endpoint and secret:
            url = client.url(endpoint, "", [("api-version", IDENTITY_API)]
                             + query)
            d = client.get_json(url, {"X-IDENTITY-HEADER": secret})
        else:
            url = client.url(imds(), "/metadata/identity/oauth2/token",
                             [("api-version", IMDS_TOKEN_API)] + query)
            d = client.get_json(url, {"Metadata": "true"})
        return d.addCallback(_expires_in)

    @defer.inlineCallbacks
    def subscription(self):
        """The subscription: configured, or the machine's (read once)."""
        c = self.creds
        if not c.subscription:
            client = self.client
            assert client is not None
            meta = yield client.get_json(client.url(
                imds(), "/metadata/instance",
                [("api-version", IMDS_INSTANCE_API)]), {"Metadata": "true"})
            try:
                c.subscription = meta["compute"]["subscriptionId"]
            except (KeyError, TypeError) as e:
                raise ValueError("no subscription in the instance "
                                 "metadata") from e
        return c.subscription

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
        yield self.subscription()
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


def imds():
    return os.environ.get("AZURE_POD_IDENTITY_AUTHORITY_HOST") or IMDS


def _expires_in(token):
    """Identity endpoints may give only ``expires_on`` (seconds since the
    epoch): the lifetime left, as the token cache reads it."""
    if isinstance(token, dict) and "expires_in" not in token and \
            token.get("expires_on"):
        token = dict(token, expires_in=max(
            0.0, float(token["expires_on"]) - time.time()))
    return token


def client_assertion(c, audience, now=None):
    """The signed JWT a client proves its certificate with (Azure AD's
    certificate credentials): the certificate named by its SHA-1
    thumbprint, for ``audience`` (the token URL), short-lived."""
    der, key = c.certificate
    now = int(now if now is not None else time.time())
    return rs256_jwt(key, {"x5t": b64url(hashlib.sha1(der).digest())}, {
        "aud": audience, "iss": c.client, "sub": c.client,
        "jti": str(uuid.uuid4()), "nbf": now, "exp": now + 600})


def read_certificate(path, password=None):
    """(certificate DER, RSA private key) from a PEM file holding both,
    or a PKCS#12 (.pfx) file with ``password``; ValueError when it holds
    no pair usable for RS256."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    with open(path, "rb") as f:
        data = f.read()
    secret = password.encode() if password else None
    pair: tuple[Any, Any]
    if b"-----BEGIN" in data:
        pair = (serialization.load_pem_private_key(data, password=secret),
                x509.load_pem_x509_certificate(data))
    else:
        pair = pkcs12.load_key_and_certificates(data, secret)[:2]
    key, cert = pair
    if cert is None or key is None:
        raise ValueError("the file holds no certificate and key")
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("the private key is not an RSA key")
    spki = (serialization.Encoding.DER,
            serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key() \
            .public_bytes(*spki):
        raise ValueError("the private key is not the certificate's")
    return cert.public_bytes(serialization.Encoding.DER), key


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
