#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, defaulters, conversions,
# protobuf, OpenAPI (with its violation report) and the typed client,
# listers, informers and apply configurations. Every generator is a Go tool
# dependency of this module; protoc comes from Debian's protobuf-compiler, and
# the well-known protos it imports (google/protobuf/descriptor.proto, which
# gogo.proto needs) from the gogo/protobuf module, so that protoc's include
# path never depends on a Debian package (libprotobuf-dev is only recommended
# by protobuf-compiler, and a fresh machine lacks it).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MODULE=github.com/mydb-dev/mydb
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
cd "${ROOT}"
# shellcheck source=hack/lib/golang.sh
source "${ROOT}/hack/lib/golang.sh"

# Assignments, not "$(...)" inside another command, so that a failure stops
# the script (errexit does not see a failed substitution in an argument).
CODEGEN_DIR=$(golang::module_dir k8s.io/code-generator)
source "${CODEGEN_DIR}/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" "${ROOT}/pkg/apis"

# go-to-protobuf expects a GOPATH: build one from symlinks to this repository
# and to the modules whose .proto files ours import.
gen_protobuf() {
  command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; return 1; }
  local tmp api_dir apimachinery_dir gogo_dir
  api_dir=$(golang::module_dir k8s.io/api)
  apimachinery_dir=$(golang::module_dir k8s.io/apimachinery)
  gogo_dir=$(golang::module_dir github.com/gogo/protobuf)
  tmp=$(mktemp -d)
  trap 'rm -rf "${tmp}"' RETURN
  mkdir -p "${tmp}/bin" "${tmp}/src/github.com/mydb-dev" "${tmp}/src/k8s.io" "${tmp}/src/github.com/gogo"
  go build -o "${tmp}/bin/" k8s.io/code-generator/cmd/go-to-protobuf \
    k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo golang.org/x/tools/cmd/goimports
  ln -s "${ROOT}" "${tmp}/src/${MODULE}"
  ln -s "${api_dir}" "${tmp}/src/k8s.io/api"
  ln -s "${apimachinery_dir}" "${tmp}/src/k8s.io/apimachinery"
  ln -s "${gogo_dir}" "${tmp}/src/github.com/gogo/protobuf"
  (cd "${tmp}/src/${MODULE}" && PATH="${tmp}/bin:${PATH}" GOFLAGS=-mod=mod "${tmp}/bin/go-to-protobuf" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir "${tmp}/src" \
    --proto-import "${tmp}/src" \
    --proto-import "${gogo_dir}/protobuf" \
    --apimachinery-packages "-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1" \
    --packages "-k8s.io/api/core/v1,${MODULE}/pkg/apis/example/v1")
}
gen_protobuf

if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
  update_report="--update-report"
fi
kube::codegen::gen_openapi \
  --output-dir "${ROOT}/pkg/generated/openapi" \
  --output-pkg "${MODULE}/pkg/generated/openapi" \
  --report-filename "${ROOT}/api/api-rules/violation_exceptions.list" \
  --output-model-name-file "zz_generated.model_name.go" \
  --extra-pkgs k8s.io/api/core/v1 \
  --extra-pkgs k8s.io/api/autoscaling/v1 \
  ${update_report:+"${update_report}"} \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema <(go run "${MODULE}/pkg/generated/openapi/cmd/models-schema") \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"
