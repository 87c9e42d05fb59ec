# shellcheck shell=bash disable=SC2034  # variables used by the sourcing scripts
# Shared helpers of hack/local-up.sh and hack/local-down.sh: logging,
# background processes tracked by PID files, waiting with timeouts, and a
# small openssl PKI. Source it; it defines functions and the directory layout
# and runs nothing.
#
# Layout under LOCAL_DIR (default _output/local):
#   pki/          CAs, serving and client certificates, service-account keys
#   kubeconfigs/  one kubeconfig per component (admin, controller manager,
#                 scheduler, kwok, mydb-apiserver)
#   kubeconfig    the admin kubeconfig for people and e2e tests
#   env           shell variables describing the running cluster (ports...)
#   logs/<name>.log, logs/<name>.log.1 (previous run)
#   pids/<name>.pid
#   mydb-apiserver.binary.sha256  the binary the running server was started from
#   etcd/, mydb-etcd/   etcd data directories (mydb-etcd-1/, mydb-etcd-2/
#                 with MYDB_ETCD_MEMBERS=3; mydb-etcd/members the count)
#   manifests/    manifests rendered at run time (APIService with the CA)
#   kwok/         kwok's stage configuration
#   certs/        self-signed serving certificates the components make
#   flexvolume/   the controller manager's (empty) flex volume plugin dir, so it
#                 does not create /usr/libexec/kubernetes on the host

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BIN_DIR=${BIN_DIR:-"${ROOT}/_output/bin"}
LOCAL_DIR=${LOCAL_DIR:-"${ROOT}/_output/local"}
# Processes are recognised by their command line mentioning LOCAL_DIR, so it
# must be absolute.
LOCAL_DIR=$(mkdir -p "${LOCAL_DIR}" && cd "${LOCAL_DIR}" && pwd)
PKI_DIR="${LOCAL_DIR}/pki"
KUBECONFIG_DIR="${LOCAL_DIR}/kubeconfigs"
LOG_DIR="${LOCAL_DIR}/logs"
PID_DIR="${LOCAL_DIR}/pids"

log() { printf '\033[1m[%s %s]\033[0m %s\n' "${LOG_PREFIX:-local}" "$(date +%H:%M:%S)" "$*" >&2; }
warn() { printf '\033[33m[%s %s] WARNING:\033[0m %s\n' "${LOG_PREFIX:-local}" "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  printf '\033[31m[%s %s] ERROR:\033[0m %s\n' "${LOG_PREFIX:-local}" "$(date +%H:%M:%S)" "$*" >&2
  exit 1
}

# ---------------------------------------------------------------------------
# Processes

pid_file() { echo "${PID_DIR}/$1.pid"; }
log_file() { echo "${LOG_DIR}/$1.log"; }

# running_pid NAME: prints the PID of NAME and succeeds if its PID file names
# a live process of ours. A PID is ours when its command line mentions
# LOCAL_DIR, so a PID recycled by an unrelated process after a reboot or crash
# is never mistaken for (or killed as) a component.
running_pid() {
  local file pid
  file=$(pid_file "$1")
  [[ -r "${file}" ]] || return 1
  pid=$(<"${file}")
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "${LOCAL_DIR}" || return 1
  echo "${pid}"
}

# port_in_use PORT: whether something listens on 127.0.0.1:PORT (or any
# address) already.
port_in_use() {
  ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# start_process NAME PORT... -- COMMAND...: starts COMMAND in the background
# unless NAME already runs with the same command line (one running with a
# different command line is restarted). It runs in its own session (setsid)
# so that ^C in the terminal that ran `make local-up` does not take the
# cluster down, with stdout and stderr in logs/NAME.log (the previous run's
# log is kept as NAME.log.1) and its PID in pids/NAME.pid. Fails early when
# one of the PORTs is taken by a process that is not ours.
# Sets STARTED=1 when it started something, 0 when NAME was already running.
start_process() {
  local name=$1 pid port
  shift
  local ports=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do ports+=("$1"); shift; done
  shift
  STARTED=0
  if pid=$(running_pid "${name}"); then
    # Same command line (binary, flags, ports, paths): leave it alone.
    # Otherwise this script or its environment changed since NAME was
    # started, and only a restart applies the change.
    if [[ "$(tr '\0' '\n' <"/proc/${pid}/cmdline")" == "$(printf '%s\n' "$@")" ]]; then
      log "${name} already running (pid ${pid})"
      return 0
    fi
    log "restarting ${name} (pid ${pid}): its command line changed"
    stop_processes "${name}"
  fi
  for port in "${ports[@]}"; do
    if port_in_use "${port}"; then
      die "cannot start ${name}: port ${port} is already in use by another process ($(ss -Hltnp "sport = :${port}" | awk '{print $NF}' | head -1)); stop it or choose other ports (see the top of hack/local-up.sh)"
    fi
  done
  mkdir -p "${LOG_DIR}" "${PID_DIR}"
  local logf pidf
  logf=$(log_file "${name}")
  pidf=$(pid_file "${name}")
  [[ -f "${logf}" ]] && mv -f "${logf}" "${logf}.1"
  rm -f "${pidf}"
  # The inner shell records its own PID and then execs the component, so the
  # PID file holds the component's PID whether or not setsid had to fork.
  # shellcheck disable=SC2016  # $$ and $@ are for the inner shell
  setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "${pidf}" "$@" \
    </dev/null >"${logf}" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "${pidf}" ]] && break
    sleep 0.1
  done
  [[ -s "${pidf}" ]] || die "${name} did not start; see ${logf}"
  log "started ${name} (pid $(<"${pidf}"), log ${logf})"
  STARTED=1
}

# stop_processes NAME...: sends TERM to the recorded processes NAMEs, waits
# up to STOP_TIMEOUT seconds for them to exit, then KILLs what is left, and
# removes their PID files. Only PIDs from the PID files are signalled.
stop_processes() {
  local name pid pids=() names=()
  for name in "$@"; do
    if pid=$(running_pid "${name}"); then
      log "stopping ${name} (pid ${pid})"
      kill -TERM "${pid}" 2>/dev/null || true
      pids+=("${pid}")
      names+=("${name}")
    elif [[ -e "$(pid_file "${name}")" ]]; then
      log "${name} is not running; removing its stale PID file"
    fi
  done
  local deadline=$((SECONDS + ${STOP_TIMEOUT:-20})) i alive
  while :; do
    alive=0
    for pid in "${pids[@]}"; do
      kill -0 "${pid}" 2>/dev/null && alive=1
    done
    ((alive)) || break
    if ((SECONDS >= deadline)); then
      for i in "${!pids[@]}"; do
        if kill -0 "${pids[i]}" 2>/dev/null; then
          warn "${names[i]} (pid ${pids[i]}) did not exit within ${STOP_TIMEOUT:-20}s; killing it"
          kill -KILL "${pids[i]}" 2>/dev/null || true
        fi
      done
      sleep 0.5
      break
    fi
    sleep 0.2
  done
  for name in "$@"; do rm -f "$(pid_file "${name}")"; done
}

# ---------------------------------------------------------------------------
# Waiting

# wait_until NAME TIMEOUT DESCRIPTION COMMAND...: retries COMMAND until it
# succeeds. Fails after TIMEOUT seconds, or as soon as process NAME (if
# non-empty) has exited, pointing at NAME's log.
wait_until() {
  local name=$1 timeout=$2 what=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "${name}" ]] && ! running_pid "${name}" >/dev/null; then
      fail_with_log "${name}" "${name} exited while waiting for ${what}"
    fi
    if ((SECONDS >= deadline)); then
      if [[ -n "${name}" ]]; then
        fail_with_log "${name}" "timed out after ${timeout}s waiting for ${what}"
      fi
      die "timed out after ${timeout}s waiting for ${what}"
    fi
    sleep 0.5
  done
}

fail_with_log() {
  local logf
  logf=$(log_file "$1")
  if [[ -f "${logf}" ]]; then
    printf '%s\n' "---- last lines of ${logf} ----" >&2
    tail -n 25 "${logf}" >&2
    printf '%s\n' "----" >&2
  fi
  die "$2 (full log: ${logf})"
}

# https_ok URL [CURL ARGS...]: the URL answers 200 with body "ok".
https_ok() {
  local url=$1
  shift
  [[ "$(curl -sS --max-time 5 "$@" "${url}")" == ok ]]
}

# ---------------------------------------------------------------------------
# PKI (openssl). Certificates are kept across runs; each is (re)made only when
# missing, expiring within a day, or not signed by its current CA, so
# re-running local-up never rotates what running processes use.

# cert_valid CRT CA_CRT: CRT exists, is valid for another day and chains to
# CA_CRT.
cert_valid() {
  [[ -s "$1" ]] &&
    openssl x509 -checkend 86400 -noout -in "$1" >/dev/null 2>&1 &&
    openssl verify -CAfile "$2" "$1" >/dev/null 2>&1
}

# ensure_ca NAME CN: PKI_DIR/NAME.{crt,key}, a self-signed CA for 10 years.
# Returns 0 whether or not it had to make one.
ensure_ca() {
  local name=$1 cn=$2
  local crt="${PKI_DIR}/${name}.crt" key="${PKI_DIR}/${name}.key"
  if [[ -s "${crt}" && -s "${key}" ]] && openssl x509 -checkend 86400 -noout -in "${crt}" >/dev/null 2>&1; then
    return 0
  fi
  log "creating CA ${name} (${cn})"
  openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
    -keyout "${key}" -out "${crt}" -subj "/CN=${cn}" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
  chmod 600 "${key}"
}

# ensure_cert NAME CA KIND SUBJECT [SAN]: PKI_DIR/NAME.{crt,key} signed by
# PKI_DIR/CA for a year. KIND is server, client or both; SUBJECT an openssl
# subject such as /O=system:masters/CN=admin; SAN a subjectAltName value
# such as DNS:localhost,IP:127.0.0.1.
ensure_cert() {
  local name=$1 ca=$2 kind=$3 subject=$4 san=${5:-}
  local crt="${PKI_DIR}/${name}.crt" key="${PKI_DIR}/${name}.key"
  if [[ -s "${key}" ]] && cert_valid "${crt}" "${PKI_DIR}/${ca}.crt"; then
    return 0
  fi
  log "creating certificate ${name} (${subject})"
  local eku
  case "${kind}" in
    server) eku=serverAuth ;;
    client) eku=clientAuth ;;
    both) eku=serverAuth,clientAuth ;;
    *) die "ensure_cert: unknown kind ${kind}" ;;
  esac
  local ext
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=${eku}"
    echo "authorityKeyIdentifier=keyid"
    if [[ -n "${san}" ]]; then echo "subjectAltName=${san}"; fi
  } >"${ext}"
  openssl req -new -nodes -newkey rsa:2048 -keyout "${key}" -subj "${subject}" 2>/dev/null |
    openssl x509 -req -sha256 -days 365 -CA "${PKI_DIR}/${ca}.crt" -CAkey "${PKI_DIR}/${ca}.key" \
      -set_serial "0x$(openssl rand -hex 16)" -extfile "${ext}" -out "${crt}" 2>/dev/null
  rm -f "${ext}"
  chmod 600 "${key}"
}

# ensure_sa_keys: the key pair kube-apiserver signs and verifies
# service-account tokens with (and the controller manager signs legacy
# token Secrets with).
ensure_sa_keys() {
  [[ -s "${PKI_DIR}/sa.key" && -s "${PKI_DIR}/sa.pub" ]] && return 0
  log "creating service-account signing key pair"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${PKI_DIR}/sa.key" 2>/dev/null
  openssl pkey -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub"
  chmod 600 "${PKI_DIR}/sa.key"
}

# ---------------------------------------------------------------------------
# Kubeconfigs

# write_kubeconfig FILE SERVER --client-certificate=CRT --client-key=KEY
# write_kubeconfig FILE SERVER --token=TOKEN
# A self-contained kubeconfig for SERVER trusting the cluster CA, with the
# certificates embedded. Written as YAML directly (kubectl config would take
# a dozen kubectl runs per run of local-up) to a temporary file that is then
# renamed, so a reader never sees a half-written file.
write_kubeconfig() {
  local file=$1 server=$2 arg user=""
  shift 2
  for arg in "$@"; do
    case "${arg}" in
      --client-certificate=*) user+="    client-certificate-data: $(base64 -w0 <"${arg#*=}")"$'\n' ;;
      --client-key=*) user+="    client-key-data: $(base64 -w0 <"${arg#*=}")"$'\n' ;;
      --token=*) user+="    token: ${arg#*=}"$'\n' ;;
      *) die "write_kubeconfig: unknown argument ${arg}" ;;
    esac
  done
  local tmp="${file}.tmp"
  (
    umask 077
    cat >"${tmp}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: ${server}
    certificate-authority-data: $(base64 -w0 <"${PKI_DIR}/ca.crt")
users:
- name: user
  user:
${user%$'\n'}
contexts:
- name: local
  context:
    cluster: local
    user: user
current-context: local
EOF
  )
  mv -f "${tmp}" "${file}"
}
