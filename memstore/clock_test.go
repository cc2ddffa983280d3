package memstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/memstore"
)

// The records report the server's clock, which advances with time and
// with StepClock; a step forward ends a live grant that much earlier and a
// step back keeps it that much longer.
func TestServerTimeAndStepClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		r1, err := s.Acquire(bg, "m", "a", ttl, tr)
		if err != nil || r1.ServerTime.IsZero() {
			t.Fatalf("Acquire = %+v, %v; want a server time", r1, err)
		}
		time.Sleep(time.Second)
		r2, err := s.Renew(bg, "m", "a", r1.Token, ttl, tr)
		if err != nil {
			t.Fatal(err)
		}
		if d := r2.ServerTime.Sub(r1.ServerTime); d != time.Second {
			t.Fatalf("server time advanced %v in 1s, want 1s", d)
		}
		// A step forward by ttl: the grant ends tr after the renewal.
		s.StepClock(ttl)
		r3, err := s.Get(bg, "m")
		if err != nil {
			t.Fatal(err)
		}
		if d := r3.ServerTime.Sub(r2.ServerTime); d != ttl {
			t.Fatalf("server time advanced %v across a step of %v, want %v", d, ttl, ttl)
		}
		if r3.OwnerID != "a" || r3.Transition != tr {
			t.Fatalf("Get after the step = %+v, want a's grant with %v left", r3, tr)
		}
		// A step back by 2·ttl: tr later, the grant still has 2·ttl left.
		s.StepClock(-2 * ttl)
		time.Sleep(tr)
		if rec := get(t, s, "m"); rec.OwnerID != "a" || rec.Transition != 2*ttl {
			t.Fatalf("Get after a step back = %+v, want a's grant with %v left", rec, 2*ttl)
		}
	})
}
