GO ?= go
BIN := bin/dractl
# `make test` runs each fuzz target for FUZZTIME_SHORT executions (a count,
# not a duration: a loaded machine must not turn the check into a few
# executions), and `make fuzz` for FUZZTIME.
FUZZTIME_SHORT ?= 500x
FUZZTIME ?= 30s
EXAMPLES := $(sort $(wildcard examples/*/))

.PHONY: all build driver binsize test demo fmt-check vet tidy-check unit scheduler-test scheduler-1.38 scheduler-test-1.38 fuzz fuzz-short golden docs conformance conformance-test bench bench-schedperf chromium node-packages report-screenshot e2e e2e-golden e2e-matrix bench-e2e bench-startup scheduler schedperf manifests soak images

all: build

# The version comes from git so that `dractl version` names the commit even
# when the toolchain does not stamp VCS information (GOFLAGS=-buildvcs=false).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/dractl/dractl/internal/cli.version=$(VERSION)) $(if $(COMMIT),-X github.com/dractl/dractl/internal/cli.commit=$(COMMIT))

# How bin/ is built, as the images build it. -s -w: no symbol table or
# DWARF, a third of each file (a debugger needs a build without them).
# -trimpath: no build machine's paths. grpcnotrace: gRPC (the kubelet
# plugin's) without golang.org/x/net/trace, whose debug pages are
# html/template: with a template's reflective method calls reachable, the
# linker keeps every exported method of every type a binary converts to
# an interface, 23 MB of the driver and of the publisher. gRPC traces only
# under grpc.EnableTracing, which nothing here sets.
RELEASE_FLAGS := -trimpath -tags grpcnotrace
RELEASE_LDFLAGS := -s -w

build:
	$(GO) build $(RELEASE_FLAGS) -ldflags '$(RELEASE_LDFLAGS) $(LDFLAGS)' -o $(BIN) ./cmd/dractl

# The partitionable GPU driver (deploy/driver/ runs it as a DaemonSet) and
# the control-plane publisher of pools no node owns (a Deployment there).
driver:
	$(GO) build $(RELEASE_FLAGS) -ldflags '$(RELEASE_LDFLAGS)' -o bin/dractl-gpu-driver ./cmd/dractl-gpu-driver
	$(GO) build $(RELEASE_FLAGS) -ldflags '$(RELEASE_LDFLAGS)' -o bin/dractl-pool-publisher ./cmd/dractl-pool-publisher

# The binaries of bin/ stay under these sizes (bytes, built as above on
# linux/amd64; about 10 % over what they are): a dependency that drags in
# a tree of packages, or code that makes the linker keep every method,
# shows here.
# The GPU driver's 46 MB (38 MB before) are its /metrics behind delegated
# authentication and authorization (pkg/ops/delegatedauth), which links
# k8s.io/apiserver's server options as kube-scheduler's endpoint does.
# The packages refused are ones such a change brought in before: kubectl's
# cli-runtime (with kustomize), and x/net/trace (its html/template).
SIZE_LIMITS := dractl=74000000 dractl-gpu-driver=51000000 dractl-pool-publisher=39000000
SIZE_REFUSED := k8s.io/cli-runtime/ sigs.k8s.io/kustomize/ golang.org/x/net/trace
binsize:
	@dir=$$(mktemp -d); trap 'rm -rf $$dir' EXIT; \
	for lim in $(SIZE_LIMITS); do \
		cmd=$${lim%%=*}; max=$${lim#*=}; \
		refused=$$($(GO) list $(RELEASE_FLAGS) -deps ./cmd/$$cmd | grep -F $(foreach p,$(SIZE_REFUSED),-e $(p))); \
		if [ -n "$$refused" ]; then \
			echo "$$cmd links $$(echo "$$refused" | wc -l) packages it must not: $$(echo "$$refused" | head -n 4 | tr '\n' ' ')..."; exit 1; \
		fi; \
		$(GO) build $(RELEASE_FLAGS) -ldflags '$(RELEASE_LDFLAGS)' -o $$dir/$$cmd ./cmd/$$cmd || exit 1; \
		size=$$(stat -c %s $$dir/$$cmd); \
		echo "$$cmd: $$size bytes (limit $$max)"; \
		if [ $$size -gt $$max ]; then echo "$$cmd is $$size bytes, over its limit of $$max: find what it links now (go tool nm -size -sort size)"; exit 1; fi; \
	done

# kube-scheduler with dractl's DRA plugin; its own module (scheduler/), which
# requires k8s.io/kubernetes.
scheduler:
	$(GO) -C scheduler build -o ../bin/dractl-scheduler .
	@bin/dractl-scheduler --version | grep -q 'for Kubernetes 1.37 ' || { echo "bin/dractl-scheduler is not the 1.37 build" >&2; exit 1; }

# The same sources for Kubernetes 1.38 (scheduler/k8s138: kube-scheduler
# v1.38.0-beta.0, Go 1.27 from the module proxy, the k8s138 build tag that
# picks each per-minor file; docs/versions.md). The 1.37 side keeps
# building on the machine's Go.
GOTOOLCHAIN_138 := go1.27.3
scheduler-1.38:
	GOTOOLCHAIN=$(GOTOOLCHAIN_138) $(GO) -C scheduler/k8s138 build -tags k8s138 -o ../../bin/dractl-scheduler-1.38 .
	@bin/dractl-scheduler-1.38 --version | grep -q 'for Kubernetes 1.38 ' || { echo "bin/dractl-scheduler-1.38 is not the 1.38 build" >&2; exit 1; }

# The plugin's, the scheduler command's and the CEL environment's tests
# compiled against kube-scheduler 1.38.
scheduler-test-1.38: scheduler-1.38
	GOTOOLCHAIN=$(GOTOOLCHAIN_138) $(GO) -C scheduler/k8s138 vet -tags k8s138 . github.com/dractl/dractl/pkg/scheduler/schedplugin github.com/dractl/dractl/pkg/core/cel github.com/dractl/dractl/scheduler/app
	GOTOOLCHAIN=$(GOTOOLCHAIN_138) $(GO) -C scheduler/k8s138 test -tags k8s138 -count=1 github.com/dractl/dractl/pkg/scheduler/schedplugin github.com/dractl/dractl/pkg/core/cel github.com/dractl/dractl/scheduler/app

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

test: fmt-check vet tidy-check binsize chromium unit fuzz-short scheduler-test scheduler-test-1.38 e2e

# The scheduler module's own tests: the effective plugin order of every
# configuration in deploy/scheduler, built by kube-scheduler's code.
scheduler-test:
	$(GO) -C scheduler vet ./...
	$(GO) -C scheduler test -count=1 ./...

# Every module's go.mod and go.sum must be tidy: `go mod tidy -diff` prints
# what tidy would change and fails if anything would. scheduler/k8s138
# needs Go 1.27.
tidy-check:
	@for mod in $$(git ls-files '*go.mod' 2>/dev/null || find . -name go.mod); do \
		dir=$$(dirname $$mod); echo "go mod tidy -diff ($$dir)"; \
		if [ "$$dir" = ./scheduler/k8s138 ] || [ "$$dir" = scheduler/k8s138 ]; then \
			(cd $$dir && GOTOOLCHAIN=$(GOTOOLCHAIN_138) $(GO) mod tidy -diff) || exit 1; \
		else \
			(cd $$dir && $(GO) mod tidy -diff) || exit 1; \
		fi; \
	done

# The HTML report of `dractl simulate` is checked in headless Chromium
# (Debian's chromium package), installed here when missing.
CHROMIUM_FLAGS := --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync
chromium:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium for the HTML report test"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || { echo "error: chromium is not installed (apt-get install chromium)" >&2; exit 1; }

# The real nodes of e2e/ (framework.Node) run containers with Debian's runc
# and build their workload image from Debian's static busybox; both are
# installed here when missing. containerd and the kubelet are built by the
# tests themselves, once, into bin/node.
NODE_PACKAGES := runc busybox-static
node-packages:
	@if ! command -v runc >/dev/null 2>&1 || ! dpkg -s busybox-static >/dev/null 2>&1; then \
		echo "installing Debian's $(NODE_PACKAGES) for the real nodes of e2e"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_PACKAGES) >/dev/null; \
	fi
	@command -v runc >/dev/null 2>&1 || { echo "error: runc is not installed (apt-get install runc)" >&2; exit 1; }
	@dpkg -s busybox-static >/dev/null 2>&1 || { echo "error: busybox-static is not installed (apt-get install busybox-static)" >&2; exit 1; }

# Rewrites internal/cli/testdata/*.golden from the current behaviour; review
# the diff before committing it.
golden:
	$(GO) test ./internal/cli -run 'TestCommands|TestExamples|TestGetClaimsAndDevices' -update

# Fuzz targets are discovered rather than listed so that a new Fuzz function
# is fuzzed without touching this file. `go test -list` prints a package's
# targets followed by its "ok <package>" line, which is what the awk pairs up.
#
# Minimization is off: the engine minimizes every input that finds new
# coverage, for up to 60 s each by default, without counting those runs,
# and early in a run nearly every mutation finds new coverage, so a short
# run did nothing but minimize (about 15 counted executions in 5 s). A run
# that counts fewer than FUZZ_MIN_EXECS executions fails: the target is no
# longer fuzzing in its budget (with a count budget, the engine stopped
# early).
FUZZ_MIN_EXECS ?= 100
define run-fuzz
	@targets=$$($(GO) test -list '^Fuzz' ./pkg/... ./internal/... | \
		awk '/^Fuzz/ { t[n++] = $$1 } /^ok/ { for (i = 0; i < n; i++) print $$2 "," t[i]; n = 0 }'); \
	if [ -z "$$targets" ]; then echo "no fuzz targets"; fi; \
	log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for pt in $$targets; do \
		pkg=$${pt%%,*}; t=$${pt#*,}; \
		echo "fuzz $$pkg $$t ($(1))"; \
		$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(1) -fuzzminimizetime=0 $$pkg > $$log 2>&1; rc=$$?; \
		cat $$log; [ $$rc -eq 0 ] || exit 1; \
		execs=$$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' $$log | tail -n 1); \
		if [ "$${execs:-0}" -lt $(FUZZ_MIN_EXECS) ]; then \
			echo "fuzz $$t: $${execs:-0} executions in $(1), fewer than FUZZ_MIN_EXECS=$(FUZZ_MIN_EXECS)"; exit 1; \
		fi; \
	done
endef

fuzz-short:
	$(call run-fuzz,$(FUZZTIME_SHORT))

fuzz:
	$(call run-fuzz,$(FUZZTIME))

# demo runs the built binary on the examples the way a driver author would.
# Every step must succeed: a failing demo means a broken example or verb.
demo: build
	@echo '$$ dractl version'; $(BIN) version
	@# Each example is its own node's pools; validated together, the two A100
	@# examples would publish one pool twice.
	@for ex in $(EXAMPLES); do \
		echo; echo "\$$ dractl validate -f $$ex"; $(BIN) validate -f $$ex || exit 1; \
	done
	@echo; echo '$$ dractl flatten -f examples/a100-mig-mixins/resourceslices.yaml | head -n 25'
	@$(BIN) flatten -f examples/a100-mig-mixins/resourceslices.yaml > $(BIN).flat.yaml
	@head -n 25 $(BIN).flat.yaml
	@echo "... $$(wc -l < $(BIN).flat.yaml) lines, $$(wc -c < $(BIN).flat.yaml) bytes flattened; $$(wc -c < examples/a100-mig-mixins/resourceslices.yaml) bytes with mixins"
	@rm -f $(BIN).flat.yaml
	@echo; echo '$$ dractl compact -f examples/a100-mig-flat > /dev/null'
	@$(BIN) compact -f examples/a100-mig-flat > /dev/null
	@# One example at a time: the two A100 examples are one pool written twice.
	@for ex in $(EXAMPLES); do \
		echo; echo "\$$ dractl compact -f $$ex > /dev/null"; $(BIN) compact -f $$ex > /dev/null || exit 1; \
	done
	@echo; echo '$$ dractl compact -f examples/a100-mig-flat | dractl validate -f -'
	@$(BIN) compact -f examples/a100-mig-flat 2>/dev/null | $(BIN) validate -f -
	@echo; echo '$$ dractl allocate -f examples/a100-mig-mixins > /dev/null'
	@$(BIN) allocate -f examples/a100-mig-mixins > /dev/null
	@echo; echo '$$ dractl explain -f examples/dgx-h100-mixins'
	@$(BIN) explain -f examples/dgx-h100-mixins
	@echo; echo '$$ dractl allocate -f examples/a100-mig-mixins | dractl describe pool a100-node -f examples/a100-mig-mixins/resourceslices.yaml -f - | head -n 24'
	@$(BIN) allocate -f examples/a100-mig-mixins 2>/dev/null | $(BIN) describe pool a100-node -f examples/a100-mig-mixins/resourceslices.yaml -f - > $(BIN).describe.txt
	@head -n 24 $(BIN).describe.txt; rm -f $(BIN).describe.txt
	@echo; echo '$$ dractl simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --html bin/simulate-report.html'
	@$(BIN) simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --html bin/simulate-report.html
	@echo; echo '$$ dractl simulate --node-template examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --max-wait 5m -o summary'
	@$(BIN) simulate --node-template examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --max-wait 5m -o summary
	@echo; echo "the HTML report is bin/simulate-report.html"

# README.md and docs/ show real output: every command of their console
# blocks is run by go test ./docs (part of make unit), which fails when
# the output shown differs. This rewrites what they show after an
# intended change of a verb or an example; review the diff.
docs:
	$(GO) test -count=1 -run TestDocCommands ./docs -update

# docs/simulate-report.png is the picture of the simulate report that
# README.md shows.
report-screenshot: build chromium
	$(BIN) simulate -f examples/dgx-h100-mixins --workload examples/dgx-h100-mixins/workload --html $(BIN).report.html > /dev/null
	chromium $(CHROMIUM_FLAGS) --user-data-dir=$$(mktemp -d) --hide-scrollbars --window-size=1300,1600 \
		--screenshot=docs/simulate-report.png file://$(abspath $(BIN).report.html) 2>/dev/null
	rm -f $(BIN).report.html

# Side by side with upstream k8s.io/dynamic-resource-allocation: the
# conformance/ module (its own go.mod, so the main module never depends on
# upstream's allocator) generates N seeded scenarios and compares outcomes
# and first-fit devices; disagreements are shrunk into
# pkg/core/allocator/testdata/regressions/. Last line: "N passed, M failed".
N ?= 2000
SEED ?= 1
conformance: conformance-test
	$(MAKE) -C conformance upstream-suite GOTOOLCHAIN_138=$(GOTOOLCHAIN_138)
	$(MAKE) -C conformance conformance N=$(N) SEED=$(SEED)

conformance-test:
	$(GO) -C conformance vet ./...
	$(GO) -C conformance test -short -count=1 ./...

# Upstream (stable, experimental) vs dractl (cold, warm) on the same
# workloads in one process; rewrites docs/performance.md and prints it.
bench:
	$(MAKE) -C conformance benchtable
	@cat docs/performance.md

# The images the Helm chart names (deploy/helm/dractl/values.yaml
# `images:`), built from the repository without a container engine
# (internal/images): each binary with go build, the driver's with cgo and
# the C library it loads libnvidia-ml with, written as OCI image-layout
# tarballs bin/images/<repository>.tar (the 1.38 scheduler's
# bin/images/dractl-scheduler-1.38.tar, built with Go 1.27 from the module
# proxy). On a node: `ctr -n k8s.io images import bin/images/dractl.tar`.
# IMAGE_TAG names them instead of the chart's tags (dev; the 1.38
# scheduler's IMAGE_TAG-1.38); dractl's version is VERSION, as `make build`
# stamps it.
IMAGE_TAG ?=
images:
	$(GO) run ./internal/images/build -out bin/images -tag '$(IMAGE_TAG)' -version '$(VERSION)' -go '$(GO)'

# The real control plane in-process (e2e/, its own module on
# k8s.io/kubernetes): kube-apiserver on an embedded etcd with every DRA
# feature gate, the resourceclaim controller, and the live verbs and the
# monitor against them. The first build of the test binary compiles
# kube-apiserver (about 20 minutes on 2 cores); later runs reuse the build
# cache. Without -race: a race build of kube-apiserver takes twice as
# long and several GiB more memory, and the code under test is raced in
# `make unit`.
E2E_TIMEOUT ?= 60m
e2e: node-packages images
	$(GO) -C e2e vet ./...
	$(GO) -C e2e test -count=1 -timeout $(E2E_TIMEOUT) ./...

# Pod start-up on a real node (e2e/startup_test.go): creation to Running
# and to the container's first output line, p50/p99, for a pod with a MIG
# device made at prepare, one with a whole GPU and one without claims,
# under dractl's and stock kube-scheduler's profiles, taking turns;
# STARTUP_PODS pods per cell (about 5 s each here, deletion and release
# included). Rewrites its section of docs/performance.md and prints it.
STARTUP_PODS ?= 100
bench-startup: node-packages
	$(GO) -C e2e test -count=1 -run '^$$' -bench '^BenchmarkPodStartup$$' -benchtime 1x -timeout 4h . \
		-args -startup-pods $(STARTUP_PODS) -startup-docs ../docs/performance.md

# kube-scheduler's own DRA test cases (scheduler_perf of k8s.io/kubernetes,
# test/integration/scheduler_perf/dra, the integration-test workloads),
# once with the in-tree DynamicResources plugin and once with dractl's in
# its place, in a temporary copy made from the Go module cache
# (scheduler/schedperf); etcd is built into bin/schedperf/<minor>/ from
# the module proxy. SCHEDPERF_VERSIONS are the Kubernetes minors, each
# run with its own kube-scheduler and its own dractl-scheduler build
# (1.38 with Go 1.27); `all` adds 1.36, which fails, saying why
# (docs/versions.md). Logs of failed workloads are kept in
# bin/schedperf/<minor>/logs. Last line: "N passed, M failed" over
# dractl's runs of every minor.
SCHEDPERF_VERSIONS ?= 1.37 1.38
SCHEDPERF_FLAGS ?=
schedperf:
	$(GO) -C scheduler run ./cmd/schedperf -repo .. -versions '$(SCHEDPERF_VERSIONS)' -toolchain $(GOTOOLCHAIN_138) $(SCHEDPERF_FLAGS)

# scheduler_perf's performance workloads of the DRA suites at 500 and
# 1,000 nodes, each run with the in-tree plugin, with dractl's and with
# its pods stripped of claims (the floor: what the workload's shape costs
# kube-scheduler, kube-apiserver and etcd here), in turn and
# BENCH_SCHEDPERF_ROUNDS times; the table of throughputs beside upstream's
# thresholds replaces the one in docs/performance.md. Hours on 2 cores.
BENCH_SCHEDPERF_WORKLOADS ?= _(500|1000)nodes
BENCH_SCHEDPERF_ROUNDS ?= 1
# Each minor's table has markers of its own in docs/performance.md.
BENCH_SCHEDPERF_VERSIONS ?= 1.37 1.38
# Flags for the benchmark binary, e.g. '-bench-sides=dractl
# -test.cpuprofile=/tmp/dractl.prof' for one side's profile, or
# '-bench-params=nodesWithDRA=5000' to scale the selected workloads.
BENCH_SCHEDPERF_ARGS ?=
bench-schedperf:
	$(GO) -C scheduler run ./cmd/schedperf -repo .. -versions '$(BENCH_SCHEDPERF_VERSIONS)' -toolchain $(GOTOOLCHAIN_138) -bench -bench-workloads '$(BENCH_SCHEDPERF_WORKLOADS)' -bench-rounds $(BENCH_SCHEDPERF_ROUNDS) -test-args '$(BENCH_SCHEDPERF_ARGS)' -bench-out ../docs/performance.md

# deploy/{scheduler,monitor,driver} rendered from the Helm chart
# deploy/helm/dractl with its default values (the chart is the source;
# e2e/helmchart's tests fail when they differ). Review the diff.
manifests:
	$(GO) -C e2e run ./helmchart/manifests -repo ..

# The whole live system under a seeded random history of work and faults
# (e2e/soak_test.go): two dractl-scheduler replicas with leader election,
# kubelets with dractl-gpu-driver, the monitor and the pool publisher,
# behind a proxy that fails their writes, with kube-apiserver restarted,
# etcd stalled and leaders killed; the invariants are checked after every
# event. SOAK is how long it runs (a short run by default, SOAK=30m for a
# long one), SOAK_SEED the seed; a violation prints the seed and the
# shrunk history that reproduces it. The figures are in bin/soak-report.txt.
SOAK ?= 2m
SOAK_SEED ?= 1
soak: scheduler
	SOAK=$(SOAK) SOAK_SEED=$(SOAK_SEED) SOAK_REPORT=$(CURDIR)/bin/soak-report.txt \
		$(GO) -C e2e test -count=1 -run '^TestSoak$$' -timeout 3h . -args -scheduler ../bin/dractl-scheduler
	@cat bin/soak-report.txt

# The live verbs, the monitor, the control-plane publisher and the mock
# GPU driver against kube-apiserver processes of every minor that serves
# resource.k8s.io/v1, and against 1.34 with that API turned off
# (e2e/matrix_test.go, build tag matrix), from 1.37 dractl's
# --kube-version verdicts against the server's own, and each
# dractl-scheduler build (1.37, 1.38) scheduling a pod where the skew
# policy allows it and refusing the server elsewhere. Each kube-apiserver is
# built once into bin/kube-apiserver-<release> from a scratch module on the
# module proxy's k8s.io/kubernetes (6 to 13 minutes each on 2 cores; 1.38
# with Go 1.27), etcd into bin/etcd; later runs reuse them and take about
# 3 minutes (docs/versions.md). Not in make test or CI: on a clean clone
# the five builds take about 50 minutes. MATRIX_RELEASES (comma-separated)
# picks releases other than e2e/matrix.Releases.
MATRIX_RELEASES ?=
e2e-matrix: scheduler-1.38
	$(GO) -C e2e run ./matrix/build -bin ../bin -toolchain $(GOTOOLCHAIN_138) $(if $(MATRIX_RELEASES),-releases '$(MATRIX_RELEASES)')
	$(GO) -C e2e test -tags matrix -count=1 -run '^TestMatrix$$' -timeout $(E2E_TIMEOUT) -v . $(if $(MATRIX_RELEASES),-args -matrix-releases '$(MATRIX_RELEASES)')

# Rewrites e2e/testdata from the current behaviour; review the diff.
e2e-golden:
	$(GO) -C e2e test -count=1 -run 'TestLiveVerbs|TestGetClaimsAndDevicesLive' -update .

# get pools, describe node and the monitor on E2E_BENCH_NODES (default
# 1,000) DGX H100 nodes' slices through the real apiserver.
bench-e2e: scheduler
	$(GO) -C e2e test -count=1 -run '^$$' -bench BenchmarkLive1000Nodes -benchtime 5x -timeout $(E2E_TIMEOUT) .
	@# The race: stock DynamicResources against dractl's plugin in one
	@# dractl-scheduler process (e2e/race_test.go), three runs a row with the
	@# profiles taking turns; rewrites its section of docs/performance.md and
	@# prints the table.
	$(GO) -C e2e test -count=1 -run '^$$' -bench BenchmarkRace -benchtime 1x -timeout 4h . \
		-args -scheduler ../bin/dractl-scheduler -race-runs 3 -race-docs ../docs/performance.md
