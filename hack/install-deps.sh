#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (protoc for the
# protobuf generator, openssl for local-up's PKI), when they are missing.
set -o errexit -o nounset -o pipefail

missing=()
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v openssl >/dev/null || missing+=(openssl)
command -v make >/dev/null || missing+=(make)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  ${SUDO} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y -qq "${missing[@]}" >/dev/null
fi
go version
