# shellcheck shell=bash
# Go helpers for the hack/ scripts. Source it; it defines functions and runs
# nothing.

# golang::module_dir MODULE: prints the directory of MODULE, at the version
# the module in the current directory requires, downloading it first.
# `go list -m -f '{{.Dir}}'` alone prints an empty line for a module that is
# not in the module cache yet (a fresh machine, a new GOMODCACHE), which
# turned into paths like /kube_codegen.sh. Fails when there is no directory.
golang::module_dir() {
  local module=$1 dir
  go mod download "${module}" || return
  dir=$(go list -m -f '{{.Dir}}' "${module}") || return
  if [[ -z "${dir}" || ! -d "${dir}" ]]; then
    echo "golang::module_dir: no directory for module ${module} after go mod download" >&2
    return 1
  fi
  echo "${dir}"
}
