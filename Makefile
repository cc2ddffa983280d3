# simba-go — developer commands. `make test` is what CI runs (with CI=true).
GO       ?= go
PKGS     := ./...
# The modules: the library (.) and its server-backed tests (integration:
# the stores' server tests, the CLI's, the test-server rig, the fault proxy
# and the campaign), each built alone with the versions its go.mod names,
# not a workspace's (a go.work a developer may keep for their editor).
export GOWORK = off
# The fuzz target's seed corpus runs in `make test`; `make fuzz` explores.
FUZZTIME ?= 30s

SQLC     := $(GO) tool -modfile=tools/go.mod sqlc

.PHONY: test test-containers containers containers-background vet fmt-check generate generate-check footprint servers example fuzz bench-sql chaos chaos-plants bench

# Two runs: every test of both modules on local servers (the Debian
# packages' binaries; SIMBA_TEST_DOCKER=0 keeps containers out even when an
# engine answers), then every server store's TCK once more through
# testcontainers (test-containers). The Docker engine and images are got in
# the background while vet and sqlc compile (containers waits for them).
# integration/zkstore runs without -race: go-zookeeper v1.0.4 (the newest)
# reads and writes Conn.lastZxid unsynchronized after a reconnect with
# live watches (upstream go-zookeeper/zk#35, open since 2020), which its
# fault tests cause on purpose; zkstore's unit tests in the root module
# still run with it. The TCK's TestMutants writes what the suite
# guarantees (every clause of the Store contract, the mistakes planted
# against it and the cases that killed each) to SIMBA_TCK_REPORT, printed
# once the root module passed (go test shows no log of a passing test).
test: fmt-check servers containers-background vet generate-check footprint containers
	r=$$(mktemp) && trap 'rm -f "$$r"' EXIT && SIMBA_TEST_DOCKER=0 SIMBA_TCK_REPORT=$$r $(GO) test -race -count=1 -timeout 20m $(PKGS) && cat "$$r"
	cd integration && SIMBA_TEST_DOCKER=0 $(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/integration/zkstore$$')
	cd integration && SIMBA_TEST_DOCKER=0 $(GO) test -count=1 -timeout 20m ./zkstore/
	cd examples/otelprom && $(GO) test -race -count=1 ./...
	@.ci/test-containers

# Every server store's TCK (Redis, Redis Cluster, PostgreSQL, MariaDB,
# ZooKeeper) through testcontainers, the container provider's tests and the
# user example examples/testcontainers, on the images of .ci/images.env;
# the log names each container's image.
test-containers: containers
	@.ci/test-containers

# A Docker engine and the local server images: installs docker.io and
# debootstrap, starts dockerd and builds the images when missing (as root on
# Debian; elsewhere it says what is missing).
containers:
	@.ci/install-docker

containers-background:
	@.ci/install-docker --background

vet:
	$(GO) vet $(PKGS)
	cd integration && $(GO) vet ./...
	cd examples/testcontainers && $(GO) vet ./...
	cd examples/otelprom && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi

# What a user's go.sum and binary get from the library (.ci/footprint):
# fails when a container, Docker, test-server or other backend's module
# reaches a Redis user's or a PostgreSQL user's go.sum, or another
# backend's module the PostgreSQL user's binary.
footprint:
	@.ci/footprint

# Regenerates internal/db from queries/ and schema/ with the sqlc pinned in
# tools/go.mod (the first run compiles sqlc: about 2 minutes).
generate:
	$(SQLC) generate

# Fails when internal/db is not what sqlc generates from queries/ and
# schema/: sqlc diff catches edits and missing files, git status stray ones.
generate-check:
	@$(SQLC) diff || { echo "internal/db is stale: run make generate"; exit 1; }
	@out=$$(git status --porcelain -- internal/db 2>/dev/null); \
	if [ -n "$$out" ]; then echo "internal/db has uncommitted or stray files:"; echo "$$out"; exit 1; fi

# Round trips and hand-off time of the SQL stores (real servers).
bench-sql:
	cd integration && SIMBA_TEST_DOCKER=0 $(GO) test -run '^$$' -bench . -benchtime 2s ./sqlstore/

# The fault campaign on every backend set-up at once (integration/chaos),
# regenerating docs/reliability.md; make test runs it for 20 s per backend
# with one lane (with -race, and so without the ZooKeeper set-ups: see
# chaos.zookeeper in integration/chaos). CHAOS_FOR per backend, CHAOS_LANES
# independent mutexes per backend (each with its own contenders and
# nemesis), CHAOS_SEED for the nemeses. The default, 30 min with 3 lanes,
# gives each set-up over 1,000 fault episodes (a 2-minute run at load 43
# gave 69–115 per set-up). Servers run under
# libfaketime (package faketime) so the nemesis can step their clocks;
# make test's short run draws a Redis restart from a snapshot and a clock
# step on Redis, a clock step and a restart on PostgreSQL, and a failover
# (the replica promoted while the primary is cut off) on redis-replica,
# first.
# CHAOS_ONLY (a regular expression of set-up names) runs some set-ups
# alone, CHAOS_REPORT names the report. -parallel is above the number of
# set-ups (9 since redis-replica): with fewer slots, the set-ups beyond
# them wait for a whole CHAOS_FOR before they start.
CHAOS_FOR    ?= 30m
CHAOS_LANES  ?= 3
CHAOS_SEED   ?= 1
CHAOS_ONLY   ?= .
CHAOS_REPORT ?= docs/reliability.md
chaos: servers
	cd integration && SIMBA_TEST_DOCKER=0 $(GO) test -count=1 -timeout 0 -parallel 16 -run 'TestCampaign$$/$(CHAOS_ONLY)' -v ./chaos/ -chaos.zookeeper \
		-chaos.duration $(CHAOS_FOR) -chaos.lanes $(CHAOS_LANES) -chaos.seed $(CHAOS_SEED) \
		-chaos.report $(CURDIR)/$(CHAOS_REPORT)

# The bugs of the safety issue (14) planted back one at a time
# (integration/chaos/plant_test.go): each builds a campaign binary with a
# patched copy of a library file (go test -c -overlay) and runs the
# campaign aimed at the faults that reach the bug; each must fail.
# CHAOS_PLANTS (a regular expression of plant names) picks some.
CHAOS_PLANTS ?= .
chaos-plants: servers
	cd integration/chaos && SIMBA_TEST_DOCKER=0 $(GO) test -count=1 -timeout 0 -run '^TestPlantedBugs$$' -v . -chaos.plants '$(CHAOS_PLANTS)'

# simba-go beside the peer libraries on every backend (the bench/ module,
# TestBench): regenerates docs/benchmarks.md and docs/benchmarks-handoff.svg
# in about 10 minutes. BENCH_ARGS narrows a run, e.g. -only redis -scenario c.
BENCH_ARGS ?=
bench: servers
	@.ci/install-bench-servers
	cd bench && SIMBA_TEST_DOCKER=0 $(GO) test -count=1 -timeout 15m -run '^TestBench$$' -v . -args -report $(CURDIR)/docs/benchmarks.md $(BENCH_ARGS)

# Checks for the server binaries the store tests start; installs them with
# apt-get when missing and running as root on Debian/Ubuntu.
servers:
	@.ci/install-servers

# The README's first command: contenders on the in-memory store.
example:
	$(GO) run ./examples/handoff

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidateName -fuzztime $(FUZZTIME) ./lease/
