"""How long a real API server takes to write the services list, by the
form asked for (not part of the test suite).

    python bench/apiserver_list.py --kubeconfig KUBECONFIG [--rounds 5]

For each form (JSON with gzip, as the kubernetes plugin asks; plain
JSON; protobuf, as CoreDNS's client asks) it GETs
``/api/v1/services?limit=500&resourceVersion=0`` ``--rounds`` times,
alternating the forms, and prints the median and range of the time to
the response's first byte and to its end, and the body's size.  The
connection is made through the plugin's own client configuration
(token, CA, client certificate from the kubeconfig), one new connection
per request, its TLS handshake not counted.
"""

import argparse
import http.client
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from corednstw.engines.kubernetes import client as kc  # noqa: E402

PATH = "/api/v1/services?limit=500&resourceVersion=0"
FORMS = {
    "json+gzip": {"Accept": "application/json",
                  "Accept-Encoding": "gzip"},
    "json": {"Accept": "application/json", "Accept-Encoding": "identity"},
    "protobuf": {"Accept": "application/vnd.kubernetes.protobuf",
                 "Accept-Encoding": "identity"},
}


def once(direct, headers):
    """(seconds to the first byte, seconds to the end, body bytes)."""
    host, port = direct.address
    if direct.ctx is not None:
        conn = http.client.HTTPSConnection(host, port, timeout=30,
                                           context=direct.ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=30)
    headers = dict(headers)
    token = direct.token.get() if direct.token is not None else None
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        conn.connect()
        t0 = time.monotonic()
        conn.request("GET", PATH, headers=headers)
        resp = conn.getresponse()
        first = resp.read(1)
        t1 = time.monotonic()
        rest = resp.read()
        t2 = time.monotonic()
        if resp.status != 200:
            sys.exit("GET %s: %d" % (PATH, resp.status))
        return t1 - t0, t2 - t0, len(first) + len(rest)
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    direct = kc.from_kubeconfig(a.kubeconfig)
    got = {name: [] for name in FORMS}
    print("%s, load average %s" % (time.strftime("%Y-%m-%d %H:%M"),
                                   open("/proc/loadavg").read().split()[0]))
    for _ in range(a.rounds):
        for name, headers in FORMS.items():
            got[name].append(once(direct, headers))
    for name, runs in got.items():
        first = [r[0] for r in runs]
        end = [r[1] for r in runs]
        print("%-9s first byte %.3f s [%.3f-%.3f], end %.3f s "
              "[%.3f-%.3f], %d bytes"
              % (name, statistics.median(first), min(first), max(first),
                 statistics.median(end), min(end), max(end), runs[-1][2]))
    print("load average %s" % open("/proc/loadavg").read().split()[0])


if __name__ == "__main__":
    main()
