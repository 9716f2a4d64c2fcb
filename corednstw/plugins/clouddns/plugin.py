"""The clouddns plugin: record sets listed with the Cloud DNS REST API
(the calls Google's Go client makes), with an OAuth token from a service
account's signed JWT, an authorized user's refresh token, workload
identity federation (an external account's token exchanged at Google's
STS), a service account impersonated with another credential's token, or
the metadata server; served through engines.hosted."""

import base64
import datetime
import json
import os
import time
from typing import Optional
from urllib.parse import quote

from twisted.internet import defer

from corednstw.core import logger
from corednstw.core.names import fqdn
from corednstw.engines.hosted import HostedZones, error_text, rr_from_text
from corednstw.engines.webapi import Client, HTTPError, Token, rs256_jwt

API = "https://dns.googleapis.com/"
TOKEN_URI = "https://oauth2.googleapis.com/token"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
REFRESH = 60.0
#: The credential types CoreDNS accepts (all implemented).
KNOWN_TYPES = ("service_account", "authorized_user",
               "impersonated_service_account", "external_account")
#: Seconds an impersonated token lives unless the file says otherwise.
IMPERSONATION_LIFETIME = 3600


class Zone:
    """A managed zone: its project and name."""

    def __init__(self, project, name):
        self.project = project
        self.name = name

    def __str__(self):
        return "%s:%s" % (self.project, self.name)


class CloudDNS(HostedZones):
    name = "clouddns"

    def __init__(self, hosted, credentials=None, fall=None, endpoint=None):
        HostedZones.__init__(self, hosted, REFRESH, fall)
        self.credentials = credentials
        self.endpoint = endpoint or API
        self.client: Optional[Client] = None     # made by start
        self._token = Token(self._new_token)

    def start(self):
        self.client = Client(self.reactor)
        if self.credentials is None:
            self.credentials = default_credentials()
        return HostedZones.start(self)

    def stop(self):
        HostedZones.stop(self)
        if self.client is not None:
            return self.client.close()
        return None

    # -- tokens -----------------------------------------------------------

    def token(self):
        """A Deferred bearer token, renewed shortly before it expires."""
        return self._token.get()

    def _new_token(self):
        client = self.client
        assert client is not None   # tokens are asked for once started
        creds = self.credentials
        if creds is None:
            return client.get_json(metadata_url(), {
                "Metadata-Flavor": "Google"})
        return token_for(client, creds)

    # -- listing ----------------------------------------------------------

    @defer.inlineCallbacks
    def fetch(self, hz):
        """Every record set of the managed zone, following
        ``nextPageToken``."""
        base = "%sdns/v1/projects/%s/managedZones/%s/rrsets" % (
            _slash(self.endpoint), quote(hz.ref.project, safe=""),
            quote(hz.ref.name, safe=""))
        client = self.client
        assert client is not None   # zones are fetched once started
        rrs = []
        page_token = None
        while True:
            token = yield self.token()
            url = base
            if page_token:
                url = client.url(base, "", [("pageToken", page_token)])
            page = yield client.get_json(
                url, {"Authorization": "Bearer " + token})
            for rs in page.get("rrsets") or ():
                rrs.extend(_records(rs))
            page_token = page.get("nextPageToken")
            if not page_token:
                return rrs


def _records(rs):
    """The RRs of one record set (CNAME and PTR targets made absolute, as
    CoreDNS does); a set that does not parse is logged and skipped."""
    out = []
    try:
        for value in rs.get("rrdatas") or ():
            if rs["type"] in ("CNAME", "PTR"):
                value = fqdn(value)
            out.append(rr_from_text(fqdn(rs["name"]), rs["type"],
                                    int(rs.get("ttl", 0)), value))
    except (KeyError, TypeError, ValueError) as e:
        logger.warning("clouddns", "Failed to process resource record set: "
                       "%s" % error_text(e))
        return []
    return out


def _slash(url):
    return url if url.endswith("/") else url + "/"


def metadata_url():
    """The metadata server's token URL (GCE_METADATA_HOST overrides the
    host, as Google's libraries allow)."""
    host = os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
    return ("http://%s/computeMetadata/v1/instance/service-accounts/"
            "default/token" % host)


def default_credentials():
    """Application default credentials: the file GOOGLE_APPLICATION_
    CREDENTIALS names, else gcloud's, else None (the metadata server)."""
    paths = [os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"),
             os.path.expanduser("~/.config/gcloud/"
                                "application_default_credentials.json")]
    for path in paths:
        if path and os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError) as e:
                logger.error("clouddns", "Failed to read credentials %s: %s"
                             % (path, e))
    return None


def token_for(client, creds):
    """A Deferred of the token response (``access_token``,
    ``expires_in``) for the credentials file's JSON ``creds``."""
    kind = creds["type"]
    if kind == "service_account":
        uri = creds.get("token_uri") or TOKEN_URI
        return client.post_form(uri, {
            "grant_type": JWT_BEARER, "assertion": signed_jwt(creds, uri)})
    if kind == "authorized_user":
        return client.post_form(creds.get("token_uri") or TOKEN_URI, {
            "grant_type": "refresh_token",
            "client_id": creds["client_id"],
            "client_secret": creds["client_secret"],
            "refresh_token": creds["refresh_token"]})
    if kind == "external_account":
        return external_account_token(client, creds)
    return impersonated_token(client, creds)


@defer.inlineCallbacks
def external_account_token(client, creds):
    """Workload identity federation: the subject token of the
    ``credential_source`` exchanged at the STS ``token_url`` (RFC 8693)
    for a federated token, which impersonates a service account when the
    file names one."""
    subject = yield subject_token(client, creds["credential_source"])
    form = {"grant_type": TOKEN_EXCHANGE, "audience": creds["audience"],
            "scope": SCOPE, "requested_token_type": ACCESS_TOKEN,
            "subject_token": subject,
            "subject_token_type": creds["subject_token_type"]}
    headers = {}
    if creds.get("client_id") and creds.get("client_secret"):
        headers["Authorization"] = "Basic " + base64.b64encode(
            ("%s:%s" % (creds["client_id"], creds["client_secret"]))
            .encode()).decode()
    elif creds.get("workforce_pool_user_project"):
        form["options"] = json.dumps(
            {"userProject": creds["workforce_pool_user_project"]})
    sts = yield client.post_form(creds["token_url"], form, headers)
    url = creds.get("service_account_impersonation_url")
    if not url:
        return sts
    lifetime = (creds.get("service_account_impersonation") or {}).get(
        "token_lifetime_seconds", IMPERSONATION_LIFETIME)
    result = yield impersonate(client, url, sts["access_token"], [],
                               lifetime)
    return result


def subject_token(client, source):
    """A Deferred of the subject token a ``credential_source`` gives: a
    file's text (read each time: a projected token is renewed) or a URL's
    body, plain or a JSON object's field."""
    fmt = source.get("format") or {}

    def pick(text):
        if fmt.get("type") == "json":
            field = fmt.get("subject_token_field_name")
            token = json.loads(text).get(field)
            if not token:
                raise ValueError("no %s in the subject token" % field)
            return token
        return text.strip()
    if "file" in source:
        return defer.maybeDeferred(_read_text, source["file"]).addCallback(
            pick)
    d = client.request("GET", source["url"], source.get("headers") or {})

    def body(result):
        code, data = result
        if code < 200 or code >= 300:
            raise HTTPError(code, data)
        return data.decode("utf-8")
    return d.addCallback(body).addCallback(pick)


def _read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@defer.inlineCallbacks
def impersonated_token(client, creds):
    """``impersonated_service_account``: the source credentials' token
    buys one of the target service account (IAM Credentials
    generateAccessToken, through the ``delegates`` chain)."""
    source = yield token_for(client, creds["source_credentials"])
    result = yield impersonate(
        client, creds["service_account_impersonation_url"],
        source["access_token"], creds.get("delegates") or [],
        IMPERSONATION_LIFETIME)
    return result


@defer.inlineCallbacks
def impersonate(client, url, bearer, delegates, lifetime):
    """generateAccessToken: its answer as a token response."""
    body = {"scope": [SCOPE], "lifetime": "%ds" % int(lifetime)}
    if delegates:
        body["delegates"] = list(delegates)
    out = yield client.post_json(url, body, {
        "Authorization": "Bearer " + bearer})
    expires = datetime.datetime.fromisoformat(out["expireTime"])
    return {"access_token": out["accessToken"],
            "expires_in": max(0.0, expires.timestamp() - time.time())}


def signed_jwt(creds, audience, now=None):
    """A service account's RS256-signed assertion for the token
    endpoint (RFC 7523)."""
    from cryptography.hazmat.primitives import serialization
    now = int(now if now is not None else time.time())
    header = {}
    if creds.get("private_key_id"):
        header["kid"] = creds["private_key_id"]
    claims = {"iss": creds["client_email"], "scope": SCOPE,
              "aud": audience, "iat": now, "exp": now + 3600}
    key = serialization.load_pem_private_key(
        creds["private_key"].encode(), password=None)
    return rs256_jwt(key, header, claims)
