#!/usr/bin/env bash
# Build the operator image from the project's own Dockerfile without a Docker daemon or a registry:
# Debian's buildah builds it, and the Python base (the Dockerfile's PYTHON_IMAGE argument, the only
# thing swapped) is a minimal Debian bookworm root filesystem with python3 and python3-venv, made
# here with debootstrap and imported as a local image. The released image keeps the official
# Python base; this one is for the tests (tests/image/).
#
#   hack/build-image.sh                  build (the base is cached); print the image name
#   hack/build-image.sh --rootfs DIR     also unpack the image's root filesystem into DIR and
#                                        write its OCI config next to it as DIR.config.json (kept
#                                        while DIR.image-id names the same image)
#
# pip inside the build uses this machine's pip configuration (`pip config list`: index, extra
# index, trusted hosts, CA bundle), written to a file mounted read-only at /etc/pip.conf for the
# build's RUN steps only, with the CA bundle mounted at the path it names; neither ends up in the
# image. Needs root (buildah with the vfs driver, debootstrap); installs buildah and debootstrap
# with apt-get when missing.
#
# Environment: TENANT_PLATFORM_CACHE (default ~/.cache/tenant-platform): the base root filesystem
# and buildah's storage live in its image/ directory. DEBIAN_MIRROR (default
# http://deb.debian.org/debian). TENANT_PLATFORM_IMAGE (default
# localhost/tenant-platform-operator:test).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${TENANT_PLATFORM_CACHE:-$HOME/.cache/tenant-platform}/image"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
image="${TENANT_PLATFORM_IMAGE:-localhost/tenant-platform-operator:test}"
suite=bookworm
packages=python3,python3-venv,python-is-python3,ca-certificates
base_image="localhost/tenant-platform-base:$suite-python3"
rootfs_out=""
if [[ "${1:-}" == "--rootfs" ]]; then rootfs_out="${2:?usage: --rootfs DIR}"; fi

[[ $(id -u) == 0 ]] || { echo "hack/build-image.sh needs root (buildah vfs storage, debootstrap)" >&2; exit 1; }
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
  echo "== installing ${missing[*]} (apt-get)" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
fi

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
bah() { buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs "$@"; }
start=$(date +%s)

# The base: debootstrap once (cached as a tarball keyed by suite and packages), import once.
base_tar="$cache/base-$suite-$(echo "$packages" | sha256sum | cut -c1-12).tar"
if [[ ! -f "$base_tar" ]]; then
  echo "== debootstrap $suite ($packages) from $mirror" >&2
  work=$(mktemp -d "$cache/.rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror" >&2
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/var/log/*
  tar --numeric-owner -C "$work/rootfs" -cf "$work/base.tar" .
  mv "$work/base.tar" "$base_tar"
  rm -rf "$work"; trap - EXIT
  bah rmi --force "$base_image" >/dev/null 2>&1 || true
fi
if ! bah inspect --type image "$base_image" >/dev/null 2>&1; then
  echo "== importing the base as $base_image" >&2
  ctr=$(bah from scratch)
  bah add "$ctr" "$base_tar" / >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 "$ctr"
  bah commit --rm --quiet "$ctr" "$base_image" >/dev/null
fi

# pip's configuration for the build: the index settings this machine's pip uses (files and PIP_*
# variables), as one /etc/pip.conf, and the CA bundle it trusts.
piptmp=$(mktemp -d)
trap 'rm -rf "$piptmp"' EXIT
ca=""
{
  echo "[global]"
  python3 -m pip config list 2>/dev/null | python3 -c '
import re, sys
keep = {"index-url", "extra-index-url", "trusted-host", "cert", "timeout", "default-timeout", "retries"}
for line in sys.stdin:
    m = re.match(r"^(?:global|install|:env:)\.([a-z-]+)=(.*)$", line.strip())
    if m and m.group(1) in keep:
        value = m.group(2).strip().strip("\x27\"")
        key = "timeout" if m.group(1) == "default-timeout" else m.group(1)
        print(f"{key} = {value}")
' | sort -u
} > "$piptmp/pip.conf"
ca=$(sed -n 's/^cert = //p' "$piptmp/pip.conf" | tail -1)
mounts=(-v "$piptmp/pip.conf:/etc/pip.conf:ro")
if [[ -z "$ca" ]]; then
  for c in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    [[ -f "$c" ]] && { ca=$c; echo "cert = $c" >> "$piptmp/pip.conf"; break; }
  done
fi
[[ -n "$ca" ]] && mounts+=(-v "$(readlink -f "$ca"):$ca:ro")
echo "== pip configuration for the build:" >&2; sed 's/^/   /' "$piptmp/pip.conf" >&2

# The build's inputs (what the Dockerfile copies, per .dockerignore, and the base): an unchanged
# input set reuses the image. buildah's --layers cache is not used: with the vfs driver every cached
# step copies the whole root filesystem, which is slower than building.
base_id=$(bah inspect --type image --format '{{.FromImageID}}' "$base_image")
inputs=$(cd "$root" && { echo "$base_id"; cat "$piptmp/pip.conf";
  find Dockerfile requirements.lock pyproject.toml README.md operator -type f \
    -not -path '*/__pycache__/*' -not -name '*.pyc' -not -path '*.egg-info/*' -print0 |
    sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
stamp="$cache/$(echo "$image" | tr '/:' '__').inputs"
if [[ "$(cat "$stamp" 2>/dev/null)" == "$inputs" ]] && bah inspect --type image "$image" >/dev/null 2>&1; then
  echo "== $image is up to date (inputs $inputs)" >&2
else
  echo "== buildah bud (PYTHON_IMAGE=$base_image) -> $image" >&2
  bah bud --isolation chroot --pull-never --quiet \
    --build-arg PYTHON_IMAGE="$base_image" "${mounts[@]}" \
    -t "$image" -f "$root/Dockerfile" "$root" >&2
  bah rmi --prune >/dev/null 2>&1 || true  # the previous build's image, now untagged
  echo "$inputs" > "$stamp"
  bah images --noheading --filter "reference=$image" >&2
fi

image_id=$(bah inspect --type image --format '{{.FromImageID}}' "$image")
if [[ -n "$rootfs_out" && "$(cat "$rootfs_out.image-id" 2>/dev/null)" == "$image_id" ]]; then
  echo "== $rootfs_out is already image $image_id" >&2
elif [[ -n "$rootfs_out" ]]; then
  rm -rf "$rootfs_out" "$rootfs_out.image-id"; mkdir -p "$rootfs_out"
  ctr=$(bah from --pull-never "$image")
  mnt=$(bah mount "$ctr")
  cp -a "$mnt/." "$rootfs_out/"
  bah umount "$ctr" >/dev/null
  bah rm "$ctr" >/dev/null
  bah inspect --type image "$image" |
    python3 -c 'import json,sys; json.dump(json.load(sys.stdin)["OCIv1"]["config"], sys.stdout, indent=1)' \
    > "$rootfs_out.config.json"
  echo "$image_id" > "$rootfs_out.image-id"
  echo "== root filesystem in $rootfs_out, config in $rootfs_out.config.json" >&2
fi
echo "== image built in $(( $(date +%s) - start ))s" >&2
echo "$image"
