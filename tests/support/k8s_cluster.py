"""The cluster the kubernetes tests serve from (the fixtures of CoreDNS's
plugin/kubernetes handler tests), shared by every kubernetes test module."""

from tests.support import k8s_apiserver as k8s


def cluster(srv):
    """Fill the test API server ``srv`` with the cluster of CoreDNS's
    APIConnServeTest: namespaces, services and endpoint slices."""
    srv.add("namespaces", *[k8s.namespace(n) for n in (
        "testns", "kube-system", "podns", "unexposedns")])
    srv.add("services",
            k8s.service("kubedns", "kube-system", ("10.0.0.10",),
                        (("dns", "UDP", 53),)),
            k8s.service("svc1", "testns", ("10.0.0.1",)),
            k8s.service("svcempty", "testns", ("10.0.0.1",)),
            k8s.service("svc6", "testns", ("1234:abcd::1",)),
            k8s.service("hdls1", "testns", ("None",), ()),
            k8s.service("external", "testns", type="ExternalName",
                        external="ext.interwebs.test"),
            k8s.service("external-to-service", "testns", type="ExternalName",
                        external="svc1.testns.svc.cluster.local."),
            k8s.service("hdlsprtls", "testns", ("None",), ()),
            k8s.service("svc1", "unexposedns", ("10.0.0.2",)),
            k8s.service("svc-dual-stack", "testns", ("10.0.0.3", "10::3")))
    srv.add("endpointslices",
            k8s.endpoint_slice("kubedns-1", "kube-system", "kubedns",
                               [k8s.endpoint(["172.0.0.100"])],
                               (("dns", "UDP", 53),)),
            k8s.endpoint_slice("svc1-slice1", "testns", "svc1",
                               [k8s.endpoint(["172.0.0.1"], "ep1a")]),
            k8s.endpoint_slice("svcempty-slice1", "testns", "svcempty", []),
            k8s.endpoint_slice("hdls1-slice1", "testns", "hdls1", [
                k8s.endpoint(["172.0.0.2"]), k8s.endpoint(["172.0.0.3"]),
                k8s.endpoint(["172.0.0.4"], "dup-name"),
                k8s.endpoint(["172.0.0.5"], "dup-name"),
                k8s.endpoint(["5678:abcd::1"]),
                k8s.endpoint(["5678:abcd::2"])]),
            k8s.endpoint_slice("hdlsprtls-slice1", "testns", "hdlsprtls",
                               [k8s.endpoint(["172.0.0.20"])], ()))
