package lease_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// logged collects the records of a Manager as "level event k=v ..." with
// the attributes other than the event sorted by key.
type logged struct {
	mu   sync.Mutex
	recs []string
}

func (g *logged) Enabled(context.Context, slog.Level) bool { return true }
func (g *logged) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *logged) WithGroup(string) slog.Handler            { return g }

func (g *logged) Handle(_ context.Context, r slog.Record) error {
	event := "NO-EVENT"
	var kvs []string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case lease.LogKeyEvent:
			event = a.Value.String()
		case lease.LogKeyError, lease.LogKeyRetryIn, lease.LogKeyAttempt:
			kvs = append(kvs, a.Key) // values vary
		default:
			kvs = append(kvs, a.Key+"="+a.Value.String())
		}
		return true
	})
	slices.Sort(kvs)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recs = append(g.recs, fmt.Sprint(r.Level, " ", event, " ", kvs))
	return nil
}

func (g *logged) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.recs
	g.recs = nil
	return out
}

func wantLogs(t *testing.T, g *logged, want ...string) {
	t.Helper()
	if got := g.take(); !slices.Equal(got, want) {
		t.Errorf("logged\n\t%v\nwant\n\t%v", got, want)
	}
}

// TestLifecycleLogs (issue 20): every record carries an event and the
// documented keys: acquired, renewed (Debug), released, lost with its
// cause, leadership gained and ended, a failed renewal (Warn).
func TestLifecycleLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		g := &logged{}
		m := newMgr(t, st, "a", lease.WithLogger(slog.New(g)))
		l := mustAcquire(t, m, "job")
		time.Sleep(tTTL/3 + time.Millisecond)
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		wantLogs(t, g,
			"INFO acquired [lock=job token=1]",
			"DEBUG renewed [lock=job token=1]",
			"INFO released [lock=job token=1]")

		l = mustAcquire(t, m, "job")
		if err := st.Release(bg, "job", "a", l.Token()); err != nil {
			t.Fatal(err)
		}
		<-l.Done()
		synctest.Wait() // the holder is told first, the log follows
		wantLogs(t, g,
			"INFO acquired [lock=job token=2]",
			"WARN lost [cause=not_held lock=job token=2]")

		l = mustAcquire(t, m, "job")
		st.FailContender("a", memstore.FaultFail)
		<-l.Done()
		st.Heal()
		synctest.Wait() // the clean-up gives the lost grant back (and fails)
		got := g.take()
		if len(got) < 3 || got[0] != "INFO acquired [lock=job token=3]" ||
			got[1] != "WARN renew_failed [attempt error lock=job token=3]" ||
			!slices.Contains(got, "WARN lost [cause=deadline lock=job token=3]") {
			t.Errorf("logged %v, want acquired, renew_failed..., lost by deadline", got)
		}

		leading := make(chan struct{})
		c, err := m.Contend("lead", lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) { close(leading) }})
		if err != nil {
			t.Fatal(err)
		}
		<-leading
		if err := c.Stop(bg); err != nil {
			t.Fatal(err)
		}
		wantLogs(t, g,
			"INFO acquired [lock=lead token=1]",
			"INFO leader_gained [lock=lead token=1]",
			"INFO leader_lost [cause=released lock=lead token=1]",
			"INFO released [lock=lead token=1]")
	})
}

// TestWaitingLogsAtDebug: a waiter that finds the lock held says so at
// Debug, with the owner and when it tries again.
func TestWaitingLogsAtDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		if _, err := st.Acquire(bg, "job", "ghost", tTTL, tTransition); err != nil {
			t.Fatal(err)
		}
		g := &logged{}
		m := newMgr(t, st, "w", lease.WithLogger(slog.New(g)))
		l := mustAcquire(t, m, "job")
		_ = l.Release(bg)
		got := g.take()
		if !slices.Contains(got, "DEBUG waiting [lock=job owner=ghost retry_in]") {
			t.Errorf("logged %v, want a waiting record", got)
		}
	})
}

// TestCancelledAcquireLogsNothing: an Acquire that ends because its
// caller's context did, its store call cut short, is the caller's doing,
// not a failure: the caller gets the error and nothing is logged (the
// CLI printed "acquire failed ... context canceled" on every interrupt
// that came during an attempt).
func TestCancelledAcquireLogsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		g := &logged{}
		m := newMgr(t, st, "a", lease.WithLogger(slog.New(g)))
		st.FailContender("a", memstore.FaultHangCtx)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() {
			_, err := m.Acquire(ctx, "job")
			done <- err
		}()
		synctest.Wait() // the attempt hangs in the store
		cancel()
		if err := <-done; err == nil {
			t.Fatal("Acquire under a cancelled context succeeded")
		}
		st.Heal()
		synctest.Wait()
		wantLogs(t, g)
	})
}
