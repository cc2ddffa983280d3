package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// zkTarget returns the target lib/ZooKeeper on the test's ZooKeeper.
func zkTarget(t *testing.T, lib string) Target {
	t.Helper()
	srv := testserver.ZooKeeper(t)
	s := Servers{ZooKeeper: strings.Join(srv.Servers(), ","), KeyPrefix: "bench-test" + srv.Root() + ":"}
	for _, tg := range zkTargets(s) {
		if tg.Lib == lib {
			return tg
		}
	}
	t.Fatalf("no target %s/ZooKeeper", lib)
	return Target{}
}

func TestZKTargets(t *testing.T) {
	if ts := zkTargets(Servers{Postgres: "x"}); len(ts) != 0 {
		t.Errorf("zkTargets without ZooKeeper: %d targets", len(ts))
	}
	ts := zkTargets(Servers{ZooKeeper: "x", ZKSessionS: 6})
	if len(ts) != 2 || ts[0].ID() != "simba/ZooKeeper" || ts[1].ID() != "zk lock recipe/ZooKeeper" {
		t.Fatalf("zkTargets: %v", ts)
	}
	for _, tg := range ts {
		if tg.Takeover != 6*time.Second {
			t.Errorf("%s: Takeover %v, want the session timeout", tg.ID(), tg.Takeover)
		}
	}
	if tg := zkTargets(Servers{ZooKeeper: "x"})[1]; tg.Takeover != defaultZKSession {
		t.Errorf("default Takeover %v", tg.Takeover)
	}
}

func TestZKLockPath(t *testing.T) {
	for key, want := range map[string]string{
		"a-b_C9":  zkRecipeRoot + "/p%3Aa-b_C9",
		"..":      zkRecipeRoot + "/p%3A%2E%2E",
		"x/y\x00": zkRecipeRoot + "/p%3Ax%2Fy%00",
	} {
		if got := zkLockPath("p:", key); got != want {
			t.Errorf("zkLockPath(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestZKSimba(t *testing.T) {
	checkTarget(t, zkTarget(t, "simba"), 5*time.Second)
}

func TestZKRecipe(t *testing.T) {
	checkTarget(t, zkTarget(t, "zk lock recipe"), 5*time.Second)
}

// TestZKWarm: the warm-up exercises the server once per run, whichever
// ZooKeeper target asks first; the other's Warm sends nothing.
func TestZKWarm(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	s := Servers{ZooKeeper: strings.Join(srv.Servers(), ","), KeyPrefix: "bench-test" + srv.Root() + ":"}
	ts := zkTargets(s)
	ctx := t.Context()
	ops := func() int64 {
		t.Helper()
		n, err := ts[0].Ops(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := ops()
	if err := ts[0].Warm(ctx); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	warmed := ops()
	if err := ts[1].Warm(ctx); err != nil {
		t.Fatalf("second Warm: %v", err)
	}
	after := ops()
	if d := warmed - before; d < 1000 {
		t.Errorf("the warm-up sent %d requests, want thousands", d)
	}
	if d := after - warmed; d > 10 {
		t.Errorf("the second target's Warm sent %d requests, want none (the server is warm)", d)
	}
}

func TestZKOps(t *testing.T) {
	checkOpsOwn(t, zkTarget(t, "simba").Ops)
}
