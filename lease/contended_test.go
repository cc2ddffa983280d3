package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
)

// watchCounter passes Watch through to a recorder's store and counts the
// subscriptions.
type watchCounter struct {
	*recorder
	n atomic.Int64
}

func (w *watchCounter) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	w.n.Add(1)
	return w.recorder.Watch(ctx, name, contender)
}

// TestContendedNameSubscribesFirst (issue 18): a Manager whose last grant
// of a name, released lately, came after a lost attempt subscribes before
// the first attempt of its next acquisition, so that under contention that
// attempt waits (a store with a queue queues it) instead of being followed
// at once by a second one; a name it won without losing is tried before
// any subscription, as before.
func TestContendedNameSubscribesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		w := &watchCounter{recorder: r}
		m := newMgr(t, noBatch{Store: r, Watcher: w}, "w")
		if _, err := r.Store.Acquire(bg, "job", "ghost", tTTL, tTransition); err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, m, "job") // loses first, then takes over at the transition end
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Store.Acquire(bg, "job", "ghost", tTTL, tTransition); err != nil {
			t.Fatal(err)
		}
		tries, watches := len(r.of("acquire", "w")), w.n.Load()
		ctx, cancel := context.WithTimeout(bg, time.Second) // ends before the owner's transition
		_, err := m.Acquire(ctx, "job")
		cancel()
		if !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("Acquire of a held name = %v, want ErrNotAcquired", err)
		}
		if n := len(r.of("acquire", "w")) - tries; n != 1 {
			t.Errorf("the acquisition after a contended grant made %d attempts, want 1 (subscribed before it)", n)
		}
		if n := w.n.Load() - watches; n != 1 {
			t.Errorf("the acquisition after a contended grant subscribed %d times, want 1", n)
		}

		// Uncontended: won at the first attempt, released; the next
		// acquisition tries before it subscribes.
		l = mustAcquire(t, m, "free")
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		watches = w.n.Load()
		l = mustAcquire(t, m, "free")
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if n := w.n.Load() - watches; n != 0 {
			t.Errorf("an uncontended acquisition subscribed %d times, want 0", n)
		}
	})
}
