#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (protoc for the
# protobuf generator, openssl for local-up's PKI, PostgreSQL 15 and MariaDB
# for the real-engine suite of make test-engines, and the real node's
# runtime and image tools), when they are missing. Each is checked by the
# file it provides that is needed, not by a command that may be there for
# another reason.
set -o errexit -o nounset -o pipefail

missing=()
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v openssl >/dev/null || missing+=(openssl)
command -v make >/dev/null || missing+=(make)
# The engine suite runs its own instances from these binaries; the
# packages' default instances are neither needed nor started.
[[ -x /usr/lib/postgresql/15/bin/postgres ]] || missing+=(postgresql-15)
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v mariadb-backup >/dev/null || missing+=(mariadb-backup)
command -v mbstream >/dev/null || missing+=(mariadb-backup)
# The real node of make local-up (hack/lib/node.sh) and the images it runs
# (hack/images.sh): containerd with runc and the CNI plugins, kube-proxy's
# iptables and conntrack, and buildah and mmdebstrap to build the images.
[[ -x /usr/bin/containerd ]] || missing+=(containerd)
[[ -x /usr/sbin/runc ]] || missing+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback && -x /usr/lib/cni/portmap ]] ||
  missing+=(containernetworking-plugins)
[[ -x /usr/sbin/iptables ]] || missing+=(iptables)
[[ -x /usr/sbin/conntrack ]] || missing+=(conntrack)
[[ -x /usr/bin/buildah ]] || missing+=(buildah)
[[ -x /usr/bin/mmdebstrap ]] || missing+=(mmdebstrap)
[[ -x /usr/bin/ip || -x /sbin/ip ]] || missing+=(iproute2)
# pause.c is built static (hack/images.sh): libc's static archive.
[[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/$(uname -m)-linux-gnu/libc.a ]] || missing+=(libc6-dev)
if [[ ${#missing[@]} -gt 0 ]]; then
  # shellcheck disable=SC2207
  missing=($(printf '%s\n' "${missing[@]}" | sort -u))
  echo "installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  # Keep the packages' maintainer scripts from starting their default
  # servers (policy-rc.d exit 101 = "not allowed"), unless a policy exists.
  policy=/usr/sbin/policy-rc.d
  if [[ ! -e ${policy} ]]; then
    printf '#!/bin/sh\nexit 101\n' | ${SUDO} tee "${policy}" >/dev/null
    ${SUDO} chmod 0755 "${policy}"
    trap '${SUDO} rm -f "${policy}"' EXIT
  fi
  ${SUDO} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
go version
