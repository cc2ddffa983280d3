package bench

import (
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

func TestRedisFloor(t *testing.T) {
	s := Servers{Redis: testserver.Redis(t).Addr(), KeyPrefix: "bench-test:"}
	checkTarget(t, redisFloorTarget(s.Redis, s.KeyPrefix+":", redisOps(s.Redis)), floorLease+5*time.Second)
}

// TestFloorIsNoPeer: a floor faster than every peer does not become the
// best peer of simba's factor; the factor says where simba stands against
// it instead.
func TestFloorIsNoPeer(t *testing.T) {
	cols := []Column{
		{Name: "acquire p50", Kind: Duration, Better: -1, Ratio: true},
		{Name: "pairs/s", Kind: Rate, Better: +1, Ratio: true},
	}
	row := func(lib string, floor bool, v ...float64) Row {
		return Row{Target: Target{Lib: lib, Backend: "Redis", Floor: floor}, Values: v}
	}
	rows := []Row{
		row("simba", false, 100e-6, 8000),
		row("redislock", false, 50e-6, 10000),
		row(floorLib, true, 40e-6, 16000),
	}
	got := ratios(cols, rows[0], rows)
	want := "acquire p50 2.0× worse (floor 40 µs); pairs/s 1.2× worse (50% of the floor)"
	if got != want {
		t.Errorf("ratios = %q, want %q", got, want)
	}
	if got := ratios(cols, rows[2], rows); got != "" {
		t.Errorf("ratios of the floor's own row = %q, want none", got)
	}
	if got := sortRows([]Row{rows[2], rows[1], rows[0]}); got[0].Target.Lib != "simba" || got[2].Target.Lib != floorLib {
		t.Errorf("rows sorted %s, %s, %s; want simba first, the floor last", got[0].Target.Lib, got[1].Target.Lib, got[2].Target.Lib)
	}
}
