#!/usr/bin/env bash
# Build the delivery tools the tests use, from the Go module proxy, into a cache keyed by version
# (checksums verified against the Go checksum database), so a second run does not rebuild:
#
#   helm       renders deploy/helm/tenant-platform (`helm template`, `helm lint`)
#   promtool   checks and unit-tests the alert rules (`promtool check rules`, `promtool test rules`)
#   kstatus    hack/judges/kstatus: what Flux and kpt compute for an object (kstatus, Flux's
#              healthCheckExprs reader); tests/integration/test_judges.py
#   argocd-lua hack/judges/argocd-lua: our Argo CD health Lua run in gopher-lua, Argo CD's VM
#   cert-manager hack/judges/cert-manager: cert-manager's own certificate and issuer controllers
#              (github.com/cert-manager/cert-manager, pinned in its go.mod) as one local process;
#              its CRDs are copied from the module source into the cache beside the binary
#              (<dir>/crds), never committed; tests/integration/test_certmanager.py. Measured on 2
#              busy cores: cold (empty Go build cache) about 3.5 min plus 61 MB of modules (13 s);
#              with a warm build cache 15 s (link); cached, instant
#   coredns    hack/judges/coredns: CoreDNS itself (github.com/coredns/coredns, pinned in its go.mod;
#              upstream's main with the plugins cluster Corefiles use), serving the Corefiles the
#              operator leaves, kubernetes plugin on the test control plane;
#              tests/integration/test_coredns_judge.py. Measured on 2 busy cores: cold (empty Go
#              build cache) 3.7 min plus 44 MB of modules (9 s); with a warm build cache 6 s (link);
#              cached, instant
#   istioctl   generates real injected pods (hack/gen-injected-pods.sh); opt-in: not built by the
#              no-argument form, since its cold build takes far longer than the others
#
# helm and promtool are `go install`ed at a pinned version; the judges are our own small modules
# under hack/judges (go.mod and go.sum pin their dependencies), cached by a hash of their files.
#
#   hack/build-tools.sh                    build helm, promtool, kstatus, argocd-lua, cert-manager
#                                          and coredns if missing;
#                                          print "name path" lines
#   hack/build-tools.sh helm               build helm if missing; print the path of the binary
#   hack/build-tools.sh --cached istioctl  print the path only if already built (exit 3 otherwise)
#
# Environment: TENANT_PLATFORM_CACHE (default ~/.cache/tenant-platform). A prebuilt binary is
# used instead when TENANT_PLATFORM_HELM, TENANT_PLATFORM_PROMTOOL, TENANT_PLATFORM_KSTATUS,
# TENANT_PLATFORM_ARGOCD_LUA, TENANT_PLATFORM_CERT_MANAGER (a directory holding bin/cert-manager and
# crds/, as this script lays it out), TENANT_PLATFORM_COREDNS or TENANT_PLATFORM_ISTIOCTL names it.
set -euo pipefail
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-modcacherw CGO_ENABLED=0

helm_version=v3.22.0
helm_k8s_minor=37   # helm v3.22.0 builds with k8s.io/client-go v0.37.0
# Prometheus v3.16.0 is published to the module proxy as v0.316.0.
prometheus_module_version=v0.316.0
# istio.io/istio is served only as pseudo-versions (its tags are not Go-module semver).
istio_module_version=v0.0.0-20260827124520-eed52ebb66ad

cache="${TENANT_PLATFORM_CACHE:-$HOME/.cache/tenant-platform}/tools"
judges="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/judges"
progress_label=build-tools
# shellcheck source=hack/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/progress.sh"
trap progress_done EXIT

package() {
  case "$1" in
    helm) echo "helm.sh/helm/v3/cmd/helm@$helm_version" ;;
    promtool) echo "github.com/prometheus/prometheus/cmd/promtool@$prometheus_module_version" ;;
    kstatus|argocd-lua|cert-manager|coredns)  # a local module: keyed by a hash of its files
      echo "hack/judges/$1@$(cd "$judges/$1" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)" ;;
    istioctl) echo "istio.io/istio/istioctl/cmd/istioctl@$istio_module_version" ;;
    *) echo "unknown tool: $1 (helm, promtool, kstatus, argocd-lua, cert-manager, coredns, istioctl)" >&2; return 2 ;;
  esac
}

ldflags() {
  case "$1" in
    helm)  # as helm's Makefile: version, and the default Kubernetes version of its client-go (v0.37)
      local f="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version" p
      for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
        f="$f -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$helm_k8s_minor"
      done
      echo "$f" ;;
    promtool)  # v0.316.0 -> 3.16.0
      local m=${prometheus_module_version#v0.}
      echo "-s -w -X github.com/prometheus/common/version.Version=3.$(( ${m%%.*} - 300 )).${m#*.}" ;;
    istioctl)  # the module's commit as the version (`istioctl version --remote=false`)
      echo "-s -w -X istio.io/istio/pkg/version.buildVersion=${istio_module_version##*-}" ;;
    *) echo "-s -w" ;;
  esac
}

override() {
  case "$1" in
    helm) echo "${TENANT_PLATFORM_HELM:-}" ;;
    promtool) echo "${TENANT_PLATFORM_PROMTOOL:-}" ;;
    kstatus) echo "${TENANT_PLATFORM_KSTATUS:-}" ;;
    argocd-lua) echo "${TENANT_PLATFORM_ARGOCD_LUA:-}" ;;
    cert-manager) echo "${TENANT_PLATFORM_CERT_MANAGER:+$TENANT_PLATFORM_CERT_MANAGER/bin/cert-manager}" ;;
    coredns) echo "${TENANT_PLATFORM_COREDNS:-}" ;;
    istioctl) echo "${TENANT_PLATFORM_ISTIOCTL:-}" ;;
  esac
}

copy_crds() {  # copy_crds MODULE_DIR DEST: cert-manager's CRD files, from the module source it builds
  local src
  src=$(cd "$1" && go list -mod=readonly -m -f '{{.Dir}}' github.com/cert-manager/cert-manager) || return 1
  if ! compgen -G "$src/deploy/crds/*.yaml" >/dev/null; then
    echo "no CRD files under $src/deploy/crds" >&2; return 1
  fi
  mkdir -p "$2" && cp "$src"/deploy/crds/*.yaml "$2"/ && chmod u+w "$2"/*.yaml
}

build() {  # build NAME: print the path of a working binary, building it once
  local name=$1 pkg dir start work
  if [[ -n "$(override "$name")" ]]; then override "$name"; return 0; fi
  pkg=$(package "$name")
  dir="$cache/$name-${pkg##*@}"
  if [[ -x "$dir/bin/$name" && -f "$dir/STAMP" ]]; then echo "$dir/bin/$name"; return 0; fi
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  if ! flock -n 9; then
    progress_step "waiting for another tool build to finish (lock $cache/.build.lock)"
    flock 9
  fi
  if [[ -x "$dir/bin/$name" && -f "$dir/STAMP" ]]; then progress_done; echo "$dir/bin/$name"; exec 9>&-; return 0; fi
  start=$(date +%s)
  work=$(mktemp -d "$cache/.build.XXXXXX")
  progress_step "building $name from $pkg"
  if [[ $pkg == hack/judges/* ]]; then  # go.sum is committed: -mod=readonly never edits it
    if ! (cd "$judges/$name" && go build -mod=readonly -trimpath -buildvcs=false -ldflags "$(ldflags "$name")" \
        -o "$work/bin/$name" . >&2); then
      progress_done; rm -rf "$work"; exec 9>&-; return 1
    fi
    if [[ $name == cert-manager ]] && ! copy_crds "$judges/$name" "$work/crds"; then
      progress_done; rm -rf "$work"; exec 9>&-; return 1
    fi
  elif ! GOBIN="$work/bin" go install -trimpath -buildvcs=false -ldflags "$(ldflags "$name")" "$pkg" >&2; then
    progress_done; rm -rf "$work"; exec 9>&-; return 1
  fi
  progress_done
  echo "[build-tools $(progress_elapsed)] built $name" >&2
  printf 'package=%s\nbuilt_in_seconds=%s\n' "$pkg" "$(( $(date +%s) - start ))" > "$work/STAMP"
  rm -rf "$dir"; mv "$work" "$dir"
  exec 9>&-
  echo "$dir/bin/$name"
}

cached() {  # cached NAME: print the path of an already built binary, else exit 3
  local name=$1 pkg dir
  if [[ -n "$(override "$name")" ]]; then override "$name"; return 0; fi
  pkg=$(package "$name")
  dir="$cache/$name-${pkg##*@}"
  if [[ -x "$dir/bin/$name" && -f "$dir/STAMP" ]]; then echo "$dir/bin/$name"; return 0; fi
  return 3
}

if [[ "${1:-}" == --cached ]]; then
  cached "$2"
elif [[ $# -gt 0 ]]; then
  build "$1"
else
  for tool in helm promtool kstatus argocd-lua cert-manager coredns; do path=$(build "$tool"); echo "$tool $path"; done
fi
