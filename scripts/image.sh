#!/usr/bin/env bash
# Builds the container image with buildah and smoke-tests it with podman
# the way Kubernetes runs it: the Corefile mounted read-only, user 65532, a
# read-only root filesystem, every capability dropped but
# NET_BIND_SERVICE, no privilege escalation.  Checks a query over UDP and
# over TCP on port 53, /health and /ready, and that SIGTERM ends the
# container with status 0; prints the build time, the image size and the
# time from `podman run` to /ready answering 200.
#
#   bash scripts/image.sh            # build corednstw:1.14.0 and test it
#   TAG=corednstw:dev bash scripts/image.sh
#
# Needs root, buildah and podman (Debian: apt-get install buildah podman).
# Where no registry is reachable, the base image python:3.11-slim is
# replaced by a stand-in built from Debian with debootstrap (Python 3.11,
# pip), under the same name.  The host's pip configuration, and the local
# directories it names, are mounted into the build, so a host whose
# package index is a local mirror builds too.  Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=${TAG:-corednstw:1.14.0}
BASE=docker.io/library/python:3.11-slim
NAME=corednstw-smoke-$$
work=$(mktemp -d)
cleanup() {
  podman rm -f "$NAME" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

for tool in buildah podman curl dig; do
  command -v "$tool" >/dev/null || { echo "image.sh: $tool is missing" >&2; exit 1; }
done

# crun may refuse the host's cgroup set-up; runc with cgroupfs works
# wherever the container engines do.
if command -v runc >/dev/null; then
  cat >"$work/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
EOF
  export CONTAINERS_CONF="$work/containers.conf"
fi
# Explicit limits (the engines' defaults may exceed what this shell may
# grant, and the runtime then refuses to start the container).
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
[ "$nofile" -gt 65536 ] && nofile=65536
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)

standin_base() {
  # python:3.11-slim's shape from Debian bookworm: python3 and pip on the
  # PATH as python/pip, pip allowed to install system-wide, no bytecode,
  # and debian:bookworm-slim's dpkg filter (no documentation, manual pages
  # or translations, now or from later installs).
  command -v debootstrap >/dev/null || { echo "image.sh: no registry and no debootstrap" >&2; exit 1; }
  local mirror root
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  root="${work:?}/rootfs"
  echo "== stand-in $BASE from $mirror (debootstrap)"
  debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -f "${root:?}"/usr/lib/python3*/EXTERNALLY-MANAGED
  ln -sf python3 "${root:?}/usr/bin/python"
  ln -sf pip3 "${root:?}/usr/bin/pip"
  printf 'path-exclude /usr/share/%s\n' 'doc/*' 'groff/*' 'info/*' 'linda/*' \
    'lintian/*' 'locale/*' 'man/*' >"${root:?}/etc/dpkg/dpkg.cfg.d/slim"
  echo 'path-include /usr/share/doc/*/copyright' >>"${root:?}/etc/dpkg/dpkg.cfg.d/slim"
  find "${root:?}/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  for d in groff info linda lintian locale man; do
    rm -rf "${root:?}/usr/share/$d"
    mkdir -p "${root:?}/usr/share/$d"
  done
  chroot "${root:?}" apt-get clean
  rm -rf "${root:?}"/var/lib/apt/lists/* "${root:?}"/var/cache/apt/* "${root:?}"/var/log/*
  find "${root:?}/usr/lib/python3.11" "${root:?}/usr/lib/python3/dist-packages" \
    -name __pycache__ -prune -exec rm -rf {} +
  tar -C "$root" -c . | podman import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE" >/dev/null
}

if ! podman image exists "$BASE"; then
  podman pull -q "$BASE" >/dev/null 2>&1 || standin_base
fi

# The host's pip configuration, as a file, and the local paths it names.
mounts=()
if command -v pip >/dev/null && pip config list >/dev/null 2>&1; then
  {
    echo "[global]"
    pip config list 2>/dev/null | sed -n "s/^[^.]*\.\([a-z-]*\)='\(.*\)'$/\1 = \2/p" | sort -u -t= -k1,1
  } >"$work/pip.conf"
  mounts+=(-v "$work/pip.conf:/etc/pip.conf:ro")
  for p in $(sed -n 's/^[a-z-]* = //p' "$work/pip.conf" | tr ' ' '\n' | sed 's|^file://||' | grep '^/' || true); do
    [ -e "$p" ] || continue
    d=$p; [ -d "$d" ] || d=$(dirname "$p")
    # A local index's pages link to files beside its simple/ directory.
    [ "$(basename "$d")" = simple ] && d=$(dirname "$d")
    mounts+=(-v "$d:$d:ro")
  done
fi

echo "== build $TAG"
start=$(date +%s.%N)
buildah bud --quiet --pull=never --network host --layers=false \
  "${ULIMITS[@]}" "${mounts[@]}" -t "$TAG" . >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log" >&2; exit 1; }
build_s=$(echo "$(date +%s.%N) - $start" | bc)
size=$(podman image inspect --format '{{.Size}}' "$TAG")

echo "== smoke test"
mkdir -p "$work/conf"
cat >"$work/conf/Corefile" <<'EOF'
.:53 {
    errors
    health :8080 {
        lameduck 1s
    }
    ready :8181
    template IN A example.org {
        answer "{{ .Name }} 60 IN A 192.0.2.53"
    }
}
EOF
chmod -R a+rX "$work/conf"
start=$(date +%s.%N)
podman run -d --name "$NAME" "${ULIMITS[@]}" \
  --user 65532:65532 --read-only --cap-drop=all --cap-add=NET_BIND_SERVICE \
  --security-opt=no-new-privileges \
  -v "$work/conf:/etc/coredns:ro" \
  "$TAG" -conf /etc/coredns/Corefile >/dev/null
ip=$(podman inspect --format '{{.NetworkSettings.IPAddress}}' "$NAME")
ready=""
for _ in $(seq 1 300); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:8181/ready")" = 200 ]; then
    ready=$(echo "$(date +%s.%N) - $start" | bc)
    break
  fi
  [ "$(podman inspect --format '{{.State.Running}}' "$NAME")" = true ] || break
  sleep 0.05
done
fail=0
check() {
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fail=1; fi
}
check "/ready" "${ready:+200}" 200
check "UDP query" "$(dig +short +time=2 +tries=2 @"$ip" www.example.org A)" 192.0.2.53
check "TCP query" "$(dig +short +tcp +time=2 +tries=2 @"$ip" www.example.org A)" 192.0.2.53
check "/health" "$(curl -s "http://$ip:8080/health")" OK
check "user" "$(podman exec "$NAME" id -u)" 65532
podman stop -t 30 "$NAME" >/dev/null
check "exit status after SIGTERM" "$(podman inspect --format '{{.State.ExitCode}}' "$NAME")" 0
echo "== logs"
podman logs "$NAME"
echo "== figures"
printf 'build: %.1f s\nimage size: %d MB (%d bytes)\nstart to ready: %s s\n' \
  "$build_s" $((size / 1000000)) "$size" "${ready:-never}"
exit "$fail"
