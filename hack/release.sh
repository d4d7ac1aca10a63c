#!/usr/bin/env bash
# Build a release into dist/: everything an admin installs from, named with the one version
# (tenant_platform.__version__; tests/unit/test_version.py keeps the chart, the kustomize base,
# the Dockerfile and the docs on it).
#
#   hack/release.sh                 the artifacts below (about a minute with the tools cached)
#   hack/release.sh --image         also the image as an OCI archive: the image tests' own build
#                                   (hack/build-image.sh: buildah, root, ~10 minutes cold, cached
#                                   by its inputs), pushed under the reference the chart and the
#                                   install manifest deploy; the SBOM names it by digest
#   hack/release.sh --out DIR       into DIR instead of dist/ (the tests)
#
# dist/ then holds (V = the version):
#   tenant_platform_operator-V-py3-none-any.whl   the operator and the `tenant-platform` command
#   tenant_platform_operator-V.tar.gz             its source distribution (the wheel is built from it)
#   tenant-platform-V.tgz                         the Helm chart (`helm package`)
#   tenancy.dev_tenantplatforms.yaml              the CRD alone
#   tenant-platform-operator.yaml                 one install manifest: namespace, CRD, RBAC,
#                                                 Deployment, Service (deploy/base, rendered by
#                                                 `kubectl kustomize`), like cert-manager's single YAML
#   tenant-platform-operator-V.cdx.json           software bill of materials (CycloneDX: hack/sbom.py)
#   tenant-platform-operator-V.oci.tar            with --image only: the image, OCI archive
#                                                 (ref.name ghcr.io/tenancy-dev/tenant-platform-operator:V)
#   SHA256SUMS                                    `sha256sum -c SHA256SUMS` checks all of the above
#
# The wheel and sdist are built with the locked build backend (setuptools and wheel from
# requirements.lock, --require-hashes) in a virtual environment cached under
# TENANT_PLATFORM_CACHE (default ~/.cache/tenant-platform)/release; PyPI (or the configured index)
# is needed once. helm comes from hack/build-tools.sh (TENANT_PLATFORM_HELM overrides), kubectl
# from the control plane's cache (hack/build-control-plane.sh; TENANT_PLATFORM_BIN_DIR overrides).
# .github/workflows/release.yaml runs this on a tag and publishes the result.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/dist"
image=false
while (($#)); do
  case "$1" in
    --image) image=true ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hack/release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
fail() { echo "hack/release.sh: $*" >&2; exit 1; }
step() { echo "== $*" >&2; }
python=${PYTHON:-python3}
cache="${TENANT_PLATFORM_CACHE:-$HOME/.cache/tenant-platform}/release"

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$root/operator/tenant_platform/__init__.py")
[[ -n "$version" ]] || fail "no __version__ in operator/tenant_platform/__init__.py"
chart_version=$(sed -n 's/^version: *//p' "$root/deploy/helm/tenant-platform/Chart.yaml")
[[ "$chart_version" == "$version" ]] ||
  fail "Chart.yaml says version $chart_version, the package $version (tests/unit/test_version.py lists every place)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"
step "release $version into $out"

rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# -- the wheel and the sdist: the sdist from the checkout, the wheel from the unpacked sdist (as
# `python -m build` does), so a file missing from the sdist fails here, not for a user.
lock_id=$(sha256sum "$root/requirements.lock" | cut -c1-16)
venv="$cache/build-$lock_id"
if [[ ! -x "$venv/bin/python" ]]; then
  step "build backend from requirements.lock -> $venv"
  rm -rf "$venv.tmp"
  "$python" -m venv "$venv.tmp"
  # The lock's setuptools and wheel entries (each with its hashes) make the build requirements.
  "$python" - "$root/requirements.lock" > "$work/build-requirements.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
print("\n".join(b.split("\n    #")[0] for b in blocks if re.match(r"(setuptools|wheel)==", b)))
EOF
  "$venv.tmp/bin/pip" install --quiet --disable-pip-version-check --require-hashes --no-deps \
    -r "$work/build-requirements.txt" >&2
  mv "$venv.tmp" "$venv"
fi
step "sdist and wheel"
# Only what the sdist needs: a copy of the tracked files, so nothing untracked (build/, egg-info)
# and no file of this machine ends up in it.
mkdir "$work/src"
git -C "$root" ls-files -z --cached --others --exclude-standard -- pyproject.toml README.md LICENSE operator |
  (cd "$root" && xargs -0 cp --parents -t "$work/src")
# setuptools' own output goes to a log, shown when the build fails.
build() { # build <sdist|wheel> <source directory>
  (cd "$2" && "$venv/bin/python" -c 'import sys; from setuptools import build_meta as b; getattr(b, "build_" + sys.argv[1])(sys.argv[2])' \
    "$1" "$out" > "$work/build.log" 2>&1) || { cat "$work/build.log" >&2; fail "building the $1 failed (its log above)"; }
}
build sdist "$work/src"
sdist="$out/tenant_platform_operator-$version.tar.gz"
[[ -f "$sdist" ]] || fail "the sdist is not $sdist: $(ls "$out")"
mkdir "$work/sdist"
tar -xzf "$sdist" -C "$work/sdist"
build wheel "$work/sdist/tenant_platform_operator-$version"
[[ -f "$out/tenant_platform_operator-$version-py3-none-any.whl" ]] || fail "no wheel for $version in $out"

# -- the chart
step "helm package"
helm=${TENANT_PLATFORM_HELM:-}
if [[ -z "$helm" ]]; then
  helm=$(bash "$root/hack/build-tools.sh" helm | tail -n 1) || fail "cannot build helm (hack/build-tools.sh helm)"
fi
"$helm" lint --strict "$root/deploy/helm/tenant-platform" >&2
"$helm" package "$root/deploy/helm/tenant-platform" --destination "$out" >&2
[[ -f "$out/tenant-platform-$version.tgz" ]] || fail "helm package did not write tenant-platform-$version.tgz"

# -- the CRD and the one install manifest
step "CRD and install manifest (kubectl kustomize deploy/base)"
cp "$root/crds/tenancy.dev_tenantplatforms.yaml" "$out/"
bin_dir=${TENANT_PLATFORM_BIN_DIR:-}
if [[ -z "$bin_dir" ]]; then
  bin_dir=$(bash "$root/hack/build-control-plane.sh" | tail -n 1) ||
    fail "cannot build kubectl (hack/build-control-plane.sh); set TENANT_PLATFORM_BIN_DIR to a directory with kubectl"
fi
{
  echo "# TenantPlatform operator $version: the namespace, the CRD, the RBAC, the Deployment and the"
  echo "# metrics Service in one file (deploy/base of the release, rendered by kubectl kustomize)."
  echo "#   kubectl apply --server-side -f tenant-platform-operator.yaml"
  echo "# Uninstall and what it keeps: docs/uninstall.md."
  "$bin_dir/kubectl" kustomize "$root/deploy/base"
} > "$out/tenant-platform-operator.yaml"
grep -q "image: ghcr.io/tenancy-dev/tenant-platform-operator:$version\$" "$out/tenant-platform-operator.yaml" ||
  fail "the install manifest does not run image tag $version (deploy/base/deployment.yaml)"

# -- the image, only when asked (buildah, root, minutes): the image tests' own build
# (hack/build-image.sh, cached by its inputs), so the suite builds it once and tests/image runs the
# image whose config digest is the archive's. The archive names it with the reference the chart and
# the install manifest deploy.
image_ref="ghcr.io/tenancy-dev/tenant-platform-operator:$version"
image_digest=""
if $image; then
  step "image (hack/build-image.sh) -> OCI archive"
  built=$(bash "$root/hack/build-image.sh" | tail -n 1) || fail "the image build failed (hack/build-image.sh, its log above)"
  storage="${TENANT_PLATFORM_CACHE:-$HOME/.cache/tenant-platform}/image"
  archive="$out/tenant-platform-operator-$version.oci.tar"
  buildah --root "$storage/storage" --runroot "$storage/run" --storage-driver vfs push --quiet "$built" \
    "oci-archive:$archive:$image_ref" >&2 || fail "buildah push $built to $archive failed"
  image_digest=$(tar -xOf "$archive" index.json | "$python" -c 'import json, sys; (m,) = json.load(sys.stdin)["manifests"]; print(m["digest"])') ||
    fail "no single manifest in $archive's index.json"
  step "image $image_ref@$image_digest"
fi

# -- the bill of materials (naming the image by its digest when there is one)
step "SBOM (CycloneDX)"
"$python" "$root/hack/sbom.py" "$version" ${image_digest:+"$image_ref@$image_digest"} > "$out/tenant-platform-operator-$version.cdx.json"

# -- checksums, last
(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
step "done: $out"
ls -l "$out" >&2
echo "$out"
