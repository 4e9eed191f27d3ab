# hnsplan — make targets. `make test` is what CI runs; `make demo` shows the tool.
GO      ?= go
BIN     := bin
FUZZTIME ?= 30s
# Minimizing a new input may take at most this long. Go's default, 60s, is
# spent on nearly every input a CUE or policy fuzzer finds (the code is
# large, so most inputs reach new code): FuzzCUE ran 8 inputs in 20 s.
FUZZMINIMIZETIME ?= 1s
# Every fuzz target, as package:Target.
FUZZTARGETS := \
	./compiler/intent:FuzzManifests ./compiler/intent:FuzzCUE ./compiler/intent:FuzzInventory \
	./compiler/plan:FuzzDecode ./compiler/plan:FuzzIndexEntry ./compiler/plan:FuzzVerify \
	./compiler/selector:FuzzParse ./compiler/policy:FuzzPolicy ./compiler/policy:FuzzSelectorACL
BENCHCOUNT ?= 6

.PHONY: all build release images test test-release test-integration check demo bench fuzz clean

all: build

# The version and commit come from git (`hnsplan version`, `--version`);
# outside a git checkout they stay empty and the binaries fall back to what
# the Go toolchain recorded.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/hnsplan/hnsplan/internal/buildinfo.version=$(VERSION) \
           -X github.com/hnsplan/hnsplan/internal/buildinfo.commit=$(COMMIT)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hnsplan ./cmd/hnsplan
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hnsplan-agent ./cmd/hnsplan-agent

# A release of the version CHANGELOG.md names, in $(RELEASE_DIR):
# hnsplan for every platform of CLI_PLATFORMS, hnsplan-agent for
# AGENT_PLATFORMS (windows/amd64, the nodes it programs; linux/amd64 for CI
# and demos, with the in-memory HNS only), named NAME-OS-ARCH[.exe].
# The version is the changelog's newest release (hack/changelog reads it,
# strictly), or RELEASE_VERSION=vX.Y.Z, which must be a release the
# changelog lists. It is refused while [Unreleased] lists changes (release
# them first, or ALLOW_UNRELEASED=1), and when the tag vX.Y.Z exists but is
# not HEAD (check the tag out to rebuild it); uncommitted changes are warned
# about (the binaries would hold them). Each binary is stamped with
# that version and COMMIT, symbol tables left out (-s -w: a panic still
# names functions and lines), built with -trimpath, without cgo and without
# VCS data (the commit is stamped), so the same commit and Go version give
# the same bytes wherever they are built. Beside each,
# NAME-OS-ARCH.sbom.txt: `go version -m`, the Go version, the module and
# every dependency with its version and go.sum hash. RELEASE_NOTES.md is the
# version's section of the changelog (the GitHub release's text).
# SHA256SUMS covers them all (sha256sum -c SHA256SUMS). The container
# images (make images) are built from these binaries.
RELEASE_DIR      ?= $(BIN)/release
CLI_PLATFORMS    ?= linux/amd64 linux/arm64 darwin/arm64 windows/amd64
AGENT_PLATFORMS  ?= windows/amd64 linux/amd64
CHANGELOG        ?= CHANGELOG.md
RELEASE_VERSION  ?=
ALLOW_UNRELEASED ?=
release:
	@v=$$($(GO) run ./hack/changelog -f '$(CHANGELOG)' $(if $(ALLOW_UNRELEASED),-allow-unreleased) version $(RELEASE_VERSION)) || exit 1; \
	  if tag=$$(git rev-parse -q --verify "refs/tags/$$v^{commit}" 2>/dev/null) && [ "$$tag" != "$$(git rev-parse HEAD)" ]; then \
	    echo "error: tag $$v is $$tag, not HEAD: check out $$v to rebuild that release" >&2; exit 1; fi; \
	  if [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then \
	    echo "warning: the work tree has uncommitted changes: the binaries hold them, stamped $$v (commit $(COMMIT))" >&2; fi; \
	  echo "release $$v (commit $(COMMIT)) in $(RELEASE_DIR)"; \
	  rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR) || exit 1; \
	  $(GO) run ./hack/changelog -f '$(CHANGELOG)' notes $$v > $(RELEASE_DIR)/RELEASE_NOTES.md || exit 1; \
	  ldflags="-s -w -X github.com/hnsplan/hnsplan/internal/buildinfo.version=$$v -X github.com/hnsplan/hnsplan/internal/buildinfo.commit=$(COMMIT)"; \
	  set -e; for spec in $(addprefix hnsplan:,$(CLI_PLATFORMS)) $(addprefix hnsplan-agent:,$(AGENT_PLATFORMS)); do \
	  cmd=$${spec%%:*}; os=$${spec#*:}; os=$${os%/*}; arch=$${spec##*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
	  name=$$cmd-$$os-$$arch$$ext; echo "$(RELEASE_DIR)/$$name"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags "$$ldflags" -o $(RELEASE_DIR)/$$name ./cmd/$$cmd; \
	  (cd $(RELEASE_DIR) && $(GO) version -m $$name > $$cmd-$$os-$$arch.sbom.txt); \
	done
	cd $(RELEASE_DIR) && sha256sum hnsplan* RELEASE_NOTES.md > SHA256SUMS

# The container images, without a container engine: hack/images
# (internal/imagebuild, go-containerregistry) writes two OCI image layouts,
# $(IMAGES_DIR)/hnsplan (the CLI, linux/amd64 and linux/arm64) and
# $(IMAGES_DIR)/hnsplan-agent (the agent's Windows HostProcess image, a
# manifest per Windows Server build), tagged with the release's version
# (the changelog's newest, or RELEASE_VERSION). The binaries are
# built by the release recipe above, for these three platforms only, into
# $(IMAGES_DIR)/release: the same bytes as `make release`'s. Every
# timestamp is SOURCE_DATE_EPOCH (default: the commit's time), so two builds
# give the same digests. AGENT_BASE=<OCI layout dir | docker save tar>
# builds the agent on Microsoft's HostProcess base image instead of the
# generated stand-in (deploy/README.md, "Images").
IMAGES_DIR        ?= $(BIN)/images
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
AGENT_BASE        ?=
images:
	@$(MAKE) --no-print-directory release RELEASE_DIR=$(IMAGES_DIR)/release \
	  CLI_PLATFORMS='linux/amd64 linux/arm64' AGENT_PLATFORMS=windows/amd64 COMMIT='$(COMMIT)'
	@v=$$($(GO) run ./hack/changelog -f '$(CHANGELOG)' $(if $(ALLOW_UNRELEASED),-allow-unreleased) version $(RELEASE_VERSION)) || exit 1; \
	  set -x; $(GO) run ./hack/images -release $(IMAGES_DIR)/release -out $(IMAGES_DIR) \
	  -version "$$v" -revision '$(COMMIT)' -epoch '$(SOURCE_DATE_EPOCH)' $(if $(AGENT_BASE),-agent-base '$(AGENT_BASE)')


# Every test but the release's: unit, golden CLI scripts (testdata/script),
# examples, dependency rules. The explicit timeout is go test's per-package
# limit; no package is near it on a 2-core machine with a cold cache.
test:
	$(GO) test -timeout 15m ./...

# The tests behind the build tag release: `make release` built twice and
# compared (examples/release_test.go), the images. They rebuild every
# dependency with release flags, so they are not part of `make test`. Only
# the packages that have such tests run (found by their build line), so
# the rest of `make test` is not run a second time.
test-release:
	@pkgs=$$(grep -rlE --include='*_test.go' --exclude-dir=bin --exclude-dir=.tmp '^//go:build (.* )?release( .*)?$$' . | xargs -r -n1 dirname | sort -u); \
	  if [ -z "$$pkgs" ]; then echo "no test has the build tag release" >&2; exit 1; fi; \
	  echo $(GO) test -tags release -count=1 -timeout 30m $$pkgs; \
	  $(GO) test -tags release -count=1 -timeout 30m $$pkgs

# Integration tests (build tag integration) against a real kube-apiserver and
# etcd, built once from the Go module proxy by hack/kube-test-env.sh (cold:
# minutes; then cached under ~/.cache/real-apiserver) and started on
# 127.0.0.1 for this run only. KUBECONFIG and KUBE_TEST_ENV reach the tests.
KUBE_TEST_ENV ?= $(CURDIR)/hack/kube-test-env.sh
KAS_RUN_DIR   ?= $(CURDIR)/.tmp/real-apiserver
test-integration:
	@KAS_RUN_DIR=$(KAS_RUN_DIR) $(KUBE_TEST_ENV) stop >/dev/null 2>&1 || true
	KAS_RUN_DIR=$(KAS_RUN_DIR) $(KUBE_TEST_ENV) start >/dev/null
	@KUBECONFIG=$(KAS_RUN_DIR)/kubeconfig KUBE_TEST_ENV=$(KUBE_TEST_ENV) KAS_RUN_DIR=$(KAS_RUN_DIR) \
	  $(GO) test -tags integration -count=1 ./applier/... ./cmd/... ./fleet/... ./examples/...; rc=$$?; \
	  KAS_RUN_DIR=$(KAS_RUN_DIR) $(KUBE_TEST_ENV) stop >/dev/null 2>&1; exit $$rc

# Static checks, and the Windows build the agent ships as.
check:
	$(GO) vet ./...
	$(GO) vet -tags release ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	GOOS=windows $(GO) build ./...
	GOOS=windows $(GO) vet ./...
	GOOS=windows $(GO) vet -tags integration ./applier/hns/hnswin
	GOOS=windows $(GO) test -c -o /dev/null ./applier/hns/hnswin
	GOOS=windows $(GO) test -c -tags integration -o /dev/null ./applier/hns/hnswin

# Vet every bundled example, compile the calico-vxlan one, show the dry
# run of one of its Windows nodes, and run the agent on that node's plan
# (compiled with the example's inventory) over an in-memory HNS until it
# has converged: network, routes, host endpoint, then the pods' ACLs.
demo: build
	@for d in $$(dirname $$(ls examples/*/*.cue) | sort -u); do $(BIN)/hnsplan vet --severity warning $$d || exit 1; done
	@echo
	$(BIN)/hnsplan compile examples/calico-vxlan -o $(BIN)/plans/calico-vxlan
	@echo
	$(BIN)/hnsplan plan examples/calico-vxlan --node win-1
	@echo
	$(BIN)/hnsplan compile examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml -o $(BIN)/plans/calico-vxlan-live
	$(BIN)/hnsplan-agent run --plan $(BIN)/plans/calico-vxlan-live/win-1.json --node win-1 --hns mem --simulate-cni \
	  --state-dir $(BIN)/agent-state --listen 127.0.0.1:0 --until-converged

# Load, vet and compile of the 1,000-Windows + 100-Linux-node intent
# against CUE's own export of it (benchstat bin/bench.txt), then the wall
# time and peak memory of `hnsplan vet` and `hnsplan compile` on it.
# BenchmarkDiffAccess (compiler/policy) is `hnsplan diff` with and without
# the access delta on the policy benchmark's 2,000 policies and 30,000 pods,
# one policy's port changed; it is slow, so it runs once, apart.
# BenchmarkFreshNodeRoutes (applier) is a fresh node of a 5,000-node cluster
# and a change of 100 VTEPs at 50 ms per HNS call, routes in batches beside
# one call per route (that half sleeps over 4 minutes); it runs once, and
# only with BENCH_SLOW=1 (make bench BENCH_SLOW=1).
# BenchmarkFreshNodeCPU is the same fresh node at 0 latency, in agent CPU
# seconds; BenchmarkAgentMemory is the agent of one node of a 5,000-node,
# 50,000-pod cluster (informers, plan parts, passes) in a child process:
# its peak RSS.
# BenchmarkTimeToProtect (applier) is how long a new pod of a policy-only
# node (AKS's Azure CNI) is unprotected: from the CNI making its endpoint to
# the agent programming its ACLs, p50/p99/max over bursts of 100 pods, with
# HNS calls at 0 and 20 ms, 4 writers and 1.
# BenchmarkVXLANChangeWindow (applier) is a VNI change rolled out by 4
# agents at maxUnavailable 1 and with rollout.vxlanChange all-at-once, at a
# tenth of real time: how long the rollout keeps nodes on different VNIs
# (rollout-s, split-s), per wave, and the most nodes cordoned at once.
# hack/bench-scale.sh is issue 16's compile figures on the CLI: wall time,
# CPU time and peak RSS of `hnsplan compile` at 1,100 to 5,000 nodes, the
# bytes written, the largest file, and how many files one joining node
# changes, each figure with OK or OVER. (BenchmarkCompileScale, compiler,
# is the same compiles in process, for profiles; it is left out here.)
# hack/bench-policy-mem.sh is issue 29's memory figure: peak RSS, wall and
# CPU time of `hnsplan compile --inventory` of the policy benchmark's
# cluster (2,000 policies, 30,000 pods), OK or OVER against 300 MiB.
# hack/bench-vet-cue.sh is issue 29's vet figure: the CPU time of
# `hnsplan vet` against `cue export` of the same intent with the schema
# (go tool cue) at 1,100 and 5,000 nodes, OK or OVER against 1.5x.
BENCH_SLOW ?=
bench: build
	$(GO) test -run '^$$' -bench . -skip 'DiffAccess|CompileScale|ACLCounts' -benchmem -count $(BENCHCOUNT) ./compiler/intent ./compiler/check ./compiler ./compiler/selector ./compiler/policy | tee $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench DiffAccess -benchtime 1x -count 1 ./compiler/policy | tee -a $(BIN)/bench.txt
	# ACL rules and address items of issue 29's three workloads (optimised, and -unopt).
	$(GO) test -run '^$$' -bench ACLCounts -benchtime 1x -count 1 ./compiler/policy ./compiler/reach | tee -a $(BIN)/bench.txt
	@if [ -n "$(BENCH_SLOW)" ]; then \
	  $(GO) test -run '^$$' -bench FreshNodeRoutes -benchtime 1x -count 1 -timeout 30m ./applier | tee -a $(BIN)/bench.txt; \
	else echo "BenchmarkFreshNodeRoutes (applier, over 4 minutes) skipped: make bench BENCH_SLOW=1 runs it"; fi
	$(GO) test -run '^$$' -bench 'FreshNodeCPU|AgentMemory' -benchtime 1x -count 1 -timeout 30m ./applier | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench Audit -benchmem -count 1 ./applier/audit | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench TimeToProtect -benchtime 5x -count 1 ./applier | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench VXLANChangeWindow -benchtime 1x -count 1 ./applier | tee -a $(BIN)/bench.txt
	@dir=$$(mktemp -d) && $(GO) run ./internal/synth/gen $$dir/intent && \
	  t=$$(command -v /usr/bin/time || true); \
	  for cmd in "vet --severity warning $$dir/intent" "compile $$dir/intent -o $$dir/plans"; do \
	    if [ -n "$$t" ]; then $$t -f "hnsplan $${cmd%% *}: %M KiB peak RSS, %e s wall" $(BIN)/hnsplan $$cmd >/dev/null; \
	    else $(BIN)/hnsplan $$cmd >/dev/null; fi; \
	  done; du -sh $$dir/plans; rm -rf $$dir
	hack/bench-scale.sh $(BIN)/hnsplan | tee $(BIN)/bench-scale.txt
	hack/bench-policy-mem.sh $(BIN)/hnsplan | tee $(BIN)/bench-policy-mem.txt
	hack/bench-vet-cue.sh $(BIN)/hnsplan | tee $(BIN)/bench-vet-cue.txt

# Coverage-guided fuzzing of every target, FUZZTIME each: the manifest,
# inventory and CUE readers, plan decoding and plan-directory entries, the
# selector parser, and policies through selectors to rendered HNS ACLs.
fuzz:
	@failed=""; for t in $(FUZZTARGETS); do \
	  echo "== $${t#*:}"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $${t%%:*} || failed="$$failed $${t#*:}"; \
	done; if [ -n "$$failed" ]; then echo "fuzz failed:$$failed"; exit 1; fi

clean:
	rm -rf $(BIN)
