package memstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// release releases a held grant and fails the test on error.
func release(t *testing.T, s *memstore.Store, name, contender string, token uint64) {
	t.Helper()
	if err := s.Release(bg, name, contender, token); err != nil {
		t.Fatalf("Release(%q, %q, %d): %v", name, contender, token, err)
	}
}

func TestQueueIsFIFOAndRefreshKeepsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		for _, c := range []string{"b", "c", "d", "c", "b"} {
			mustLose(t, s, mx, c)
		}
		wantQueue(t, s, mx, "b", "c", "d")
		if err := s.Release(bg, mx, "c", 0); err == nil {
			t.Fatal("withdrawal with token 0 reported success")
		}
		wantQueue(t, s, mx, "b", "d")
		mustLose(t, s, mx, "c")
		wantQueue(t, s, mx, "b", "d", "c")

		release(t, s, mx, "a", tok)
		for _, c := range []string{"d", "c", "a"} {
			rec := mustLose(t, s, mx, c)
			if rec.OwnerID != "" || rec.Transition != memstore.DefaultHandoff {
				t.Fatalf("%s during b's hand-off got %+v, want empty owner and a 1s window", c, rec)
			}
		}
		wantQueue(t, s, mx, "b", "d", "c", "a")
		if st := s.Inspect(mx); st.Reserved != "b" {
			t.Fatalf("reserved for %q, want b", st.Reserved)
		}
		tok = mustHold(t, s, mx, "b").Token
		wantQueue(t, s, mx, "d", "c", "a") // the winner left the queue
		release(t, s, mx, "b", tok)
		mustLose(t, s, mx, "c")
		mustHold(t, s, mx, "d")
		wantQueue(t, s, mx, "c", "a")
	})
}

func TestHandoffLapsesToNextWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		mustLose(t, s, mx, "b")
		mustLose(t, s, mx, "c")
		mustLose(t, s, mx, "d")
		b, c, d := watch(t, s, mx, "b"), watch(t, s, mx, "c"), watch(t, s, mx, "d")
		release(t, s, mx, "a", tok)
		wantEvent(t, "b on release", b, lease.Event{Name: mx})
		wantNoEvent(t, "c on release", c)
		wantNoEvent(t, "d on release", d)

		time.Sleep(memstore.DefaultHandoff / 2)
		if rec := mustLose(t, s, mx, "x"); rec.Transition != memstore.DefaultHandoff/2 {
			t.Fatalf("Acquire mid-window = %+v, want the rest of the window", rec)
		}
		// b never comes: when its window ends, c is woken, without any call.
		time.Sleep(memstore.DefaultHandoff / 2)
		synctest.Wait()
		wantEvent(t, "c after b's window", c, lease.Event{Name: mx})
		wantNoEvent(t, "b after its window", b)
		wantNoEvent(t, "d after b's window", d)
		if st := s.Inspect(mx); st.Reserved != "c" || st.Owner != "" {
			t.Fatalf("after b's window: %+v, want reserved for c", st)
		}
		wantQueue(t, s, mx, "c", "d", "x") // the no-show left the queue
		mustLose(t, s, mx, "b")            // and queues again at the tail
		mustHold(t, s, mx, "c")
		wantQueue(t, s, mx, "d", "x", "b")
	})
}

func TestHandoffWindowCappedBySpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithHandoff(time.Hour))
		tok := mustHold(t, s, mx, "a").Token
		if _, err := s.Acquire(bg, mx, "b", 20*time.Millisecond, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		mustLose(t, s, mx, "c")
		release(t, s, mx, "a", tok)
		if rec := get(t, s, mx); rec.Transition != 30*time.Millisecond {
			t.Fatalf("window for b = %v, want b's ttl+transition 30ms", rec.Transition)
		}
		time.Sleep(30 * time.Millisecond)
		if st := s.Inspect(mx); st.Reserved != "c" {
			t.Fatalf("after b's window reserved for %q, want c", st.Reserved)
		}
		if rec := get(t, s, mx); rec.Transition != ttl+tr {
			t.Fatalf("window for c = %v, want c's ttl+transition", rec.Transition)
		}
	})
}

func TestHandoffDisabledOnlyWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithHandoff(-time.Second))
		tok := mustHold(t, s, mx, "a").Token
		mustLose(t, s, mx, "b")
		b := watch(t, s, mx, "b")
		release(t, s, mx, "a", tok)
		wantEvent(t, "b on release", b, lease.Event{Name: mx})
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get after release without hand-off = %+v, want free", rec)
		}
		mustHold(t, s, mx, "c")
		wantQueue(t, s, mx, "b")
	})
}

func TestWithdrawingReservedWaiterHandsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		mustLose(t, s, mx, "b")
		mustLose(t, s, mx, "c")
		c := watch(t, s, mx, "c")
		release(t, s, mx, "a", tok)
		wantErr(t, "withdrawal", s.Release(bg, mx, "b", 0), lease.ErrNotHeld)
		wantEvent(t, "c after b withdrew", c, lease.Event{Name: mx})
		if st := s.Inspect(mx); st.Reserved != "c" {
			t.Fatalf("reserved for %q, want c", st.Reserved)
		}
		wantErr(t, "withdrawal", s.Release(bg, mx, "c", 0), lease.ErrNotHeld)
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get after every waiter withdrew = %+v, want free", rec)
		}
	})
}

func TestQueueEntryExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		const wt, wtr = time.Second, 500 * time.Millisecond // entries last 3s
		for _, c := range []string{"b", "c"} {
			if _, err := s.Acquire(bg, mx, c, wt, wtr); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		if _, err := s.Acquire(bg, mx, "c", wt, wtr); err != nil { // refresh
			t.Fatal(err)
		}
		time.Sleep(time.Second - time.Nanosecond)
		wantQueue(t, s, mx, "b", "c")
		time.Sleep(time.Nanosecond)
		wantQueue(t, s, mx, "c") // b crashed: its entry expired
		b := watch(t, s, mx, "b")
		c := watch(t, s, mx, "c")
		release(t, s, mx, "a", tok)
		wantNoEvent(t, "expired waiter", b)
		wantEvent(t, "live waiter", c, lease.Event{Name: mx})
		time.Sleep(2 * time.Second)
		wantQueue(t, s, mx) // c expired too; its window lapsed first
		if st := s.Inspect(mx); st.Reserved != "" || st.Owner != "" {
			t.Fatalf("orphaned state: %+v", st)
		}
		mustHold(t, s, mx, "d")
	})
}

func TestTransitionEndReservesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		mustHold(t, s, mx, "a")
		mustLose(t, s, mx, "b")
		b := watch(t, s, mx, "b")
		time.Sleep(ttl + tr) // a crashed
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get after a's transition = %+v, want free and not held back", rec)
		}
		wantNoEvent(t, "b at a's transition end", b)
		mustHold(t, s, mx, "c") // first come wins
		wantQueue(t, s, mx, "b")
	})
}

func TestWaitersDoNotOrphan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		mustHold(t, s, mx, "a")
		for _, c := range []string{"b", "c", "d"} {
			mustLose(t, s, mx, c)
		}
		time.Sleep(2 * (ttl + tr)) // everyone crashed
		st := s.Inspect(mx)
		if st.Owner != "" || len(st.Queue) != 0 || st.Reserved != "" || st.Counter != 1 {
			t.Fatalf("state after every contender's time ran out: %+v", st)
		}
		if got := s.Mutexes(); len(got) != 1 || got[0] != mx {
			t.Fatalf("Locks() = %q", got)
		}
	})
}
