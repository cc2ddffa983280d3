//go:build unix

package main

import "time"

// These tests run the simba binary (built by TestMain from
// github.com/simba-go/simba/cmd/simba), so they see what a user sees: the
// exit codes, the connect timeout and the JSON of simba status below are the CLI's documented
// interface (cmd/simba/exit.go, cmd/simba/status.go), stated here on
// purpose: a change there is a change for users, and fails these tests.

// The exit codes the tests expect (cmd/simba/exit.go).
const (
	codeUsage       = 64
	codeUnavailable = 69
	codeBusy        = 75
	codeLost        = 76
	codeCannotExec  = 126
	codeNotFound    = 127
	codeSignal      = 128 // + N
)

// connectTimeout bounds simba's opening a store (cmd/simba/open.go).
const connectTimeout = 10 * time.Second

// lockStatus is one row of simba status --json (cmd/simba/status.go).
type lockStatus struct {
	Lock         string `json:"lock"`
	Owner        string `json:"owner"` // "" when free
	Token        uint64 `json:"token"` // 0 when free
	TTLMs        int64  `json:"ttl_ms"`
	TransitionMs int64  `json:"transition_ms"`
}
