//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// TestZKSessionTooShort (issue 14 item 4): against ZooKeeper's default
// maxSessionTimeout (40 s), timings whose safety margin the granted
// session cannot outlive are refused at once, with one line and exit 64,
// instead of taking and losing the lock in a loop.
func TestZKSessionTooShort(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateZooKeeper(t, testserver.WithMaxSessionTimeout(40*time.Second))
	store := "zk://" + strings.Join(srv.Servers(), ",") + srv.Root()
	for _, flags := range [][]string{{"--transition", "90s"}, {"--ttl", "410s"}} {
		e := newEnv(t, store)
		args := append(append([]string{"run"}, flags...), uniqueName(t, "x"), "--", "true")
		line := oneErrorLine(t, e.run(args...), codeUsage)
		if !strings.Contains(line, "40s session") {
			t.Errorf("%v: %q; want it to name the 40s session the server granted", flags, line)
		}
	}
	// Timings that fit still run.
	e := newEnv(t, store)
	if r := e.run("run", "--ttl", "20s", "--transition", "10s", uniqueName(t, "ok"), "--", "true"); r.code != 0 {
		t.Errorf("run with ttl + transition under the granted session: exit %d, %q", r.code, r.stderr)
	}
}
