"""A local emulation of the REST calls the azure and clouddns plugins make
(there is no Azure or Google Cloud to run here).

One threaded HTTP server answers, as the providers document them:

- Azure AD's client-credentials token endpoint
  (``POST /{tenant}/oauth2/token``: the client secret, or an assertion
  signed with a certificate of ``azure_certificates``), the managed
  identity's token from the instance metadata service
  (``GET /metadata/identity/oauth2/token``, ``Metadata: true``) or from
  App Service's identity endpoint (``GET /msi/token`` with the
  ``X-IDENTITY-HEADER`` secret), the instance metadata
  (``GET /metadata/instance``: the subscription), Azure DNS's record set
  lists
  (``GET /subscriptions/{sub}/resourceGroups/{group}/providers/
  Microsoft.Network/dnsZones/{zone}/recordsets`` and, for private zones,
  ``.../privateDnsZones/{zone}/ALL``), paged with ``nextLink``;
- Google's OAuth token endpoint (``POST /token``: a service account's
  RS256 JWT, checked against its public key, or a refresh token), the
  metadata server's token (``GET /computeMetadata/v1/instance/
  service-accounts/default/token``) and Cloud DNS's record set list
  (``GET /dns/v1/projects/{project}/managedZones/{zone}/rrsets``), paged
  with ``pageToken``;
- Google's STS token exchange (``POST /v1/token``, RFC 8693: a subject
  token of ``subject_tokens`` for the ``audience``), IAM Credentials'
  ``POST /v1/projects/-/serviceAccounts/{email}:generateAccessToken``
  (a token of ours buys one for a service account of
  ``impersonable``, through ``delegates``), and an identity provider's
  subject token (``GET /subject-token``, JSON, needing a header).

List calls need a token the server issued (401 otherwise), and an unknown
zone gets 404.  ``page_size`` cuts every list into pages.  ``requests``
records each (method, path) answered.
"""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

#: The service principal the Azure emulation accepts.
TENANT = "tenant-1"
CLIENT = "client-1"
SECRET = "secret-1"
SUBSCRIPTION = "sub-1"


def _unb64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class CloudAPIs:

    def __init__(self, page_size=100):
        self.page_size = page_size
        self.lock = threading.Lock()
        self.azure = {}       # (group, zone, private) -> [record set]
        self.google = {}      # (project, zone) -> [rrset]
        self.public_keys = {}  # service account email -> public key
        self.refresh_tokens = set()
        self.tokens = set()
        self.requests = []
        self.httpd = None
        self.fail = False
        self.subject_tokens = set()    # what the STS exchanges
        self.audience = None           # the workload pool it exchanges for
        self.impersonable = set()      # service accounts tokens can buy
        self.impersonations = []       # (email, delegates, lifetime)
        self.azure_certificates = {}   # x5t thumbprint -> public key
        self.identities = {}           # how a managed identity asked
        self.identity_header = "identity-secret"

    # -- data -------------------------------------------------------------

    def azure_zone(self, group, zone, record_sets, private=False):
        with self.lock:
            self.azure[(group, zone, private)] = list(record_sets)

    def google_zone(self, project, zone, rrsets):
        with self.lock:
            self.google[(project, zone)] = list(rrsets)

    def service_account(self, email):
        """A new service account: its credentials file's JSON."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_keys[email] = key.public_key()
        pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        return {"type": "service_account", "project_id": "p",
                "private_key_id": "k1", "private_key": pem,
                "client_email": email, "token_uri": self.url + "/token"}

    # -- server -----------------------------------------------------------

    def start(self, port=0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever,
                         daemon=True).start()
        return self

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def _issue(self):
        token = "token-%d" % (len(self.tokens) + 1)
        self.tokens.add(token)
        return 200, {"access_token": token, "token_type": "Bearer",
                     "expires_in": "3599"}

    # -- token endpoints ---------------------------------------------------

    def post(self, path, form, headers=None, body=None):
        with self.lock:
            self.requests.append(("POST", path))
            if path == "/v1/token":
                return self._exchange(form)
            if path.endswith(":generateAccessToken"):
                return self._impersonate(path, headers or {}, body)
            if path == "/%s/oauth2/token" % TENANT:
                if form.get("client_id") == CLIENT and form.get(
                        "grant_type") == "client_credentials" and (
                        form.get("client_secret") == SECRET
                        or self._assertion_ok(form, path)):
                    return self._issue()
                return 401, {"error": "invalid_client"}
            if path == "/token":
                return self._google_token(form)
            return 404, {"error": "not found"}

    def azure_certificate(self, cert):
        """Register a client certificate (a cryptography Certificate)."""
        from cryptography.hazmat.primitives import hashes
        x5t = base64.urlsafe_b64encode(cert.fingerprint(hashes.SHA1())) \
            .rstrip(b"=").decode()
        self.azure_certificates[x5t] = cert.public_key()

    def _assertion_ok(self, form, path):
        """A client assertion: RS256 with a registered certificate, for
        this token URL, from and about the client, not expired."""
        import time
        if form.get("client_assertion_type") != ("urn:ietf:params:oauth:"
                                                 "client-assertion-type:"
                                                 "jwt-bearer"):
            return False
        try:
            head, body, _ = form["client_assertion"].split(".")
            header = json.loads(_unb64(head))
            claims = json.loads(_unb64(body))
            key = self.azure_certificates[header["x5t"]]
        except (KeyError, ValueError):
            return False
        return (self._signed(form["client_assertion"], key)
                and claims.get("aud") == self.url + path
                and claims.get("iss") == claims.get("sub") == CLIENT
                and claims.get("nbf", 0) <= time.time() < claims.get("exp",
                                                                     0))

    def _signed(self, jwt, key):
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        head, body, sig = jwt.split(".")
        try:
            key.verify(_unb64(sig), ("%s.%s" % (head, body)).encode(),
                       padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return False
        return True

    def _identity(self, path, query, headers):
        """The managed identity endpoints: a token for the management
        resource; how it was asked is kept in ``identities``."""
        import time
        if path == "/msi/token":
            if headers.get("X-IDENTITY-HEADER") != self.identity_header or \
                    query.get("api-version") != "2019-08-01":
                return 401, {"error": "bad identity header"}
        elif headers.get("Metadata") != "true" or query.get(
                "api-version") != "2018-02-01":
            return 400, {"error": "invalid_request"}
        if query.get("resource") != "https://management.azure.com/":
            return 400, {"error": "invalid_resource"}
        self.identities[path] = query.get("client_id")
        _, out = self._issue()
        if path == "/msi/token":
            del out["expires_in"]
            out["expires_on"] = str(int(time.time()) + 3600)
        return 200, out

    def _exchange(self, form):
        if form.get("grant_type") != ("urn:ietf:params:oauth:grant-type:"
                                      "token-exchange") or form.get(
                "requested_token_type") != ("urn:ietf:params:oauth:"
                                            "token-type:access_token"):
            return 400, {"error": "unsupported_grant_type"}
        if form.get("subject_token") not in self.subject_tokens or \
                form.get("audience") != self.audience:
            return 400, {"error": "invalid_grant"}
        code, out = self._issue()
        out["issued_token_type"] = ("urn:ietf:params:oauth:token-type:"
                                    "access_token")
        return code, out

    def _impersonate(self, path, headers, body):
        auth = headers.get("Authorization", "")
        if auth[len("Bearer "):] not in self.tokens:
            return 401, {"error": {"code": 401}}
        email = path.rsplit("/", 1)[-1].split(":")[0]
        req = json.loads(body or b"{}")
        if email not in self.impersonable or req.get("scope") != [
                "https://www.googleapis.com/auth/cloud-platform"]:
            return 403, {"error": {"code": 403,
                                   "status": "PERMISSION_DENIED"}}
        self.impersonations.append((email, req.get("delegates", []),
                                    req.get("lifetime")))
        _, out = self._issue()
        return 200, {"accessToken": out["access_token"],
                     "expireTime": "2999-01-01T00:00:00Z"}

    def _google_token(self, form):
        grant = form.get("grant_type")
        if grant == "refresh_token":
            if form.get("refresh_token") in self.refresh_tokens:
                return self._issue()
            return 400, {"error": "invalid_grant"}
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            if self._jwt_ok(form.get("assertion", "")):
                return self._issue()
        return 400, {"error": "invalid_grant"}

    def _jwt_ok(self, jwt):
        try:
            claims = json.loads(_unb64(jwt.split(".")[1]))
            key = self.public_keys[claims["iss"]]
            if not self._signed(jwt, key):
                return False
        except (ValueError, KeyError, IndexError):
            return False
        return claims.get("aud") == self.url + "/token" and claims.get(
            "exp", 0) > claims.get("iat", 0)

    # -- list endpoints ----------------------------------------------------

    def get(self, path, query, headers):
        with self.lock:
            self.requests.append(("GET", path))
            if self.fail:
                return 503, {"error": "unavailable"}
            if path in ("/metadata/identity/oauth2/token", "/msi/token"):
                return self._identity(path, query, headers)
            if path == "/metadata/instance":
                if headers.get("Metadata") != "true":
                    return 400, {"error": "missing Metadata header"}
                return 200, {"compute": {"subscriptionId": SUBSCRIPTION}}
            if path == "/subject-token":
                if headers.get("X-Identity") != "yes":
                    return 403, {"error": "missing X-Identity"}
                return 200, {"id_token": sorted(self.subject_tokens)[0]}
            if path.startswith("/computeMetadata/"):
                if headers.get("Metadata-Flavor") != "Google":
                    return 403, {"error": "missing Metadata-Flavor"}
                return self._issue()
            auth = headers.get("Authorization", "")
            if auth[len("Bearer "):] not in self.tokens:
                return 401, {"error": "unauthorized"}
            parts = path.strip("/").split("/")
            if parts[0] == "subscriptions":
                return self._azure_list(parts, query)
            if parts[:2] == ["dns", "v1"]:
                return self._google_list(parts, query)
            return 404, {"error": "not found"}

    def _page(self, items, start):
        start = int(start or 0)
        end = start + self.page_size
        return items[start:end], (str(end) if end < len(items) else None)

    def _azure_list(self, parts, query):
        # subscriptions/S/resourceGroups/G/providers/Microsoft.Network/
        # dnsZones/Z/recordsets  or  privateDnsZones/Z/ALL
        if len(parts) != 9 or parts[1] != SUBSCRIPTION:
            return 404, {"error": "not found"}
        private = parts[6] == "privateDnsZones"
        sets = self.azure.get((parts[3], parts[7], private))
        want = "2018-09-01" if private else "2018-05-01"
        if sets is None or query.get("api-version") != want:
            return 404, {"error": {"code": "ResourceNotFound"}}
        items, nxt = self._page(sets, query.get("$skipToken"))
        out = {"value": items}
        if nxt is not None:
            out["nextLink"] = "%s/%s?api-version=%s&$skipToken=%s" % (
                self.url, "/".join(parts), want, nxt)
        return 200, out

    def _google_list(self, parts, query):
        # dns/v1/projects/P/managedZones/Z/rrsets
        if len(parts) != 7 or parts[6] != "rrsets":
            return 404, {"error": "not found"}
        sets = self.google.get((parts[3], parts[5]))
        if sets is None:
            return 404, {"error": {"code": 404, "message": "notFound"}}
        items, nxt = self._page(sets, query.get("pageToken"))
        out = {"kind": "dns#resourceRecordSetsListResponse",
               "rrsets": items}
        if nxt is not None:
            out["nextPageToken"] = nxt
        return 200, out


def _handler(api):
    class Handler(BaseHTTPRequestHandler):
        # Persistent connections, as the real services keep them: a
        # client's pooled connection must not be closed under a POST
        # (which a client cannot safely retry).
        protocol_version = "HTTP/1.1"

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            u = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(u.query).items()}
            self._send(*api.get(u.path, query, self.headers))

        def do_POST(self):
            u = urlsplit(self.path)
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            form = {}
            if "json" not in self.headers.get("Content-Type", ""):
                form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            self._send(*api.post(u.path, form, self.headers, body))

        def log_message(self, *args):
            pass
    return Handler
