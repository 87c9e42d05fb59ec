# syntax=docker/dockerfile:1
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mydb-apiserver ./cmd/mydb-apiserver
# The instance manager: database pods' init container runs
# `/mydb-instance copy /mydb` from this image into an emptyDir (static, so it
# runs in the unmodified engine images).
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mydb-instance ./cmd/mydb-instance

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mydb-apiserver /mydb-apiserver
COPY --from=build /out/mydb-instance /mydb-instance
USER 65532:65532
ENTRYPOINT ["/mydb-apiserver"]
