#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (protoc for the
# protobuf generator, openssl for local-up's PKI, PostgreSQL 15 and MariaDB
# for the real-engine suite of make test-engines), when they are missing.
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
