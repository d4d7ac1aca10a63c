#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager and kubectl from the Go module proxy
# into a cache directory keyed by their versions, so a second run does not rebuild.
#
#   hack/build-control-plane.sh            build if missing; print the bin directory
#   hack/build-control-plane.sh --print-replaces K8S_VERSION
#                                          print the replace block for a new Kubernetes version
#   hack/build-control-plane.sh --versions print the selectable Kubernetes minors, newest first
#
# Environment: TENANT_PLATFORM_CACHE (default ~/.cache/tenant-platform); TENANT_PLATFORM_K8S, the
# Kubernetes minor to build (e.g. 1.30): hack/k8s-<minor>/go.mod pins it, hack/k8s/go.mod pins the
# newest (the default). Every version shares hack/etcd and gets its own cache directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-modcacherw CGO_ENABLED=0

if [[ "${1:-}" == "--print-replaces" ]]; then
  k="${2:?usage: --print-replaces 1.36.3}"; s="v0.${k#1.}"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  gomod=$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@v$k" |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  grep -E '^(go|godebug) ' "$gomod"
  grep -E '^\s+k8s\.io/[A-Za-z0-9._-]+ v0\.0\.0(\s|$)' "$gomod" | awk -v s="$s" '{print "\t"$1" => "$1" "s}'
  exit 0
fi

modversion() {  # modversion GO_MOD MODULE: the version a go.mod requires, block or single line
  awk -v m="$2" '{ if ($1 == "require") { $1 = "" ; $0 = $0 } } $1 == m { print $2; exit }' "$1"
}
minor_of() { local v; v=$(modversion "$1/go.mod" k8s.io/kubernetes); v=${v#v}; echo "${v%.*}"; }
if [[ "${1:-}" == "--versions" ]]; then
  { minor_of "$here/k8s"; for d in "$here"/k8s-*/; do minor_of "$d"; done; } | sort -V -r -u
  exit 0
fi
k8s_dir="$here/k8s"
want="${TENANT_PLATFORM_K8S:-}"
if [[ -n "$want" && "$want" != "$(minor_of "$here/k8s")" ]]; then
  k8s_dir="$here/k8s-$want"
  if [[ ! -f "$k8s_dir/go.mod" ]]; then
    echo "TENANT_PLATFORM_K8S=$want: no hack/k8s-$want/go.mod; selectable: $("$0" --versions | tr '\n' ' ')" >&2
    exit 1
  fi
fi
k8s_version=$(modversion "$k8s_dir/go.mod" k8s.io/kubernetes)
etcd_version=$(modversion "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)
[[ -n "$k8s_version" && -n "$etcd_version" ]] || { echo "cannot read versions from hack/*/go.mod" >&2; exit 1; }
cache="${TENANT_PLATFORM_CACHE:-$HOME/.cache/tenant-platform}"
out="$cache/control-plane/k8s-$k8s_version-etcd-$etcd_version"
bins=(etcd kube-apiserver kube-controller-manager kubectl)

complete() { for b in "${bins[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done; [[ -f "$out/STAMP" ]]; }
if complete; then echo "$out/bin"; exit 0; fi

progress_label=build-control-plane
# shellcheck source=hack/progress.sh
source "$here/progress.sh"
# shellcheck source=hack/control-plane-finish.sh
source "$here/control-plane-finish.sh"
trap progress_done EXIT
mkdir -p "$cache/control-plane"
exec 9>"$cache/control-plane/.build.lock"
if ! flock -n 9; then
  progress_step "waiting for another build of the control plane to finish (lock $cache/control-plane/.build.lock)"
  flock 9
fi
if complete; then progress_done; echo "$out/bin"; exit 0; fi

start=$(date +%s)
work=$(mktemp -d "$cache/control-plane/.build.XXXXXX")
trap 'progress_done; rm -rf "$work"' EXIT
mkdir -p "$work/bin"

minor=$(echo "$k8s_version" | cut -d. -f2)
date_stamp=2026-01-01T00:00:00Z   # fixed, so the build is reproducible
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date_stamp"
done

progress_step "building etcd $etcd_version (the first build downloads its modules; minutes)"
(cd "$here/etcd" && go build -mod=mod -trimpath -buildvcs=false -o "$work/bin/etcd" go.etcd.io/etcd/server/v3)
progress_step "building kube-apiserver, kube-controller-manager, kubectl $k8s_version (the longest step)"
(cd "$k8s_dir" && go build -mod=mod -trimpath -buildvcs=false -tags selinux,notest,grpcnotrace \
  -ldflags "$ld" -o "$work/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)

progress_done
echo "[build-control-plane $(progress_elapsed)] built" >&2
# The versions, the stamp, the move into place: hack/control-plane-finish.sh (tested on its own).
finish_control_plane "$work" "$out" "$k8s_version" "$etcd_version" "$start"
trap progress_done EXIT
echo "$out/bin"
