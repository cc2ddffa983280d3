package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// TestReleaseUnderTheLeasesOwnContext: a holder that releases with the
// lease's context, or one derived from it (the context a callback is
// handed), releases the grant in one store call. The release cancels that
// context before it asks the store; it failed every such release with
// "context canceled" and left the grant to lapse, or to be given back by
// the next attempt.
func TestReleaseUnderTheLeasesOwnContext(t *testing.T) {
	ctxs := map[string]func(l *lease.Lease) (context.Context, context.CancelFunc){
		"own": func(l *lease.Lease) (context.Context, context.CancelFunc) {
			return l.Context(), func() {}
		},
		"derived with a deadline": func(l *lease.Lease) (context.Context, context.CancelFunc) {
			return context.WithTimeout(l.Context(), time.Minute)
		},
	}
	for name, mk := range ctxs {
		t.Run(name, func(t *testing.T) {
			st := memstore.New()
			m := newMgr(t, st, "a")
			l := mustAcquire(t, m, "job")
			ctx, cancel := mk(l)
			defer cancel()
			st.ResetStats()
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			if rec, _ := st.Get(bg, "job"); rec.OwnerID != "" {
				t.Errorf("the store still grants %+v after Release", rec)
			}
			if n := st.Stats().Release; n != 1 {
				t.Errorf("%d store releases, want 1", n)
			}
		})
	}

	// A context the caller ends for its own reason still bounds the call.
	t.Run("cancelled by the caller", func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		l := mustAcquire(t, m, "job")
		ctx, cancel := context.WithCancel(l.Context())
		cancel()
		if err := l.Release(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Release under a context the caller cancelled: %v, want context.Canceled", err)
		}
	})
}

// TestStoppedLeaderReleasesUnderItsContext: a Contender's leader that
// Stop has drained (its context is cancelled) and that releases with that
// context returns nil, as does Stop, and the lock is free.
func TestStoppedLeaderReleasesUnderItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		released := make(chan error, 1)
		c, err := m.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				<-ctx.Done()
				released <- l.Release(ctx)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Stop(bg); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-released; err != nil {
			t.Errorf("Release in OnAcquired after Stop: %v", err)
		}
		if rec, _ := st.Get(bg, "job"); rec.OwnerID != "" {
			t.Errorf("the store still grants %+v after Stop", rec)
		}
	})
}
