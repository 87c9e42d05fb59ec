#!/usr/bin/env bash
# Stops what hack/local-up.sh started: exactly the processes recorded in
# LOCAL_DIR/pids (TERM, then KILL after STOP_TIMEOUT seconds), clients before
# kube-apiserver before etcd so nothing logs errors about a vanished server,
# and with a real node what it leaves besides processes (hack/lib/node.sh
# stop_node).
#
# Usage: hack/local-down.sh [--purge]     (make local-down)
#   --purge, or PURGE=1: also delete LOCAL_DIR (etcd data, PKI, kubeconfigs,
#   logs), so the next local-up starts from an empty cluster.
# Env: LOCAL_DIR (default _output/local), STOP_TIMEOUT (default 20).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=local-down
PURGE=${PURGE:-0}
for arg in "$@"; do
  case "${arg}" in
    --purge) PURGE=1 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument: ${arg} (try --help)" >&2; exit 2 ;;
  esac
done

if [[ ! -d "${LOCAL_DIR:-${ROOT}/_output/local}" ]]; then
  echo "nothing to do: ${LOCAL_DIR:-${ROOT}/_output/local} does not exist" >&2
  exit 0
fi
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"
# shellcheck source=hack/lib/node.sh
source "${ROOT}/hack/lib/node.sh"

stop_processes mydb-apiserver kwok kube-scheduler kube-controller-manager
# The real node: its processes, then what outlives them (containers,
# mounts, iptables chains, the bridge, sysctls).
stop_processes kubelet kube-proxy coredns local-path-provisioner
stop_node
stop_processes kube-apiserver
stop_processes etcd mydb-etcd mydb-etcd-1 mydb-etcd-2 jaeger

# Anything else with a PID file (a component added later, or a renamed one).
shopt -s nullglob
leftover=()
for f in "${PID_DIR}"/*.pid; do
  leftover+=("$(basename "${f}" .pid)")
done
if ((${#leftover[@]})); then
  stop_processes "${leftover[@]}"
fi

if [[ "${PURGE}" == 1 ]]; then
  # Refuse to delete anything that does not look like local-up's state.
  case "${LOCAL_DIR}" in
    / | "${HOME}" | "${ROOT}" | "${ROOT}/_output") die "refusing to purge LOCAL_DIR=${LOCAL_DIR}" ;;
  esac
  if [[ -d "${LOCAL_DIR}/pki" || -d "${LOCAL_DIR}/pids" || -d "${LOCAL_DIR}/etcd" ]]; then
    log "purging ${LOCAL_DIR}"
    rm -rf "${LOCAL_DIR}"
  else
    die "refusing to purge ${LOCAL_DIR}: it does not look like a local-up state directory"
  fi
fi
log "local cluster stopped"
