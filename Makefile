# awaken — durable execution of AI-agent tool calls on NATS JetStream.
SHELL := /bin/bash
GO ?= go
export GOTOOLCHAIN ?= local
export TESTCONTAINERS_RYUK_DISABLED ?= true

BIN := bin
PKGS := ./...
FUZZTIME ?= 30s
CONFIG ?= examples/awaken.yaml

.PHONY: all build wasm test test-short lint fmt vet fuzz run bench bench-e2e chaos clean

all: build

## build: the awaken binary (every service is a subcommand) and the example sandbox tools
build: wasm
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/awaken ./cmd/awaken

## wasm: the example WebAssembly tools (wc, sha256, jsonq) into bin/wasm
wasm:
	bash scripts/build-wasm-tools.sh $(BIN)/wasm

## test: the whole suite with the race detector (fuzz seed corpora included)
test: lint wasm
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-short: the suite without the slow scenarios
test-short:
	$(GO) test -race -count=1 -short $(PKGS)

## lint: gofmt, go vet and the import rules
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

## run: every service on an embedded NATS server with the example configuration
run: build
	$(BIN)/awaken dev --config $(CONFIG)

## bench: pipeline vs floor vs Temporal vs in-process, one table + bench/results/*.json
## (its own module under bench/, so the main module never depends on Temporal).
## BENCHFLAGS passes options, e.g. BENCHFLAGS='-duration 5s -cpuprofile /tmp/cpu.pprof'.
BENCHFLAGS ?=
bench:
	@mkdir -p $(BIN)
	cd bench && $(GO) build -o ../$(BIN)/awaken-bench ./cmd/awaken-bench
	cd bench && $(GO) build -tags temporal -o ../$(BIN)/awaken-bench-temporal ./cmd/awaken-bench
	cd bench && ../$(BIN)/awaken-bench -temporal-bin ../$(BIN)/awaken-bench-temporal \
	  -config ../$(CONFIG) -out results $(BENCHFLAGS)

## bench-e2e: the e2e Go benchmarks of the pipeline alone
bench-e2e:
	$(GO) test -run '^$$' -bench 'BenchmarkPipeline' -benchtime 200x -count 1 ./e2e/

## chaos: the full process-kill chaos run (1,000+ calls per variant, services and nats-server
## SIGKILLed) with the history checker, then the crash matrix; prints the checker's summary
chaos:
	set -o pipefail; AWAKEN_CHAOS=full $(GO) test -race -count=1 -v -timeout 30m -run 'TestChaos' ./chaos/ | grep -E '^(checker:|--- |ok|FAIL)|violation|seed'
	$(GO) test -race -count=1 -timeout 10m -run 'TestCrashMatrix' ./e2e/

clean:
	rm -rf $(BIN)
