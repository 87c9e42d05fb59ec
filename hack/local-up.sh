#!/usr/bin/env bash
# Brings up a local Kubernetes control plane with mydb-apiserver aggregated
# into it, as processes on 127.0.0.1 (no containers, no kubelet):
#
#   etcd                     cluster state of kube-apiserver
#   mydb-etcd                a separate etcd for mydb-apiserver, as in a real
#                            deployment where the aggregated server owns its
#                            storage
#   kube-apiserver           RBAC, service accounts, aggregation layer
#   kube-controller-manager  default controllers (statefulset, job, GC, ...)
#   kube-scheduler
#   a node                   MYDB_NODE=real (the default where the machine
#                            can run it): containerd, kubelet, kube-proxy,
#                            CoreDNS and local-path-provisioner running real
#                            containers from images built here
#                            (hack/lib/node.sh, hack/images.sh);
#                            MYDB_NODE=kwok: kwok plays the kubelet for 3
#                            fake nodes: pods become Running/Ready (Job pods
#                            Succeeded), PVCs of the default StorageClass
#                            kwok-volume get bound PVs, no container runs
#   mydb-apiserver           serves example.com/v1 through the aggregator,
#                            authenticating and authorizing by delegation as
#                            the ServiceAccount mydb-system/mydb-apiserver
#
# Usage: hack/local-up.sh          (make local-up)
#        hack/local-down.sh        (make local-down; --purge also deletes data)
#        export KUBECONFIG=$PWD/_output/local/kubeconfig
#
# Re-running is safe: components that run (by PID file and liveness) with the
# same command line are left alone, missing ones are started, ones whose
# flags changed are restarted, manifests are re-applied. mydb-apiserver is
# rebuilt (a no-op when the code did not change) and restarted when its
# binary changed. Certificates, etcd data and mydb's token are kept.
#
# Ports (all on 127.0.0.1; override through the environment). They are below
# the Linux ephemeral range (32768+) and away from the usual defaults (2379,
# 6443, 8443, 10250-10259) so a real cluster or kind on the same host does
# not collide:
#   ETCD_PORT=21379 ETCD_PEER_PORT=21380            cluster etcd (http)
#   MYDB_ETCD_PORT=21381 MYDB_ETCD_PEER_PORT=21382  mydb's etcd (http; with
#                       MYDB_ETCD_MEMBERS=3, https, and members 1 and 2 on
#                       these ports +10 and +20)
#   KUBE_APISERVER_PORT=21443                       kube-apiserver (https)
#   KUBE_CONTROLLER_MANAGER_PORT=21257              controller manager (https)
#   KUBE_SCHEDULER_PORT=21259                       scheduler (https)
#   KWOK_PORT=21247                                 kwok /healthz (http)
#   MYDB_PORT=21444                                 mydb-apiserver (https)
#   JAEGER_OTLP_PORT=21317 JAEGER_QUERY_PORT=21686  Jaeger, with MYDB_TRACING=1:
#                       OTLP/gRPC in, the query API (/api/traces) out
#
# Other knobs:
#   MYDB_NODE=real|kwok  the node (default: the one LOCAL_DIR was made with,
#                      else real where the machine can run it, else kwok,
#                      saying why); the e2e and fault suites pin kwok, whose
#                      loopback pod IPs their rig serves on
#   MYDB_BIN=path      use this mydb-apiserver binary instead of building one
#   POD_CIDR=127.1.0.0/16  the loopback range kwok gives pod IPs from (a second
#                      control plane on the machine needs its own)
#   LOCAL_DIR=dir      state directory (default _output/local)
#   RESTART_MYDB=1     restart mydb-apiserver even if its binary is unchanged
#   MYDB_APISERVER_FLAGS="--flag=value ..."  more flags for mydb-apiserver,
#                      after (so over) the rig's (a changed set restarts it);
#                      the scale benchmark runs the controller's modes so
#   WAIT_TIMEOUT=120   seconds to wait for each component to become healthy
#   MYDB_STOP_TIMEOUT=10  seconds mydb-apiserver gets to exit when local-up
#                         restarts it, before it is killed (see
#                         start_mydb_apiserver for why it can be slow)
#   MYDB_TOKEN_DURATION=8760h  lifetime of mydb-apiserver's SA token
#   MYDB_CA_ROTATION_OVERLAP=30s  how long a rotation of a database's CA
#                      trusts both roots (the server's default, 10m, gives
#                      applications time to read a new bundle; a local
#                      cluster's have none to read)
#   MYDB_TRACING=1     run Jaeger (built by hack/build-tools.sh, traces kept in
#                      memory) and give kube-apiserver and mydb-apiserver a
#                      tracing configuration that sends it their spans. Its
#                      sampling rate is 0: only a request whose client asks
#                      for a trace (a sampled W3C traceparent header, from a
#                      user in system:masters, whom kube-apiserver trusts to
#                      ask) is traced, the aggregator passes the trace on to
#                      mydb-apiserver, and nothing else fills the store (make
#                      bench's trace scenario). 0 (the default) stops Jaeger
#                      and restarts both servers without it.
#   MYDB_ETCD_MEMBERS=1  1: mydb's etcd is one plain-HTTP member without fsync
#                      (fast, throwaway). 3: three members on loopback with
#                      TLS on client and peer ports, client-certificate auth
#                      on both and fsync on, and mydb-apiserver talks to all
#                      three with its client certificate. A LOCAL_DIR keeps
#                      the count it was made with (local-down --purge to
#                      change it).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=local-up
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"
# shellcheck source=hack/lib/golang.sh
source "${ROOT}/hack/lib/golang.sh"
# shellcheck source=hack/lib/node.sh
source "${ROOT}/hack/lib/node.sh"

ETCD_PORT=${ETCD_PORT:-21379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-21380}
MYDB_ETCD_PORT=${MYDB_ETCD_PORT:-21381}
MYDB_ETCD_PEER_PORT=${MYDB_ETCD_PEER_PORT:-21382}
KUBE_APISERVER_PORT=${KUBE_APISERVER_PORT:-21443}
KUBE_CONTROLLER_MANAGER_PORT=${KUBE_CONTROLLER_MANAGER_PORT:-21257}
KUBE_SCHEDULER_PORT=${KUBE_SCHEDULER_PORT:-21259}
KWOK_PORT=${KWOK_PORT:-21247}
MYDB_PORT=${MYDB_PORT:-21444}
JAEGER_OTLP_PORT=${JAEGER_OTLP_PORT:-21317}
JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT:-21686}
MYDB_TRACING=${MYDB_TRACING:-0}
case "${MYDB_TRACING}" in
  0 | 1) ;;
  *) die "MYDB_TRACING must be 0 or 1, not ${MYDB_TRACING}" ;;
esac
WAIT_TIMEOUT=${WAIT_TIMEOUT:-120}
MYDB_NODE=${MYDB_NODE:-}
MYDB_TOKEN_DURATION=${MYDB_TOKEN_DURATION:-8760h}
MYDB_ETCD_MEMBERS=${MYDB_ETCD_MEMBERS:-1}
case "${MYDB_ETCD_MEMBERS}" in
  1 | 3) ;;
  *) die "MYDB_ETCD_MEMBERS must be 1 or 3, not ${MYDB_ETCD_MEMBERS}" ;;
esac

# Service ClusterIPs; the first address is the kubernetes Service, which the
# kube-apiserver certificate names. Pod IPs (assigned by kwok) must not
# overlap.
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
# Pod IPs are on loopback: the controller reads every instance manager at
# its pod's IP, and the e2e suite's real instance managers serve there (each
# pod its own 127.1.x.y). Nothing may ever be sent to a non-local address.
POD_CIDR=${POD_CIDR:-127.1.0.0/16}
SA_ISSUER=https://kubernetes.default.svc.cluster.local

KUBE_APISERVER_URL="https://127.0.0.1:${KUBE_APISERVER_PORT}"

# choose_node: MYDB_NODE, or real where the machine can run it.
choose_node() {
  local why was
  # A state directory keeps the node it was made with: pods and claims of
  # one kind mean nothing to the other.
  was=$(cat "${LOCAL_DIR}/node.kind" 2>/dev/null || true)
  # One made before there were real nodes had kwok's.
  [[ -z "${was}" && -d "${LOCAL_DIR}/pki" ]] && was=kwok
  if [[ -n "${was}" && -n "${MYDB_NODE}" && "${was}" != "${MYDB_NODE}" ]]; then
    die "${LOCAL_DIR} was made with MYDB_NODE=${was}: make local-down, then hack/local-down.sh --purge to change it"
  fi
  MYDB_NODE=${MYDB_NODE:-${was}}
  case "${MYDB_NODE}" in
    kwok) ;;
    real)
      why=$(node_unsupported)
      [[ -z "${why}" ]] || die "MYDB_NODE=real: this machine cannot run the real node: ${why}"
      ;;
    "")
      why=$(node_unsupported)
      if [[ -z "${why}" ]]; then
        MYDB_NODE=real
      else
        MYDB_NODE=kwok
        warn "no real node here (${why}): kwok's fake nodes instead, which run no container"
      fi
      ;;
    *) die "MYDB_NODE must be real or kwok, not ${MYDB_NODE}" ;;
  esac
  echo "${MYDB_NODE}" >"${LOCAL_DIR}/node.kind"
  log "node: ${MYDB_NODE}"
}
ADMIN_KUBECONFIG="${LOCAL_DIR}/kubeconfig"
MYDB_KUBECONFIG="${KUBECONFIG_DIR}/mydb-apiserver.kubeconfig"
MYDB_BIN=${MYDB_BIN:-}

# Both API servers record the writes of mydb's controllers
# (artifacts/local/audit-policy.yaml says which) in LOG_DIR/@LOG@.log.
AUDIT_FLAGS=(--audit-policy-file="${ROOT}/artifacts/local/audit-policy.yaml"
  --audit-log-path="${LOG_DIR}/@LOG@.log" --audit-log-maxsize=100 --audit-log-maxbackup=1)

kubectl() { "${BIN_DIR}/kubectl" --kubeconfig="${ADMIN_KUBECONFIG}" "$@"; }

# ---------------------------------------------------------------------------

build_binaries() {
  # build-tools.sh caches each binary by version, and waits for another run
  # building into the same directory. Only what the control plane runs: the
  # tests that need the S3 server (weed) build it themselves (make test,
  # make test-engines, make e2e).
  log "checking control-plane binaries (hack/build-tools.sh)"
  if [[ "${MYDB_NODE}" == real ]]; then
    "${ROOT}/hack/build-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl \
      kubelet kube-proxy coredns local-path-provisioner
  else
    "${ROOT}/hack/build-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok
  fi
  if ((MYDB_TRACING)); then
    "${ROOT}/hack/build-tools.sh" jaeger
  fi

  if [[ -n "${MYDB_BIN}" ]]; then
    [[ -x "${MYDB_BIN}" ]] || die "MYDB_BIN=${MYDB_BIN} is not an executable file"
    MYDB_BIN=$(cd "$(dirname "${MYDB_BIN}")" && pwd)/$(basename "${MYDB_BIN}")
    log "using prebuilt ${MYDB_BIN}"
  else
    MYDB_BIN="${BIN_DIR}/mydb-apiserver"
    log "building mydb-apiserver (go build; a no-op when nothing changed)"
    local start=${SECONDS}
    (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${MYDB_BIN}" ./cmd/mydb-apiserver)
    log "mydb-apiserver ready in $((SECONDS - start))s"
  fi
}

make_pki() {
  mkdir -p "${PKI_DIR}"
  chmod 700 "${PKI_DIR}"
  ensure_ca ca mydb-local-ca
  # The aggregator proves its identity to mydb-apiserver with a client
  # certificate from this separate CA; mydb-apiserver trusts the
  # X-Remote-User/Group headers only on connections presenting it.
  ensure_ca front-proxy-ca mydb-local-front-proxy-ca
  ensure_sa_keys

  ensure_cert kube-apiserver ca server /CN=kube-apiserver \
    "IP:127.0.0.1,IP:${NODE_IP},IP:${KUBERNETES_SERVICE_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  ensure_cert admin ca client /O=system:masters/CN=admin
  ensure_cert kube-controller-manager ca client /CN=system:kube-controller-manager
  ensure_cert kube-scheduler ca client /CN=system:kube-scheduler
  # kwok gets its own user, bound to the ClusterRoles kwok ships
  # (artifacts/local/kwok/rbac.yaml), rather than system:masters.
  ensure_cert kwok ca client /CN=kwok-controller
  ensure_cert front-proxy-client front-proxy-ca client /CN=front-proxy-client
  # The aggregator dials the ExternalName Service's localhost but verifies the
  # certificate for <service>.<namespace>.svc.
  ensure_cert mydb-apiserver ca server /CN=mydb-apiserver.mydb-system.svc \
    "DNS:mydb-apiserver.mydb-system.svc,DNS:mydb-apiserver.mydb-system.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
  if ((MYDB_ETCD_MEMBERS > 1)); then
    # mydb's etcd has a CA of its own, as in artifacts/deploy: a certificate
    # from the cluster CA must not open mydb's storage. Members use theirs
    # both to serve and, as clients, towards their peers.
    ensure_ca mydb-etcd-ca mydb-local-etcd-ca
    local i
    for ((i = 0; i < MYDB_ETCD_MEMBERS; i++)); do
      ensure_cert "$(mydb_etcd_member "${i}")" mydb-etcd-ca both "/CN=$(mydb_etcd_member "${i}")" "IP:127.0.0.1,DNS:localhost"
    done
    ensure_cert mydb-etcd-client mydb-etcd-ca client /CN=mydb-apiserver
  fi
}

write_kubeconfigs() {
  mkdir -p "${KUBECONFIG_DIR}"
  local name
  for name in admin kube-controller-manager kube-scheduler kwok; do
    write_kubeconfig "${KUBECONFIG_DIR}/${name}.kubeconfig" "${KUBE_APISERVER_URL}" \
      --client-certificate="${PKI_DIR}/${name}.crt" --client-key="${PKI_DIR}/${name}.key"
  done
  cp "${KUBECONFIG_DIR}/admin.kubeconfig" "${ADMIN_KUBECONFIG}.tmp"
  mv -f "${ADMIN_KUBECONFIG}.tmp" "${ADMIN_KUBECONFIG}"
}

# start_etcd NAME CLIENT_PORT PEER_PORT
start_etcd() {
  local name=$1 port=$2 peer=$3
  mkdir -p "${LOCAL_DIR}/${name}"
  chmod 700 "${LOCAL_DIR}/${name}"
  # --unsafe-no-fsync: this is throwaway dev data and fsync dominates etcd's
  # latency on small VMs; a crash can at worst lose the last writes.
  start_process "${name}" "${port}" "${peer}" -- "${BIN_DIR}/etcd" \
    --name="${name}" \
    --data-dir="${LOCAL_DIR}/${name}/data" \
    --listen-client-urls="http://127.0.0.1:${port}" \
    --advertise-client-urls="http://127.0.0.1:${port}" \
    --listen-peer-urls="http://127.0.0.1:${peer}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${peer}" \
    --initial-cluster="${name}=http://127.0.0.1:${peer}" \
    --unsafe-no-fsync \
    --log-level=warn
}

etcd_healthy() {
  curl -sS --max-time 3 "http://127.0.0.1:$1/health" | grep -q '"health":"true"'
}

# mydb's etcd members: member 0 is mydb-etcd on MYDB_ETCD_PORT and
# MYDB_ETCD_PEER_PORT, member i is mydb-etcd-i on those ports + 10*i.
mydb_etcd_member() { if (($1 == 0)); then echo mydb-etcd; else echo "mydb-etcd-$1"; fi; }
mydb_etcd_port() { echo $((MYDB_ETCD_PORT + 10 * $1)); }
mydb_etcd_peer_port() { echo $((MYDB_ETCD_PEER_PORT + 10 * $1)); }

# mydb_etcd_servers: the --etcd-servers value for mydb-apiserver.
mydb_etcd_servers() {
  if ((MYDB_ETCD_MEMBERS == 1)); then
    echo "http://127.0.0.1:${MYDB_ETCD_PORT}"
    return
  fi
  local i urls=()
  for ((i = 0; i < MYDB_ETCD_MEMBERS; i++)); do urls+=("https://127.0.0.1:$(mydb_etcd_port "${i}")"); done
  (IFS=,; echo "${urls[*]}")
}

# check_mydb_etcd_members: a LOCAL_DIR made with one member count cannot
# serve another (the data directories name their cluster), so say so
# rather than start members that never form a quorum.
check_mydb_etcd_members() {
  local file="${LOCAL_DIR}/mydb-etcd/members" had=""
  if [[ -s "${file}" ]]; then
    had=$(<"${file}")
  elif [[ -d "${LOCAL_DIR}/mydb-etcd/data" ]]; then
    had=1 # made before the count was recorded
  fi
  if [[ -n "${had}" && "${had}" != "${MYDB_ETCD_MEMBERS}" ]]; then
    die "${LOCAL_DIR} holds a ${had}-member mydb etcd, not MYDB_ETCD_MEMBERS=${MYDB_ETCD_MEMBERS}: run hack/local-down.sh --purge first (or use another LOCAL_DIR)"
  fi
  mkdir -p "${LOCAL_DIR}/mydb-etcd"
  echo "${MYDB_ETCD_MEMBERS}" >"${file}"
}

# start_mydb_etcd_cluster: MYDB_ETCD_MEMBERS members with TLS and
# client-certificate auth on client and peer ports, and fsync on: this
# cluster is for measuring what survives a member's crash.
start_mydb_etcd_cluster() {
  local i name initial=() p="${PKI_DIR}"
  for ((i = 0; i < MYDB_ETCD_MEMBERS; i++)); do
    initial+=("$(mydb_etcd_member "${i}")=https://127.0.0.1:$(mydb_etcd_peer_port "${i}")")
  done
  for ((i = 0; i < MYDB_ETCD_MEMBERS; i++)); do
    name=$(mydb_etcd_member "${i}")
    mkdir -p "${LOCAL_DIR}/${name}"
    chmod 700 "${LOCAL_DIR}/${name}"
    start_process "${name}" "$(mydb_etcd_port "${i}")" "$(mydb_etcd_peer_port "${i}")" -- "${BIN_DIR}/etcd" \
      --name="${name}" \
      --data-dir="${LOCAL_DIR}/${name}/data" \
      --listen-client-urls="https://127.0.0.1:$(mydb_etcd_port "${i}")" \
      --advertise-client-urls="https://127.0.0.1:$(mydb_etcd_port "${i}")" \
      --listen-peer-urls="https://127.0.0.1:$(mydb_etcd_peer_port "${i}")" \
      --initial-advertise-peer-urls="https://127.0.0.1:$(mydb_etcd_peer_port "${i}")" \
      --initial-cluster="$(IFS=,; echo "${initial[*]}")" \
      --initial-cluster-token=mydb-etcd \
      --initial-cluster-state=new \
      --cert-file="${p}/${name}.crt" --key-file="${p}/${name}.key" \
      --trusted-ca-file="${p}/mydb-etcd-ca.crt" --client-cert-auth \
      --peer-cert-file="${p}/${name}.crt" --peer-key-file="${p}/${name}.key" \
      --peer-trusted-ca-file="${p}/mydb-etcd-ca.crt" --peer-client-cert-auth \
      --log-level=warn
  done
}

mydb_etcd_healthy() {
  if ((MYDB_ETCD_MEMBERS == 1)); then
    etcd_healthy "${MYDB_ETCD_PORT}"
    return
  fi
  local i
  for ((i = 0; i < MYDB_ETCD_MEMBERS; i++)); do
    curl -sS --max-time 3 --cacert "${PKI_DIR}/mydb-etcd-ca.crt" \
      --cert "${PKI_DIR}/mydb-etcd-client.crt" --key "${PKI_DIR}/mydb-etcd-client.key" \
      "https://127.0.0.1:$(mydb_etcd_port "${i}")/health" | grep -q '"health":"true"' || return 1
  done
}

# Tracing (MYDB_TRACING=1): TRACING_FLAGS is what both API servers are
# given, empty without it.
TRACING_FLAGS=()
# The files are named by their ports: other ports, other command lines, so
# start_process restarts what reads them.
TRACING_CONFIG="${LOCAL_DIR}/tracing/tracing-config-${JAEGER_OTLP_PORT}.yaml"
JAEGER_CONFIG="${LOCAL_DIR}/tracing/jaeger-${JAEGER_OTLP_PORT}-${JAEGER_QUERY_PORT}.yaml"

# start_tracing: Jaeger on loopback with the configuration below, or, with
# MYDB_TRACING=0, no Jaeger.
start_tracing() {
  if ! ((MYDB_TRACING)); then
    stop_processes jaeger
    return
  fi
  mkdir -p "${LOCAL_DIR}/tracing"
  sed -e "s|@OTLP_PORT@|${JAEGER_OTLP_PORT}|g" -e "s|@QUERY_PORT@|${JAEGER_QUERY_PORT}|g" \
    "${ROOT}/artifacts/local/jaeger.yaml.tmpl" >"${JAEGER_CONFIG}"
  # Sampling 0 per million: the servers trace only requests whose (trusted)
  # client sent a sampled traceparent; the sampler honours the parent's choice.
  cat >"${TRACING_CONFIG}" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: 127.0.0.1:${JAEGER_OTLP_PORT}
samplingRatePerMillion: 0
EOF
  TRACING_FLAGS=(--tracing-config-file="${TRACING_CONFIG}")
  start_process jaeger "${JAEGER_OTLP_PORT}" "${JAEGER_QUERY_PORT}" -- "${BIN_DIR}/jaeger" \
    --config="${JAEGER_CONFIG}"
}

jaeger_ready() {
  curl -fsS --max-time 3 "http://127.0.0.1:${JAEGER_QUERY_PORT}/api/services" >/dev/null
}

start_kube_apiserver() {
  local p="${PKI_DIR}"
  mkdir -p "${LOCAL_DIR}/certs/kube-apiserver"
  # --advertise-address: with only loopback to bind to, kube-apiserver would
  #   otherwise look for a default route and fail on a host without one.
  # --endpoint-reconciler-type=none: the kubernetes Service's Endpoints may
  #   not hold a loopback address, and nothing in this cluster needs them.
  # --requestheader-*/--proxy-client-*: the aggregation layer; the front-proxy
  #   CA and header names are published in kube-system/
  #   extension-apiserver-authentication for mydb-apiserver to read.
  # --enable-aggregator-routing=false: reach mydb-apiserver through its
  #   (ExternalName) Service rather than Endpoints of pods.
  # With a real node, pods reach kube-apiserver at the node's address on
  # their bridge (the kubernetes Service's endpoint), and kube-apiserver
  # reaches the kubelet there.
  local network=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
  if [[ "${MYDB_NODE}" == real ]]; then
    network=(--bind-address=0.0.0.0 --advertise-address="${NODE_IP}" --endpoint-reconciler-type=lease
      --kubelet-certificate-authority="${p}/ca.crt"
      --kubelet-client-certificate="${p}/kube-apiserver-kubelet-client.crt"
      --kubelet-client-key="${p}/kube-apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP)
  fi
  start_process kube-apiserver "${KUBE_APISERVER_PORT}" -- "${BIN_DIR}/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:${ETCD_PORT}" \
    "${network[@]}" \
    --secure-port="${KUBE_APISERVER_PORT}" \
    --cert-dir="${LOCAL_DIR}/certs/kube-apiserver" \
    --tls-cert-file="${p}/kube-apiserver.crt" \
    --tls-private-key-file="${p}/kube-apiserver.key" \
    --client-ca-file="${p}/ca.crt" \
    --authorization-mode=Node,RBAC \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --service-account-issuer="${SA_ISSUER}" \
    --service-account-key-file="${p}/sa.pub" \
    --service-account-signing-key-file="${p}/sa.key" \
    --allow-privileged=true \
    --requestheader-client-ca-file="${p}/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-username-headers=X-Remote-User \
    --proxy-client-cert-file="${p}/front-proxy-client.crt" \
    --proxy-client-key-file="${p}/front-proxy-client.key" \
    --enable-aggregator-routing=false \
    "${TRACING_FLAGS[@]}" \
    "${AUDIT_FLAGS[@]/@LOG@/kube-apiserver-audit}"
}

kube_apiserver_ready() {
  https_ok "${KUBE_APISERVER_URL}/readyz" --cacert "${PKI_DIR}/ca.crt" \
    --cert "${PKI_DIR}/admin.crt" --key "${PKI_DIR}/admin.key"
}

start_kube_controller_manager() {
  local kc="${KUBECONFIG_DIR}/kube-controller-manager.kubeconfig"
  mkdir -p "${LOCAL_DIR}/certs/kube-controller-manager"
  # Leader election is pointless with one replica and only delays start-up.
  start_process kube-controller-manager "${KUBE_CONTROLLER_MANAGER_PORT}" -- \
    "${BIN_DIR}/kube-controller-manager" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${KUBE_CONTROLLER_MANAGER_PORT}" \
    --cert-dir="${LOCAL_DIR}/certs/kube-controller-manager" \
    --controllers='*' \
    --use-service-account-credentials=true \
    --service-account-private-key-file="${PKI_DIR}/sa.key" \
    --root-ca-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-cert-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-key-file="${PKI_DIR}/ca.key" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --cluster-name=mydb-local \
    --flex-volume-plugin-dir="${LOCAL_DIR}/flexvolume" \
    --leader-elect=false
}

start_kube_scheduler() {
  local kc="${KUBECONFIG_DIR}/kube-scheduler.kubeconfig"
  mkdir -p "${LOCAL_DIR}/certs/kube-scheduler"
  start_process kube-scheduler "${KUBE_SCHEDULER_PORT}" -- "${BIN_DIR}/kube-scheduler" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${KUBE_SCHEDULER_PORT}" \
    --cert-dir="${LOCAL_DIR}/certs/kube-scheduler" \
    --leader-elect=false
}

# The controller manager and scheduler serve self-signed certificates from
# their --cert-dir, hence -k for their health checks.
component_healthy() {
  https_ok "https://127.0.0.1:$1/healthz" -k
}

# write_kwok_stages: one kwok configuration file with the stages of the kwok
# release that was built: node initialisation and lease heartbeat, pods
# Running/Ready, Job pods Succeeded, pod deletion, and the volume stages that
# create and bind a PersistentVolume for each claim of kwok-volume; then our
# own stages from artifacts/local/kwok-stages (volume expansion).
write_kwok_stages() {
  local kwok_dir stage_dir out="${LOCAL_DIR}/kwok/stages.yaml"
  # Downloaded first: a kwok binary cached in _output/bin says nothing about
  # the module cache, where go list -m alone finds no directory.
  kwok_dir=$(cd "${ROOT}/hack/tools/kwok" && golang::module_dir sigs.k8s.io/kwok)
  stage_dir="${kwok_dir}/kustomize/stage"
  # node/heartbeat-with-lease rather than the deprecated node/heartbeat
  # (pre-v0.3): kwok renews each node's Lease every few seconds, which is
  # what keeps the node lifecycle controller from marking nodes NotReady,
  # and rewrites node status only every ~10 minutes (kwok's own "fast" set).
  local files=(
    node/fast/node-initialize.yaml
    node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    pod/fast/pod-ready.yaml
    pod/fast/pod-complete.yaml
    pod/fast/pod-delete.yaml
    volume/fast/pvc-provision.yaml
    volume/fast/pv-bind.yaml
    volume/fast/pvc-delete.yaml
    volume/fast/pv-delete.yaml
  )
  mkdir -p "${LOCAL_DIR}/kwok"
  local f
  {
    echo "# Generated by hack/local-up.sh from ${stage_dir}"
    echo "# and ${ROOT}/artifacts/local/kwok-stages"
    for f in "${files[@]}"; do
      [[ -f "${stage_dir}/${f}" ]] || die "kwok stage ${stage_dir}/${f} not found"
      echo "---"
      cat "${stage_dir}/${f}"
    done
    for f in "${ROOT}"/artifacts/local/kwok-stages/*.yaml; do
      echo "---"
      cat "${f}"
    done
  } >"${out}.tmp"
  mv -f "${out}.tmp" "${out}"
}

start_kwok() {
  write_kwok_stages
  # Only nodes annotated kwok.x-k8s.io/node=fake are kwok's, so a real
  # kubelet could join this control plane without kwok faking its pods.
  # --node-lease-duration-seconds: the kwok binary defaults it to 0 (only
  # kwokctl sets 40), which means no node Leases at all. The node lifecycle
  # controller then finds the nodes silent after its 50s grace period, marks
  # them unreachable and their pods NotReady, and evicts the pods 5 minutes
  # later, while kwok's node-initialize stage keeps flipping them back.
  # With Leases (renewed every 10s) nodes stay healthy, like kubelets.
  start_process kwok "${KWOK_PORT}" -- "${BIN_DIR}/kwok" \
    --kubeconfig="${KUBECONFIG_DIR}/kwok.kubeconfig" \
    --config="${LOCAL_DIR}/kwok/stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:${KWOK_PORT}" \
    --cidr="${POD_CIDR}" \
    --node-ip=127.0.0.1 \
    --node-lease-duration-seconds=40
}

kwok_healthy() {
  [[ "$(curl -sS --max-time 3 "http://127.0.0.1:${KWOK_PORT}/healthz")" == ok ]]
}

# ensure_mydb_kubeconfig: a kubeconfig holding a bound token of the
# ServiceAccount mydb-system/mydb-apiserver, which mydb-apiserver uses for
# everything it asks kube-apiserver (TokenReviews, SubjectAccessReviews, the
# extension-apiserver-authentication ConfigMap, informers), like a pod with
# that ServiceAccount would. A valid token is kept; a missing, expired or
# revoked one (e.g. after the ServiceAccount was recreated) is replaced.
# Sets MYDB_TOKEN_RENEWED=1 when it wrote a new token.
ensure_mydb_kubeconfig() {
  MYDB_TOKEN_RENEWED=0
  local want=system:serviceaccount:mydb-system:mydb-apiserver who
  if [[ -s "${MYDB_KUBECONFIG}" ]]; then
    who=$("${BIN_DIR}/kubectl" --kubeconfig="${MYDB_KUBECONFIG}" auth whoami \
      -o jsonpath='{.status.userInfo.username}' 2>/dev/null || true)
    # The cluster URL must match too, in case KUBE_APISERVER_PORT changed.
    if [[ "${who}" == "${want}" ]] && grep -qF "server: ${KUBE_APISERVER_URL}" "${MYDB_KUBECONFIG}"; then
      return 0
    fi
  fi
  log "creating a ${MYDB_TOKEN_DURATION} token for ServiceAccount mydb-system/mydb-apiserver"
  local token
  token=$(kubectl create token mydb-apiserver -n mydb-system --duration="${MYDB_TOKEN_DURATION}")
  write_kubeconfig "${MYDB_KUBECONFIG}" "${KUBE_APISERVER_URL}" --token="${token}"
  MYDB_TOKEN_RENEWED=1
}

start_mydb_apiserver() {
  local sum_file="${LOCAL_DIR}/mydb-apiserver.binary.sha256" sum pid
  local extra_flags=()
  read -r -a extra_flags <<<"${MYDB_APISERVER_FLAGS:-}"
  # The flags count as part of the binary: other flags, a restart.
  sum=$( (sha256sum "${MYDB_BIN}" | cut -d' ' -f1; echo "${extra_flags[*]}") | sha256sum | cut -d' ' -f1)
  # Unlike the pinned control-plane binaries, mydb-apiserver changes while you
  # work on it: restart it when the binary (or its token) changed since it
  # was started, so `make local-up` always serves the current code.
  if pid=$(running_pid mydb-apiserver); then
    local why=""
    [[ "$(cat "${sum_file}" 2>/dev/null)" != "${sum}" ]] && why="its binary or MYDB_APISERVER_FLAGS changed"
    ((MYDB_TOKEN_RENEWED)) && why="its token was renewed"
    [[ "${RESTART_MYDB:-0}" == 1 ]] && why="RESTART_MYDB=1"
    if [[ -n "${why}" ]]; then
      log "restarting mydb-apiserver (pid ${pid}): ${why}"
      # On TERM the server releases its controller Lease at once but then
      # waits up to its 60s request timeout for watches that kube-apiserver
      # proxies for the controller manager (garbage collector, quota) to end.
      # Nothing is lost by cutting that short: its state is in mydb-etcd.
      STOP_TIMEOUT=${MYDB_STOP_TIMEOUT:-10} stop_processes mydb-apiserver
    fi
  fi
  # On the real node, database pods run the images built here.
  local node_flags=()
  if [[ "${MYDB_NODE}" == real ]]; then
    mapfile -t node_flags < <(node_engine_image_flags)
    node_flags+=(--instance-image="${IMAGE_PREFIX}/mydb:dev")
  fi
  # The policy that pins the images mydb's pods may run to these flags
  # (beside artifacts/common/managed-objects-policy.yaml).
  "${MYDB_BIN}" --print-managed-images-policy "${node_flags[@]}" | kubectl apply -f - >/dev/null
  local etcd_tls=()
  if ((MYDB_ETCD_MEMBERS > 1)); then
    etcd_tls=(--etcd-cafile="${PKI_DIR}/mydb-etcd-ca.crt"
      --etcd-certfile="${PKI_DIR}/mydb-etcd-client.crt" --etcd-keyfile="${PKI_DIR}/mydb-etcd-client.key")
  fi
  STOP_TIMEOUT=${MYDB_STOP_TIMEOUT:-10} start_process mydb-apiserver "${MYDB_PORT}" -- "${MYDB_BIN}" \
    --etcd-servers="$(mydb_etcd_servers)" \
    "${etcd_tls[@]}" \
    --bind-address=127.0.0.1 \
    --secure-port="${MYDB_PORT}" \
    --tls-cert-file="${PKI_DIR}/mydb-apiserver.crt" \
    --tls-private-key-file="${PKI_DIR}/mydb-apiserver.key" \
    --kubeconfig="${MYDB_KUBECONFIG}" \
    --authentication-kubeconfig="${MYDB_KUBECONFIG}" \
    --authorization-kubeconfig="${MYDB_KUBECONFIG}" \
    --instance-poll-interval=2s \
    --ca-rotation-overlap="${MYDB_CA_ROTATION_OVERLAP:-30s}" \
    "${node_flags[@]}" \
    "${TRACING_FLAGS[@]}" \
    "${AUDIT_FLAGS[@]/@LOG@/mydb-apiserver-audit}" \
    "${extra_flags[@]}"
  if ((STARTED)); then
    echo "${sum}" >"${sum_file}"
  fi
}

mydb_ready() {
  https_ok "https://127.0.0.1:${MYDB_PORT}/readyz" --cacert "${PKI_DIR}/ca.crt"
}

# apply_apiservice: renders the ExternalName Service and the APIService with
# this machine's CA and port, and applies them.
apply_apiservice() {
  local out="${LOCAL_DIR}/manifests/apiservice.yaml" ca_bundle
  mkdir -p "${LOCAL_DIR}/manifests"
  ca_bundle=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  sed -e "s|@MYDB_PORT@|${MYDB_PORT}|g" -e "s|@CA_BUNDLE@|${ca_bundle}|g" \
    "${ROOT}/artifacts/local/apiservice.yaml.tmpl" >"${out}"
  kubectl apply -f "${out}" >/dev/null
}

# wait_apiservice: waits for the aggregator to find mydb-apiserver healthy;
# on timeout shows why not (the Available condition's message names TLS,
# discovery or connection errors), besides mydb-apiserver's log.
wait_apiservice() {
  local deadline=$((SECONDS + WAIT_TIMEOUT))
  until kubectl wait --for=condition=Available apiservice/v1.example.com --timeout=5s >/dev/null 2>&1; do
    running_pid mydb-apiserver >/dev/null ||
      fail_with_log mydb-apiserver "mydb-apiserver exited while waiting for APIService v1.example.com"
    if ((SECONDS >= deadline)); then
      warn "APIService v1.example.com: $(kubectl get apiservice v1.example.com \
        -o jsonpath='{.status.conditions[?(@.type=="Available")].message}' 2>&1)"
      fail_with_log mydb-apiserver "timed out after ${WAIT_TIMEOUT}s waiting for APIService v1.example.com to become Available"
    fi
  done
}

write_env_file() {
  cat >"${LOCAL_DIR}/env.tmp" <<EOF
# Written by hack/local-up.sh; source it to talk to the local cluster.
export KUBECONFIG=${ADMIN_KUBECONFIG}
export LOCAL_DIR=${LOCAL_DIR}
export KUBE_APISERVER_URL=${KUBE_APISERVER_URL}
export ETCD_PORT=${ETCD_PORT}
export MYDB_ETCD_PORT=${MYDB_ETCD_PORT}
export MYDB_ETCD_MEMBERS=${MYDB_ETCD_MEMBERS}
export MYDB_ETCD_SERVERS=$(mydb_etcd_servers)
export KUBE_APISERVER_PORT=${KUBE_APISERVER_PORT}
export KUBE_CONTROLLER_MANAGER_PORT=${KUBE_CONTROLLER_MANAGER_PORT}
export KUBE_SCHEDULER_PORT=${KUBE_SCHEDULER_PORT}
export KWOK_PORT=${KWOK_PORT}
export MYDB_NODE=${MYDB_NODE}
export NODE_NAME=${NODE_NAME}
export NODE_IP=${NODE_IP}
export CONTAINERD_SOCKET=${CONTAINERD_SOCKET}
export MYDB_PORT=${MYDB_PORT}
export MYDB_BIN=${MYDB_BIN}
export MYDB_TRACING=${MYDB_TRACING}
export JAEGER_QUERY_PORT=${JAEGER_QUERY_PORT}
EOF
  mv -f "${LOCAL_DIR}/env.tmp" "${LOCAL_DIR}/env"
}

main() {
  local start=${SECONDS}
  choose_node
  build_binaries
  make_pki
  write_kubeconfigs
  [[ "${MYDB_NODE}" == real ]] && make_node_pki
  [[ "${MYDB_NODE}" == real ]] && node_network

  # Both etcds start at once; the servers then wait for their health.
  start_etcd etcd "${ETCD_PORT}" "${ETCD_PEER_PORT}"
  check_mydb_etcd_members
  if ((MYDB_ETCD_MEMBERS == 1)); then
    start_etcd mydb-etcd "${MYDB_ETCD_PORT}" "${MYDB_ETCD_PEER_PORT}"
  else
    start_mydb_etcd_cluster
  fi
  wait_until etcd "${WAIT_TIMEOUT}" "etcd health on :${ETCD_PORT}" etcd_healthy "${ETCD_PORT}"

  start_tracing
  ((MYDB_TRACING)) && wait_until jaeger "${WAIT_TIMEOUT}" "Jaeger's query API on :${JAEGER_QUERY_PORT}" jaeger_ready
  start_kube_apiserver
  wait_until kube-apiserver "${WAIT_TIMEOUT}" "kube-apiserver /readyz on :${KUBE_APISERVER_PORT}" kube_apiserver_ready

  if [[ "${MYDB_NODE}" == kwok ]]; then
    # kwok's permissions first, so it does not start by being forbidden.
    log "applying kwok RBAC, nodes and StorageClass (artifacts/local/kwok)"
    kubectl apply -k "${ROOT}/artifacts/local/kwok" >/dev/null
  fi

  start_kube_controller_manager
  start_kube_scheduler
  if [[ "${MYDB_NODE}" == kwok ]]; then
    start_kwok
  else
    start_node
  fi

  # mydb-apiserver's identity and permissions must exist before it starts:
  # it reads the authentication ConfigMap at start-up.
  log "applying mydb-apiserver namespace, ServiceAccount and RBAC (artifacts/local)"
  kubectl apply -k "${ROOT}/artifacts/local" >/dev/null
  ensure_mydb_kubeconfig

  wait_until mydb-etcd "${WAIT_TIMEOUT}" "mydb-etcd health ($(mydb_etcd_servers))" mydb_etcd_healthy
  start_mydb_apiserver

  wait_until kube-controller-manager "${WAIT_TIMEOUT}" "kube-controller-manager /healthz on :${KUBE_CONTROLLER_MANAGER_PORT}" \
    component_healthy "${KUBE_CONTROLLER_MANAGER_PORT}"
  wait_until kube-scheduler "${WAIT_TIMEOUT}" "kube-scheduler /healthz on :${KUBE_SCHEDULER_PORT}" \
    component_healthy "${KUBE_SCHEDULER_PORT}"
  [[ "${MYDB_NODE}" == kwok ]] && wait_until kwok "${WAIT_TIMEOUT}" "kwok /healthz on :${KWOK_PORT}" kwok_healthy
  wait_until mydb-apiserver "${WAIT_TIMEOUT}" "mydb-apiserver /readyz on :${MYDB_PORT}" mydb_ready

  log "registering example.com/v1 with the aggregator (APIService v1.example.com)"
  apply_apiservice
  wait_apiservice
  if [[ "${MYDB_NODE}" == kwok ]]; then
    wait_until kwok "${WAIT_TIMEOUT}" "the kwok nodes to become Ready" \
      kubectl wait --for=condition=Ready node -l type=kwok --timeout=5s
  fi
  # Namespaces get their default ServiceAccount from the controller manager;
  # pods can only be created once it exists.
  wait_until kube-controller-manager "${WAIT_TIMEOUT}" "ServiceAccount default/default" \
    kubectl get serviceaccount default -n default

  write_env_file
  log "local cluster up in $((SECONDS - start))s"
  cat <<EOF

  The local control plane and mydb-apiserver are running on 127.0.0.1.

    export KUBECONFIG=${ADMIN_KUBECONFIG}
    kubectl get mdb -A             # or ${BIN_DIR}/kubectl, which matches the server version
    kubectl get nodes,apiservice v1.example.com

  mydb-apiserver:  https://127.0.0.1:${MYDB_PORT} (log ${LOG_DIR}/mydb-apiserver.log)
  kube-apiserver:  ${KUBE_APISERVER_URL} (log ${LOG_DIR}/kube-apiserver.log)
  Ports and paths: ${LOCAL_DIR}/env
  Stop:            make local-down   (hack/local-down.sh [--purge])

EOF
}

main "$@"
