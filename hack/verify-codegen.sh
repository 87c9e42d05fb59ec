#!/usr/bin/env bash
# Fails when a generated file differs from what hack/update-codegen.sh makes:
# regenerates in a copy of the repository and diffs the two.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

# A copy without _output and .git: the generators only read the module.
tar -C "${ROOT}" --exclude=./_output --exclude=./.git -cf - . | tar -C "${TMP}" -xf -
"${TMP}/hack/update-codegen.sh"

ret=0
for dir in pkg api; do
  diff -Naupr "${ROOT}/${dir}" "${TMP}/${dir}" || ret=$?
done
if [[ ${ret} -eq 0 ]]; then
  echo "generated code is up to date"
else
  echo "generated code is out of date: run hack/update-codegen.sh" >&2
fi
exit ${ret}
