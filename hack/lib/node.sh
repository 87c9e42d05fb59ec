# shellcheck shell=bash disable=SC2034  # variables used by the sourcing scripts
# The real node of hack/local-up.sh (MYDB_NODE=real): containerd with runc
# and the CNI bridge from Debian's packages, kubelet and kube-proxy
# (iptables mode) from Kubernetes, CoreDNS as the cluster DNS and rancher's
# local-path-provisioner for the claims, all as processes of this machine
# like the control plane, and images built here (hack/images.sh). Source it
# after hack/lib/local.sh; it defines functions and runs nothing.
#
# Pods live on a bridge of their own (NODE_BRIDGE, NODE_POD_CIDR), which
# exists only inside this machine: the host is its gateway (NODE_IP), the
# node's address, where kube-apiserver, CoreDNS and the kubelet serve pods.
#
# Layout under LOCAL_DIR/node:
#   containerd/      containerd's root, state and socket; config.toml
#   cni/             the CNI network (conflist) and host-local's leases
#   kubelet/         the kubelet's root directory (a shared mount of its own)
#   pod-logs/        the containers' logs
#   volumes/         what local-path-provisioner gives the claims
#   coredns/         the Corefile
#   sysctl.saved     the sysctls the node changed, restored by local-down
#   images.loaded    the image archives containerd has imported, by hash

NODE_NAME=${NODE_NAME:-mydb-node}
NODE_BRIDGE=${NODE_BRIDGE:-mydb0}
NODE_POD_CIDR=${NODE_POD_CIDR:-10.210.0.0/24}
NODE_IP=${NODE_IP:-10.210.0.1}
NODE_DIR="${LOCAL_DIR}/node"
CONTAINERD_SOCKET="${NODE_DIR}/containerd/containerd.sock"
KUBELET_PORT=${KUBELET_PORT:-21250}
KUBELET_HEALTHZ_PORT=${KUBELET_HEALTHZ_PORT:-21248}
KUBE_PROXY_HEALTHZ_PORT=${KUBE_PROXY_HEALTHZ_PORT:-21256}
KUBE_PROXY_METRICS_PORT=${KUBE_PROXY_METRICS_PORT:-21249}
COREDNS_HEALTH_PORT=${COREDNS_HEALTH_PORT:-21253}
IMAGES_DIR=${IMAGES_DIR:-"${ROOT}/_output/images"}
IMAGE_PREFIX=${IMAGE_PREFIX:-mydb.local}
# The engine images the node loads, and mydb is pointed at with
# --engine-image: by default only PostgreSQL 17, the default version, so the
# quick start builds one (NODE_ENGINE_IMAGES="postgres-15 mariadb-10.11",
# or all: every engine image hack/images.sh knows).
NODE_ENGINE_IMAGES=${NODE_ENGINE_IMAGES:-postgres-17}

# node_unsupported: prints why this machine cannot run the real node, or
# nothing when it can.
node_unsupported() {
  [[ $(uname -s) == Linux ]] || { echo "not Linux"; return; }
  [[ $(id -u) -eq 0 ]] || { echo "not root (the kubelet and containerd need root)"; return; }
  local tool
  for tool in containerd runc buildah mmdebstrap iptables conntrack ip; do
    command -v "${tool}" >/dev/null || { echo "${tool} is missing (hack/install-deps.sh installs it)"; return; }
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    { echo "the CNI plugins are missing (containernetworking-plugins)"; return; }
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || { echo "the kernel has no bridge netfilter (br_netfilter)"; return; }
  local probe f
  probe=$(mktemp -d)
  # runc itself must be able to make a container here (a nested sandbox may
  # not let it): /bin/true with its libraries as the root filesystem.
  mkdir -p "${probe}/rootfs"
  for f in /bin/true $(ldd /bin/true | grep -o '/[^ ]*'); do
    mkdir -p "${probe}/rootfs$(dirname "${f}")" && cp -L "${f}" "${probe}/rootfs${f}"
  done
  if ! (cd "${probe}" && runc spec &&
    python3 -c 'import json; c=json.load(open("config.json")); c["process"]["terminal"]=False; c["process"]["args"]=["/bin/true"]; json.dump(c, open("config.json", "w"))' &&
    timeout 20 runc run --bundle "${probe}" "mydb-probe-$$") >/dev/null 2>&1; then
    runc delete --force "mydb-probe-$$" >/dev/null 2>&1 || true
    rm -rf "${probe}"
    echo "runc cannot run a container on this machine"
    return
  fi
  rm -rf "${probe}"
}

# write_config FILE: writes standard input to FILE when it differs from what
# FILE holds: kube-proxy exits when its configuration file is written, even
# with the same content, and a re-run of local-up must leave it running.
write_config() {
  local tmp="$1.tmp"
  cat >"${tmp}"
  if cmp -s "${tmp}" "$1"; then
    rm -f "${tmp}"
  else
    mv -f "${tmp}" "$1"
  fi
}

# set_sysctl KEY VALUE: sets a sysctl the node needs, remembering the value
# it had (once) so that local-down restores it.
set_sysctl() {
  local key=$1 value=$2 path="/proc/sys/${1//.//}" old
  old=$(<"${path}")
  [[ "${old}" == "${value}" ]] && return 0
  grep -q "^${key}=" "${NODE_DIR}/sysctl.saved" 2>/dev/null || echo "${key}=${old}" >>"${NODE_DIR}/sysctl.saved"
  echo "${value}" >"${path}"
}

# node_network: the pods' bridge with the node's address on it, forwarding,
# and bridged traffic through iptables (kube-proxy's Service rules apply to
# pod-to-pod traffic on the same bridge only so).
node_network() {
  mkdir -p "${NODE_DIR}"
  if ! ip link show "${NODE_BRIDGE}" >/dev/null 2>&1; then
    log "creating bridge ${NODE_BRIDGE} with ${NODE_IP}/${NODE_POD_CIDR#*/}"
    ip link add "${NODE_BRIDGE}" type bridge
  fi
  local addrs
  addrs=$(ip -o -4 addr show dev "${NODE_BRIDGE}")
  [[ "${addrs}" == *" ${NODE_IP}/"* ]] || ip addr add "${NODE_IP}/${NODE_POD_CIDR#*/}" dev "${NODE_BRIDGE}"
  ip link set "${NODE_BRIDGE}" up
  set_sysctl net.ipv4.ip_forward 1
  set_sysctl net.bridge.bridge-nf-call-iptables 1
}

make_node_pki() {
  ensure_cert kubelet ca server "/CN=${NODE_NAME}" "IP:${NODE_IP},IP:127.0.0.1,DNS:${NODE_NAME}"
  ensure_cert kubelet-client ca client "/O=system:nodes/CN=system:node:${NODE_NAME}"
  ensure_cert kube-apiserver-kubelet-client ca client /CN=kube-apiserver-kubelet-client
  ensure_cert kube-proxy ca client /CN=system:kube-proxy
  ensure_cert coredns ca client /CN=system:coredns
  local name
  for name in kubelet-client kube-proxy coredns; do
    write_kubeconfig "${KUBECONFIG_DIR}/${name}.kubeconfig" "${KUBE_APISERVER_URL}" \
      --client-certificate="${PKI_DIR}/${name}.crt" --client-key="${PKI_DIR}/${name}.key"
  done
}

start_containerd() {
  local dir="${NODE_DIR}/containerd" cni="${NODE_DIR}/cni"
  mkdir -p "${dir}" "${cni}/net.d"
  # cgroupfs (no systemd here) and restrict_oom_score_adj: root on this
  # machine lacks CAP_SYS_RESOURCE, and runc fails a container asked for a
  # lower oom_score_adj than its own.
  write_config "${dir}/config.toml" <<EOF
version = 2
root = "${dir}/root"
state = "${dir}/state"
[grpc]
  address = "${CONTAINERD_SOCKET}"
[ttrpc]
  address = "${CONTAINERD_SOCKET}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${IMAGE_PREFIX}/pause:3.10"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cni}/net.d"
EOF
  # Pods have a route to the Services' addresses through the node, and none
  # beyond it: nothing in a pod can reach an address outside this machine.
  write_config "${cni}/net.d/10-mydb.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "mydb",
  "plugins": [
    {"type": "bridge", "bridge": "${NODE_BRIDGE}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "${cni}/ipam", "ranges": [[{"subnet": "${NODE_POD_CIDR}", "gateway": "${NODE_IP}"}]],
              "routes": [{"dst": "${SERVICE_CIDR}"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start_process containerd -- containerd --config "${dir}/config.toml"
}

containerd_ready() { ctr --address "${CONTAINERD_SOCKET}" version >/dev/null; }

# load_images: builds (when their recipe changed) and imports the images the
# node runs into containerd's k8s.io namespace, each archive once.
load_images() {
  local images=(pause busybox mydb) name sum
  if [[ "${NODE_ENGINE_IMAGES}" == all ]]; then
    images+=(postgres-15 postgres-17 mariadb-10.11 mariadb-11.8 mysql-9.7)
  else
    # shellcheck disable=SC2206
    images+=(${NODE_ENGINE_IMAGES})
  fi
  IMAGES_DIR="${IMAGES_DIR}" IMAGE_PREFIX="${IMAGE_PREFIX}" "${ROOT}/hack/images.sh" "${images[@]}"
  touch "${NODE_DIR}/images.loaded"
  # What containerd holds, not only what was imported: an image it lost
  # (deleted by hand, or by an older kubelet's garbage collection) is
  # imported again.
  local present
  present=$(ctr --address "${CONTAINERD_SOCKET}" -n k8s.io images ls -q)
  for name in "${images[@]}"; do
    sum="${name} $(cat "${IMAGES_DIR}/${name}.recipe")"
    grep -qxF "${sum}" "${NODE_DIR}/images.loaded" &&
      grep -qxF "$(IMAGE_PREFIX="${IMAGE_PREFIX}" "${ROOT}/hack/images.sh" --ref "${name}")" <<<"${present}" && continue
    log "importing image ${name} into containerd"
    ctr --address "${CONTAINERD_SOCKET}" -n k8s.io images import --no-unpack=false "${IMAGES_DIR}/${name}.tar" >/dev/null
    grep -v "^${name} " "${NODE_DIR}/images.loaded" >"${NODE_DIR}/images.loaded.tmp" || true
    echo "${sum}" >>"${NODE_DIR}/images.loaded.tmp"
    mv "${NODE_DIR}/images.loaded.tmp" "${NODE_DIR}/images.loaded"
  done
  NODE_IMAGES=("${images[@]}")
}

# node_engine_image_flags: mydb-apiserver's --engine-image for every engine
# image the node loaded (postgres-15 -> postgres:15=mydb.local/postgres:15).
node_engine_image_flags() {
  local name
  for name in "${NODE_IMAGES[@]}"; do
    case "${name}" in
      postgres-* | mariadb-* | mysql-*) echo "--engine-image=${name%%-*}:${name#*-}=${IMAGE_PREFIX}/${name%%-*}:${name#*-}" ;;
    esac
  done
}

start_kubelet() {
  local dir="${NODE_DIR}/kubelet"
  mkdir -p "${dir}" "${NODE_DIR}/pod-logs"
  # Volumes the kubelet mounts (Secrets, emptyDirs) must propagate into the
  # containers: its root directory is a shared mount of its own (/ is
  # private here).
  if ! mountpoint -q "${dir}"; then
    mount --bind "${dir}" "${dir}"
    mount --make-rshared "${dir}"
  fi
  # failCgroupV1 false / cgroupfs: this machine has cgroups v1 and no
  # systemd. oomScoreAdj 0: root may not lower it (no CAP_SYS_RESOURCE).
  write_config "${NODE_DIR}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
port: ${KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${KUBELET_HEALTHZ_PORT}
tlsCertFile: ${PKI_DIR}/kubelet.crt
tlsPrivateKeyFile: ${PKI_DIR}/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI_DIR}/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://${CONTAINERD_SOCKET}
clusterDNS: [${NODE_IP}]
clusterDomain: cluster.local
resolvConf: ${NODE_DIR}/resolv.conf
failSwapOn: false
oomScoreAdj: 0
podLogsDir: ${NODE_DIR}/pod-logs
serializeImagePulls: false
maxPods: 110
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# The images were imported, and no registry has them: image garbage
# collection (on a disk over the threshold) would lose them for good, the
# pause image first, and no pod could start again. 100 turns it off.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  # Pods resolve through the cluster DNS only: nothing outside this machine.
  : >"${NODE_DIR}/resolv.conf"
  start_process kubelet "${KUBELET_PORT}" "${KUBELET_HEALTHZ_PORT}" -- "${BIN_DIR}/kubelet" \
    --config="${NODE_DIR}/kubelet.yaml" \
    --kubeconfig="${KUBECONFIG_DIR}/kubelet-client.kubeconfig" \
    --root-dir="${dir}" \
    --hostname-override="${NODE_NAME}" \
    --node-ip="${NODE_IP}"
}

kubelet_healthy() { [[ "$(curl -sS --max-time 3 "http://127.0.0.1:${KUBELET_HEALTHZ_PORT}/healthz")" == ok ]]; }

start_kube_proxy() {
  write_config "${NODE_DIR}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${KUBECONFIG_DIR}/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: ${NODE_POD_CIDR}
hostnameOverride: ${NODE_NAME}
healthzBindAddress: 127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT}
metricsBindAddress: 127.0.0.1:${KUBE_PROXY_METRICS_PORT}
nodePortAddresses: [${NODE_IP}/32]
# The conntrack table is the machine's: leave its sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
  start_process kube-proxy "${KUBE_PROXY_HEALTHZ_PORT}" "${KUBE_PROXY_METRICS_PORT}" -- "${BIN_DIR}/kube-proxy" \
    --config="${NODE_DIR}/kube-proxy.yaml"
}

kube_proxy_healthy() { curl -sS --max-time 3 "http://127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT}/healthz" | grep -q lastUpdated; }

start_coredns() {
  mkdir -p "${NODE_DIR}/coredns"
  # Names of the cluster only; anything else is NXDOMAIN (no upstream can be
  # reached from here).
  write_config "${NODE_DIR}/coredns/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
  bind ${NODE_IP}
  errors
  health 127.0.0.1:${COREDNS_HEALTH_PORT}
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig ${KUBECONFIG_DIR}/coredns.kubeconfig
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
  }
  cache 5
}
.:53 {
  bind ${NODE_IP}
  template ANY ANY {
    rcode NXDOMAIN
  }
}
EOF
  start_process coredns "${COREDNS_HEALTH_PORT}" -- "${BIN_DIR}/coredns" -conf "${NODE_DIR}/coredns/Corefile"
}

coredns_healthy() { [[ "$(curl -sS --max-time 3 "http://127.0.0.1:${COREDNS_HEALTH_PORT}/health")" == OK ]]; }

start_local_path_provisioner() {
  local token kc="${KUBECONFIG_DIR}/local-path-provisioner.kubeconfig"
  mkdir -p "${NODE_DIR}/volumes"
  write_config "${NODE_DIR}/local-path.json" <<EOF
{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["${NODE_DIR}/volumes"]}]}
EOF
  if [[ ! -s "${kc}" ]]; then
    token=$(kubectl create token local-path-provisioner-service-account -n local-path-storage --duration=8760h)
    write_kubeconfig "${kc}" "${KUBE_APISERVER_URL}" --token="${token}"
  fi
  start_process local-path-provisioner -- "${BIN_DIR}/local-path-provisioner" --debug start \
    --kubeconfig="${kc}" --config="${NODE_DIR}/local-path.json" \
    --namespace=local-path-storage --helper-image="${IMAGE_PREFIX}/busybox:dev"
}

# start_node: the real node, once the control plane serves (make_node_pki
# and node_network before kube-apiserver starts).
start_node() {
  start_containerd
  wait_until containerd "${WAIT_TIMEOUT}" "containerd on ${CONTAINERD_SOCKET}" containerd_ready
  load_images
  log "applying the node's RBAC, DNS and storage (artifacts/local/node)"
  kubectl apply -k "${ROOT}/artifacts/local/node" >/dev/null
  start_kubelet
  start_kube_proxy
  start_coredns
  start_local_path_provisioner
  wait_until kubelet "${WAIT_TIMEOUT}" "kubelet /healthz on :${KUBELET_HEALTHZ_PORT}" kubelet_healthy
  wait_until kube-proxy "${WAIT_TIMEOUT}" "kube-proxy /healthz on :${KUBE_PROXY_HEALTHZ_PORT}" kube_proxy_healthy
  wait_until coredns "${WAIT_TIMEOUT}" "CoreDNS /health on :${COREDNS_HEALTH_PORT}" coredns_healthy
  wait_until kubelet "${WAIT_TIMEOUT}" "node ${NODE_NAME} to become Ready" \
    kubectl wait --for=condition=Ready "node/${NODE_NAME}" --timeout=5s
}

# stop_node: removes what start_node made that outlives its processes: the
# pods' containers and sandboxes (with their network namespaces and mounts),
# the kubelet's mounts, kube-proxy's iptables chains, the bridge, and the
# sysctls it changed.
stop_node() {
  [[ -d "${NODE_DIR}" ]] || return 0
  if running_pid containerd >/dev/null; then
    local ids
    # crictl is not here: the CRI's own namespace holds every pod's
    # containers and sandboxes; tasks first, then containers.
    ids=$(ctr --address "${CONTAINERD_SOCKET}" -n k8s.io tasks list -q 2>/dev/null || true)
    for id in ${ids}; do ctr --address "${CONTAINERD_SOCKET}" -n k8s.io tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true; done
    sleep 1
    for id in ${ids}; do ctr --address "${CONTAINERD_SOCKET}" -n k8s.io tasks delete -f "${id}" >/dev/null 2>&1 || true; done
    ids=$(ctr --address "${CONTAINERD_SOCKET}" -n k8s.io containers list -q 2>/dev/null || true)
    for id in ${ids}; do ctr --address "${CONTAINERD_SOCKET}" -n k8s.io containers delete "${id}" >/dev/null 2>&1 || true; done
  fi
  stop_processes containerd
  # Mounts under the node's directory (Secret tmpfs, the shared kubelet
  # root, containerd's snapshots and sandboxes' shm), deepest first.
  local m
  while read -r m; do umount -l "${m}" 2>/dev/null || true; done < <(awk -v d="${NODE_DIR}/" 'index($2, d) == 1 || $2 == substr(d, 1, length(d)-1) {print $2}' /proc/self/mounts | sort -r)
  # Network namespaces the CNI made for the sandboxes.
  for m in /var/run/netns/cni-*; do
    [[ -e "${m}" ]] && ip netns delete "$(basename "${m}")" 2>/dev/null || true
  done
  # kube-proxy's chains (its own cleanup mode removes exactly those), then
  # the kubelet's: its firewall for localhost and its canaries.
  [[ -x "${BIN_DIR}/kube-proxy" ]] && "${BIN_DIR}/kube-proxy" --cleanup >/dev/null 2>&1 || true
  local ipt table chain
  for ipt in iptables ip6tables; do
    command -v "${ipt}" >/dev/null || continue
    for chain in INPUT OUTPUT; do
      while "${ipt}" -D "${chain}" -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "${ipt}" -t "${table}" -F "${chain}" 2>/dev/null && "${ipt}" -t "${table}" -X "${chain}" 2>/dev/null || true
      done
    done
  done
  ip link show "${NODE_BRIDGE}" >/dev/null 2>&1 && ip link delete "${NODE_BRIDGE}"
  if [[ -f "${NODE_DIR}/sysctl.saved" ]]; then
    local line
    while IFS= read -r line; do
      echo "${line#*=}" >"/proc/sys/$(echo "${line%%=*}" | tr . /)" 2>/dev/null || true
    done <"${NODE_DIR}/sysctl.saved"
    rm -f "${NODE_DIR}/sysctl.saved"
  fi
}
