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
UNIT_PKGS        := ./pkg/... ./cmd/... ./docs ./manifests ./hack/extend-crd-status/...
INTEGRATION_PKGS := ./test/integration/... ./manifests/rbactest/...
# The in-process API server lives as long as the test binary's deadline.
INTEGRATION_TIMEOUT ?= 45m

# What `make image` builds and `make push` pushes: IMAGE is the reference,
# VERSION and COMMIT are stamped into the binaries (--version) and the
# image's labels, SOURCE_DATE_EPOCH (the commit's time) dates the image so
# that one commit always gives one digest.
VERSION           ?= v0.1.0
COMMIT            ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
IMAGE             ?= ghcr.io/gpu-gang/gpu-gang:$(VERSION)
IMAGE_ARCH        ?= $(shell $(GO) env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
VERSION_LDFLAGS   := -X github.com/gpu-gang/gpu-gang/pkg/version.version=$(VERSION) -X github.com/gpu-gang/gpu-gang/pkg/version.commit=$(COMMIT)

# Go modules of their own, each with tests `make test` runs: the image
# builder (go-containerregistry) and the Helm chart test (the Helm SDK).
# Their dependencies would move versions the scheduler is built with.
IMAGE_MODULE    := hack/image
# How many times bench-scenarios runs each scenario.
RUNS ?= 1
# Build tags of the main module's files; make verify vets with all of them, so
# that no tagged file rots unseen (hack/verify-build-tags.sh checks the list).
VERIFY_TAGS     := bench
HELMTEST_MODULE := hack/helmtest

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
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/gpu-gang-scheduler ./cmd/scheduler
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/podgroup-controller ./cmd/podgroup-controller

.PHONY: image
image: ## Build the image (both binaries, static, non-root) into _output/image/ as an OCI layout and a docker-load tarball; no Docker needed.
	$(GO) build -C $(IMAGE_MODULE) -o $(BIN)/image-builder .
	$(BIN)/image-builder build --repo . --out _output/image --image $(IMAGE) \
		--version $(VERSION) --commit $(COMMIT) --created $(SOURCE_DATE_EPOCH) --arch $(IMAGE_ARCH)

.PHONY: push
push: image ## Build the image and push it: IMAGE=registry/name:tag make push (credentials from ~/.docker/config.json).
	$(BIN)/image-builder push --out _output/image --image $(IMAGE)

.PHONY: tools
tools: ## Build the pinned helper binaries (controller-gen, kwok, training-operator) into bin/.
	@source hack/lib/tools.sh && for t in controller-gen kwok training-operator; do tools::ensure $$t >/dev/null; done

.PHONY: test-binaries
test-binaries: ## Build kwok, training-operator and the scheduler into bin/ for the integration tests (cached).
	@source hack/lib/tools.sh && tools::ensure kwok >/dev/null && tools::ensure training-operator >/dev/null
	$(GO) build -o $(BIN)/gpu-gang-scheduler ./cmd/scheduler

##@ Test

.PHONY: test
test: test-unit test-integration test-snapshot test-image test-chart ## Run every test: unit (with -race), integration (real kube-apiserver), the simulator on a cluster snapshot, the image and the Helm chart.

.PHONY: test-unit
test-unit: ## Run the unit tests with the race detector.
	$(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: test-integration
test-integration: test-binaries ## Run the integration tests against an in-process etcd and kube-apiserver.
	$(GO) test -count=1 -timeout $(INTEGRATION_TIMEOUT) $(INTEGRATION_PKGS)

.PHONY: test-snapshot
test-snapshot: simulator ## Run the shipped cluster snapshot through the built simulator (gpu-gang, default, in-tree) and check the results.
	GPU_GANG_SIMULATOR=$(BIN)/simulator $(GO) test -count=1 -run '^TestSnapshotRun$$' ./cmd/simulator

.PHONY: test-image
test-image: ## Build the image in a temporary directory and check its config, files and binaries (runs them with --version).
	cd $(IMAGE_MODULE) && $(GO) test -count=1 ./...

.PHONY: test-chart
test-chart: ## Render the Helm chart with the Helm SDK and compare it with the kustomize install, object by object.
	cd $(HELMTEST_MODULE) && $(GO) test -count=1 ./...

.PHONY: test-browser
test-browser: ## Open the simulator's HTML report in headless Chromium (installed with apt-get if missing) and check it.
	@command -v chromium >/dev/null || { echo "installing chromium (Debian package)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	GPU_GANG_REQUIRE_BROWSER=1 $(GO) test -count=1 -run 'InBrowser' -v ./pkg/simulator/report/

.PHONY: bench
bench: bench-micro bench-scenarios ## Run every benchmark: micro-benchmarks, then scenarios S1-S14 in the simulator.

.PHONY: bench-micro
bench-micro: ## Run the micro-benchmarks (QueueSort, capacity pre-check on extended resources and on DRA devices, topology planner).
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS)

.PHONY: bench-scenarios
bench-scenarios: simulator ## Run scenarios S1-S14 (every scenarios/s*.yaml) through their profiles, RUNS times each (median and range, with machine and date); reports go to _output/simulator/.
	@for f in $(SCENARIOS); do echo "== $$f"; $(BIN)/simulator --scenario $$f --runs $(RUNS) || exit 1; done

.PHONY: bench-soak
bench-soak: test-binaries ## Run the fault suite's soak for 10 minutes (GPU_GANG_SOAK_DURATION, GPU_GANG_SOAK_SEED to change).
	GPU_GANG_SOAK_DURATION=$${GPU_GANG_SOAK_DURATION:-10m} $(GO) test -count=1 -timeout 60m -run '^TestFaultSoak$$' -v ./test/integration

.PHONY: bench-go
bench-go: test-binaries ## Run S1-S3 as go test benchmarks (benchstat-comparable; takes long).
	$(GO) test -tags bench -run '^$$' -bench 'S[123]' -benchtime 1x -timeout 3h ./test/bench

##@ Code health

.PHONY: verify
verify: ## Check gofmt, go vet (every build tag too), go mod tidy and generated files.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	hack/verify-build-tags.sh $(VERIFY_TAGS)
	$(GO) vet -tags '$(VERIFY_TAGS)' ./...
	$(GO) mod tidy -diff
	@for m in $(IMAGE_MODULE) $(HELMTEST_MODULE); do echo "(cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff)"; (cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff) || exit 1; done
	hack/verify-generated.sh

.PHONY: generate
generate: ## Regenerate the PodGroup CRD and deepcopy code.
	hack/update-crds.sh
	hack/update-deepcopy.sh
