# mydb: an aggregated Kubernetes API server for databases.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := build

OUTPUT   ?= _output
BIN      := $(OUTPUT)/bin
IMAGE    ?= mydb-apiserver
TAG      ?= dev
GOFLAGS_TEST ?= -p 2 -count=1
# One set of build flags for go vet, go test, the binaries and the image's
# build stage (the Dockerfile's): a package compiled once is reused by all of
# them, which on a machine with empty caches saves compiling the dependency
# graph a second time (cgo would change net and all above it, -trimpath every
# package). Nothing here needs cgo: the binaries are static.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(GOFLAGS)

.PHONY: build
build: ## Build mydb-apiserver, mydb-instance and the kubectl-mydb plugin into _output/bin.
	go build -o $(BIN)/mydb-apiserver ./cmd/mydb-apiserver
	go build -o $(BIN)/mydb-instance ./cmd/mydb-instance
	go build -o $(BIN)/kubectl-mydb ./cmd/kubectl-mydb

.PHONY: tools
tools: ## Build the control-plane binaries (etcd, kube-*, kubectl, kwok) and the test S3 server (weed) once into _output/bin.
	hack/build-tools.sh

.PHONY: test
test: ## Unit and integration tests (integration starts a real etcd, the object store tests a real S3 server).
	hack/build-tools.sh etcd weed
	go test $(GOFLAGS_TEST) ./pkg/... ./cmd/... ./test/integration/... ./test/tcpproxy/... ./test/repo/... ./test/stats/...
	cd test/bench && go test $(GOFLAGS_TEST) ./...

.PHONY: test-engines
test-engines: ## The instance manager against real PostgreSQL, MariaDB (and MariaDB 10.11 -> 11.8 from their images) and MySQL 9.7 (from its engine image's root filesystem) and a real S3 server (as root; hack/install-deps.sh installs them).
	hack/install-deps.sh
	hack/build-tools.sh weed
	hack/images.sh mysql-9.7 mariadb-10.11 mariadb-11.8
	go build -o $(BIN)/mydb-instance ./cmd/mydb-instance
	MYDB_INSTANCE_BIN=$(abspath $(BIN)/mydb-instance) GOTEST_LOG=$(OUTPUT)/logs/test-engines.log hack/gotest.sh $(GOFLAGS_TEST) -v -timeout 20m -tags engines ./test/engines/...

.PHONY: fuzz
fuzz: ## Fuzz decoding, defaulting and validation for FUZZTIME (default 30s) from the committed corpus.
	go test -run='^$$' -fuzz=FuzzDecodeValidate -fuzztime=$(or $(FUZZTIME),30s) ./pkg/apis/example/install/

# E2E_PARALLEL: how many of the e2e tests that call t.Parallel run at a time
# (the ones that disturb shared things run first, alone). Most of a test's
# time is waiting for the control plane and the rig's instances.
E2E_PARALLEL ?= 4

.PHONY: e2e
e2e: ## End-to-end tests through a real kube-apiserver's aggregation layer (starts or reuses make local-up with kwok's nodes, whose loopback pod IPs the rig serves on).
	MYDB_NODE=kwok hack/local-up.sh
	hack/build-tools.sh weed etcdutl prometheus
	go build -o $(BIN)/kubectl-mydb ./cmd/kubectl-mydb
	go build -o $(BIN)/mydb-instance ./cmd/mydb-instance
	GOTEST_LOG=$(OUTPUT)/logs/e2e.log hack/gotest.sh $(GOFLAGS_TEST) -parallel $(E2E_PARALLEL) -v -timeout 30m -tags e2e ./test/e2e/...

.PHONY: e2e-long
e2e-long: ## The switchover and failover figures of docs/replication.md: 10 of each per engine under Sync (MYDB_E2E_LONG=1, ~7 min).
	MYDB_NODE=kwok hack/local-up.sh
	go build -o $(BIN)/mydb-instance ./cmd/mydb-instance
	MYDB_E2E_LONG=1 go test $(GOFLAGS_TEST) -v -timeout 40m -tags e2e -run 'TestSyncFailoverLosesNoAcknowledgedWrite' ./test/e2e/...

# The fault suite runs on a control plane of its own (LOCAL_DIR
# _output/faults) whose mydb etcd has three members, on ports FAULTS_PORT_BASE
# + the last three digits of local-up's defaults (default base 21500: 21747 to
# 21944) and pod IPs from FAULTS_POD_CIDR, so it never disturbs the control
# plane of make local-up, whatever ports that one was given. It is taken down
# afterwards, whether the test passed or not.
FAULTS_DIR := $(abspath $(OUTPUT))/faults
FAULTS_PORT_BASE ?= 21500
FAULTS_POD_CIDR ?= 127.21.0.0/16
faults_port = $(shell echo $$(($(FAULTS_PORT_BASE)+$(1))))
FAULTS_ENV = LOCAL_DIR=$(FAULTS_DIR) MYDB_NODE=kwok MYDB_ETCD_MEMBERS=3 POD_CIDR=$(FAULTS_POD_CIDR) \
	ETCD_PORT=$(call faults_port,379) ETCD_PEER_PORT=$(call faults_port,380) \
	MYDB_ETCD_PORT=$(call faults_port,381) MYDB_ETCD_PEER_PORT=$(call faults_port,382) \
	KUBE_APISERVER_PORT=$(call faults_port,443) MYDB_PORT=$(call faults_port,444) \
	KUBE_CONTROLLER_MANAGER_PORT=$(call faults_port,257) KUBE_SCHEDULER_PORT=$(call faults_port,259) \
	KWOK_PORT=$(call faults_port,247)

.PHONY: test-faults
test-faults: ## Fault suite on its own control plane, under load: kill -9 members of a 3-member TLS etcd (fsync on), rolling restarts of mydb-apiserver replicas (with watches, and with database tunnels open), a 30 s cut between the aggregator and mydb, SIGSTOP of the controllers' leader past its lease during 100 spec changes (~6 min; MYDB_E2E_LONG=1: 20 kill cycles, 10 restarts, 200 changes).
	go build -o $(BIN)/mydb-instance ./cmd/mydb-instance
	rc=0; $(FAULTS_ENV) hack/local-up.sh && E2E_LOCAL_DIR=$(FAULTS_DIR) E2E_KUBECONFIG=$(FAULTS_DIR)/kubeconfig \
		GOTEST_LOG=$(OUTPUT)/logs/test-faults.log hack/gotest.sh $(GOFLAGS_TEST) -v -timeout 30m -tags e2e,faults -run 'TestEtcdMember|TestRollingRestarts|TestACutBetweenTheAggregatorAndMydb|TestFrozenLeader|TestTunnelsThroughRestartsOfMydb' ./test/e2e/... || rc=$$?; \
	$(FAULTS_ENV) hack/local-down.sh; exit $$rc

# The real-node suite runs on a control plane of its own (LOCAL_DIR
# _output/node-test, ports NODE_PORT_BASE + the last three digits of
# local-up's defaults, 22247 to 22444 by default) with a real node
# (MYDB_NODE=real: containerd, kubelet, kube-proxy, CoreDNS,
# local-path-provisioner, images built by hack/images.sh), so it never
# disturbs make local-up's; it is taken down afterwards, passed or not.
NODE_TEST_DIR := $(abspath $(OUTPUT))/node-test
NODE_PORT_BASE ?= 22000
node_port = $(shell echo $$(($(NODE_PORT_BASE)+$(1))))
NODE_ENV = LOCAL_DIR=$(NODE_TEST_DIR) MYDB_NODE=real NODE_ENGINE_IMAGES="postgres-15 postgres-17 mariadb-10.11 mariadb-11.8 mysql-9.7" \
	ETCD_PORT=$(call node_port,379) ETCD_PEER_PORT=$(call node_port,380) \
	MYDB_ETCD_PORT=$(call node_port,381) MYDB_ETCD_PEER_PORT=$(call node_port,382) \
	KUBE_APISERVER_PORT=$(call node_port,443) MYDB_PORT=$(call node_port,444) \
	KUBE_CONTROLLER_MANAGER_PORT=$(call node_port,257) KUBE_SCHEDULER_PORT=$(call node_port,259) \
	KWOK_PORT=$(call node_port,247) KUBELET_PORT=$(call node_port,250) KUBELET_HEALTHZ_PORT=$(call node_port,248) \
	KUBE_PROXY_HEALTHZ_PORT=$(call node_port,256) KUBE_PROXY_METRICS_PORT=$(call node_port,249) \
	COREDNS_HEALTH_PORT=$(call node_port,253)

.PHONY: test-node
test-node: ## The database scenarios on a real node, through the aggregation layer, with the pods as mydb wrote them (its own control plane; MYDB_NODE=real).
	go build -o $(BIN)/kubectl-mydb ./cmd/kubectl-mydb
	rc=0; $(NODE_ENV) hack/local-up.sh && E2E_LOCAL_DIR=$(NODE_TEST_DIR) E2E_KUBECONFIG=$(NODE_TEST_DIR)/kubeconfig \
		GOTEST_LOG=$(OUTPUT)/logs/test-node.log hack/gotest.sh $(GOFLAGS_TEST) -v -timeout 30m -tags e2e,node -run 'TestNode' ./test/e2e/... || rc=$$?; \
	$(NODE_ENV) hack/local-down.sh; exit $$rc

# test/bench is a Go module of its own (test/bench/go.mod), so that gonum/plot
# stays out of the server's go.mod: it is built there and run from here, where
# its default paths (_output/local, _output/bench) are.
BENCH_BIN := $(BIN)/mydb-bench

.PHONY: bench-build
bench-build: ## Build the benchmark harness (module test/bench) into _output/bin/mydb-bench.
	cd test/bench && go build -o "$(abspath $(BENCH_BIN))" .

.PHONY: bench
# The command as the report quotes it, passed in the environment: a note
# with quotes or parentheses in BENCH_ARGS would break a shell assignment.
bench: export BENCH_COMMAND = make bench$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')
bench: bench-build ## Measure on the local control plane (starts or reuses make local-up with kwok's nodes); BENCH_ARGS=-large for the issue's sizes.
	MYDB_NODE=kwok hack/local-up.sh
	$(BENCH_BIN) -docs docs/benchmarks.md -chart docs/benchmarks.png $(BENCH_ARGS)

.PHONY: ci
ci: verify test test-engines fuzz e2e test-faults test-node ## Everything CI runs.

.PHONY: local-up
local-up: ## Bring up etcd, kube-apiserver, controller-manager, scheduler, a node (real where the machine can run it, MYDB_NODE=kwok for fake ones) and mydb-apiserver.
	hack/local-up.sh

.PHONY: local-down
local-down: ## Stop what local-up started.
	hack/local-down.sh

.PHONY: image
image: ## Build the container image (needs a Docker engine).
	docker build -t $(IMAGE):$(TAG) .

.PHONY: verify
verify: verify-gofmt verify-vet verify-codegen verify-deps ## All static checks.

.PHONY: verify-gofmt
verify-gofmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: update-gofmt
update-gofmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify-vet
verify-vet:
	go vet ./...
	go vet -tags e2e ./test/e2e/...
	go vet -tags e2e,faults ./test/e2e/...
	go vet -tags e2e,node ./test/e2e/...
	go vet -tags engines ./test/engines/...
	cd test/bench && go vet ./...

.PHONY: verify-codegen
verify-codegen:
	hack/verify-codegen.sh

.PHONY: update-codegen
update-codegen:
	hack/update-codegen.sh

.PHONY: verify-deps
verify-deps:
	go mod tidy -diff
	cd hack/tools && go mod tidy -diff
	cd hack/tools/kwok && go mod tidy -diff
	cd test/bench && go mod tidy -diff

.PHONY: update-deps
update-deps:
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/tools/kwok && go mod tidy
	cd test/bench && go mod tidy

.PHONY: clean
clean: ## Remove build output (keeps nothing cached).
	rm -rf $(OUTPUT)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-14s %s\n", $$1, $$2}'
