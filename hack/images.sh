#!/usr/bin/env bash
# Builds the container images the real node of hack/local-up.sh runs, on this
# machine, from Debian's packages and the project's own Dockerfile (no
# registry can be reached): each is saved as a docker archive under
# _output/images/<name>.tar and rebuilt only when its recipe (the lines of
# this script that make it, or for mydb the sources) changes.
#
#   pause           Kubernetes' own pause (build/pause/linux/pause.c of the
#                   k8s.io/kubernetes module), static, as registry.k8s.io's
#   busybox         busybox-static, for local-path-provisioner's helper pods
#   golang          the Dockerfile's build stage base: Debian + the Go
#                   toolchain of this machine (golang:1.26's layout)
#   static          the Dockerfile's runtime base: what
#                   gcr.io/distroless/static-debian12:nonroot holds that a
#                   static binary needs (CA bundle, passwd with nonroot 65532)
#   mydb            the project's Dockerfile, built with buildah from the two
#                   bases above: mydb-apiserver and mydb-instance
#   postgres-15, postgres-17, mariadb-10.11, mariadb-11.8, mysql-9.7
#                   engine images laid out like the official ones (see
#                   engine_image below); postgres-17 carries 15's server
#                   too, for pg_upgrade
#
# Usage: hack/images.sh [NAME...]   (default: pause busybox mydb postgres-15)
#        hack/images.sh --ref NAME  (the reference NAME is tagged with)
# Env:   IMAGES_DIR (default _output/images), IMAGE_PREFIX (default mydb.local)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGES_DIR=${IMAGES_DIR:-"${ROOT}/_output/images"}
IMAGE_PREFIX=${IMAGE_PREFIX:-mydb.local}
KUBE_VERSION=v1.37.2
mkdir -p "${IMAGES_DIR}"
log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

# buildah keeps its store under IMAGES_DIR, apart from any other on the machine.
buildah() {
  command buildah --root "${IMAGES_DIR}/storage" --runroot "${IMAGES_DIR}/run" --storage-driver vfs "$@"
}

# image_ref NAME: the reference an image is tagged with (postgres-15 ->
# mydb.local/postgres:15).
image_ref() {
  local name=$1
  case "${name}" in
    pause) echo "${IMAGE_PREFIX}/pause:3.10" ;;
    golang) echo "${IMAGE_PREFIX}/golang:$(go env GOVERSION | sed 's/^go//')" ;;
    static) echo "${IMAGE_PREFIX}/static:nonroot" ;;
    mydb | busybox) echo "${IMAGE_PREFIX}/${name}:dev" ;;
    *-*) echo "${IMAGE_PREFIX}/${name%%-*}:${name#*-}" ;;
  esac
}

# --ref NAME prints the reference NAME is tagged with, and builds nothing.
if [[ "${1:-}" == --ref ]]; then
  image_ref "$2"
  exit 0
fi

# One run at a time: two would race on the same store and archives.
exec 8>"${IMAGES_DIR}/.images.lock"
flock 8

# fresh NAME RECIPE: true when NAME was made from RECIPE (a string whose
# hash stands for everything the image is made from) and is still there: its
# archive, or for the Dockerfile's bases (never loaded into a node) the
# image in buildah's store.
fresh() {
  local sum
  sum=$(printf '%s' "$2" | sha256sum | cut -d' ' -f1)
  [[ "$(cat "${IMAGES_DIR}/$1.recipe" 2>/dev/null)" == "${sum}" ]] || return 1
  case "$1" in
    golang | static) buildah inspect --type image "$(image_ref "$1")" >/dev/null 2>&1 ;;
    *) [[ -s "${IMAGES_DIR}/$1.tar" ]] ;;
  esac
}
done_with() {
  printf '%s' "$2" | sha256sum | cut -d' ' -f1 >"${IMAGES_DIR}/$1.recipe"
}

# save NAME: writes the image tagged image_ref NAME as a docker archive,
# which `ctr images import` loads under that name.
save() {
  local ref
  ref=$(image_ref "$1")
  rm -f "${IMAGES_DIR}/$1.tar.tmp"
  buildah push --quiet "${ref}" "docker-archive:${IMAGES_DIR}/$1.tar.tmp:${ref}" >/dev/null
  mv "${IMAGES_DIR}/$1.tar.tmp" "${IMAGES_DIR}/$1.tar"
}

# from_rootfs NAME DIR CONFIG...: an image of the single layer DIR (owners
# and modes kept), with buildah config flags CONFIG.
from_rootfs() {
  local name=$1 dir=$2 ctr mnt
  shift 2
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "${ctr}")
  cp -a "${dir}/." "${mnt}/"
  buildah umount "${ctr}" >/dev/null
  buildah config "$@" "${ctr}"
  buildah commit --quiet --rm "${ctr}" "$(image_ref "${name}")" >/dev/null
}

# debootstrap_tree DIR SUITE PACKAGES [HOOK]: a Debian root filesystem of
# SUITE with PACKAGES (comma-separated) in DIR; HOOK runs in it (chroot)
# once the essential packages are in, before the others, where the engines'
# users are made with the ids the official images give them. SUITE may be
# SUITE+OLDER: the packages only OLDER has come from it, with the libraries
# they need that SUITE lacks (apt picks each package's newest version), as
# Debian installs an older PostgreSQL major beside a newer one for
# pg_upgrade.
debootstrap_tree() {
  local dir=$1 suite=$2 packages=$3 hook=${4:-true} mirrors=()
  if [[ "${suite}" == *+* ]]; then
    mirrors=("deb http://deb.debian.org/debian ${suite%%+*} main" "deb http://deb.debian.org/debian ${suite#*+} main")
    suite=${suite%%+*}
  fi
  rm -rf "${dir}"
  # The mirror may be a snapshot: sid's Release file then carries a
  # Valid-Until in the past. Its signature is still checked.
  mmdebstrap --variant=apt --include="${packages}" --aptopt='Acquire::Check-Valid-Until "false"' \
    --essential-hook="chroot \"\$1\" sh -c '${hook}'" \
    --customize-hook='chroot "$1" sh -c "apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/* /var/log/*"' \
    "${suite}" "${dir}" "${mirrors[@]}" >"${dir}.log" 2>&1 || { tail -20 "${dir}.log" >&2; die "mmdebstrap ${suite} failed (log ${dir}.log)"; }
}

# system_user NAME UID HOME: the lines that make a user and its group with
# these ids (useradd is not among the essential packages).
system_user() {
  echo "echo $1:x:$2:$2::$3:/bin/bash >>/etc/passwd && echo $1:x:$2: >>/etc/group && echo $1:*:19000:0:99999:7::: >>/etc/shadow"
}

build_pause() {
  local src recipe dir="${IMAGES_DIR}/pause.rootfs"
  # Downloaded first: `go list -m` prints no directory for a module not in
  # the module cache yet.
  src="$(cd "${ROOT}/hack/tools" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  [[ -f "${src}" ]] || die "no ${src} in the k8s.io/kubernetes module"
  recipe="$(sha256sum "${src}") $(declare -f build_pause)"
  fresh pause "${recipe}" && return
  log "building $(image_ref pause) from Kubernetes ${KUBE_VERSION}'s pause.c"
  rm -rf "${dir}"; mkdir -p "${dir}"
  gcc -Os -Wall -Werror -static -DVERSION="${KUBE_VERSION}" -o "${dir}/pause" "${src}"
  strip "${dir}/pause"
  from_rootfs pause "${dir}" --entrypoint '["/pause"]' --user 65535:65535
  save pause
  done_with pause "${recipe}"
}

build_busybox() {
  local recipe dir="${IMAGES_DIR}/busybox.rootfs" suite
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME}")
  recipe="${suite} $(declare -f build_busybox debootstrap_tree)"
  fresh busybox "${recipe}" && return
  log "building $(image_ref busybox) from ${suite}'s busybox-static"
  local tree="${IMAGES_DIR}/busybox.debian"
  debootstrap_tree "${tree}" "${suite}" busybox-static
  rm -rf "${dir}"; mkdir -p "${dir}/bin" "${dir}/tmp"
  cp "${tree}/bin/busybox" "${dir}/bin/busybox"
  chroot "${dir}" /bin/busybox --install -s /bin
  rm -rf "${tree}"
  from_rootfs busybox "${dir}" --cmd '["/bin/sh"]'
  save busybox
  done_with busybox "${recipe}"
}

build_golang() {
  local recipe dir="${IMAGES_DIR}/golang.rootfs" suite goroot
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME}")
  goroot=$(go env GOROOT)
  recipe="${suite} $(go env GOVERSION) $(sha256sum /etc/ssl/certs/ca-certificates.crt) $(declare -f build_golang debootstrap_tree)"
  fresh golang "${recipe}" && return
  log "building $(image_ref golang): ${suite} with $(go env GOVERSION) from ${goroot}"
  debootstrap_tree "${dir}" "${suite}" ca-certificates,git
  mkdir -p "${dir}/usr/local" "${dir}/go"
  cp -a "${goroot}" "${dir}/usr/local/go"
  # The machine's trust, which may hold a CA of its own network's (a proxy
  # to the Go module proxy), as a build machine's image would.
  cp /etc/ssl/certs/ca-certificates.crt "${dir}/etc/ssl/certs/ca-certificates.crt"
  from_rootfs golang "${dir}" --env GOPATH=/go --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --workingdir /go
  rm -rf "${dir}"
  done_with golang "${recipe}"
}

build_static() {
  local recipe dir="${IMAGES_DIR}/static.rootfs"
  recipe="$(sha256sum /etc/ssl/certs/ca-certificates.crt) $(declare -f build_static)"
  fresh static "${recipe}" && return
  log "building $(image_ref static): a CA bundle and the nonroot user"
  rm -rf "${dir}"; mkdir -p "${dir}/etc/ssl/certs" "${dir}/tmp" "${dir}/home/nonroot"
  chmod 1777 "${dir}/tmp"
  chown 65532:65532 "${dir}/home/nonroot"
  cp /etc/ssl/certs/ca-certificates.crt "${dir}/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"${dir}/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"${dir}/etc/group"
  from_rootfs static "${dir}" --user 65532:65532 --workingdir /home/nonroot
  done_with static "${recipe}"
}

# build_mydb: the project's Dockerfile, as a user would build it, with the
# bases made here. The Dockerfile's cache mounts (RUN --mount=type=cache) are
# this machine's own Go module and build caches: buildah keeps a cache mount
# under $TMPDIR/buildah-cache/<target>, so with TMPDIR under IMAGES_DIR and
# those targets linked to the caches, the build stage reuses what the host
# already compiled with the same toolchain and flags (CGO_ENABLED=0,
# -trimpath; the Makefile's): on a machine with empty caches that saves
# compiling mydb's dependency graph a second time (about 4 minutes here).
link_buildah_caches() {
  local cache=$1
  mkdir -p "${cache}/root/.cache" "${cache}/go/pkg" "$(go env GOCACHE)" "$(go env GOMODCACHE)"
  ln -sfn "$(go env GOCACHE)" "${cache}/root/.cache/go-build"
  ln -sfn "$(go env GOMODCACHE)" "${cache}/go/pkg/mod"
}

build_mydb() {
  build_golang
  build_static
  local recipe
  recipe="$(cd "${ROOT}" && git ls-files -co --exclude-standard Dockerfile go.mod go.sum cmd pkg | xargs sha256sum | sha256sum) $(image_ref golang) $(declare -f build_mydb link_buildah_caches)"
  fresh mydb "${recipe}" && return
  log "building $(image_ref mydb) from the Dockerfile (buildah)"
  local start=${SECONDS}
  local tmp="${IMAGES_DIR}/tmp"
  link_buildah_caches "${tmp}/buildah-cache"
  TMPDIR=${tmp} buildah bud --quiet --isolation=chroot --layers \
    --build-arg BUILD_IMAGE="$(image_ref golang)" --build-arg RUNTIME_IMAGE="$(image_ref static)" \
    --build-arg GOPROXY="$(go env GOPROXY)" \
    -t "$(image_ref mydb)" -f "${ROOT}/Dockerfile" "${ROOT}" >"${IMAGES_DIR}/mydb.log" 2>&1 ||
    { tail -30 "${IMAGES_DIR}/mydb.log" >&2; die "building the Dockerfile failed (log ${IMAGES_DIR}/mydb.log)"; }
  save mydb
  done_with mydb "${recipe}"
  log "built $(image_ref mydb) in $((SECONDS - start))s"
}

# engine_image NAME SUITE PACKAGES USER UID HOOK CONFIG...: an engine's image
# laid out like the official one: the engine's user and group with the
# official image's uid and gid (999), made before the packages so that
# they own their files; the binaries on PATH; no default instance.
engine_image() {
  local name=$1 suite=$2 packages=$3 user=$4 uid=$5 hook=$6 recipe dir="${IMAGES_DIR}/${name}.rootfs"
  shift 6
  recipe="${suite} ${packages} ${user} ${uid} ${hook} $* $(declare -f engine_image debootstrap_tree from_rootfs system_user)"
  fresh "${name}" "${recipe}" && return
  log "building $(image_ref "${name}") from ${suite}'s ${packages}"
  local start=${SECONDS}
  debootstrap_tree "${dir}" "${suite}" "${packages}" "$(system_user "${user}" "${uid}" "/var/lib/${user}") && ${hook}"
  from_rootfs "${name}" "${dir}" --user "${uid}:${uid}" "$@"
  rm -rf "${dir}"
  save "${name}"
  done_with "${name}" "${recipe}"
  log "built $(image_ref "${name}") in $((SECONDS - start))s"
}

# Debian's postgresql-common makes a "main" cluster when a server package is
# installed; the official image turns that off the same way.
no_main_cluster='mkdir -p /etc/postgresql-common && echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf'
postgres_config() {
  local v=$1
  echo --env "PATH=/usr/lib/postgresql/${v}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --env PGDATA=/var/lib/postgresql/data --env LANG=C.UTF-8 --cmd '["postgres"]'
}

build_one() {
  case "$1" in
    pause) build_pause ;;
    busybox) build_busybox ;;
    golang) build_golang ;;
    static) build_static ;;
    mydb) build_mydb ;;
    # shellcheck disable=SC2046
    postgres-15) engine_image postgres-15 bookworm postgresql-15 postgres 999 "${no_main_cluster}" $(postgres_config 15) ;;
    # shellcheck disable=SC2046
    # PostgreSQL 15's server beside 17's, from bookworm: what pg_upgrade
    # runs the old data with (docs/operations.md#major-versions).
    postgres-17) engine_image postgres-17 trixie+bookworm postgresql-17,postgresql-15 postgres 999 "${no_main_cluster}" $(postgres_config 17) ;;
    mariadb-10.11) engine_image mariadb-10.11 bookworm mariadb-server,mariadb-backup mysql 999 true --env LANG=C.UTF-8 --cmd '["mariadbd"]' ;;
    mariadb-11.8) engine_image mariadb-11.8 trixie mariadb-server,mariadb-backup mysql 999 true --env LANG=C.UTF-8 --cmd '["mariadbd"]' ;;
    mysql-9.7) engine_image mysql-9.7 sid mysql-server mysql 999 true --env LANG=C.UTF-8 --cmd '["mysqld"]' ;;
    *) die "unknown image $1" ;;
  esac
}

command -v buildah >/dev/null || die "buildah not found: hack/install-deps.sh installs it"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: hack/install-deps.sh installs it"
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(pause busybox mydb postgres-15)
for name in "${wanted[@]}"; do
  build_one "${name}"
done
log "images ready in ${IMAGES_DIR}: $(printf '%s ' "${wanted[@]}")"
