# Rondo's build. `make run` runs the main job, `make test` runs every test.
GO      ?= go
BIN     := $(CURDIR)/bin
GOFILES  = $(shell git ls-files '*.go' 2>/dev/null)
# The build's version (internal/version): git describe where git and the
# repository are there, else "dev".
VERSION ?= $(shell git describe --always --dirty --tags 2>/dev/null || echo dev)
LDFLAGS := -X github.com/rondo-sched/rondo/internal/version.Version=$(VERSION)

.PHONY: all deps build client run test test-long chaos vet fmt-check bench bench-nomad nomad gpu-check clean dl2-model dl2-experiments preemption-experiments screenshots

all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/rondo ./cmd/rondo
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/nomad-device-rondo ./cmd/nomad-device-rondo
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/rondo-trainer ./cmd/rondo-trainer

# The client binary (bin/rondo-client): status, job, vc status, node status,
# config validate (-nomad), policy list, version. Built without COIN-OR Clp
# (-tags noclp) and without cgo: one static file to copy onto any host; the
# commands that solve (agent, simulate, policy solve, demo) say to use the
# full binary. Needs no deps. cmd/rondo's TestClientBinary builds it.
client:
	CGO_ENABLED=0 $(GO) build -tags noclp -ldflags "$(LDFLAGS)" -o $(BIN)/rondo-client ./cmd/rondo

# The main job: a local Nomad cluster with fake GPUs, the agent, jobs/.
run: build nomad
	$(BIN)/rondo demo -bin $(BIN) -jobs jobs

# A nomad binary in bin/: a working one from NOMAD_BIN or /tmp/nomad-bin,
# else built from the module cache (about 5 minutes the first time).
nomad:
	@mkdir -p $(BIN); if [ -x $(BIN)/nomad ]; then :; \
	elif [ -n "$$NOMAD_BIN" ] && "$$NOMAD_BIN" version >/dev/null 2>&1; then ln -sf "$$NOMAD_BIN" $(BIN)/nomad; \
	elif /tmp/nomad-bin version >/dev/null 2>&1; then ln -sf /tmp/nomad-bin $(BIN)/nomad; \
	else echo "building nomad (about 5 minutes)"; $(GO) build -o $(BIN)/nomad github.com/hashicorp/nomad; fi

# Every test: formatting, vet, unit and property tests under the race
# detector, and the end-to-end tests against a real Nomad. -parallel 4:
# e2e's parallel tests (e2e/README.md) wait on Nomad and rounds, not CPU.
test: deps fmt-check vet nomad
	NOMAD_BIN=$(BIN)/nomad $(GO) test -race -count=1 -parallel 4 -timeout 60m ./...

# The full-size checks that `make test` runs scaled down: every test named
# TestLong* (they skip unless RONDO_LONG is set). No -race: they are long
# simulations. Results are recorded in docs/checks.md.
test-long: deps nomad
	RONDO_LONG=1 NOMAD_BIN=$(BIN)/nomad $(GO) test -count=1 -timeout 120m -v -run '^TestLong' ./allocator/... ./e2e/
	RONDO_DL2_STATES=1000000 $(GO) test -count=1 -timeout 60m -v -run '^TestPolicyNeverOvercommits$$' ./policies/dl2/

# The chaos soak (#18, docs/chaos.md): 20 jobs on a local Nomad cluster,
# 100 kill -9 of the agent at every phase of the round, 10 Nomad server
# restarts, 10 client losses; asserts no job lost, none run twice, nothing
# going backwards, every job finished. The kill log and every agent's log
# go to bin/chaos/. About 30 minutes; `make test` runs a short version
# (3 kills, one server restart, one client loss).
chaos: deps nomad
	RONDO_CHAOS=1 RONDO_CHAOS_OUT=$(BIN)/chaos NOMAD_BIN=$(BIN)/nomad $(GO) test -count=1 -timeout 90m -v -run '^TestChaosOnNomad$$' ./e2e/

# DL2: the shipped model (policies/dl2/default-model.json.gz) and the
# experiments of docs/dl2.md (docs/dl2/).
dl2-model: build
	$(BIN)/rondo dl2 train -out $(BIN)/dl2-model.json -curve docs/dl2/curve-default.json
	gzip -9 -n -c $(BIN)/dl2-model.json > policies/dl2/default-model.json.gz

dl2-experiments: deps
	RONDO_DL2_EXPERIMENTS=1 $(GO) test -count=1 -timeout 120m -v -run '^TestDL2Experiments$$' ./cmd/rondo/

# Preemption that respects the work: the experiments of docs/preemption.md
# (docs/preemption/results.json and the document's results tables; about a
# minute).
preemption-experiments: deps
	RONDO_PREEMPTION_EXPERIMENTS=1 $(GO) test -count=1 -timeout 30m -v -run '^TestPreemptionExperiments$$' ./cmd/rondo/

# Screenshots of the web status page for the README (docs/figures/ui-*.png):
# TestWebUIOnNomad with RONDO_SCREENSHOTS set runs a few short jobs to their
# end, lets the plots fill and saves the overview, the job table, the VCs
# and a job's timeline from headless Chromium; about 3 minutes. Not part of
# `make test`.
screenshots: deps nomad
	RONDO_SCREENSHOTS=$(CURDIR)/docs/figures NOMAD_BIN=$(BIN)/nomad $(GO) test -count=1 -timeout 20m -v -run '^TestWebUIOnNomad$$' ./e2e/

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3x ./policies/...

# The allocator's round against a real Nomad at 200 and 1,000 jobs
# (docs/performance.md); not part of `make test`.
bench-nomad: deps nomad
	RONDO_BENCH=200,1000 NOMAD_BIN=$(BIN)/nomad $(GO) test -count=1 -run TestScaleBench -v -timeout 30m ./e2e/

# Build the device plugin and fingerprint once against real NVML (or, with
# GPU_CHECK_ARGS="-fake device-plugin/testdata/mixed.hcl", the fake backend).
gpu-check:
	GO=$(GO) BIN=$(BIN) scripts/gpu-check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf $(BIN)
