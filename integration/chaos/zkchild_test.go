package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestZooKeeperChildWaitsForSession: a ZooKeeper contender process whose
// server does not answer (one restarting under load took longer than 20
// s) keeps waiting for its session instead of exiting with an error, and
// exits with 0 when told to end. The campaign of 2026-11-24 failed on
// "setup: zookeeper-1-p0.85: exit: exit status 1 (... chaos child: zkstore:
// no session with [127.0.0.1:44687]: context deadline exceeded)".
func TestZooKeeperChildWaitsForSession(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "chaos") // short: the path of a Unix socket is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := NewSystemHistory(SystemClock())
	const mutex = "chaos/zkchild/0"
	hub, err := NewHub(filepath.Join(dir, "hub"), mutex, h, NewRegister(true), NewRegister(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hub.Close() })

	// A server that accepts connections and never answers.
	silent := proxyTo(t, "127.0.0.1:1")
	silent.Blackhole()

	s := Setup{Name: "zkchild", TTL: realTTL, Transition: realTr,
		Spawn: func() (*exec.Cmd, Faulter) { return child("zookeeper", silent.Addr(), "/chaos-zkchild"), nil }}
	p := &proc{s: s, hub: hub.ln.Addr().String(), mutex: mutex, base: "zkchild-p0", start: SystemClock(),
		log: filepath.Join(dir, "p.log")}
	if err := p.spawn(); err != nil {
		t.Fatal(err)
	}
	const wait = 25 * time.Second // the process gave up after 20 s
	select {
	case <-p.exited:
		t.Fatalf("the process exited while it waited for its server: %v (its log ends: %q)", p.exitErr, logTail(p.log))
	case <-time.After(wait):
	}
	if err := p.terminate(); err != nil {
		t.Errorf("told to end while it waited for its server: %v", err)
	}
}
