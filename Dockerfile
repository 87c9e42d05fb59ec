# syntax=docker/dockerfile:1
# The bases are build arguments so that a machine that cannot pull them (an
# air-gapped cluster, this project's CI) builds this same file from bases it
# made itself: hack/images.sh builds them from Debian's packages and the Go
# toolchain on the machine, and passes them here.
ARG BUILD_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
# Empty means the go command's default proxy.
ARG GOPROXY
ARG GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
# The instance manager: database pods' init container runs
# `/mydb-instance copy /mydb` from this image into an emptyDir (static, so it
# runs in the unmodified engine images).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/mydb-apiserver ./cmd/mydb-instance

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/mydb-apiserver /mydb-apiserver
COPY --from=build /out/mydb-instance /mydb-instance
USER 65532:65532
ENTRYPOINT ["/mydb-apiserver"]
