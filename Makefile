# Rondo's build. `make run` runs the main job, `make test` runs every test.
GO      ?= go
BIN     := $(CURDIR)/bin
GOFILES  = $(shell git ls-files '*.go' 2>/dev/null)

.PHONY: all deps build run test vet fmt-check bench nomad gpu-check clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -o $(BIN)/rondo ./cmd/rondo

# The main job on the embedded default cluster.
run: build
	$(BIN)/rondo demo

# Every test: formatting, vet, unit and property tests under the race
# detector, and the end-to-end tests against a real Nomad.
test: deps fmt-check vet nomad
	NOMAD_BIN=$(BIN)/nomad $(GO) test -race -count=1 -timeout 60m ./...

# A Nomad binary built from the module version in go.mod (first build takes
# minutes; Go's build cache makes later ones quick).
nomad:
	$(GO) build -o $(BIN)/nomad github.com/hashicorp/nomad

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3x ./policies/...

# Build the device plugin and fingerprint once against real NVML (or, with
# GPU_CHECK_ARGS="-fake device-plugin/testdata/mixed.hcl", the fake backend).
gpu-check:
	GO=$(GO) BIN=$(BIN) scripts/gpu-check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf $(BIN)
