# awaken — durable execution of AI-agent tool calls on NATS JetStream.
SHELL := /bin/bash
GO ?= go
export GOTOOLCHAIN ?= local
export TESTCONTAINERS_RYUK_DISABLED ?= true
# -trimpath: no binary, test binary or vet result records this checkout's directory, so
# the Go build cache serves every clone of the repository alike (a fresh clone compiles
# only what changed) and the binaries are reproducible.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

BIN := bin
PKGS := ./...
FUZZTIME ?= 30s
CONFIG ?= examples/awaken.yaml

.PHONY: all build wasm schemas test test-short lint fmt vet fuzz run bench bench-scaling bench-e2e soak chaos chaos-cluster upgrade-cluster clean images linux-binaries compose-config

all: build

## build: the awaken binary (every service is a subcommand) and the example sandbox tools
build: wasm
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/awaken ./cmd/awaken

## wasm: the example WebAssembly tools (wc, sha256, jsonq) into bin/wasm
wasm:
	bash scripts/build-wasm-tools.sh $(BIN)/wasm

## schemas: the JSON Schemas of every payload, api body and the host configuration,
## derived from the Go types into schemas/ (internal/schemas tests fail when they drift)
schemas:
	$(GO) run ./cmd/awaken-schemas -out schemas

## test: the whole suite with the race detector (fuzz seed corpora included); the
## container suite (deploy/: Docker engine, images built FROM scratch) runs after the
## rest, so its containers do not starve the timing-sensitive embedded tests on 2 cores
CONTAINER_PKGS := ./deploy/
test: lint wasm
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -v '/deploy$$')
	cd examples/custom-brain && $(GO) test -race -count=1 -timeout 5m ./...   # its own module: public packages only
	cd adapters/openai && $(GO) test -race -count=1 -timeout 5m ./...   # provider SDKs live in their own modules
	cd adapters/anthropic && $(GO) test -race -count=1 -timeout 5m ./...
	cd adapters/eino && $(GO) test -race -count=1 -timeout 5m ./...
	$(GO) test -race -count=1 -timeout 10m $(CONTAINER_PKGS)

## test-short: the suite without the slow scenarios
test-short:
	$(GO) test -race -count=1 -short $(PKGS)

## lint: gofmt, go vet and the import rules
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd bench && $(GO) vet ./...   # the benchmark module (without the Temporal rows) builds too
	cd examples/custom-brain && $(GO) vet ./...   # an internal import fails here (another module)
	cd adapters/openai && $(GO) vet ./... && cd ../anthropic && $(GO) vet ./... && cd ../eino && $(GO) vet ./...
	cd examples/openai-agent && $(GO) vet ./... && cd ../anthropic-agent && $(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

## run: every service on an embedded NATS server with the example configuration.
## make run LISTEN=127.0.0.1:4333 HTTP=127.0.0.1:8081 DATA=/tmp/awaken CONFIG=my.yaml
## picks the NATS address, the HTTP address (HTTP= turns HTTP off), the data directory
## and the configuration; unset, awaken dev's defaults (and AWAKEN_* variables) apply.
given = $(filter command line,$(origin $(1)))
run: build
	$(BIN)/awaken dev --config $(CONFIG) $(if $(call given,LISTEN),--listen '$(LISTEN)') \
	  $(if $(call given,HTTP),--http '$(HTTP)') $(if $(call given,DATA),--data '$(DATA)')

## bench: pipeline vs floor vs tuned Temporal at two durability levels (synced, relaxed),
## the pipeline and floor on a 3-node cluster (R3, synced), single JetStream operations on
## one node and on the cluster, in-process calls, the write counts per call, large parallel
## batches, the brain-exec scale-out curve and the partition rows (bench-scaling); one table +
## bench/results/*.json (about 10 minutes). Its own module under bench/, so the main module
## never depends on Temporal.
## BENCHFLAGS passes options, e.g. BENCHFLAGS='-duration 5s -cpuprofile /tmp/cpu.pprof'.
BENCHFLAGS ?=
bench:
	@mkdir -p $(BIN)
	cd bench && $(GO) build -o ../$(BIN)/awaken-bench ./cmd/awaken-bench
	cd bench && $(GO) build -tags temporal -o ../$(BIN)/awaken-bench-temporal ./cmd/awaken-bench
	cd bench && ../$(BIN)/awaken-bench -temporal-bin ../$(BIN)/awaken-bench-temporal \
	  -config ../$(CONFIG) -out results $(BENCHFLAGS)

## bench-scaling: only the partition rows, synced: pipeline-pN and floor-pN for P = 1, 2, 4, 8
## on one node and pipeline-cluster-pN and floor-cluster-pN for P = 1, 3 on three nodes (R3);
## the table and bench/results/*.json in a few minutes (no Temporal build). BENCHFLAGS as for
## bench, e.g. BENCHFLAGS='-duration 10s'.
bench-scaling:
	@mkdir -p $(BIN)
	cd bench && $(GO) build -o ../$(BIN)/awaken-bench ./cmd/awaken-bench
	cd bench && ../$(BIN)/awaken-bench -rows scaling -config ../$(CONFIG) -out results $(BENCHFLAGS)

## soak: `bin/awaken dev` on the loopback with a fresh data directory and retention.default
## SOAK_RETENTION, driven by SOAK_WORKERS submitters of distinct 1- and 10-call echo runs
## until SOAK_CALLS calls or SOAK_DURATION; every SOAK_INTERVAL it samples each store's disk,
## messages and keys, the RSS and the probe batches' p50/p99, then restarts awaken dev on the
## same store and probes it for SOAK_RESTART (0: no restart). A table, and
## bench/results/soak-{timestamp}.json (a benchmark, not a test: it asserts nothing).
SOAK_CALLS ?= 100000
SOAK_DURATION ?= 30m
SOAK_RETENTION ?= 2m
SOAK_WORKERS ?= 16
SOAK_INTERVAL ?= 10s
SOAK_RESTART ?= 40s
soak: build
	cd bench && $(GO) build -o ../$(BIN)/awaken-soak ./cmd/awaken-soak
	cd bench && ../$(BIN)/awaken-soak -awaken ../$(BIN)/awaken -config ../$(CONFIG) -out results \
	  -calls $(SOAK_CALLS) -duration $(SOAK_DURATION) -retention $(SOAK_RETENTION) \
	  -workers $(SOAK_WORKERS) -interval $(SOAK_INTERVAL) -restart $(SOAK_RESTART)

## bench-e2e: the e2e Go benchmarks of the pipeline alone
bench-e2e:
	$(GO) test -run '^$$' -bench 'BenchmarkPipeline' -benchtime 200x -count 1 ./e2e/

## chaos: the full process-kill chaos run (1,000+ calls per variant, services and nats-server
## SIGKILLed) with the history checker, then the crash matrix; a short retention expires
## the records of finished runs during the run. Prints the checker's summary, the expiry
## evidence (archives and run records expired, messages aged out) and the dead letters
chaos:
	set -o pipefail; AWAKEN_CHAOS=full $(GO) test -race -count=1 -v -timeout 30m -run 'TestChaos' ./chaos/ | grep -E '^(checker:|expiry:|dead letters:|--- |ok|FAIL)|violation|seed'
	set -o pipefail; $(GO) test -race -count=1 -v -timeout 10m -run 'TestCrashMatrix' ./e2e/ | grep -E '^(crash matrix:|--- FAIL|ok|FAIL)|violation:|dead letter:|    --- FAIL'

## chaos-cluster: the 3-node JetStream cluster chaos run in containers (Docker engine, the
## images below, nothing pulled): 500+ batches of the chaos workload while stream and
## bucket leaders are stopped and SIGKILLed, nodes partitioned, frozen past the ack wait
## and replaced with an empty data directory (5+ of each); prints the checker's summary,
## one line per fault kind ending in violations=N, and the dead letters (the workload is
## valid, so any is work given up: it fails the run), with the records of finished runs
## expiring during the run (retention.runs 60s) and the expiry evidence. AWAKEN_CHAOS_SEED replays the
## workload and the fault schedule; AWAKEN_CHAOS_BATCHES and AWAKEN_CHAOS_REPEATS size it.
## The whole test log (each fault, container logs on failure) goes to bin/chaos-cluster.log.
chaos-cluster: images
	set -o pipefail; AWAKEN_CHAOS=cluster $(GO) test -count=1 -v -timeout 30m -run 'TestChaos_cluster' ./chaos/ \
	  | tee $(BIN)/chaos-cluster.log | grep -E '^(checker:|expiry:|fault |dead letters:|audit trail:|--- |ok|FAIL)|violation|seed|containers_test.go:'

## upgrade-cluster: the rolling upgrade of chaos/TestRollingUpgrade (previousVersion ↔ HEAD,
## under load, the history checker's verdict) on a 3-node JetStream cluster of nats-server
## processes on the loopback, every stream and bucket at 3 replicas (no Docker); `make test`
## runs the one-server variant
upgrade-cluster:
	set -o pipefail; AWAKEN_UPGRADE=cluster $(GO) test -race -count=1 -v -timeout 20m -run 'TestRollingUpgrade_cluster' ./chaos/ \
	  | grep -E '^(upgrade |--- |ok|FAIL)|upgrade_test.go:|violation'

## images: the two deployment images, FROM scratch, nothing pulled: awaken:dev (every
## service by subcommand, with the example configuration and wasm tools) and
## awaken-nats:$(NATS_VERSION) (nats-server built from the module pinned in go.mod)
LINUX := $(BIN)/linux
IMAGES_CTX := $(BIN)/images
AWAKEN_IMAGE ?= awaken:dev
NATS_VERSION := $(shell $(GO) list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2 | sed 's/^v//')
NATS_IMAGE ?= awaken-nats:$(NATS_VERSION)
# Static, stripped, with the time zone database (scratch has no /usr/share/zoneinfo).
LINUX_GO := CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -tags timetzdata -ldflags='-s -w'

linux-binaries:
	@mkdir -p $(LINUX)
	$(LINUX_GO) -o $(LINUX)/awaken ./cmd/awaken
	$(LINUX_GO) -o $(LINUX)/awaken-healthcheck ./cmd/awaken-healthcheck
	$(LINUX_GO) -o $(LINUX)/nats-server github.com/nats-io/nats-server/v2

images: wasm linux-binaries
	rm -rf $(IMAGES_CTX) && mkdir -p $(IMAGES_CTX)/awaken/wasm $(IMAGES_CTX)/awaken/data $(IMAGES_CTX)/nats/data
	cp $(LINUX)/awaken $(IMAGES_CTX)/awaken/
	cp $(BIN)/wasm/*.wasm $(IMAGES_CTX)/awaken/wasm/
	cp examples/awaken.yaml $(IMAGES_CTX)/awaken/
	cp $(LINUX)/nats-server $(LINUX)/awaken-healthcheck $(IMAGES_CTX)/nats/
	cp -r deploy/nats $(IMAGES_CTX)/nats/nats
	docker build -q -f deploy/awaken.Dockerfile -t $(AWAKEN_IMAGE) $(IMAGES_CTX)/awaken
	docker build -q -f deploy/nats.Dockerfile -t $(NATS_IMAGE) $(IMAGES_CTX)/nats
	@docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^($(AWAKEN_IMAGE)|$(NATS_IMAGE)) '

## compose-config: validate deploy/compose.yaml (both topologies)
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
compose-config:
	$(COMPOSE) -f deploy/compose.yaml config -q
	$(COMPOSE) -f deploy/compose.yaml --profile cluster config -q

clean:
	rm -rf $(BIN)
