// Package integration is the module of simba-go's tests that need a
// server (Redis, PostgreSQL, MariaDB, ZooKeeper, locally or in
// containers): the stores' server tests and TCK runs (redisstore,
// sqlstore, zkstore, schema), the CLI's tests (cmd/simba, which run the
// built binary), the test-server rig (testserver), the fault proxy
// (faultproxy) and the fault campaign (chaos). They live in a module of
// their own so that the library's go.mod requires only what its packages
// import: a user's go.sum gets no testcontainers, Docker or other
// backend's modules through the tests of the packages they import.
//
// Nothing here is API; run it with `make test` or `cd integration && go
// test ./...` (SIMBA_TEST_DOCKER=0 for local servers only).
package integration
