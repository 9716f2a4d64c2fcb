"""kubeadm's Corefile, unchanged, against a real API server, as a pod runs it.

    sudo .venv/bin/python bench/kubeadm_incluster.py KUBECONFIG_DIR

KUBECONFIG_DIR is a directory made by shared/reference/kube-apiserver
(it holds ca.crt, admin.token and ports.env).  The script needs root: it
re-runs itself in a private mount namespace (``unshare -m``), where

* a tmpfs over /run holds the service account files a pod gets
  (/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace});
* /etc/resolv.conf is replaced by one naming 127.0.0.2, where a second
  corednstw answers for example.com (the cluster's upstream);
* KUBERNETES_SERVICE_HOST/PORT point at the API server.

Then it starts ``twistd -n coredns`` on the kubeadm Corefile of
tests/corefiles/shared (the copy of the shared example) with nothing
changed: port 53, health on :8080 with a 5 s lameduck, ready on :8181,
prometheus on :9153.  It checks what a cluster asks (a Service, a headless
Service, a pod name, a reverse lookup, an external name through forward,
NXDOMAIN with the SOA), the probes, the metrics, a reload, and that
SIGTERM drains through the lameduck; it prints one line per check and
exits 1 if any failed.  Nothing outside the namespace changes.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.reversename

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_bench import http  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
COREFILE = os.path.join(ROOT, "tests", "corefiles", "shared",
                        "kubernetes-default.Corefile")
SA = "/run/secrets/kubernetes.io/serviceaccount"
UPSTREAM = "127.0.0.2"
#: Families a scrape must show once the checks above have run.
FAMILIES = ("coredns_dns_requests_total", "coredns_dns_responses_total",
            "coredns_cache_entries", "coredns_cache_hits_total",
            "coredns_proxy_request_duration_seconds_count",
            "coredns_health_request_duration"
            "_seconds_bucket", "coredns_kubernetes_rest_client_requests_total",
            "coredns_plugin_enabled", "coredns_build_info")
ZONE = """$ORIGIN example.com.
@ 300 IN SOA ns.example.com. admin.example.com. 1 7200 3600 1209600 300
@ 300 IN NS ns
ns 300 IN A 192.0.2.53
www 300 IN A 192.0.2.80
"""


def port_of(apidir):
    with open(os.path.join(apidir, "ports.env")) as f:
        for line in f:
            if "KAPI_PORT:=" in line:
                return line.split(":=", 1)[1].split("}")[0]
    return "6443"


def setup_namespace(apidir, work):
    """Inside the private mount namespace: the pod's files."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
    os.makedirs(SA)
    shutil.copy(os.path.join(apidir, "ca.crt"), os.path.join(SA, "ca.crt"))
    with open(os.path.join(apidir, "admin.token")) as f:
        token = f.read().strip()    # as the kubelet writes it
    with open(os.path.join(SA, "token"), "w") as f:
        f.write(token)
    with open(os.path.join(SA, "namespace"), "w") as f:
        f.write("kube-system")
    resolv = os.path.join(work, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver %s\n" % UPSTREAM)
    subprocess.run(["mount", "--bind", resolv, "/etc/resolv.conf"],
                   check=True)


def ask(name, rdtype="A", timeout=2.0):
    q = dns.message.make_query(name, rdtype)
    try:
        return dns.query.udp(q, "127.0.0.1", port=53, timeout=timeout)
    except Exception:
        return None


def wait(predicate, limit=30.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, what, ok, detail=""):
        print("%-4s %s%s" % ("ok" if ok else "FAIL", what,
                             (": " + detail) if detail else ""),
              flush=True)
        if not ok:
            self.failed += 1


def first_service(kind):
    """(name, namespace, answer) of a Service of ``kind`` from the API."""
    from kubernetes import client, config
    config.load_incluster_config()
    core = client.CoreV1Api()
    for s in core.list_service_for_all_namespaces(limit=200).items:
        headless = s.spec.cluster_ip == "None"
        if s.spec.type == "ClusterIP" and headless == (kind == "headless"):
            return s.metadata.name, s.metadata.namespace, s.spec.cluster_ip
    return None


def run_checks(rep, server, log_path):
    t0 = time.monotonic()
    rep.check("ready on :8181", wait(
        lambda: http("http://127.0.0.1:8181/ready")[0] == 200, 60),
        "%.2f s after start" % (time.monotonic() - t0))
    rep.check("health on :8080", http("http://127.0.0.1:8080/health")
              == (200, "OK"))
    svc = first_service("cluster")
    if svc:
        name = "%s.%s.svc.cluster.local." % svc[:2]
        m = ask(name)
        got = [r.address for rr in (m.answer if m else []) for r in rr]
        rep.check("service " + name, got == [svc[2]], str(got))
        m = ask(dns.reversename.from_address(svc[2]).to_text(), "PTR")
        got = [r.to_text() for rr in (m.answer if m else []) for r in rr]
        rep.check("reverse of " + svc[2], got == [name], str(got))
    head = first_service("headless")
    if head:
        name = "%s.%s.svc.cluster.local." % head[:2]
        m = ask(name)
        n = sum(len(rr) for rr in m.answer) if m else 0
        rep.check("headless service " + name, m is not None
                  and m.rcode() == dns.rcode.NOERROR and n > 0,
                  "%d addresses" % n)
    m = ask("10-244-1-5.default.pod.cluster.local.")
    got = [r.address for rr in (m.answer if m else []) for r in rr]
    rep.check("pod name (pods insecure)", got == ["10.244.1.5"], str(got))
    m = ask("nosuch.default.svc.cluster.local.")
    rep.check("NXDOMAIN with the cluster SOA", m is not None
              and m.rcode() == dns.rcode.NXDOMAIN and m.authority
              and m.authority[0].rdtype == dns.rdatatype.SOA)
    m = ask("www.example.com.")
    got = [r.address for rr in (m.answer if m else []) for r in rr]
    rep.check("external name through forward . /etc/resolv.conf",
              got == ["192.0.2.80"], str(got))
    m2 = ask("www.example.com.")
    rep.check("cached by cache 30", m2 is not None and m2.answer
              and m2.answer[0].ttl <= m.answer[0].ttl if m else False)
    scrape = {}

    def complete():
        scrape["status"], scrape["text"] = http(
            "http://127.0.0.1:9153/metrics")
        return all("\n" + f in scrape["text"] for f in FAMILIES)
    wait(complete, 5)   # health's self-check is timed once a second
    status, text = scrape["status"], scrape["text"]
    missing = [f for f in FAMILIES if "\n" + f not in text]
    rep.check("metrics on :9153", status == 200 and not missing,
              "missing " + ", ".join(missing) if missing else "")
    server.send_signal(signal.SIGUSR1)
    rep.check("reload (SIGUSR1)", wait(
        lambda: "Reloading complete" in open(log_path).read()))
    rep.check("answers after reload", ask(
        "kubernetes.default.svc.cluster.local.") is not None)
    t1 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    answered = wait(lambda: ask("www.example.com.") is not None, 2)
    server.wait(timeout=60)
    took = time.monotonic() - t1
    rep.check("SIGTERM: answers during the 5 s lameduck, then exits 0",
              answered and server.returncode == 0 and took >= 4.5,
              "exited after %.1f s, status %s" % (took, server.returncode))
    with open(log_path) as f:
        log = f.read()
    errors = [ln for ln in log.splitlines() if ln.startswith("[ERROR]")]
    rep.check("no error lines in the log", not errors,
              "; ".join(errors[:3]))


def inside(apidir):
    work = tempfile.mkdtemp(prefix="kubeadm-incluster-")
    setup_namespace(apidir, work)
    with open(os.path.join(work, "db.example.com"), "w") as f:
        f.write(ZONE)
    with open(os.path.join(work, "Upstream"), "w") as f:
        f.write(".:53 {\n    bind %s\n    file db.example.com example.com\n"
                "}\n" % UPSTREAM)
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
               KUBERNETES_SERVICE_PORT=port_of(apidir))
    up = subprocess.Popen([TWISTD, "-n", "--pidfile=", "coredns", "-c",
                           "Upstream"], cwd=work, stdout=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT)
    log_path = os.path.join(work, "log")
    rep = Report()
    server = None
    try:
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [TWISTD, "-n", "--pidfile=", "coredns", "-c", COREFILE],
                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
            os.environ.update(KUBERNETES_SERVICE_HOST="127.0.0.1",
                              KUBERNETES_SERVICE_PORT=port_of(apidir))
            run_checks(rep, server, log_path)
    finally:
        for p in (server, up):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    print("%d checks failed" % rep.failed)
    return 1 if rep.failed else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        return inside(sys.argv[2])
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    return subprocess.call(["unshare", "-m", "--propagation", "private",
                            sys.executable, os.path.abspath(__file__),
                            "--inside", os.path.abspath(sys.argv[1])])


if __name__ == "__main__":
    sys.exit(main())
