# corednstw: the cluster DNS image.
#
#   docker build -t corednstw:1.14.0 .
#
# Runs as an unprivileged user with a read-only root filesystem. Two things
# make that work:
#   * Twisted's plugin cache (dropin.cache) is generated here, at build time;
#     otherwise twistd would try to write it at every start.
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
# iproute2: for NodeLocal DNSCache's init container (it sets up the
# link-local address); libcap2-bin only for setcap, removed afterwards.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 libcap2-bin \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl \
 && rm -rf /wheels \
 && python -m compileall -q "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && python -c "from twisted.plugin import IPlugin, getPlugins; list(getPlugins(IPlugin))" \
 && setcap cap_net_bind_service=+ep "$(readlink -f "$(command -v python3)")" \
 && apt-get purge -y libcap2-bin \
 && apt-get autoremove -y \
 && groupadd --system --gid 65532 coredns \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin coredns
USER 65532:65532
WORKDIR /
EXPOSE 53/udp 53/tcp 8080/tcp 8181/tcp 9153/tcp
ENTRYPOINT ["twistd", "-n", "--pidfile=", "coredns"]
CMD ["-c", "/etc/coredns/Corefile"]
