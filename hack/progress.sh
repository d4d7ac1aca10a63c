# Progress lines for the long, silent builds (sourced by hack/build-control-plane.sh and
# hack/build-tools.sh). `progress_step "building etcd v3.6.16"` prints the step at once and then,
# every TENANT_PLATFORM_PROGRESS_SECONDS (default 15) seconds while it runs, a line with the time
# elapsed since the script started and the step, on stderr:
#   [build-control-plane 2m15s] building kube-apiserver, ... (still running)
# `progress_done` stops the ticker; call it before returning (an EXIT trap does it on failure).
progress_t0=$(date +%s)
progress_pid=""
progress_label=${progress_label:-build}

progress_elapsed() {
  local s=$(( $(date +%s) - progress_t0 ))
  printf '%dm%02ds' $(( s / 60 )) $(( s % 60 ))
}

progress_done() {
  if [[ -n "$progress_pid" ]]; then
    kill "$progress_pid" 2>/dev/null || true
    wait "$progress_pid" 2>/dev/null || true
    progress_pid=""
  fi
}

progress_step() {
  progress_done
  echo "[$progress_label $(progress_elapsed)] $1" >&2
  local step=$1 every=${TENANT_PLATFORM_PROGRESS_SECONDS:-15} owner=$BASHPID
  # stdout to /dev/null: the ticker must never hold a caller's $(...) open; it also ends by
  # itself when the shell that started it is gone.
  ( while sleep "$every"; do
      kill -0 "$owner" 2>/dev/null || exit 0
      echo "[$progress_label $(progress_elapsed)] $step (still running)" >&2
    done ) >/dev/null &
  progress_pid=$!
}
