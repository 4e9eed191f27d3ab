# hnsplan — make targets. `make test` is what CI runs; `make demo` shows the tool.
GO      ?= go
BIN     := bin
FUZZTIME ?= 30s
BENCHCOUNT ?= 6

.PHONY: all build test check demo bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/hnsplan ./cmd/hnsplan

# Every test: unit, golden CLI scripts (testdata/script), examples, dependency rules.
test:
	$(GO) test ./...

# Static checks, and the Windows build the agent ships as.
check:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	GOOS=windows $(GO) build ./...
	GOOS=windows $(GO) vet ./...

# Vet every bundled example, then show the calico-vxlan intent.
demo: build
	@for d in examples/*/; do $(BIN)/hnsplan vet $${d%/} || exit 1; done
	@echo
	@echo "== examples/calico-vxlan: the intent hnsplan checked =="
	@for f in examples/calico-vxlan/*.cue; do echo "-- $$f"; cat $$f; done

# Load time of the 1,000-Windows-node intent against CUE's own export of
# it, then the peak memory of `hnsplan vet` on it.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./compiler/intent ./compiler/check | tee $(BIN)/bench.txt
	@dir=$$(mktemp -d) && $(GO) run ./compiler/internal/synth/gen $$dir && \
	  if [ -x /usr/bin/time ]; then /usr/bin/time -f 'hnsplan vet (1,000 Windows nodes): %M KiB peak RSS, %e s' $(BIN)/hnsplan vet $$dir; \
	  else $(BIN)/hnsplan vet $$dir; fi; rm -rf $$dir

# Coverage-guided fuzzing of the manifest reader and the CUE loader.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzManifests -fuzztime $(FUZZTIME) ./compiler/intent
	$(GO) test -run '^$$' -fuzz FuzzCUE -fuzztime $(FUZZTIME) ./compiler/intent

clean:
	rm -rf $(BIN)
