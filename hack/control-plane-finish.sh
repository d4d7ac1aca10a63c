# The tail of hack/build-control-plane.sh (sourced by it), after the binaries are built: report
# their versions, write the stamp, move the build into place. Kept apart so
# tests/unit/test_build_scripts.py runs exactly this code, under the build's `set -euo pipefail`,
# against fake binaries, without building anything.
#
#   finish_control_plane WORK OUT K8S_VERSION ETCD_VERSION START_EPOCH
#
# WORK/bin holds the fresh kube-apiserver and etcd; OUT is replaced by WORK. Nothing here may fail
# after the build succeeded for a reason other than a missing or broken binary (issue 25, item 8):
# a version's output is read whole and cut in the shell, never piped into a reader that stops
# early (`etcd --version | head -1` killed etcd by SIGPIPE between its lines on a busy machine and
# failed the finished build, silently, before its stamp).
finish_control_plane() {
  local work=$1 out=$2 k8s_version=$3 etcd_version=$4 start=$5 etcd_says
  "$work/bin/kube-apiserver" --version >&2
  etcd_says=$("$work/bin/etcd" --version)
  echo "${etcd_says%%$'\n'*}" >&2
  printf 'k8s=%s\netcd=%s\nbuilt_in_seconds=%s\n' "$k8s_version" "$etcd_version" "$(( $(date +%s) - start ))" > "$work/STAMP"
  rm -rf "$out"
  mv "$work" "$out"
}
