# simba-go — developer commands. `make test` is what CI runs (with CI=true).
GO       ?= go
PKGS     := ./...
# The fuzz target's seed corpus runs in `make test`; `make fuzz` explores.
FUZZTIME ?= 30s

.PHONY: test vet fmt-check servers example fuzz

test: fmt-check vet servers
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi

# Checks for the server binaries the store tests start; installs them with
# apt-get when missing and running as root on Debian/Ubuntu.
servers:
	@.ci/install-servers

# The README's first command: contenders on the in-memory store.
example:
	$(GO) run ./examples/handoff

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidateName -fuzztime $(FUZZTIME) ./lease/
