# corednstw: the cluster DNS image.
#
#   docker build -t corednstw:1.14.0 .      (or scripts/image.sh: build + smoke test)
#
# A drop-in for CoreDNS's image: the entrypoint is the `coredns` command
# with CoreDNS's flags, so manifests written for CoreDNS
# (`args: ["-conf", "/etc/coredns/Corefile"]`) work unchanged. The same
# image runs NodeLocal DNSCache with `command: ["node-cache"]` and
# k8s-dns-node-cache's arguments.
#
# Runs as an unprivileged user with a read-only root filesystem. What makes
# that work:
#   * Everything Python would otherwise compile at each start is compiled
#     here: the standard library (the base image ships no bytecode) and the
#     installed packages. On a read-only root it would be compiled in
#     memory at every start, costing start-up time and CPU.
#   * Twisted's plugin cache (dropin.cache) is generated here; otherwise
#     `twistd coredns` would try to write it at every start.
#   * The interpreter carries the file capability cap_net_bind_service, so
#     the non-root process can bind port 53 (the Deployment adds
#     NET_BIND_SERVICE to the container's bounding set and drops the rest).

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY corednstw ./corednstw
COPY twisted ./twisted
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# iproute2 and iptables: node-cache's interface and conntrack rules (and
# NodeLocal DNSCache set-ups that run `ip` in an init container).
# libcap2-bin (setcap) stays: iproute2 depends on it, and purging it would
# take iproute2 along.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 iptables libcap2-bin \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
COPY --from=build /wheels /wheels
# After installing: drop what nothing imports at run time (packages' own
# test suites; kubernetes/aio, the asyncio copy of the API client, which
# neither the kubernetes package nor corednstw imports), then compile.
RUN pip install --no-cache-dir --no-compile /wheels/*.whl \
 && rm -rf /wheels \
 && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && stdlib="$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
 && rm -rf "$site/kubernetes/aio" "$site/kubernetes/test" "$site/kubernetes/e2e_test" \
 && find "$site" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} + \
 && python -m compileall -q -j 0 "$stdlib" "$site" \
 && python -c "from twisted.plugin import IPlugin, getPlugins; list(getPlugins(IPlugin))" \
 && setcap cap_net_bind_service=+ep "$(readlink -f "$(command -v python3)")" \
 && groupadd --system --gid 65532 coredns \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin coredns
USER 65532:65532
WORKDIR /
EXPOSE 53/udp 53/tcp 8080/tcp 8181/tcp 9153/tcp
ENTRYPOINT ["coredns"]
