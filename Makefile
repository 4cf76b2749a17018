# retryring — build, test and run everything from a fresh clone.
# The two commands a newcomer needs: `make demo` and `make test`.

SHELL := /bin/bash
GO ?= go
BIN := bin
GOLANGCI_LINT_VERSION := v2.15.0
# The chart checks: helm from the Go module proxy, kubernetes-validate from PyPI in bin/venv.
HELM_VERSION := v3.21.4
KUBERNETES_VALIDATE_VERSION := 1.37.0
CHART := deploy/helm/retryring
export CASSANDRA_COMMITLOG_SYNC ?= batch
export CASSANDRA_TOMBSTONE_WARN ?= 100
# Go test timeout for the whole suite of one package. The worker package took 19 min once at a load
# average of 11 (its 100,000-row tombstone acceptance test alone 16 min); alone it takes 6-10.
TEST_TIMEOUT ?= 30m

.PHONY: all build test test-unit test-go lint vet fmt demo chaos bench bench-ring bench-cluster bench-flow bench-swarm clean \
        chart-check image image-deps cassandra-fetch cassandra-start cassandra-stop cassandra-status cassandra-drain cassandra-kill cassandra-logs conformance-deps chromium \
        cassandra-cluster-start cassandra-cluster-stop cassandra-cluster-status test-cluster

all: build

# The version and commit `retryring version` prints, from git; a build outside git (go install)
# falls back to the module's build information.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/retryring ./cmd/retryring

# The image (Dockerfile): named and tagged as the chart deploys it by default (image.repository,
# and the chart's appVersion as image.tag). Debian's buildah builds it without a daemon, in a storage
# of its own under bin/image (vfs: no overlay mounts, which a container may refuse); nothing is
# pulled. The binary is built here, static, with the version and commit of `make build`. Then
# `docker load -i bin/image/retryring-<tag>.docker.tar`, or `podman load -i ...oci.tar`.
IMAGE_DIR := $(BIN)/image
IMAGE_CONTEXT := $(IMAGE_DIR)/context
IMAGE_REPOSITORY := docker.io/retryring/retryring
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml)
IMAGE_ARCHIVE := $(IMAGE_DIR)/retryring-$(IMAGE_TAG)
BUILDAH := buildah --root $(abspath $(IMAGE_DIR))/storage --runroot $(abspath $(IMAGE_DIR))/run --storage-driver vfs

image-deps:
	@command -v buildah >/dev/null && test -s /etc/ssl/certs/ca-certificates.crt || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah ca-certificates; }

image: image-deps
	@test -n "$(IMAGE_TAG)" || { echo "image: no appVersion in $(CHART)/Chart.yaml: set IMAGE_TAG"; exit 1; }
	mkdir -p $(IMAGE_CONTEXT)/home $(IMAGE_CONTEXT)/var/lib
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGE_CONTEXT)/retryring ./cmd/retryring
	cp /etc/ssl/certs/ca-certificates.crt deploy/image/passwd deploy/image/group $(IMAGE_CONTEXT)/
	$(BUILDAH) bud --quiet --isolation chroot -f Dockerfile --build-arg VERSION=$(VERSION) --build-arg REVISION=$(COMMIT) \
		-t $(IMAGE_REPOSITORY):$(IMAGE_TAG) $(IMAGE_CONTEXT)
	rm -f $(IMAGE_ARCHIVE).docker.tar $(IMAGE_ARCHIVE).oci.tar
	$(BUILDAH) push --quiet $(IMAGE_REPOSITORY):$(IMAGE_TAG) docker-archive:$(IMAGE_ARCHIVE).docker.tar:$(IMAGE_REPOSITORY):$(IMAGE_TAG)
	$(BUILDAH) push --quiet $(IMAGE_REPOSITORY):$(IMAGE_TAG) oci-archive:$(IMAGE_ARCHIVE).oci.tar:$(IMAGE_REPOSITORY):$(IMAGE_TAG)
	@# The images this tag named before take only room (one a leftover container uses stays).
	@$(BUILDAH) rmi --prune >/dev/null 2>&1 || true
	@echo "image $(IMAGE_REPOSITORY):$(IMAGE_TAG) (retryring $(VERSION), commit $(COMMIT)): $(IMAGE_ARCHIVE).docker.tar, $(IMAGE_ARCHIVE).oci.tar"

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

$(BIN)/golangci-lint:
	GOBIN=$(abspath $(BIN)) GOFLAGS= $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(BIN)/golangci-lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...

# Everything: a real Cassandra (started if not running), the JS conformance client, Debian's chromium for
# the ring page's browser test (required here, skipped by a plain `go test` without it), the image (its
# tests in deploy/image run a coordinator from it: required here too), all Go tests with -race.
test: build image cassandra-start conformance-deps chromium chart-check
	$(GO) vet ./...
	# FuzzRSocketServerRawBytes's seeds close connections under answers being sent: rsocket-go's
	# DuplexConnection.Close races its own sendFrame (a send it recovers from, but -race reports it;
	# seen once in make test), so that target runs on the coordinator's line without -race below.
	# ./docs runs the marked blocks of README.md and docs/operations.md with bin/retryring (built above),
	# bin/helm and bin/venv (chart-check), each file in a network namespace of its own (root, as here).
	RETRYRING_REQUIRE_BROWSER=1 RETRYRING_REQUIRE_HELM=1 RETRYRING_REQUIRE_IMAGE=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '^FuzzRSocketServerRawBytes$$' $$($(GO) list ./... | grep -v /e2e)
	# The test build of the wall clock (package wallclock; the e2e suite builds the binary with the tag).
	RETRYRING_TEST_CLOCK_SKEW=-900ms $(GO) test -race -count=1 -tags skewclock ./wallclock
	# The end-to-end suite restarts the shared Cassandra in one scenario, so it runs alone, after the rest.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./e2e/...
	# This regression test provokes a race inside reactor-go on purpose, so it runs without -race.
	$(GO) test -count=1 -run TestConnectionClosingDuringSubscribe ./worker/leaseclient
	# A hundred lease clients dialling at once trip a race inside rsocket-go's client setup; this
	# fleet failover scenario is built without -race (testkit/ringtest/fleet_test.go says why).
	$(GO) test -count=1 -run TestFailoverWithHundredClientsChangesNoAssignment ./testkit/ringtest
	# The flood of bad clients beside two real workers (30 s, issue 10), and real lease clients
	# refused at SETUP for their certificates: rsocket-go's client races with itself when a SETUP is
	# rejected (coordinator/tls_refused_test.go says how), so these run without -race too.
	$(GO) test -count=1 -run 'TestFloodBesideTwoRealWorkers|TestTLSRefuses|TestCertificateBinds|TestWorkerBindingRequired|TestTLSWorkerAgainstAPlain|FuzzRSocketServerRawBytes' ./coordinator

$(BIN)/helm:
	GOBIN=$(abspath $(BIN)) GOFLAGS= $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(BIN)/venv/bin/kubernetes-validate:
	python3 -m venv $(BIN)/venv
	$(BIN)/venv/bin/pip install --quiet --disable-pip-version-check kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION)

# The Helm chart: lint, render with the default values plus the authentication the chart requires
# (ci/auth-values.yaml) and with the TLS values, and validate every rendered manifest offline
# against the Kubernetes schemas (strict: unknown fields fail). The Go tests of deploy/helm parse
# the renderings back and check them (run by `test`, or alone with
# `RETRYRING_REQUIRE_HELM=1 go test ./deploy/helm`).
chart-check: $(BIN)/helm $(BIN)/venv/bin/kubernetes-validate
	$(BIN)/helm lint --strict $(CHART) -f $(CHART)/ci/auth-values.yaml
	$(BIN)/helm lint --strict $(CHART) -f $(CHART)/ci/tls-values.yaml
	$(BIN)/helm template retryring $(CHART) --namespace retryring -f $(CHART)/ci/auth-values.yaml > $(BIN)/chart-default.yaml
	$(BIN)/helm template retryring $(CHART) --namespace retryring -f $(CHART)/ci/tls-values.yaml > $(BIN)/chart-tls.yaml
	$(BIN)/venv/bin/kubernetes-validate --strict --quiet $(BIN)/chart-default.yaml $(BIN)/chart-tls.yaml

# Pure and loopback tests only (no Cassandra); quick feedback while editing.
test-unit:
	$(GO) test -race -count=1 ./lease/... ./fsm/... ./window/...

cassandra-fetch:
	scripts/cassandra.sh fetch

cassandra-start:
	scripts/cassandra.sh start

cassandra-stop:
	scripts/cassandra.sh stop

cassandra-status:
	scripts/cassandra.sh status

cassandra-drain:
	scripts/cassandra.sh drain

cassandra-kill:
	scripts/cassandra.sh kill

cassandra-logs:
	scripts/cassandra.sh logs

# A cluster of CASSANDRA_CLUSTER_NODES (3) nodes on 127.0.0.2 and up, beside the single node of
# `make test` (docs/cassandra.md, "A cluster on loopback"); CASSANDRA_CLUSTER_DCS=2 splits it into
# two datacenters. About 4 GB of memory for three nodes.
cassandra-cluster-start:
	scripts/cassandra.sh cluster-start

cassandra-cluster-stop:
	scripts/cassandra.sh cluster-stop

cassandra-cluster-status:
	scripts/cassandra.sh cluster-status

# The data plane on Cassandra clusters (e2e, build tag cluster): three nodes of one datacenter
# (schema apply with dc1=3, a drain with a node killed mid-drain, two of three nodes down), then four
# nodes in two datacenters (TestClusterTwoRegions). Each layout starts on fresh data (cluster-wipe;
# a running cluster makes it refuse) and is stopped and wiped at the end, whatever the tests did.
# Not in `make test` (the cluster takes most of a small machine); see docs/cassandra.md for its time.
TWO_DCS := CASSANDRA_CLUSTER_NODES=4 CASSANDRA_CLUSTER_DCS=2
CLUSTER_TEST = E2E_BIN=$(abspath $(BIN))/retryring $(GO) test -race -count=1 -v -tags cluster -timeout $(TEST_TIMEOUT)
test-cluster: build
	scripts/cassandra.sh cluster-wipe
	scripts/cassandra.sh cluster-start
	status=0; $(CLUSTER_TEST) -run '^TestCluster' -skip '^TestClusterTwoRegions$$' ./e2e || status=$$?; \
	scripts/cassandra.sh cluster-stop; scripts/cassandra.sh cluster-wipe || exit 1; \
	if $(TWO_DCS) scripts/cassandra.sh cluster-start; then \
		$(TWO_DCS) $(CLUSTER_TEST) -run '^TestClusterTwoRegions$$' ./e2e || status=$$?; \
	else status=1; fi; \
	$(TWO_DCS) scripts/cassandra.sh cluster-stop; $(TWO_DCS) scripts/cassandra.sh cluster-wipe; exit $$status

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

conformance-deps:
	@if [ -f conformance/js/package.json ]; then cd conformance/js && npm ci --no-audit --no-fund --loglevel=error; fi

# The main job on one machine: Cassandra (started if needed), 3 coordinators, 3 workers, a burst of
# 20,000 failures, a worker kill -9 and a leader kill, then a summary (about 2 minutes; non-zero
# exit if anything was lost). DEMO_FLAGS adds flags, e.g. DEMO_FLAGS="--count 5000 --keep".
demo: build cassandra-start
	$(BIN)/retryring demo $(DEMO_FLAGS)

# The long chaos run (issue 4): >=5 min and >=100,000 failures while faults hit on a schedule (worker
# SIGKILL/SIGSTOP/SIGTERM, leader SIGKILL, quorum loss, Cassandra SIGKILL, a worker added, a 503 phase);
# prints lost, executed twice, the longest lease gap and the time to drain. It kills the shared
# Cassandra: run it alone. Full log in bin/chaos.log.
chaos: build cassandra-start
	set -o pipefail; E2E_LONG=1 E2E_BIN=$(abspath $(BIN))/retryring $(GO) test -count=1 -timeout 60m -v -run '^TestChaos$$' ./e2e 2>&1 \
		| tee $(BIN)/chaos.log | grep -E '^(chaos report|  [a-z]|--- |ok|FAIL)'

# Data-plane figures of docs/benchmarks.md (ring coordinator figures: go run ./bench/ringbench).
bench: build cassandra-start
	$(GO) run ./bench/recorder -instances 10 -count 60000 -goroutines 16 -rounds 2
	$(GO) run ./bench/rss -windows 3 -instances 5 -rows 10000 -concurrency 100
	$(GO) run ./bench/drain -total 150000 -segment 15000 -workers 1,3 -impl ours,naive,naive+markers

bench-ring: build
	$(GO) run ./bench/ringbench -timing old,new

# Figure 19: the drain on the 3-node cluster (RF 3, LOCAL_QUORUM) vs the shared single node and a
# single node of the cluster nodes' settings on 127.0.0.5 (512M heap, commitlog_sync periodic), with
# the CPU of each process class, then a drain with node 3 SIGKILLed and restarted against one
# without (~25 minutes on 2 busy cores). Starts the cluster on fresh data and the extra node, and
# stops and wipes both after, as test-cluster does.
OWN_NODE = CASSANDRA_HOME_DIR=$(abspath .cassandra-own) CASSANDRA_LIB_DIR=$(abspath .cassandra/lib) \
	CASSANDRA_LISTEN_ADDRESS=127.0.0.5 CASSANDRA_JMX_PORT=7399 CASSANDRA_HEAP=512M CASSANDRA_CLUSTER_NAME=retryring-own
bench-cluster: cassandra-start
	scripts/cassandra.sh cluster-wipe
	scripts/cassandra.sh cluster-start
	$(OWN_NODE) scripts/cassandra.sh start
	$(GO) run ./bench/drain -cluster 127.0.0.2:9042,127.0.0.3:9042,127.0.0.4:9042 -own 127.0.0.5:9042 -impl ours \
		-total 15000 -segment 15000 -workers 1,3 -kill-node 3 -kill-after 20s -restart-after 10s -recovery-total 120000; \
	status=$$?; $(OWN_NODE) scripts/cassandra.sh stop; rm -rf .cassandra-own; \
	scripts/cassandra.sh cluster-stop; scripts/cassandra.sh cluster-wipe; exit $$status

# Figures 6-9 (replay, outage, rate limit, pause): real processes and the shared Cassandra, ~40 minutes.
bench-flow: build cassandra-start
	$(GO) run ./bench/replay -dead 10000 -rate 500 -baseline-rate
	$(GO) run ./bench/outage -count 20000 -outage 5m -binary $(BIN)/retryring -variant breaker= -variant no-breaker=--no-breaker
	$(GO) run ./bench/flow -binary $(BIN)/retryring

# Figure 10: 200 and 1,000 lease clients through a join storm, a leader kill and a rolling restart (~10 minutes).
bench-swarm: build
	$(GO) run ./bench/swarm -workers 200,1000 -timing new,old -binary $(BIN)/retryring

clean:
	rm -rf $(BIN)
