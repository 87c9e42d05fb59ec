#!/usr/bin/env bash
# Runs go test with the given arguments, its output both on the terminal and
# in $GOTEST_LOG (default _output/logs/gotest.log). When it fails, it ends by
# printing each failed test's own lines again, gathered from the interleaved
# -v output of parallel tests: a failure's message scrolled away minutes
# before the end is where a CI excerpt, which shows the end, can see it.
set -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=${GOTEST_LOG:-_output/logs/gotest.log}
mkdir -p "$(dirname "${log}")"
go test "$@" 2>&1 | tee "${log}"
rc=${PIPESTATUS[0]}
if [[ ${rc} -ne 0 ]]; then
	hack/lib/failed-tests.awk "${log}"
fi
exit "${rc}"
