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
# One step, so no layer keeps what a later one removes (the wheels are
# bind-mounted from the build stage, never copied in):
#   * iproute2 and iptables: node-cache's interface and conntrack rules.
#     libcap2-bin (setcap) stays: iproute2 depends on it, and purging it
#     would take iproute2 along. binutils only strips the extension
#     modules' symbols and is purged with what it alone pulled in.
#   * What nothing imports at run time goes: packages' own test suites
#     (tests/, and Twisted's test/ packages); kubernetes/aio, the asyncio
#     copy of the API client, which neither the kubernetes package nor
#     corednstw imports, and aiohttp with the packages only it needs
#     (kubernetes requires it for kubernetes/aio alone).
#   * The kubernetes API client, thousands of generated modules the
#     kubernetes plugin imports only for kubeconfig authentication it does
#     not speak itself (and then sends raw requests through it: no model
#     docstring is read), is kept as optimised bytecode in one zip on the
#     path (it reads no files of its own).
#   * Everything else is compiled: the standard library (the base image
#     ships none of its bytecode) and the installed packages.
# The import check fails the build if anything needed went.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    apt-get update \
 && apt-get install -y --no-install-recommends iproute2 iptables libcap2-bin binutils \
 && pip install --no-cache-dir --no-compile /wheels/*.whl \
 && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && stdlib="$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
 && rm -rf "${site:?}/kubernetes/aio" "${site:?}/kubernetes/test" "${site:?}/kubernetes/e2e_test" \
 && pip uninstall -y -q aiohttp aiohttp-retry yarl multidict frozenlist aiosignal propcache aiohappyeyeballs \
 && find "${site:?}" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} + \
 && find "${site:?}/twisted" -depth -type d -name test -exec rm -rf {} + \
 && find "${site:?}" -name '*.so*' -type f -exec strip --strip-unneeded {} + \
 && python -m compileall -q -j 0 -b -o 2 "${site:?}/kubernetes" \
 && find "${site:?}/kubernetes" -name '*.py' -delete \
 && (cd "${site:?}" && python -c "import os, zipfile; z = zipfile.ZipFile('kubernetes.zip', 'w', zipfile.ZIP_DEFLATED); [z.write(os.path.join(d, f)) for d, _, fs in os.walk('kubernetes') for f in fs]; z.close()") \
 && rm -rf "${site:?}/kubernetes" \
 && echo kubernetes.zip >"${site:?}/kubernetes-bytecode.pth" \
 && python -m compileall -q -j 0 "$stdlib" "$site" \
 && python -c "import corednstw.cli, corednstw.nodecache.main, corednstw.plugins.kubernetes, kubernetes.client, kubernetes.config, twisted.names.dns, grpc, aioquic, cryptography, prometheus_client, dns.zone, maxminddb, yaml" \
 && python -c "from twisted.plugin import IPlugin, getPlugins; list(getPlugins(IPlugin))" \
 && setcap cap_net_bind_service=+ep "$(readlink -f "$(command -v python3)")" \
 && apt-get purge -y --auto-remove binutils \
 && ip -V && iptables -V \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log \
 && groupadd --system --gid 65532 coredns \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin coredns
USER 65532:65532
WORKDIR /
EXPOSE 53/udp 53/tcp 8080/tcp 8181/tcp 9153/tcp
ENTRYPOINT ["coredns"]
