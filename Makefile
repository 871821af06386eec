# gpu-gang: `make help` lists the targets.
#
# Never add -trimpath: the in-process kube-apiserver used by the tests and the
# simulator finds its serving certificates through runtime.Caller.

SHELL := /usr/bin/env bash -o pipefail -o errexit -o nounset
GO    ?= go
BIN   := $(CURDIR)/bin

# Unit tests are cheap to build, so they run with the race detector. The
# integration package links kube-apiserver; with -race its first build would
# take twice as long, so it runs without.
UNIT_PKGS        := ./pkg/... ./cmd/... ./manifests/... ./hack/extend-crd-status/...
INTEGRATION_PKGS := ./test/integration/...
# The in-process API server lives as long as the test binary's deadline.
INTEGRATION_TIMEOUT ?= 45m

# The simulator's scenario for `make demo`; SCENARIOS for `make bench`.
SCENARIO  ?= scenarios/default.yaml
SCENARIOS ?= $(sort $(wildcard scenarios/s*.yaml))

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Main job

.PHONY: demo
demo: simulator ## Run the simulator on the default scenario: gpu-gang vs default vs in-tree on an embedded control plane.
	$(BIN)/simulator --scenario $(SCENARIO)

.PHONY: simulator
simulator: ## Build the simulator and kwok into bin/.
	@source hack/lib/tools.sh && tools::ensure kwok >/dev/null
	$(GO) build -o $(BIN)/simulator ./cmd/simulator

##@ Build

.PHONY: build
build: ## Build the scheduler and the PodGroup status controller into bin/.
	$(GO) build -o $(BIN)/gpu-gang-scheduler ./cmd/scheduler
	$(GO) build -o $(BIN)/podgroup-controller ./cmd/podgroup-controller

.PHONY: tools
tools: ## Build the pinned helper binaries (controller-gen, kwok, training-operator) into bin/.
	@source hack/lib/tools.sh && for t in controller-gen kwok training-operator; do tools::ensure $$t >/dev/null; done

.PHONY: test-binaries
test-binaries: ## Build kwok, training-operator and the scheduler into bin/ for the integration tests (cached).
	@source hack/lib/tools.sh && tools::ensure kwok >/dev/null && tools::ensure training-operator >/dev/null
	$(GO) build -o $(BIN)/gpu-gang-scheduler ./cmd/scheduler

##@ Test

.PHONY: test
test: test-unit test-integration ## Run every test: unit (with -race) and integration (real kube-apiserver).

.PHONY: test-unit
test-unit: ## Run the unit tests with the race detector.
	$(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: test-integration
test-integration: test-binaries ## Run the integration tests against an in-process etcd and kube-apiserver.
	$(GO) test -count=1 -timeout $(INTEGRATION_TIMEOUT) $(INTEGRATION_PKGS)

.PHONY: bench
bench: bench-micro bench-scenarios ## Run every benchmark: micro-benchmarks, then scenarios S1-S6 in the simulator.

.PHONY: bench-micro
bench-micro: ## Run the micro-benchmarks (QueueSort, capacity pre-check, topology planner).
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS)

.PHONY: bench-scenarios
bench-scenarios: simulator ## Run scenarios S1-S6 through every profile; reports go to _output/simulator/.
	@for f in $(SCENARIOS); do echo "== $$f"; $(BIN)/simulator --scenario $$f || exit 1; done

.PHONY: bench-soak
bench-soak: test-binaries ## Run the fault suite's soak for 10 minutes (GPU_GANG_SOAK_DURATION, GPU_GANG_SOAK_SEED to change).
	GPU_GANG_SOAK_DURATION=$${GPU_GANG_SOAK_DURATION:-10m} $(GO) test -count=1 -timeout 60m -run '^TestFaultSoak$$' -v ./test/integration

.PHONY: bench-go
bench-go: ## Run S1-S3 as go test benchmarks (benchstat-comparable; takes long).
	@source hack/lib/tools.sh && tools::ensure kwok >/dev/null
	$(GO) test -tags bench -run '^$$' -bench 'S[123]' -benchtime 1x -timeout 3h ./test/bench

##@ Code health

.PHONY: verify
verify: ## Check gofmt, go vet, go mod tidy and generated files.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	hack/verify-generated.sh

.PHONY: generate
generate: ## Regenerate the PodGroup CRD and deepcopy code.
	hack/update-crds.sh
	hack/update-deepcopy.sh
