package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Timings used throughout, as in Simba's defaults.
const (
	ttl = 10 * time.Second
	tr  = 6 * time.Second
	mx  = "jobs/nightly"
)

var bg = context.Background()

// acquire calls Acquire with the default timings and fails the test on error.
func acquire(t *testing.T, s *memstore.Store, name, contender string) lease.Record {
	t.Helper()
	rec, err := s.Acquire(bg, name, contender, ttl, tr)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, contender, err)
	}
	return plain(rec)
}

// plain is rec without its server clock reading, for comparisons of what
// the store decided.
func plain(rec lease.Record) lease.Record {
	rec.ServerTime = time.Time{}
	return rec
}

// mustHold acquires and fails the test unless contender now holds lock.
func mustHold(t *testing.T, s *memstore.Store, name, contender string) lease.Record {
	t.Helper()
	rec := acquire(t, s, name, contender)
	if !rec.Held(contender) {
		t.Fatalf("Acquire(%q, %q) = %+v, want it held", name, contender, rec)
	}
	return rec
}

// mustLose acquires and fails the test if contender now holds lock.
func mustLose(t *testing.T, s *memstore.Store, name, contender string) lease.Record {
	t.Helper()
	rec := acquire(t, s, name, contender)
	if rec.OwnerID == contender {
		t.Fatalf("Acquire(%q, %q) = %+v, want it lost", name, contender, rec)
	}
	return rec
}

// get calls Get and fails the test on error.
func get(t *testing.T, s *memstore.Store, name string) lease.Record {
	t.Helper()
	rec, err := s.Get(bg, name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return plain(rec)
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one wrapping %v", what, err, target)
	}
}

// wantQueue fails the test unless lock's live wait queue is want.
func wantQueue(t *testing.T, s *memstore.Store, name string, want ...string) {
	t.Helper()
	got := s.Inspect(name).Queue
	if len(got) != len(want) {
		t.Fatalf("queue of %q = %q, want %q", name, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queue of %q = %q, want %q", name, got, want)
		}
	}
}

// watch subscribes and fails the test on error. The subscription ends with
// the test.
func watch(t *testing.T, s *memstore.Store, name, contender string) <-chan lease.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx, name, contender)
	if err != nil {
		t.Fatalf("Watch(%q, %q): %v", name, contender, err)
	}
	return ch
}

// wantEvent fails the test unless ch holds exactly ev right now.
func wantEvent(t *testing.T, name string, ch <-chan lease.Event, ev lease.Event) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed, want %+v", name, ev)
		}
		if got != ev {
			t.Fatalf("%s: event %+v, want %+v", name, got, ev)
		}
	default:
		t.Fatalf("%s: no event, want %+v", name, ev)
	}
}

// wantNoEvent fails the test if ch holds an event right now.
func wantNoEvent(t *testing.T, name string, ch <-chan lease.Event) {
	t.Helper()
	select {
	case got, ok := <-ch:
		t.Fatalf("%s: got event %+v (open %v), want none", name, got, ok)
	default:
	}
}

// manualClock is a server clock a test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
