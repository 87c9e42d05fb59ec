#!/usr/bin/env bash
# Builds the control-plane binaries that local-up and the e2e suite run
# (etcd, etcdutl, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok), the real node's (kubelet, kube-proxy, coredns,
# local-path-provisioner), the S3 server the backup tests store to (weed,
# SeaweedFS), the Prometheus server that scrapes the instances' metrics, and
# the Jaeger collector the API servers' traces go to (make bench's trace
# scenario), from the Go module proxy at pinned versions, once per machine: each binary is
# cached under _output/bin/<name>-<version> and skipped when present.
# With arguments, builds only the named binaries (hack/build-tools.sh etcd).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-"${ROOT}/_output/bin"}
KUBE_VERSION=v1.37.2
ETCD_VERSION=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(cd "${ROOT}/hack/tools/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
# SeaweedFS has replace directives, so neither `go install mod@version` nor a
# require in hack/tools can build it: it is built as its own main module.
WEED_MODULE=github.com/seaweedfs/seaweedfs
WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
# The real node's cluster DNS and volume provisioner, each its own main module.
COREDNS_MODULE=github.com/coredns/coredns
COREDNS_VERSION=v1.15.0
LOCAL_PATH_MODULE=github.com/rancher/local-path-provisioner
LOCAL_PATH_VERSION=v0.0.30
# Prometheus, its own main module (its go.work is for its own development),
# with Kubernetes discovery alone (Debian's package has none).
PROMETHEUS_MODULE=github.com/prometheus/prometheus
PROMETHEUS_VERSION=v0.316.0
# Jaeger v2 (an OpenTelemetry Collector with Jaeger's in-memory store and
# query API), its own main module; only MYDB_TRACING=1 hack/local-up.sh runs it.
JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_VERSION=v1.75.0
mkdir -p "${BIN_DIR}"
log() { printf '[build-tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# cached <name> <version>: links _output/bin/<name> to a binary built before.
cached() {
  local out="${BIN_DIR}/$1-$2"
  [[ -x "${out}" ]] || return 1
  ln -sf "$(basename "${out}")" "${BIN_DIR}/$1"
}

# build <module dir> <package> <name> <version> [ldflags]
build() {
  local dir=$1 pkg=$2 name=$3 version=$4 ldflags=${5:-}
  local out="${BIN_DIR}/${name}-${version}"
  cached "${name}" "${version}" && return
  # One build of a binary at a time per output directory: a second would race
  # on the same files, and one that waits finds the binary built. Per binary,
  # so that .ci/run's builds in the background hold up only what needs their
  # binary. (flock, not a look at the process list: another checkout's build
  # writes elsewhere and need not be waited for.)
  local lock
  exec {lock}>"${BIN_DIR}/.${name}.lock"
  if ! flock -n "${lock}"; then
    log "another hack/build-tools.sh is building ${name} into ${BIN_DIR}; waiting for it"
    flock "${lock}"
  fi
  if ! cached "${name}" "${version}"; then
    log "building ${name} ${version} (cold builds of Kubernetes binaries take several minutes)"
    local start=${SECONDS}
    (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${ldflags}" -o "${out}.tmp" "${pkg}")
    mv "${out}.tmp" "${out}"
    ln -sf "$(basename "${out}")" "${BIN_DIR}/${name}"
    log "built ${name} in $((SECONDS - start))s"
  fi
  exec {lock}>&-
}

# module_dir MODULE VERSION downloads a module that is built as its own main
# module (once per module cache) and prints its directory.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

kube_ldflags() {
  local v=k8s.io/component-base/version
  echo "-X ${v}.gitVersion=${KUBE_VERSION} -X ${v}.gitMajor=1 -X ${v}.gitMinor=37 -X ${v}.gitTreeState=clean -X ${v}.buildDate=1970-01-01T00:00:00Z"
}

wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(etcd etcdutl kube-apiserver kube-controller-manager kube-scheduler kubectl kwok weed kubelet kube-proxy coredns local-path-provisioner prometheus)
for name in "${wanted[@]}"; do
  case "${name}" in
    etcd) build "${ROOT}/hack/tools" go.etcd.io/etcd/server/v3 etcd "${ETCD_VERSION}" ;;
    # Snapshots and restores of mydb's etcd (docs/operations.md).
    etcdutl) build "${ROOT}/hack/tools" go.etcd.io/etcd/etcdutl/v3 etcdutl "${ETCD_VERSION}" ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy)
      build "${ROOT}/hack/tools" "k8s.io/kubernetes/cmd/${name}" "${name}" "${KUBE_VERSION}" "$(kube_ldflags)" ;;
    kwok) build "${ROOT}/hack/tools/kwok" sigs.k8s.io/kwok/cmd/kwok kwok "${KWOK_VERSION}" ;;
    weed) cached weed "${WEED_VERSION}" || GOFLAGS=-mod=mod build "$(module_dir "${WEED_MODULE}" "${WEED_VERSION}")" ./weed weed "${WEED_VERSION}" ;;
    coredns) cached coredns "${COREDNS_VERSION}" ||
      GOFLAGS=-mod=mod build "$(module_dir "${COREDNS_MODULE}" "${COREDNS_VERSION}")" . coredns "${COREDNS_VERSION}" ;;
    local-path-provisioner) cached local-path-provisioner "${LOCAL_PATH_VERSION}" ||
      GOFLAGS=-mod=mod build "$(module_dir "${LOCAL_PATH_MODULE}" "${LOCAL_PATH_VERSION}")" . local-path-provisioner "${LOCAL_PATH_VERSION}" ;;
    prometheus) cached prometheus "${PROMETHEUS_VERSION}" ||
      GOWORK=off GOFLAGS="-mod=mod -tags=remove_all_sd,enable_kubernetes_sd" \
        build "$(module_dir "${PROMETHEUS_MODULE}" "${PROMETHEUS_VERSION}")" ./cmd/prometheus prometheus "${PROMETHEUS_VERSION}" ;;
    jaeger) cached jaeger "${JAEGER_VERSION}" ||
      GOWORK=off GOFLAGS=-mod=mod build "$(module_dir "${JAEGER_MODULE}" "${JAEGER_VERSION}")" ./cmd/jaeger jaeger "${JAEGER_VERSION}" ;;
    *) echo "unknown tool ${name}" >&2; exit 2 ;;
  esac
done
log "binaries ready in ${BIN_DIR}"
